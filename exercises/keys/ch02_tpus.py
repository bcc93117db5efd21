"""Answer keys for the chapter 2 exercises (TPUs), computed with book_lib."""

from __future__ import annotations

import dataclasses

from book_lib import collectives, hardware, roofline, systolic, topology
from exercises.keys import JaxCheck, Key

V4 = hardware.get_chip("tpu-v4")
V5E = hardware.get_chip("tpu-v5e")
V5P = hardware.get_chip("tpu-v5p")
V6E = hardware.get_chip("tpu-v6e")

# The rates the statements print, each with the book_lib value it must match
# (tests/test_exercises.py checks that every one appears in a statement and agrees within 0.5 %).
GIVENS = [
    ("1.2 \\times 10^{12}", V4.hbm_bytes_per_s),
    ("1.97 \\times 10^{14}", V5E.bf16_flops_per_s),
    ("3.94 \\times 10^{14}", V5E.int8_ops_per_s),
    ("8.1 \\times 10^{11}", V5E.hbm_bytes_per_s),
    ("4.5 \\times 10^{10}", V5E.ici_bytes_per_s),
    ("1.5 \\times 10^{10}", V5E.pcie_bytes_per_s),
    ("2.5 \\times 10^{10}", V5P.dcn_bytes_per_s),
    ("4.59 \\times 10^{14}", V5P.bf16_flops_per_s),
    ("9.2 \\times 10^{14}", V6E.bf16_flops_per_s),
    ("16 GiB", V5E.hbm_bytes),
    ("96 GiB", V5P.hbm_bytes),
]

PCIE_GIVEN_BYTES_PER_S = V5E.pcie_bytes_per_s  # problems 2.3 and 2.6 state 1.5e10 (a v5e's link; a v6e's is faster)
VMEM_OVER_HBM = 22  # problem 2.4: VMEM feeds the MXU 22 times faster than HBM (book_lib has no VMEM rate)
HOP_LATENCY_S = collectives.HOP_LATENCY_S  # problem 2.5: 1 us per hop
SEND_BYTES = 2**30  # the DCN question: 1 GiB per chip
W_SHAPE = (16384, 4096)  # problem 2.4: int8[F, D] weights times int8[B, D] activations
MATRIX_2_6_SIDE = 128 * 1024  # problem 2.6: int8[128 * 1024, 128 * 1024]
MATRIX_2_6_BYTES = MATRIX_2_6_SIDE**2


CLOCK_CASES = tuple(
    (chip.bf16_flops_per_s, chip.mxu_size, chip.mxus_per_core * chip.cores_per_chip)
    for chip in (V5E, V4, V5P, hardware.get_chip("tpu-v2"))
)


def _clock(peak_flops_per_s: float, mxu_size: int, n_mxus: int) -> float:
    one_core = dataclasses.replace(
        V5E, bf16_flops_per_s=peak_flops_per_s, mxu_size=mxu_size, mxus_per_core=n_mxus, cores_per_chip=1
    )
    return systolic.implied_clock_hz(one_core)


BUSY_CASES = ((8, 128, 128), (1, 1, 1), (5, 3, 7), (64, 16, 16), (1024, 128, 128))


def _busy(M: int, K: int, N: int) -> float:
    # M K N multiply-adds out of K N cells over the M + K + N - 2 cycles of a pass (tests check this
    # against book_lib.systolic.simulate, cycle by cycle).
    return M * K * N / (systolic.cycles(M, K, N) * K * N)


HOP_CASES = tuple(
    (grid.shape, grid.wraparound, a, b)
    for grid, a, b in (
        (topology.Slice.of(V5E, "4x8"), (0, 0), (3, 7)),
        (topology.Slice.of(V5E, "16x16"), (0, 0), (15, 15)),
        (topology.Slice.of(V5E, "16x16"), (3, 12), (10, 1)),
        (topology.Slice.of(V6E, "8x16"), (1, 2), (7, 14)),
        (topology.Slice.of(V4, "4x4x8"), (0, 0, 0), (3, 2, 6)),
        (topology.Slice.of(V5P, "2x2x4"), (0, 1, 0), (1, 0, 3)),
    )
)


def _rows(sizes: tuple[int, int], n: int, seed: int):
    """f32[n * rows, cols] of random values: a block of `rows` rows per device."""
    import numpy as np

    rows, cols = sizes
    return np.random.default_rng(seed).standard_normal((n * rows, cols)).astype(np.float32)


def _last_gets_first(arrays, n: int, n_devices: int):
    """Problem 2.7's transfer: zeros, except that the last device's block is device 0's."""
    import numpy as np

    (x,) = arrays
    rows = x.shape[0] // n
    out = np.zeros_like(x)
    out[(n - 1) * rows :] = x[:rows]
    return out


def _which_axes_wrap() -> str:
    short_wraps, long_wraps = topology.Slice.of(V5E, "8x16").wraparound
    names = {(False, False): "none", (True, False): "short", (False, True): "long", (True, True): "both"}
    return names[(short_wraps, long_wraps)]


