"""Answer keys for the chapter 2 exercises (TPUs), computed with book_lib."""

from __future__ import annotations

import dataclasses
import random

from book_lib import collectives, hardware, roofline, systolic, topology
from book_lib.hardware import get_chip
from exercises.keys import JaxCheck, Key, redraw, text_chip

V4 = get_chip("tpu-v4")
V5E = get_chip("tpu-v5e")
V5P = get_chip("tpu-v5p")
V6E = get_chip("tpu-v6e")

# The rates the function problems state, as their statements print them, with the book_lib value each
# must match (tests/course/test_exercises.py checks that every one appears in a statement and agrees within 0.5 %).
# The value problems print their chip's rates from book_lib through the templates.
GIVENS = [
    ("1.97 \\times 10^{14}", V5E.bf16_flops_per_s),
    ("3.94 \\times 10^{14}", V5E.int8_ops_per_s),
    ("8.1 \\times 10^{11}", V5E.hbm_bytes_per_s),
    ("1.5 \\times 10^{10}", V5E.pcie_bytes_per_s),
    ("9.2 \\times 10^{14}", V6E.bf16_flops_per_s),
]

PCIE_GIVEN_BYTES_PER_S = V5E.pcie_bytes_per_s  # problem 2.3 (Q3c) states 1.5e10 (a v5e's link; a v6e's is faster)
VMEM_OVER_HBM = hardware.VMEM_OVER_HBM_BANDWIDTH_RATIO  # problem 2.4: VMEM feeds the MXU 22 times faster than HBM
HOP_LATENCY_S = collectives.HOP_LATENCY_S  # problem 2.5: 1 us per hop
W_SHAPE = (16384, 4096)  # problem 2.4: int8[F, D] weights times int8[B, D] activations

# What a class's variant may draw: chips with the figures a question needs.
TPUS = hardware.chip_names(family="tpu", since="tpu-v4")
TPUS_2D = hardware.chip_names(ici_topology="2d-torus")  # 2D tori: square pods, wraparound at the pod's side
TPUS_3D = hardware.chip_names(ici_topology="3d-torus")  # 3D tori built of 4x4x4 cubes
TPUS_WITH_INT8 = tuple(t for t in TPUS if get_chip(t).int8_ops_per_s != get_chip(t).bf16_flops_per_s)
SHAPES_3D = ("2x2x4", "2x4x4", "4x4x4", "2x2x8", "4x8x8", "8x8x8", "4x4x16", "2x4x8", "8x8x16", "4x8x16")
MATMUL_SHAPES = ((2048, 8192), (4096, 14336), (4096, 16384), (8192, 28672), (8192, 32768), (16384, 53248))


def _side(chip: str) -> int:
    """The side of a 2D-torus pod (chips); an axis of this size wraps."""
    return get_chip(chip).pod_shape[0]


def _sizes(shape: str) -> tuple[int, ...]:
    return topology.parse_shape(shape)


