"""Answer keys for the chapter 2 exercises (TPUs), computed with book_lib."""

from __future__ import annotations

import dataclasses
import random

from book_lib import collectives, hardware, roofline, systolic, topology
from book_lib.hardware import get_chip
from exercises.keys import choice, function, pick, program, redraw, value
from exercises.keys.arrays import normal
from exercises.keys.chips import TPUS, TPUS_2D, TPUS_3D, TPUS_WITH_INT8, V5E, givens, text_chip

# The rates the function problems' statements print, each with the book_lib value it must match; the
# value problems print their chip's rates from book_lib through the templates.
GIVENS = givens(
    "tpu-v5e",
    bf16_flops_per_s="1.97 \\times 10^{14}",
    int8_ops_per_s="3.94 \\times 10^{14}",
    hbm_bytes_per_s="8.1 \\times 10^{11}",
    pcie_bytes_per_s="1.5 \\times 10^{10}",
) + givens("tpu-v6e", bf16_flops_per_s="9.2 \\times 10^{14}")
PCIE_GIVEN_BYTES_PER_S = V5E.pcie_bytes_per_s  # problem 2.3 (Q3c) states 1.5e10 (a v5e's link; a v6e's is faster)
VMEM_OVER_HBM = hardware.VMEM_OVER_HBM_BANDWIDTH_RATIO  # problem 2.4: VMEM feeds the MXU 22 times faster than HBM
W_SHAPE = (16384, 4096)  # problem 2.4: int8[F, D] weights times int8[B, D] activations
SHAPES_3D = ("2x2x4", "2x4x4", "4x4x4", "2x2x8", "4x8x8", "8x8x8", "4x4x16", "2x4x8", "8x8x16", "4x8x16")
MATMUL_SHAPES = ((2048, 8192), (4096, 14336), (4096, 16384), (8192, 28672), (8192, 32768), (16384, 53248))


def _side(chip: str) -> int:
    """The side of a 2D-torus pod (chips); an axis of this size wraps."""
    return get_chip(chip).pod_shape[0]


CLOCK_CASES = tuple(
    (chip.bf16_flops_per_s, chip.mxu_size, chip.mxus_per_core * chip.cores_per_chip)
    for chip in map(get_chip, ("tpu-v5e", "tpu-v4", "tpu-v5p", "tpu-v2"))
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
        (topology.Slice.of("tpu-v5e", "4x8"), (0, 0), (3, 7)),
        (topology.Slice.of("tpu-v5e", "16x16"), (0, 0), (15, 15)),
        (topology.Slice.of("tpu-v5e", "16x16"), (3, 12), (10, 1)),
        (topology.Slice.of("tpu-v6e", "8x16"), (1, 2), (7, 14)),
        (topology.Slice.of("tpu-v4", "4x4x8"), (0, 0, 0), (3, 2, 6)),
        (topology.Slice.of("tpu-v5p", "2x2x4"), (0, 1, 0), (1, 0, 3)),
    )
)


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


def _dcn_send(tpu: str, send_gib: int) -> float:
    chip = get_chip(tpu)
    return send_gib * 2**30 / min(chip.dcn_bytes_per_s_per_chip, chip.pcie_bytes_per_s)


def _draw_load(r: random.Random) -> dict:
    tpu, params_b, n_chips = r.choice(TPUS), r.choice((30, 70, 120, 175, 405)), r.choice((8, 16, 64, 128, 256))
    return {"tpu": tpu, "params_b": params_b, "n_chips": n_chips}


def _fits_load(v: dict) -> bool:
    """The chip's HBM holds the model's share of bf16 weights, and not much more."""
    return get_chip(v["tpu"]).hbm_bytes / 8 <= 2 * v["params_b"] * 1e9 / v["n_chips"] <= get_chip(v["tpu"]).hbm_bytes


def _pod(tpu: str | hardware.Chip) -> tuple[float, float, float, float]:
    """A full pod's hosts, cores, FLOPs/s and HBM bytes."""
    pod = topology.pod(tpu)
    return (pod.n_hosts, pod.n_cores, pod.flops_per_s, pod.hbm_bytes)


def _pod_names(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}_{name}" for name in ("hosts", "cores", "flops_per_s", "hbm_bytes"))


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