def _pod(chip: hardware.Chip) -> dict[str, float]:
    pod = topology.pod(chip)
    prefix = chip.name.removeprefix("tpu-")
    return {
        f"{prefix}_pod_hosts": pod.n_hosts,
        f"{prefix}_pod_cores": pod.n_cores,
        f"{prefix}_pod_flops_per_s": pod.flops_per_s,
        f"{prefix}_pod_hbm_bytes": pod.hbm_bytes,
    }


def _pcie_min_d() -> float:
    # F = 4D: per token, 2 D F = 8 D^2 FLOPs against (2 D + 2 F) = 10 D bytes over PCIe; a batch can only
    # help when 8 D^2 / peak > 10 D / pcie, i.e. D > 10 peak / (8 pcie) (where critical_batch_size turns finite).
    return 10 * V6E.bf16_flops_per_s / (8 * PCIE_GIVEN_BYTES_PER_S)


def _int8_time(B: int, bytes_per_s: float) -> float:
    F, D = W_SHAPE
    cost = roofline.matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1)
    return roofline.roofline_time(cost.flops, cost.bytes, V5E.int8_ops_per_s, bytes_per_s).t_lower


def _int8_critical(bytes_per_s: float) -> float:
    F, D = W_SHAPE
    return roofline.critical_batch_size(D, F, V5E.int8_ops_per_s, bytes_per_s, x_bytes=1, w_bytes=1, out_bytes=1)


def _transfer() -> dict[str, float]:
    grid = topology.Slice.of(V5E, "4x4")
    size = 2 * 8 * 128 * 8192  # bf16[8, 128, 8192]
    return {
        "first_byte_s": grid.hop_count((0, 0), (3, 3)) * HOP_LATENCY_S,
        "transfer_s": size / sum(grid.axis_bytes_per_s),  # a corner chip sends along both axes at once
    }


def _pipeline() -> dict[str, float]:
    grid = topology.Slice.of(V5E, "4x4")
    per_host = MATRIX_2_6_BYTES / grid.n_hosts
    received = MATRIX_2_6_BYTES * (grid.n_chips - 1) / grid.n_chips
    matmul = roofline.matmul_cost(8, MATRIX_2_6_SIDE, MATRIX_2_6_SIDE)
    return {
        "pcie_load_s": per_host / (grid.chips_per_host * PCIE_GIVEN_BYTES_PER_S),
        "ici_gather_s": received / sum(grid.axis_bytes_per_s),
        "hbm_load_s": MATRIX_2_6_BYTES / V5E.hbm_bytes_per_s,
        "matmul_s": matmul.flops / V5E.bf16_flops_per_s,
    }


def _bounds() -> dict[str, float]:
    steps = _pipeline().values()
    return {"total_lower_s": max(steps), "total_upper_s": sum(steps)}


def _dcn_route_s() -> float:
    # host 1 ships its half to host 0 over DCN; host 0 pushes the whole matrix into chip (0, 0) over its one PCIe link
    grid = topology.Slice.of(V5E, "4x4")
    dcn_s = MATRIX_2_6_BYTES / grid.n_hosts / V5E.dcn_bytes_per_s
    pcie_s = MATRIX_2_6_BYTES / PCIE_GIVEN_BYTES_PER_S
    return max(dcn_s, pcie_s)


def _route() -> str:
    return "ici" if _bounds()["total_lower_s"] < _dcn_route_s() else "dcn"


def _allgather_s() -> float:
    grid = topology.Slice.of(V5E, "4x4")
    return collectives.collective_time(
        "all_gather", MATRIX_2_6_BYTES, grid.shape, V5E, wraparound=grid.wraparound
    ).bandwidth_s


def _ring_hops() -> dict[str, float]:
    return {
        "hops_wrapped": topology.Slice.of(V5E, "2x16").hop_count((0, 0), (0, 15)),
        "hops_line": topology.Slice.of(V5E, "2x8").hop_count((0, 0), (0, 7)),
    }