CLOCK_CASES = tuple(
    (chip.bf16_flops_per_s, chip.mxu_size, chip.mxus_per_core * chip.cores_per_chip)
    for chip in (V5E, V4, V5P, get_chip("tpu-v2"))
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


def _wrap_axes(tpu: str, shape: str) -> str:
    short_wraps, long_wraps = topology.Slice.of(tpu, shape).wraparound
    names = {(False, False): "none", (True, False): "short", (False, True): "long", (True, True): "both"}
    return names[(short_wraps, long_wraps)]


def _draw_2d_slice(r: random.Random) -> dict:
    """A 2D-torus chip and a slice `short x long` of its pod (short < long, powers of 2)."""
    tpu = r.choice(TPUS_2D)
    side = _side(tpu)
    long = r.choice((side // 2, side, side))
    short = r.choice([2**k for k in range(1, 6) if 2**k < long])
    return {"tpu": tpu, "shape": f"{short}x{long}"}


def _draw_diameters(r: random.Random) -> dict:
    two = _draw_2d_slice(r)
    return {"tpu2": two["tpu"], "shape2": two["shape"], "tpu3": r.choice(TPUS_3D), "shape3": r.choice(SHAPES_3D)}


def _dcn_send(tpu: str, send_gib: int) -> dict[str, float]:
    chip = get_chip(tpu)
    per_chip = min(chip.dcn_bytes_per_s_per_chip, chip.pcie_bytes_per_s)
    return {"dcn_send_s": send_gib * 2**30 / per_chip}


def _draw_load(r: random.Random) -> dict:
    tpu, params_b, n_chips = r.choice(TPUS), r.choice((30, 70, 120, 175, 405)), r.choice((8, 16, 64, 128, 256))
    return {"tpu": tpu, "params_b": params_b, "n_chips": n_chips}


def _fits_load(v: dict) -> bool:
    """The chip's HBM holds the model's share of bf16 weights, and not much more."""
    return get_chip(v["tpu"]).hbm_bytes / 8 <= 2 * v["params_b"] * 1e9 / v["n_chips"] <= get_chip(v["tpu"]).hbm_bytes


def _pod(tpu: str, prefix: str, *, text_gb: bool = False) -> dict[str, float]:
    """A full pod's counts; `text_gb`: with the chip's HBM as the text's table prints it (GB of 1e9 bytes)."""
    pod = topology.pod(text_chip(tpu) if text_gb else tpu)
    return {
        f"{prefix}_hosts": pod.n_hosts,
        f"{prefix}_cores": pod.n_cores,
        f"{prefix}_flops_per_s": pod.flops_per_s,
        f"{prefix}_hbm_bytes": pod.hbm_bytes,
    }


def _pcie_min_d(tpu: str, pcie_bytes_per_s: float) -> float:
    # F = 4D, activations over PCIe: a batch can only help above this D (where critical_batch_size turns finite)
    return roofline.smallest_compute_bound_width(get_chip(tpu).bf16_flops_per_s, pcie_bytes_per_s, f_over_d=4)


def _draw_pcie(r: random.Random) -> dict:
    tpu = r.choice(TPUS)
    return {"tpu": tpu, "pcie_bytes_per_s": get_chip(tpu).pcie_bytes_per_s}


def _int8_time(B: int, bytes_per_s: float) -> float:
    F, D = W_SHAPE
    cost = roofline.matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1)
    return roofline.roofline_time(cost.flops, cost.bytes, V5E.int8_ops_per_s, bytes_per_s).t_lower


def _int8_critical(D: int, F: int, ops_per_s: float, bytes_per_s: float) -> float:
    return roofline.critical_batch_size(D, F, ops_per_s, bytes_per_s, x_bytes=1, w_bytes=1, out_bytes=1)


def _draw_int8_matmul(r: random.Random) -> dict:
    D, F = r.choice(MATMUL_SHAPES)
    return {"tpu": r.choice(TPUS_WITH_INT8), "d": D, "f": F}


def _transfer(tpu: str, shape: str, batch: int, seq: int, d_model: int) -> dict[str, float]:
    grid = topology.Slice.of(tpu, shape)
    size = 2 * batch * seq * d_model  # bf16[batch, seq, d_model]
    return {
        "first_byte_s": grid.hop_count((0,) * len(grid.shape), tuple(n - 1 for n in grid.shape)) * HOP_LATENCY_S,
        "transfer_s": size / sum(grid.axis_bytes_per_s),  # a corner chip sends along both axes at once
    }


def _draw_transfer(r: random.Random) -> dict:
    """A 2D-torus chip, a slice with no wraparound (both axes shorter than the pod's), a bf16 array."""
    tpu = r.choice(TPUS_2D)
    sizes = [2**k for k in range(1, 6) if 2**k < _side(tpu)]
    return {
        "tpu": tpu,
        "shape": f"{r.choice(sizes)}x{r.choice(sizes)}",
        "batch": r.choice((4, 8, 16, 32)),
        "seq": r.choice((128, 256, 512, 1024)),
        "d_model": r.choice((4096, 8192, 16384)),
    }


def _latency_well_below_bandwidth(v: dict) -> bool:
    """The sanity check's claim: the first byte arrives well before the transfer ends."""
    times = _transfer(**v)
    return 3 * times["first_byte_s"] < times["transfer_s"]


def _two_hosts(tpu: str) -> topology.Slice:
    """Problem 2.6's slice: two hosts' blocks side by side (a v5e's 4x4; a v2's 2x4), no wraparound."""
    rows, cols = get_chip(tpu).host_shape
    return topology.Slice.of(tpu, (rows, 2 * cols))


def _pipeline(tpu: str, side_k: int, batch: int, *, text_gb: bool = False) -> dict[str, float]:
    chip, grid = get_chip(tpu), _two_hosts(tpu)
    side = side_k * 1024
    # int8[side, side]; the text reads 2^34 bytes as 16 GB of 1e9 bytes (7 % less), and its FLOPs likewise
    elements = side**2 / 2**30 * 1e9 if text_gb else side**2
    received = elements * (grid.n_chips - 1) / grid.n_chips
    return {
        "pcie_load_s": elements / grid.n_hosts / (grid.chips_per_host * chip.pcie_bytes_per_s),
        "ici_gather_s": received / sum(grid.axis_bytes_per_s),
        "hbm_load_s": elements / chip.hbm_bytes_per_s,
        "matmul_s": roofline.matmul_cost(batch, side, side).flops * elements / side**2 / chip.bf16_flops_per_s,
    }


def _bounds(tpu: str, side_k: int, batch: int) -> dict[str, float]:
    steps = _pipeline(tpu, side_k, batch).values()
    return {"total_lower_s": max(steps), "total_upper_s": sum(steps)}


def _dcn_route_s(tpu: str, side_k: int) -> float:
    # host 1 ships its half to host 0 over DCN; host 0 pushes the whole matrix into chip (0, 0) over its one PCIe link
    chip, grid = get_chip(tpu), _two_hosts(tpu)
    matrix_bytes = (side_k * 1024) ** 2
    dcn_s = matrix_bytes / grid.n_hosts / chip.dcn_bytes_per_s
    pcie_s = matrix_bytes / chip.pcie_bytes_per_s
    return max(dcn_s, pcie_s)


def _route(tpu: str, side_k: int) -> str:
    # Q6a's route into chip (0, 0), its two transfers overlapped, against the DCN route, its two overlapped
    steps = _pipeline(tpu, side_k, 1)
    ici_route_s = max(steps["pcie_load_s"], steps["ici_gather_s"])
    return "ici" if ici_route_s < _dcn_route_s(tpu, side_k) else "dcn"


def _allgather_s(tpu: str, side_k: int) -> float:
    shape = _two_hosts(tpu).shape  # its rings: the physical default, topology.ring_flags
    return collectives.collective_time("all_gather", (side_k * 1024) ** 2, shape, tpu).bandwidth_s


def _draw_matrix(r: random.Random) -> dict:
    """A 2D-torus chip and a square int8 matrix (side in units of 1024)."""
    return {"tpu": r.choice(TPUS_2D), "side_k": r.choice((64, 96, 112, 128, 160, 176))}


def _fits_matrix(v: dict) -> bool:
    """The int8 matrix fits the chip's HBM."""
    return (v["side_k"] * 1024) ** 2 <= get_chip(v["tpu"]).hbm_bytes


def _draw_pipeline(r: random.Random) -> dict:
    return {**redraw(_draw_matrix, _fits_matrix, r), "batch": r.choice((4, 8, 16, 32, 64))}


def _ring_hops(tpu: str, line_len: int, src: int) -> dict[str, float]:
    side = _side(tpu)
    return {
        "hops_wrapped": topology.Slice.of(tpu, f"2x{side}").hop_count((0, src), (0, side - 1)),
        "hops_line": topology.Slice.of(tpu, f"2x{line_len}").hop_count((0, src), (0, line_len - 1)),
    }


def _draw_ring(r: random.Random) -> dict:
    """A 2D-torus chip, a row shorter than its pod's side (no wraparound) and a source chip inside it."""
    tpu = r.choice(TPUS_2D)
    line_len = r.choice([n for n in (4, 8, 16) if n < _side(tpu)])
    return {"tpu": tpu, "line_len": line_len, "src": r.randrange(1, line_len - 1)}


KEYS = {
    "ch02_q0a_mxu_clock": Key(names=("clock_hz",), kind="function", reference=_clock, cases=CLOCK_CASES),
    "ch02_q0b_systolic_busy": Key(
        names=("systolic_busy_fraction",), kind="function", reference=_busy, cases=BUSY_CASES
    ),
    "ch02_q0c_hop_count": Key(
        names=("hop_count",), kind="function", reference=topology.grid_hops, cases=HOP_CASES, rel_tol=0
    ),
    "ch02_q0d_wrap_axes": Key(
        names=("wrap_axes",),
        kind="choice",
        choices=("none", "short", "long", "both"),
        expected=_wrap_axes,
        params={"tpu": "tpu-v5e", "shape": "8x16"},
        draw=_draw_2d_slice,
    ),
    "ch02_q0e_diameters": Key(
        names=("diameter_2d_hops", "diameter_3d_hops"),
        kind="value",
        rel_tol=0,
        expected=lambda tpu2, shape2, tpu3, shape3: {
            "diameter_2d_hops": topology.Slice.of(tpu2, shape2).diameter_hops,
            "diameter_3d_hops": topology.Slice.of(tpu3, shape3).diameter_hops,
        },
        params={"tpu2": "tpu-v5e", "shape2": "8x16", "tpu3": "tpu-v4", "shape3": "4x4x8"},
        draw=_draw_diameters,
    ),
    "ch02_q0f_dcn_send": Key(
        names=("dcn_send_s",),
        kind="value",
        expected=_dcn_send,
        params={"tpu": "tpu-v5p", "send_gib": 1},
        draw=lambda r: {"tpu": r.choice(TPUS), "send_gib": r.choice((2, 4, 8, 16))},
    ),
    "ch02_q1_load_time": Key(
        names=("load_time_s",),
        kind="value",
        expected=lambda tpu, params_b, n_chips: {
            "load_time_s": 2 * params_b * 1e9 / n_chips / get_chip(tpu).hbm_bytes_per_s
        },
        rel_tol=0.05,  # the text's "around 10 ms" for 10.4 ms
        params={"tpu": "tpu-v4", "params_b": 200, "n_chips": 32},
        draw=_draw_load,
        accept=_fits_load,
    ),
    # Two pods per class, never the same chip twice (a 2D torus's twin with as many hosts, a v6e for
    # the v5e say, would not move every number).
    "ch02_q2a_v5e_pod": Key(
        names=tuple(_pod(V5E, "pod_a")),
        kind="value",
        expected=lambda tpu: _pod(tpu, "pod_a"),
        also=(lambda tpu: _pod(tpu, "pod_a", text_gb=True),),
        rel_tol=0.02,  # the text's 5.1e16: the v5e's peak rounded to 2e14
        params={"tpu": "tpu-v5e"},
        draw=lambda r: {"tpu": r.choice(("tpu-v3", "tpu-v4"))},
    ),
    "ch02_q2b_v5p_pod": Key(
        names=tuple(_pod(V5P, "pod_b")),
        kind="value",
        expected=lambda tpu: _pod(tpu, "pod_b"),
        also=(lambda tpu: _pod(tpu, "pod_b", text_gb=True),),  # the text's 860 TB: 96 GB of 1e9 bytes per chip
        params={"tpu": "tpu-v5p"},
        draw=lambda r: {"tpu": r.choice(("tpu-v2", "tpu-v6e"))},
    ),
    "ch02_q3a_pcie_batch": Key(
        names=("pcie_batch_tokens",),
        kind="value",
        expected=lambda tpu, pcie_bytes_per_s: {"pcie_batch_tokens": get_chip(tpu).bf16_flops_per_s / pcie_bytes_per_s},
        params={"tpu": "tpu-v6e", "pcie_bytes_per_s": PCIE_GIVEN_BYTES_PER_S},
        draw=_draw_pcie,
    ),
    "ch02_q3b_pcie_min_d": Key(
        names=("pcie_min_d",),
        kind="value",
        expected=lambda tpu, pcie_bytes_per_s: {"pcie_min_d": _pcie_min_d(tpu, pcie_bytes_per_s)},
        params={"tpu": "tpu-v6e", "pcie_bytes_per_s": PCIE_GIVEN_BYTES_PER_S},
        draw=_draw_pcie,
    ),
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
        expected=lambda tpu, d, f: {
            "hbm_batch_tokens": _int8_critical(d, f, get_chip(tpu).int8_ops_per_s, get_chip(tpu).hbm_bytes_per_s)
        },
        params={"tpu": "tpu-v5e", "d": W_SHAPE[1], "f": W_SHAPE[0]},
        draw=_draw_int8_matmul,
        rel_tol=0.04,
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
        expected=lambda tpu, d, f, vmem_over_hbm: {
            "vmem_batch_tokens": _int8_critical(
                d, f, get_chip(tpu).int8_ops_per_s, vmem_over_hbm * get_chip(tpu).hbm_bytes_per_s
            )
        },
        params={"tpu": "tpu-v5e", "d": W_SHAPE[1], "f": W_SHAPE[0], "vmem_over_hbm": VMEM_OVER_HBM},
        draw=lambda r: {**_draw_int8_matmul(r), "vmem_over_hbm": r.choice((10, 16, 22, 32))},
    ),
    "ch02_q5_ici_transfer": Key(
        names=("first_byte_s", "transfer_s"),
        kind="value",
        expected=_transfer,
        params={"tpu": "tpu-v5e", "shape": "4x4", "batch": 8, "seq": 128, "d_model": 8192},
        draw=_draw_transfer,
        accept=_latency_well_below_bandwidth,
    ),
    "ch02_q6a_pipeline": Key(
        names=tuple(_pipeline("tpu-v5e", 128, 8)),
        kind="value",
        expected=_pipeline,
        also=(lambda **v: _pipeline(**v, text_gb=True),),
        rel_tol=0.04,  # the text's 19 ms for 19.75 ms
        params={"tpu": "tpu-v5e", "side_k": 128, "batch": 8},
        draw=_draw_pipeline,
    ),
    "ch02_q6b_bounds": Key(
        names=("total_lower_s", "total_upper_s"),
        kind="value",
        expected=_bounds,
        params={"tpu": "tpu-v5e", "side_k": 128, "batch": 8},
        draw=_draw_pipeline,
    ),
    "ch02_q6c_route": Key(
        names=("faster_route",),
        kind="choice",
        choices=("ici", "dcn"),
        expected=_route,
        params={"tpu": "tpu-v5e", "side_k": 128},
        draw=_draw_matrix,
        accept=_fits_matrix,
    ),
    "ch02_q6d_dcn_route": Key(
        names=("dcn_route_s",),
        kind="value",
        expected=lambda tpu, side_k: {"dcn_route_s": _dcn_route_s(tpu, side_k)},
        params={"tpu": "tpu-v5e", "side_k": 128},
        draw=_draw_matrix,
        accept=_fits_matrix,
    ),
    "ch02_q6e_allgather": Key(
        names=("allgather_s",),
        kind="value",
        expected=lambda tpu, side_k: {"allgather_s": _allgather_s(tpu, side_k)},
        params={"tpu": "tpu-v5e", "side_k": 128},
        draw=_draw_matrix,
        accept=_fits_matrix,
    ),
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
    "ch02_q7b_ring_hops": Key(
        names=("hops_wrapped", "hops_line"),
        kind="value",
        rel_tol=0,
        expected=_ring_hops,
        params={"tpu": "tpu-v5e", "line_len": 8, "src": 0},
        draw=_draw_ring,
    ),
}

# Right values by the wrong route: gather every block everywhere, then keep device 0's (tests/course/test_grading.py).
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

# The text's printed answers where its model gives them (tests/course/test_exercises.py): the grader accepts
# each. Q1's "around 10 ms" is accepted at 5 %; Q2's pods at 2 % (the v5e's peak rounded to 2e14) and
# with the table's GB of 1e9 bytes through `also`; Q6a's reading of the 2^34-byte matrix as 16e9 bytes
# through `also`.
PRINTED = {
    "ch02_q1_load_time": {"load_time_s": 10e-3},
    "ch02_q6a_pipeline": {"pcie_load_s": 66e-3, "ici_gather_s": 167e-3, "hbm_load_s": 19e-3, "matmul_s": 1.3e-3},
    "ch02_q3a_pcie_batch": {"pcie_batch_tokens": 61_000},
    "ch02_q4b_hbm_batch": {"hbm_batch_tokens": 271},
    "ch02_q4d_vmem_batch": {"vmem_batch_tokens": 11},
    "ch02_q5_ici_transfer": {"first_byte_s": 6e-6, "transfer_s": 188e-6},
    # 256 * 16 = "4TB": 4096 GiB of the v5e's 16 GiB chips; 16*16*2e14 = 5.1e16
    "ch02_q2a_v5e_pod": {"pod_a_hosts": 32, "pod_a_cores": 256, "pod_a_flops_per_s": 5.1e16, "pod_a_hbm_bytes": 2**42},
    # the current text's 8960 * 4.59e14 = 4.1e18 (the February 2025 text's 4e18 used 4.5e14) and 8960 * 96 = 860TB
    "ch02_q2b_v5p_pod": {
        "pod_b_hosts": 2240,
        "pod_b_cores": 17_920,
        "pod_b_flops_per_s": 4.1e18,
        "pod_b_hbm_bytes": 860e12,
    },
    "ch02_q6e_allgather": {"allgather_s": 16e9 / (4.5e10 * 2)},  # "a full AllGather would also take roughly" this
}

# Why the text's answer to each other question is not in PRINTED.
UNPRINTED: dict[str, str] = {
    "ch02_q0a_mxu_clock": "a function question: graded on its inputs; the text prints only the v5e's 1.5 GHz, "
    "no table of outputs",
    "ch02_q0b_systolic_busy": "a function question: graded on its inputs, and the text prints no answer to it",
    "ch02_q0c_hop_count": "a function question: graded on its inputs, and the text prints no table of hop counts",
    "ch02_q0d_wrap_axes": "a choice question: PRINTED holds numbers only (the text's answer, a wraparound on the "
    "longer axis of a v5e 8x16, is the key's)",
    "ch02_q0e_diameters": "the text prints no diameter for either slice",
    "ch02_q0f_dcn_send": "the text prints no answer to this question",
    "ch02_q3b_pcie_min_d": "the text prints no answer to this part: it assumes B << D throughout",
    "ch02_q3c_pcie_batch_exact": "a function question: graded on its inputs; the text prints only the B << D "
    "approximation",
    "ch02_q4a_hbm_time": "a function question: graded on its inputs; the text prints the max of two times, no "
    "table of outputs",
    "ch02_q4c_vmem_time": "a function question: graded on its inputs; the text prints the formula, no table of outputs",
    "ch02_q6b_bounds": "the text prints the four steps but not their sum, and for the overlapped time a range, "
    "about 150-200 ms",
    "ch02_q6c_route": "a choice question: PRINTED holds numbers only (the text's answer, option 2 through PCIe "
    "and ICI, is the key's)",
    "ch02_q6d_dcn_route": "the text rejects the DCN route in words and prints no time for it",
    "ch02_q7a_send_to_last": "a JAX program, judged by running it",
    "ch02_q7b_ring_hops": "the text prints no answer to this question",
}