def _int8_critical(tpu: str, d: int, f: int, vmem_over_hbm: float = 1) -> float:
    """The batch at which an int8 matmul turns compute-bound, its operands read at `vmem_over_hbm` times HBM's rate."""
    chip = get_chip(tpu)
    bytes_per_s = vmem_over_hbm * chip.hbm_bytes_per_s
    return roofline.critical_batch_size(d, f, chip.int8_ops_per_s, bytes_per_s, x_bytes=1, w_bytes=1, out_bytes=1)


def _draw_int8_matmul(r: random.Random) -> dict:
    D, F = r.choice(MATMUL_SHAPES)
    return {"tpu": r.choice(TPUS_WITH_INT8), "d": D, "f": F}


def _transfer(tpu: str, shape: str, batch: int, seq: int, d_model: int) -> tuple[float, float]:
    """The first byte's arrival and the whole transfer of bf16[batch, seq, d_model] across the slice (s)."""
    grid = topology.Slice.of(tpu, shape)
    far_corner = grid.hop_count((0,) * len(grid.shape), tuple(n - 1 for n in grid.shape))
    # a corner chip sends along both axes at once
    return (far_corner * collectives.HOP_LATENCY_S, 2 * batch * seq * d_model / sum(grid.axis_bytes_per_s))


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
    first_byte_s, transfer_s = _transfer(**v)
    return 3 * first_byte_s < transfer_s


def _two_hosts(tpu: str) -> topology.Slice:
    """Problem 2.6's slice: two hosts' blocks side by side (a v5e's 4x4; a v2's 2x4), no wraparound."""
    rows, cols = get_chip(tpu).host_shape
    return topology.Slice.of(tpu, (rows, 2 * cols))


PIPELINE = ("pcie_load_s", "ici_gather_s", "hbm_load_s", "matmul_s")


def _pipeline(tpu: str, side_k: int, batch: int, *, text_gb: bool = False) -> tuple[float, float, float, float]:
    """Problem 2.6's steps (`PIPELINE`): over PCIe into the chips, gathered over ICI, read from HBM, multiplied."""
    chip, grid = get_chip(tpu), _two_hosts(tpu)
    side = side_k * 1024
    # int8[side, side]; the text reads 2^34 bytes as 16 GB of 1e9 bytes (7 % less), and its FLOPs likewise
    elements = side**2 / 2**30 * 1e9 if text_gb else side**2
    received = elements * (grid.n_chips - 1) / grid.n_chips
    return (
        elements / grid.n_hosts / (grid.chips_per_host * chip.pcie_bytes_per_s),
        received / sum(grid.axis_bytes_per_s),
        elements / chip.hbm_bytes_per_s,
        roofline.matmul_cost(batch, side, side).flops * elements / side**2 / chip.bf16_flops_per_s,
    )


def _dcn_route_s(tpu: str, side_k: int) -> float:
    # host 1 ships its half to host 0 over DCN; host 0 pushes the whole matrix into chip (0, 0) over its one PCIe link
    chip, grid = get_chip(tpu), _two_hosts(tpu)
    matrix_bytes = (side_k * 1024) ** 2
    return max(matrix_bytes / grid.n_hosts / chip.dcn_bytes_per_s, matrix_bytes / chip.pcie_bytes_per_s)


def _route(tpu: str, side_k: int) -> str:
    # Q6a's route into chip (0, 0), its two transfers overlapped, against the DCN route, its two overlapped
    pcie_load_s, ici_gather_s, _, _ = _pipeline(tpu, side_k, 1)
    return "ici" if max(pcie_load_s, ici_gather_s) < _dcn_route_s(tpu, side_k) else "dcn"


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


def _ring_hops(tpu: str, line_len: int, src: int) -> tuple[int, int]:
    """Hops from `src` to the row's last chip: on a row of the pod's side (a ring), then on a line of `line_len`."""
    side = _side(tpu)
    wrapped = topology.Slice.of(tpu, f"2x{side}").hop_count((0, src), (0, side - 1))
    return (wrapped, topology.Slice.of(tpu, f"2x{line_len}").hop_count((0, src), (0, line_len - 1)))


def _draw_ring(r: random.Random) -> dict:
    """A 2D-torus chip, a row shorter than its pod's side (no wraparound) and a source chip inside it."""
    tpu = r.choice(TPUS_2D)
    line_len = r.choice([n for n in (4, 8, 16) if n < _side(tpu)])
    return {"tpu": tpu, "line_len": line_len, "src": r.randrange(1, line_len - 1)}