KEYS = {
    "ch02_q0a_mxu_clock": Key(names=("clock_hz",), kind="function", reference=_clock, cases=CLOCK_CASES),
    "ch02_q0b_systolic_busy": Key(
        names=("systolic_busy_fraction",), kind="function", reference=_busy, cases=BUSY_CASES
    ),
    "ch02_q0c_hop_count": Key(
        names=("hop_count",), kind="function", reference=topology.grid_hops, cases=HOP_CASES, rel_tol=0
    ),
    "ch02_q0d_wrap_axes": Key(
        names=("wrap_axes_8x16",), kind="choice", choices=("none", "short", "long", "both"), expected=_which_axes_wrap
    ),
    "ch02_q0e_diameters": Key(
        names=("diameter_v5e_8x16_hops", "diameter_v4_4x4x8_hops"),
        kind="value",
        rel_tol=0,
        expected=lambda: {
            "diameter_v5e_8x16_hops": topology.Slice.of(V5E, "8x16").diameter_hops,
            "diameter_v4_4x4x8_hops": topology.Slice.of(V4, "4x4x8").diameter_hops,
        },
    ),
    "ch02_q0f_dcn_send": Key(
        names=("dcn_send_s",),
        kind="value",
        expected=lambda: {"dcn_send_s": SEND_BYTES / (V5P.dcn_bytes_per_s / V5P.chips_per_host)},
    ),
    "ch02_q1_load_time": Key(
        names=("load_time_s",),
        kind="value",
        expected=lambda: {"load_time_s": 2 * 200e9 / 32 / V4.hbm_bytes_per_s},
    ),
    "ch02_q2a_v5e_pod": Key(names=tuple(_pod(V5E)), kind="value", expected=lambda: _pod(V5E)),
    "ch02_q2b_v5p_pod": Key(names=tuple(_pod(V5P)), kind="value", expected=lambda: _pod(V5P)),
    "ch02_q3a_pcie_batch": Key(
        names=("pcie_batch_tokens",),
        kind="value",
        expected=lambda: {"pcie_batch_tokens": V6E.bf16_flops_per_s / PCIE_GIVEN_BYTES_PER_S},
    ),
    "ch02_q3b_pcie_min_d": Key(names=("pcie_min_d",), kind="value", expected=lambda: {"pcie_min_d": _pcie_min_d()}),
    "ch02_q3c_pcie_batch_exact": Key(
        names=("pcie_batch_exact_tokens",),
        kind="function",
        reference=lambda D: roofline.critical_batch_size(D, 4 * D, V6E.bf16_flops_per_s, PCIE_GIVEN_BYTES_PER_S),
        cases=((100_000,), (2**17,), (2**18,), (2**20,)),
    ),
    "ch02_q4a_hbm_time": Key(
        names=("int8_hbm_time_s",),
        kind="function",
        reference=lambda B: _int8_time(B, V5E.hbm_bytes_per_s),
        cases=((1,), (64,), (256,), (1024,), (8192,)),
    ),
    "ch02_q4b_hbm_batch": Key(
        names=("hbm_batch_tokens",),
        kind="value",
        expected=lambda: {"hbm_batch_tokens": _int8_critical(V5E.hbm_bytes_per_s)},
    ),
    "ch02_q4c_vmem_time": Key(
        names=("int8_vmem_time_s",),
        kind="function",
        reference=lambda B: _int8_time(B, VMEM_OVER_HBM * V5E.hbm_bytes_per_s),
        cases=((1,), (4,), (16,), (64,), (1024,)),
    ),
    "ch02_q4d_vmem_batch": Key(
        names=("vmem_batch_tokens",),
        kind="value",
        expected=lambda: {"vmem_batch_tokens": _int8_critical(VMEM_OVER_HBM * V5E.hbm_bytes_per_s)},
    ),
    "ch02_q5_ici_transfer": Key(names=("first_byte_s", "transfer_s"), kind="value", expected=_transfer),
    "ch02_q6a_pipeline": Key(names=tuple(_pipeline()), kind="value", expected=_pipeline),
    "ch02_q6b_bounds": Key(names=("total_lower_s", "total_upper_s"), kind="value", expected=_bounds),
    "ch02_q6c_route": Key(names=("faster_route",), kind="choice", choices=("ici", "dcn"), expected=_route),
    "ch02_q6d_dcn_route": Key(names=("dcn_route_s",), kind="value", expected=lambda: {"dcn_route_s": _dcn_route_s()}),
    "ch02_q6e_allgather": Key(names=("allgather_s",), kind="value", expected=lambda: {"allgather_s": _allgather_s()}),
    "ch02_q7a_send_to_last": Key(
        names=("send_to_last",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((4, 8), (2, 16)),
            inputs=lambda sizes, n, seed: ((_rows(sizes, n, seed),), (n,)),
            in_specs=(("X",),),
            reference=_last_gets_first,
            collectives={
                "collective-permute": (1, 1),
                "all-gather": (0, 0),
                "all-to-all": (0, 0),
                "all-reduce": (0, 0),
            },
        ),
    ),
    "ch02_q7b_ring_hops": Key(names=("hops_wrapped", "hops_line"), kind="value", rel_tol=0, expected=_ring_hops),
}

# Right values by the wrong route: gather every block everywhere, then keep device 0's (tests/test_grading.py).
PLAUSIBLE = {
    "ch02_q7a_send_to_last": """
def send_to_last(x, n_devices):
    def body(block):
        everything = jax.lax.all_gather(block, "X", tiled=True)
        first = everything[: block.shape[0]]
        return jnp.where(jax.lax.axis_index("X") == n_devices - 1, first, jnp.zeros_like(block))

    return jax.shard_map(body, in_specs=jax.P("X"), out_specs=jax.P("X"))(x)
""",
}