# Problem 2.6: one matrix on one slice; Q6a draws it, and the other parts take up its chip and matrix.
PIPELINE_NUMBERS = {"params": {"tpu": "tpu-v5e", "side_k": 128, "batch": 8}, "draw": _draw_pipeline}
MATRIX = {"params": {"tpu": "tpu-v5e", "side_k": 128}}

KEYS = {
    "ch02_q0a_mxu_clock": function("clock_hz", _clock, CLOCK_CASES),
    "ch02_q0b_systolic_busy": function("systolic_busy_fraction", _busy, BUSY_CASES),
    "ch02_q0c_hop_count": function("hop_count", topology.grid_hops, HOP_CASES, rel_tol=0),
    "ch02_q0d_wrap_axes": choice(
        "wrap_axes",
        _wrap_axes,
        ("none", "short", "long", "both"),
        params={"tpu": "tpu-v5e", "shape": "8x16"},
        draw=_draw_2d_slice,
    ),
    "ch02_q0e_diameters": value(
        ("diameter_2d_hops", "diameter_3d_hops"),
        lambda tpu2, shape2, tpu3, shape3: (
            topology.Slice.of(tpu2, shape2).diameter_hops,
            topology.Slice.of(tpu3, shape3).diameter_hops,
        ),
        rel_tol=0,
        params={"tpu2": "tpu-v5e", "shape2": "8x16", "tpu3": "tpu-v4", "shape3": "4x4x8"},
        draw=_draw_diameters,
    ),
    "ch02_q0f_dcn_send": value(
        "dcn_send_s",
        _dcn_send,
        params={"tpu": "tpu-v5p", "send_gib": 1},
        draw=pick(tpu=TPUS, send_gib=(2, 4, 8, 16)),
    ),
    "ch02_q1_load_time": value(
        "load_time_s",
        lambda tpu, params_b, n_chips: 2 * params_b * 1e9 / n_chips / get_chip(tpu).hbm_bytes_per_s,
        rel_tol=0.05,  # the text's "around 10 ms" for 10.4 ms
        params={"tpu": "tpu-v4", "params_b": 200, "n_chips": 32},
        draw=_draw_load,
        accept=_fits_load,
    ),
    # Two pods per class, never the same chip twice (a 2D torus's twin with as many hosts, a v6e for
    # the v5e say, would not move every number).
    "ch02_q2a_v5e_pod": value(
        _pod_names("pod_a"),
        _pod,
        also=(lambda tpu: _pod(text_chip(tpu)),),
        rel_tol=0.02,  # the text's 5.1e16: the v5e's peak rounded to 2e14
        params={"tpu": "tpu-v5e"},
        draw=pick(tpu=("tpu-v3", "tpu-v4")),
    ),
    "ch02_q2b_v5p_pod": value(
        _pod_names("pod_b"),
        _pod,
        also=(lambda tpu: _pod(text_chip(tpu)),),  # the text's 860 TB: 96 GB of 1e9 bytes per chip
        params={"tpu": "tpu-v5p"},
        draw=pick(tpu=("tpu-v2", "tpu-v6e")),
    ),
    "ch02_q3a_pcie_batch": value(
        "pcie_batch_tokens",
        lambda tpu, pcie_bytes_per_s: roofline.critical_intensity(tpu, bytes_per_s=pcie_bytes_per_s),
        params={"tpu": "tpu-v6e", "pcie_bytes_per_s": PCIE_GIVEN_BYTES_PER_S},
        draw=_draw_pcie,
    ),
    "ch02_q3b_pcie_min_d": value(  # the matmul of Q3a, on its chip and link
        "pcie_min_d",
        _pcie_min_d,
        params={"tpu": "tpu-v6e", "pcie_bytes_per_s": PCIE_GIVEN_BYTES_PER_S},
        follows="ch02_q3a_pcie_batch",
    ),
    "ch02_q3c_pcie_batch_exact": function(
        "pcie_batch_exact_tokens",
        lambda D: roofline.critical_batch_size(D, 4 * D, get_chip("tpu-v6e").bf16_flops_per_s, PCIE_GIVEN_BYTES_PER_S),
        ((100_000,), (2**17,), (2**18,), (2**20,)),
    ),
    "ch02_q4a_hbm_time": function(
        "int8_hbm_time_s", lambda B: _int8_time(B, V5E.hbm_bytes_per_s), ((1,), (64,), (256,), (1024,), (8192,))
    ),
    "ch02_q4b_hbm_batch": value(
        "hbm_batch_tokens",
        _int8_critical,
        params={"tpu": "tpu-v5e", "d": W_SHAPE[1], "f": W_SHAPE[0]},
        draw=_draw_int8_matmul,
        rel_tol=0.04,
    ),
    "ch02_q4c_vmem_time": function(
        "int8_vmem_time_s",
        lambda B: _int8_time(B, VMEM_OVER_HBM * V5E.hbm_bytes_per_s),
        ((1,), (4,), (16,), (64,), (1024,)),
    ),
    "ch02_q4d_vmem_batch": value(
        "vmem_batch_tokens",
        _int8_critical,
        params={"tpu": "tpu-v5e", "d": W_SHAPE[1], "f": W_SHAPE[0], "vmem_over_hbm": VMEM_OVER_HBM},
        draw=pick(vmem_over_hbm=(10, 16, 22, 32)),
        follows="ch02_q4b_hbm_batch",  # Q4b's matmul and chip, out of VMEM
    ),
    "ch02_q5_ici_transfer": value(
        ("first_byte_s", "transfer_s"),
        _transfer,
        params={"tpu": "tpu-v5e", "shape": "4x4", "batch": 8, "seq": 128, "d_model": 8192},
        draw=_draw_transfer,
        accept=_latency_well_below_bandwidth,
    ),
    "ch02_q6a_pipeline": value(
        PIPELINE,
        _pipeline,
        also=(lambda **v: _pipeline(**v, text_gb=True),),
        rel_tol=0.04,  # the text's 19 ms for 19.75 ms
        **PIPELINE_NUMBERS,
    ),
    "ch02_q6b_bounds": value(
        ("total_lower_s", "total_upper_s"),
        lambda **v: (max(_pipeline(**v)), sum(_pipeline(**v))),
        params=PIPELINE_NUMBERS["params"],
        follows="ch02_q6a_pipeline",
    ),
    "ch02_q6c_route": choice("faster_route", _route, ("ici", "dcn"), **MATRIX, follows="ch02_q6a_pipeline"),
    "ch02_q6d_dcn_route": value("dcn_route_s", _dcn_route_s, **MATRIX, follows="ch02_q6c_route"),
    "ch02_q6e_allgather": value("allgather_s", _allgather_s, **MATRIX, follows="ch02_q6a_pipeline"),
    "ch02_q7a_send_to_last": program(
        "send_to_last",
        cases=((4, 8), (2, 16)),
        inputs=lambda sizes, n, seed: (normal(((n * sizes[0], sizes[1]),), seed), (n,)),
        in_specs=(("X",),),
        reference=_last_gets_first,
        collectives={"collective-permute": (1, 1), "all-gather": (0, 0), "all-to-all": (0, 0), "all-reduce": (0, 0)},
    ),
    "ch02_q7b_ring_hops": value(
        ("hops_wrapped", "hops_line"),
        _ring_hops,
        rel_tol=0,
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
    "ch02_q0d_wrap_axes": {"wrap_axes": "long"},  # a v5e 8x16 wraps on its longer axis
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
    "ch02_q6c_route": {"faster_route": "ici"},  # its option 2, through PCIe and ICI
    "ch02_q6e_allgather": {"allgather_s": 16e9 / (4.5e10 * 2)},  # "a full AllGather would also take roughly" this
}

# Why the text's answer to a question is not in PRINTED, where that says more than its kind.
UNPRINTED = {
    "ch02_q0a_mxu_clock": "the text prints only the v5e's 1.5 GHz",
    "ch02_q0e_diameters": "the text prints no diameter for either slice",
    "ch02_q0f_dcn_send": "the text prints no answer to this question",
    "ch02_q3b_pcie_min_d": "the text prints no answer to this part: it assumes B << D throughout",
    "ch02_q3c_pcie_batch_exact": "the text prints only the B << D approximation",
    "ch02_q6b_bounds": "the text prints the four steps but not their sum, and for the overlapped time a range, "
    "about 150-200 ms",
    "ch02_q6d_dcn_route": "the text rejects the DCN route in words and prints no time for it",
    "ch02_q7b_ring_hops": "the text prints no answer to this question",
}
