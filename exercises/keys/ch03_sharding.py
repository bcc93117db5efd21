"""Answer keys for the chapter 3 exercises (sharded matrices and collectives), computed with book_lib."""

from __future__ import annotations

import random

from book_lib import checks, collectives, hardware, notation, roofline, sharding, topology
from book_lib.hardware import get_chip
from exercises.keys import JaxCheck, Key

V5P = get_chip("tpu-v5p")

# The rates problem 3.4's function question (Q4a) prints, each with the book_lib value it must match
# (tests/course/test_exercises.py checks that every one appears in a statement and agrees within 0.5 %).
# The value and choice problems print their chip's rates from book_lib through the templates.
GIVENS = [
    ("4.59 \\times 10^{14}", V5P.bf16_flops_per_s),
    ("9 \\times 10^{10}", V5P.ici_bytes_per_s),
]
HOP_S = collectives.HOP_LATENCY_S  # 1 us per ICI hop, stated in the header

# What a class's variant may draw.
TPUS = hardware.chip_names(family="tpu")
TPUS_2D = hardware.chip_names(ici_topology="2d-torus")  # 2D tori: an axis wraps only at the pod's side
TPUS_3D = hardware.chip_names(ici_topology="3d-torus")  # 3D tori: every axis wraps when every side is a multiple of 4
# 3D slices (X, Y, Z): whole 4x4x4 cubes (every axis a ring) and smaller ones (every axis a line).
SHAPES_3D = (
    (4, 4, 4),
    (4, 4, 8),
    (4, 8, 4),
    (8, 4, 4),
    (4, 8, 8),
    (8, 8, 8),
    (4, 4, 16),
    (2, 4, 4),
    (4, 2, 4),
    (2, 2, 4),
)
# Rings of X chips each chip family can close: an axis of whole cubes, or a 2D pod's full side.
RINGS = {
    "tpu-v4": (4, 8, 16),
    "tpu-v5p": (4, 8, 16),
    "tpu-7x": (4, 8, 16),
    "tpu-v2": (16,),
    "tpu-v3": (32,),
    "tpu-v5e": (16,),
    "tpu-v6e": (16,),
}
POP_QUIZ_DTYPES = ("int8", "bf16", "f32")  # their bytes: checks.dtype_bytes


def _draw_2d_mesh(r: random.Random, sizes: tuple[int, ...] = (2, 4, 8)) -> dict:
    """A 2D-torus chip and a mesh {X: x, Y: y} of a slice with both axes shorter than its pod's side."""
    tpu = r.choice(TPUS_2D)
    return {"tpu": tpu, "x": r.choice(sizes), "y": r.choice(sizes)}


def _draw_3d_mesh(r: random.Random) -> dict:
    x, y, z = r.choice(SHAPES_3D)
    return {"tpu": r.choice(TPUS_3D), "x": x, "y": y, "z": z}


# --- pop quizzes -----------------------------------------------------------------------------------


def _pop_quiz_bytes(dtype: str, i: int, j: int, x: int, y: int, z: int) -> dict[str, float]:
    a, sizes, mesh = notation.parse("A[I_XY, J]"), {"I": i, "J": j}, {"X": x, "Y": y, "Z": z}
    return {
        "bytes_per_device": a.local_bytes(sizes, mesh, bytes_per_element=checks.dtype_bytes(dtype)),
        "bytes_all_devices": a.total_bytes(sizes, mesh, bytes_per_element=checks.dtype_bytes(dtype)),
    }


def _draw_pop_quiz_bytes(r: random.Random) -> dict:
    return {
        "dtype": r.choice(POP_QUIZ_DTYPES),
        "i": r.choice((128, 256, 512, 1024)),
        "j": r.choice((1024, 4096, 8192)),
        "x": r.choice((2, 4, 8)),
        "y": r.choice((2, 4, 8, 16)),
        "z": r.choice((2, 4, 8)),
    }


def _gather_y(tpu: str, x: int, y: int, e: int, f: int) -> collectives.CollectiveTime:
    """AllGather_Y [E_Y, F] -> [E, F] (bf16) on a slice x by y; an axis wraps only at the pod's side."""
    y_ring = topology.ring_flags(tpu, (x, y))[1]
    return collectives.collective_time("all_gather", 2 * e * f, y, tpu, wraparound=y_ring)


def _draw_gather_big(r: random.Random) -> dict:
    return {**_draw_2d_mesh(r), "e": r.choice((1024, 2048, 4096, 8192)), "f": r.choice((2048, 4096, 8192, 16384))}


def _bandwidth_bound(v: dict) -> bool:
    """A bandwidth-bound AllGather: the bandwidth time at least 3 times the latency."""
    gather = _gather_y(**v)
    return gather.bandwidth_s >= 3 * gather.latency_s


def _draw_gather_small(r: random.Random) -> dict:
    return {**_draw_2d_mesh(r), "e": r.choice((64, 128, 256, 512)), "f": r.choice((128, 256, 512, 1024))}


def _draw_gather_bound(r: random.Random) -> dict:
    """Sizes on both sides of the latency-bandwidth crossover."""
    return {**_draw_2d_mesh(r), "e": r.choice((64, 128, 256, 512)), "f": r.choice((128, 256, 512, 1024, 2048))}


def _clear_of_crossover(gather: collectives.CollectiveTime) -> bool:
    """Not too near the latency-bandwidth crossover (a clear answer)."""
    return not 0.8 < gather.bandwidth_s / gather.latency_s < 1.25


def _replication(x: int, y: int, z: int, axis: str) -> dict[str, float]:
    sizes, mesh = {"I": 1024, "J": 8, "K": 8}, {"X": x, "Y": y, "Z": z}
    total = notation.parse(f"A[I_{axis}, J, K]").total_bytes(sizes, mesh)
    return {"total_over_one_copy": total / notation.parse("A[I, J, K]").global_bytes(sizes)}


# --- problems 3.2 and 3.3: a 3D slice; whole cubes wrap every axis ------------------------------------------


def _problem_3_2(tpu: str, x: int, y: int, z: int, b: int, d: int) -> dict[str, float]:
    wraps = topology.ring_flags(tpu, (x, y, z))
    gather_x = collectives.all_gather_time(2 * b * d / y, x, tpu, wraparound=wraps[0])  # [B_X, D_Y] keeps D / |Y|
    gather_xy = collectives.all_gather_time_multi(2 * b * d, (x, y), tpu, wraparound=wraps[:2])
    reduce_z = collectives.all_reduce_time(2 * b * d / (x * y), z, tpu, wraparound=wraps[2])
    return {"gather_x_s": gather_x, "gather_xy_s": gather_xy, "all_reduce_z_s": reduce_z}


def _problem_3_2_text(tpu: str, x: int, y: int, z: int, b: int, d: int) -> dict[str, float]:
    """The text's model of problem 3.2: each collective's rule of thumb (no (N - 1) / N)."""
    wraps = topology.ring_flags(tpu, (x, y, z))
    gather_x = collectives.collective_time("all_gather", 2 * b * d / y, x, tpu, wraparound=wraps[0])
    gather_xy = collectives.collective_time("all_gather", 2 * b * d, (x, y), tpu, wraparound=wraps[:2])
    reduce_z = collectives.collective_time("all_reduce", 2 * b * d / (x * y), z, tpu, wraparound=wraps[2])
    return {
        "gather_x_s": gather_x.rule_of_thumb_s,
        "gather_xy_s": gather_xy.rule_of_thumb_s,
        "all_reduce_z_s": reduce_z.rule_of_thumb_s,
    }


def _draw_3_2(r: random.Random) -> dict:
    return {**_draw_3d_mesh(r), "b": r.choice((256, 512, 2048, 4096)), "d": r.choice((2048, 8192, 16384))}


def _problem_3_3(tpu: str, x: int, y: int, z: int, b: int) -> collectives.CollectiveTime:
    wraps = topology.ring_flags(tpu, (x, y, z))
    return collectives.collective_time("all_gather", 2 * b, x, tpu, wraparound=wraps[0])


def _draw_3_3_tiny(r: random.Random) -> dict:
    """A vector small enough that every slice's gather is latency-bound."""
    return {**_draw_3d_mesh(r), "b": r.choice((64, 128, 256, 512, 1024))}


def _draw_3_3_bound(r: random.Random) -> dict:
    return {**_draw_3d_mesh(r), "b": r.choice((128, 1024, 2**14, 2**17, 2**19, 2**21))}


# --- problem 3.4: two strategies for X[B, D] . W[D_X, F] on a ring -----------------------------------------


def _strategies(
    B: int, D: int, F: int, X: int, tpu: str = "tpu-v5p"
) -> tuple[sharding.MatmulPlan, sharding.MatmulPlan]:
    sizes, mesh = {"B": B, "D": D, "F": F}, {"X": X}
    ring_of_x = {"sizes": sizes, "mesh": mesh, "chip": tpu, "wraparound": True}  # the problem's ring, idealised
    gather = sharding.matmul_plan("A[B, D]", "W[D_X, F]", contracting="D", **ring_of_x)
    reduce = sharding.matmul_plan("A[B, D_X]", "W[D_X, F]", contracting="D", **ring_of_x)
    return gather, reduce


def _strategy_times(B: int, D: int, F: int, X: int) -> tuple[float, float, float, float]:
    gather, reduce = _strategies(B, D, F, X)
    return (gather.matmul.t_math, gather.comms_s, reduce.matmul.t_math, reduce.comms_s)


def _strategy_times_text(B: int, D: int, F: int, X: int) -> tuple[float, float, float, float]:
    """The text's model: each collective by its rule of thumb V / W_bidirectional (an AllReduce twice
    that), without the ring's (X - 1) / X or the hops' latency."""
    gather, reduce = _strategies(B, D, F, X)
    ring = {"wraparound": True}
    t_gather = collectives.collective_time("all_gather", 2 * D * F, X, "tpu-v5p", **ring).rule_of_thumb_s
    t_reduce = collectives.collective_time("all_reduce", 2 * B * F, X, "tpu-v5p", **ring).rule_of_thumb_s
    return (gather.matmul.t_math, t_gather, reduce.matmul.t_math, t_reduce)


STRATEGY_CASES = ((128, 8192, 32768, 16), (4096, 8192, 32768, 16), (64, 4096, 16384, 8), (1024, 2048, 8192, 4))


def _draw_ring(r: random.Random) -> dict:
    tpu = r.choice(tuple(RINGS))
    return {"tpu": tpu, "x": r.choice(RINGS[tpu])}


def _comms_bound_batch(tpu: str, x: int, d: int, f: int) -> dict[str, float]:
    # Strategy 1's gather does not depend on B and its math grows as B: they meet at B = comms / (math per token).
    gather, _ = _strategies(1, d, f, x, tpu)
    return {"comms_bound_below_tokens": gather.comms_s / gather.matmul.t_math}


def _comms_bound_batch_text(tpu: str, x: int, d: int, f: int) -> dict[str, float]:
    # the text's model: the gather's rule of thumb V / W_bidirectional, without the ring's (X - 1) / X
    gather, _ = _strategies(1, d, f, x, tpu)
    rule = collectives.collective_time("all_gather", 2 * d * f, x, tpu, wraparound=True).rule_of_thumb_s
    return {"comms_bound_below_tokens": rule / gather.matmul.t_math}


def _strategy_2_wins_d_text(tpu: str, x: int, f: int) -> dict[str, float]:
    big_b, d = 2**20, 8192
    gather, _ = _strategies(big_b, d, f, x, tpu)
    rule = collectives.collective_time("all_reduce", 2 * big_b * f, x, tpu, wraparound=True).rule_of_thumb_s
    return {"strategy_2_wins_above_d": rule / (gather.matmul.t_math / d)}


def _strategy_2_wins_d(tpu: str, x: int, f: int) -> dict[str, float]:
    # Large B, both bandwidth-bound on their own terms: Strategy 2's AllReduce (no D) against Strategy 1's math (D).
    big_b, d = 2**20, 8192
    gather, reduce = _strategies(big_b, d, f, x, tpu)
    return {"strategy_2_wins_above_d": reduce.comms_s / (gather.matmul.t_math / d)}


def _better_strategy(tpu: str, x: int, b: int, d: int, f: int) -> str:
    gather, reduce = _strategies(b, d, f, x, tpu)
    t1 = max(gather.matmul.t_math, gather.comms_s)
    t2 = max(reduce.matmul.t_math, reduce.comms_s)
    return "strategy_1" if t1 < t2 else "strategy_2"


def _draw_better_strategy(r: random.Random) -> dict:
    return {
        **_draw_ring(r),
        "b": r.choice((64, 128, 512, 2048, 8192)),
        "d": r.choice((4096, 8192, 16384)),
        "f": r.choice((16384, 32768, 65536)),
    }


def _strategies_differ(v: dict) -> bool:
    """The two strategies' times differ by more than 10 % (a clear answer)."""
    gather, reduce = _strategies(v["b"], v["d"], v["f"], v["x"], v["tpu"])
    t1 = max(gather.matmul.t_math, gather.comms_s)
    t2 = max(reduce.matmul.t_math, reduce.comms_s)
    return max(t1, t2) > 1.1 * min(t1, t2)


# --- problem 3.5: lowest latency on a 3D slice ------------------------------------------------------------

SPLITS35 = {
    "B": ("A[B_XYZ, D]", "W[D, F]"),
    "D": ("A[B, D_XYZ]", "W[D_XYZ, F]"),
    "F": ("A[B, D]", "W[D, F_XYZ]"),
}


def _plan_35(dim: str, tpu: str, x: int, y: int, z: int, b: int, d: int, f: int) -> sharding.MatmulPlan:
    lhs, rhs = SPLITS35[dim]
    mesh = {"X": x, "Y": y, "Z": z}  # its rings: the physical default, topology.ring_flags
    sizes = {"B": b, "D": d, "F": f}
    return sharding.matmul_plan(lhs, rhs, contracting="D", sizes=sizes, mesh=mesh, chip=tpu)


def _fastest_35(**values) -> str:
    return min(SPLITS35, key=lambda dim: _plan_35(dim, **values).time_lower_s)


def _draw_3_5(r: random.Random) -> dict:
    return {
        **_draw_3d_mesh(r),
        "b": r.choice((128, 256, 512, 2048, 8192, 65536)),
        "d": r.choice((4096, 8192, 16384)),
        "f": r.choice((8192, 16384, 32768, 65536)),
    }


def _one_split_fastest(v: dict) -> bool:
    """Sizes every split divides, with one split at least 10 % faster than the others (a clear answer)."""
    n = v["x"] * v["y"] * v["z"]
    if any(v[s] % n for s in ("b", "d", "f")):
        return False
    first, second = sorted(_plan_35(dim, **v).time_lower_s for dim in SPLITS35)[:2]
    return second > 1.1 * first


# --- problem 3.6: three shardings on a 2D slice without wraparound -----------------------------------------

PARTS36 = {
    "main": ("A[I_X, J_Y]", "B[J_Y, K]"),
    "part1": ("A[I_X, J]", "B[J_X, K_Y]"),
    "part2": ("A[I_X, J]", "B[J, K_Y]"),
}


def _plan_36(part: str, tpu: str, x: int, y: int, i: int, j: int, k: int) -> sharding.MatmulPlan:
    lhs, rhs = PARTS36[part]
    mesh = {"X": x, "Y": y}  # its rings: the physical default, topology.ring_flags
    sizes = {"I": i, "J": j, "K": k}
    return sharding.matmul_plan(lhs, rhs, contracting="J", sizes=sizes, mesh=mesh, chip=tpu)


def _collective_36(part: str, **values) -> str:
    ops = [s.op for s in _plan_36(part, **values).steps if s.op != "Matmul"]
    names = {"AllGather": "all_gather", "AllReduce": "all_reduce", "ReduceScatter": "reduce_scatter"}
    return names[ops[0]] if ops else "none"


def _times_36(part: str, prefix: str, **values) -> dict[str, float]:
    plan = _plan_36(part, **values)
    return {f"{prefix}_comms_s": plan.comms_s, f"{prefix}_math_s": plan.matmul.t_math}


def _draw_3_6(r: random.Random) -> dict:
    return {
        **_draw_2d_mesh(r),
        "i": r.choice((4096, 8192, 16384)),
        "j": r.choice((4096, 8192, 16384)),
        "k": r.choice((16384, 32768, 65536)),
    }


# --- problem 3.7: an MLP block on a 2D slice without wraparound ---------------------------------------------


def _mlp_plans(dim: str, tpu: str, x: int, y: int, b: int, d: int, f: int):
    """x[B, D] . Win[D, F] -> h, then h . Wout[F, D], both weights split over X and Y along `dim`."""
    mesh = {"X": x, "Y": y}  # its rings: the physical default, topology.ring_flags
    sizes = {"B": b, "D": d, "F": f}
    common = dict(sizes=sizes, mesh=mesh, chip=tpu)
    if dim == "F":
        up = sharding.matmul_plan("x[B, D]", "Win[D, F_XY]", contracting="D", out_name="h", **common)
        down = sharding.matmul_plan(
            up.result, "Wout[F_XY, E]", contracting="F", **{**common, "sizes": {**sizes, "E": d}}
        )
    else:
        up = sharding.matmul_plan(
            "x[B, D_XY]",
            "Win[D_XY, F]",
            contracting="D",
            out_name="h",
            reduce="reduce_scatter",
            scatter_dim="F",
            **common,
        )
        down = sharding.matmul_plan(
            up.result, "Wout[F, E_XY]", contracting="F", **{**common, "sizes": {**sizes, "E": d}}
        )
    return up, down


def _mlp_weight_bytes(d: int, f: int, x: int, y: int) -> float:
    sizes, mesh = {"D": d, "F": f}, {"X": x, "Y": y}
    return notation.parse("Win[D, F_XY]").local_bytes(sizes, mesh) + notation.parse("Wout[F_XY, D]").local_bytes(
        sizes, mesh
    )


def _mlp_best_dim(**values) -> str:
    return min(("D", "F"), key=lambda dim: sum(p.comms_s for p in _mlp_plans(dim, **values)))


def _mlp_times(**values) -> tuple[float, float]:
    up, down = _mlp_plans(_mlp_best_dim(**values), **values)
    return up.comms_s + down.comms_s, up.matmul.t_math + down.matmul.t_math


def _mlp_weight_load_s(tpu: str, x: int, y: int, b: int, d: int, f: int) -> float:
    """Seconds for one chip to read its share of both weight matrices from HBM (the text's crux)."""
    chip = get_chip(tpu)
    return roofline.roofline_time(
        0.0, _mlp_weight_bytes(d, f, x, y), chip.bf16_flops_per_s, chip.hbm_bytes_per_s
    ).t_comms


def _mlp_bound(**values) -> str:
    comms_s, math_s = _mlp_times(**values)
    bounds = {"compute": math_s, "ici": comms_s, "hbm": _mlp_weight_load_s(**values)}
    return max(bounds, key=bounds.__getitem__)


def _draw_3_7(r: random.Random) -> dict:
    """A 2D slice of 4 to 16 chips and an MLP (F > D)."""
    d = r.choice((4096, 6144, 8192, 12288, 16384))
    return {**_draw_2d_mesh(r, (2, 4)), "b": r.choice((64, 128, 256, 512)), "d": d, "f": r.choice((2, 3, 4, 8)) * d}


def _mlp_fits(v: dict) -> bool:
    """The MLP's weights per chip fit well within the chip's HBM (a quarter of it)."""
    return _mlp_weight_bytes(v["d"], v["f"], v["x"], v["y"]) < get_chip(v["tpu"]).hbm_bytes / 4


# --- problem 3.9: gather-then-multiply against multiply-then-reduce-scatter --------------------------------


def _comm_ratio(N: int, M: int, K: int) -> float:
    # AllGather A[N, M_X] moves 2 N M bytes; ReduceScatter of C[N, K]{U_X} moves 2 N K; X = 8, bandwidth-bound.
    gather = collectives.collective_time("all_gather", 2 * N * M, 8, "tpu-v5e", hop_latency_s=0).bandwidth_s
    scatter = collectives.collective_time("reduce_scatter", 2 * N * K, 8, "tpu-v5e", hop_latency_s=0).bandwidth_s
    return gather / scatter


# --- problem 3.10: scalars over one link of a ring ---------------------------------------------------------

LINK_CASES = ((1024, 4), (4096, 8), (96, 3), (512, 16), (100, 5))
LINK_CASES_EVEN = ((1024, 4), (4096, 8), (512, 16), (96, 6))
# On a one-way ring every ratio of two collectives' busiest-link loads is the same for any D (the AllToAll's
# over the AllGather's is 1/2): a class compares another pair, each of an N x N matrix as Q10a and Q10b define it.
LINK_PAIRS = (
    ("all_gather", "all_to_all"),
    ("reduce_scatter", "all_to_all"),
    ("all_reduce", "all_to_all"),
    ("all_to_all", "all_reduce"),
    ("all_reduce", "all_gather"),
)


def _link(op: str, both: bool):
    def scalars(N: int, D: int) -> float:
        # link_load_fraction is the share of V = N^2 scalars (the whole matrix) the busiest link carries;
        # for the gather V is the gathered matrix, for the AllToAll the matrix over all devices.
        return collectives.link_load_fraction(op, D, bidirectional=both) * N * N

    return scalars


def _draw_link_pair(r: random.Random) -> dict:
    num, den = r.choice(LINK_PAIRS)
    return {"d": r.choice((4, 6, 8, 12, 32, 64)), "num": num, "den": den}


# --- the JAX questions: inputs drawn at grading time ------------------------------------------------------

NO_OTHER_COLLECTIVE = {"all-gather": (0, 0), "all-reduce": (0, 0), "reduce-scatter": (0, 0), "all-to-all": (0, 0)}


def _random(shape: tuple[int, ...], seed: int):
    import numpy as np

    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _matmul_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """A: f32[I, n * J] (columns split over "X") and B: f32[n * J, K] (replicated)."""
    rows, inner, cols = sizes
    return (_random((rows, n * inner), seed), _random((n * inner, cols), seed + 1)), ()


P32 = {"tpu": "tpu-v4", "x": 4, "y": 4, "z": 4, "b": 1024, "d": 4096}  # problem 3.2: a v4 4x4x4 cube
P33 = {"tpu": "tpu-v4", "x": 4, "y": 4, "z": 4, "b": 128}  # problem 3.3
P35 = {"tpu": "tpu-v5p", "x": 4, "y": 4, "z": 4, "b": 128, "d": 8192, "f": 32768}  # problem 3.5
P36 = {"tpu": "tpu-v5e", "x": 4, "y": 4, "i": 8192, "j": 8192, "k": 32768}  # problem 3.6: a v5e 4x4
P37 = {"tpu": "tpu-v5e", "x": 2, "y": 2, "b": 128, "d": 8192, "f": 32768}  # problem 3.7: a v5e 2x2
P0B = {"tpu": "tpu-v5e", "x": 8, "y": 4, "e": 2048, "f": 8192}  # pop quiz 2: a v5e 8x4
P0C = {**P0B, "e": 256, "f": 256}

KEYS = {
    "ch03_q0a_pop_quiz_bytes": Key(
        names=("bytes_per_device", "bytes_all_devices"),
        kind="value",
        rel_tol=1e-6,
        expected=_pop_quiz_bytes,
        params={"dtype": "int8", "i": 128, "j": 2048, "x": 2, "y": 8, "z": 2},
        draw=_draw_pop_quiz_bytes,
    ),
    "ch03_q0b_gather_big": Key(
        names=("gather_big_s",),
        kind="value",
        expected=lambda **v: {"gather_big_s": _gather_y(**v).total_s},
        params=P0B,
        draw=_draw_gather_big,
        accept=_bandwidth_bound,
    ),
    "ch03_q0c_gather_small": Key(
        names=("gather_small_s",),
        kind="value",
        expected=lambda **v: {"gather_small_s": _gather_y(**v).total_s},
        params=P0C,
        draw=_draw_gather_small,
    ),
    "ch03_q0d_small_bound": Key(
        names=("gather_small_bound",),
        kind="choice",
        choices=("latency", "bandwidth"),
        expected=lambda **v: _gather_y(**v).bound,
        params=P0C,
        draw=_draw_gather_bound,
        accept=lambda v: _clear_of_crossover(_gather_y(**v)),
    ),
    "ch03_q0e_latency_bytes": Key(
        names=("latency_bound_below_bytes",),
        kind="value",
        expected=lambda tpu: {"latency_bound_below_bytes": get_chip(tpu).ici_bytes_per_s * HOP_S},
        params={"tpu": "tpu-v5e"},
        draw=lambda r: {"tpu": r.choice(TPUS)},
    ),
    "ch03_q0f_ring_all_gather": Key(
        names=("ring_all_gather",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((2, 3), (4, 8)),
            inputs=lambda sizes, n, seed: ((_random((n * sizes[0], sizes[1]), seed),), ()),
            in_specs=(("X",),),
            reference=lambda arrays, n: arrays[0],
            per_device=True,
            collectives={"collective-permute": (1, 10**6), **NO_OTHER_COLLECTIVE},
        ),
    ),
    "ch03_q1_replication": Key(
        names=("total_over_one_copy",),
        kind="value",
        rel_tol=1e-6,
        expected=_replication,
        params={"x": 4, "y": 8, "z": 2, "axis": "X"},
        draw=lambda r: {
            "x": r.choice((2, 4, 8, 16)),
            "y": r.choice((2, 4, 8, 16)),
            "z": r.choice((2, 4, 8)),
            "axis": r.choice(("X", "Y", "Z")),
        },
    ),
    "ch03_q2a_gather_x": Key(
        names=("gather_x_s",),
        kind="value",
        rel_tol=0.02,
        expected=lambda **v: {"gather_x_s": _problem_3_2(**v)["gather_x_s"]},
        also=(lambda **v: {"gather_x_s": _problem_3_2_text(**v)["gather_x_s"]},),
        params=P32,
        draw=_draw_3_2,
    ),
    "ch03_q2b_gather_xy": Key(
        names=("gather_xy_s",),
        kind="value",
        rel_tol=0.02,
        expected=lambda **v: {"gather_xy_s": _problem_3_2(**v)["gather_xy_s"]},
        also=(lambda **v: {"gather_xy_s": _problem_3_2_text(**v)["gather_xy_s"]},),
        params=P32,
        draw=_draw_3_2,
    ),
    "ch03_q2c_all_reduce_z": Key(
        names=("all_reduce_z_s",),
        kind="value",
        rel_tol=0.02,
        expected=lambda **v: {"all_reduce_z_s": _problem_3_2(**v)["all_reduce_z_s"]},
        also=(lambda **v: {"all_reduce_z_s": _problem_3_2_text(**v)["all_reduce_z_s"]},),
        params=P32,
        draw=_draw_3_2,
    ),
    "ch03_q3a_small_gather": Key(
        names=("small_gather_s",),
        kind="value",
        expected=lambda **v: {"small_gather_s": _problem_3_3(**v).total_s},
        params=P33,
        draw=_draw_3_3_tiny,
    ),
    "ch03_q3b_small_bound": Key(
        names=("small_gather_bound",),
        kind="choice",
        choices=("latency", "bandwidth"),
        expected=lambda **v: _problem_3_3(**v).bound,
        params=P33,
        draw=_draw_3_3_bound,
        accept=lambda v: _clear_of_crossover(_problem_3_3(**v)),
    ),
    "ch03_q4a_strategy_times": Key(
        names=("strategy_times_s",),
        kind="function",
        reference=_strategy_times,
        also=(_strategy_times_text,),
        cases=STRATEGY_CASES,
        rel_tol=1e-4,
    ),
    "ch03_q4b_comms_bound_batch": Key(
        names=("comms_bound_below_tokens",),
        kind="value",
        expected=_comms_bound_batch,
        also=(_comms_bound_batch_text,),
        params={"tpu": "tpu-v5p", "x": 16, "d": 8192, "f": 32768},
        draw=lambda r: {
            **_draw_ring(r),
            "d": r.choice((4096, 8192, 12288, 16384)),
            "f": r.choice((16384, 28672, 32768, 53248, 65536)),
        },
    ),
    "ch03_q4c_strategy_2_d": Key(
        names=("strategy_2_wins_above_d",),
        kind="value",
        expected=_strategy_2_wins_d,
        also=(_strategy_2_wins_d_text,),
        params={"tpu": "tpu-v5p", "x": 16, "f": 32768},
        draw=lambda r: {**_draw_ring(r), "f": r.choice((16384, 28672, 32768, 53248, 65536))},
    ),
    "ch03_q4d_better_strategy": Key(
        names=("better_strategy",),
        kind="choice",
        choices=("strategy_1", "strategy_2"),
        expected=_better_strategy,
        params={"tpu": "tpu-v5p", "x": 16, "b": 128, "d": 8192, "f": 32768},
        draw=_draw_better_strategy,
        accept=_strategies_differ,
    ),
    "ch03_q5a_min_latency_dim": Key(
        names=("min_latency_dim",),
        kind="choice",
        choices=tuple(SPLITS35),
        expected=_fastest_35,
        params=P35,
        draw=_draw_3_5,
        accept=_one_split_fastest,
    ),
    "ch03_q5b_min_latency_s": Key(
        names=("min_latency_s",),
        kind="value",
        expected=lambda **v: {"min_latency_s": _plan_35(_fastest_35(**v), **v).time_lower_s},
        params=P35,
        draw=_draw_3_5,
        accept=_one_split_fastest,
    ),
    "ch03_q5c_flops_per_chip": Key(
        names=("flops_per_chip",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda **v: {"flops_per_chip": _plan_35(_fastest_35(**v), **v).matmul.flops},
        params=P35,
        draw=_draw_3_5,
        accept=_one_split_fastest,
    ),
    "ch03_q5d_contracting_s": Key(
        names=("contracting_split_s",),
        kind="value",
        expected=lambda **v: {"contracting_split_s": _plan_35("D", **v).time_lower_s},
        params=P35,
        draw=_draw_3_5,
        accept=_one_split_fastest,
    ),
    "ch03_q6a_main_collective": Key(
        names=("main_collective",),
        kind="choice",
        choices=("none", "all_gather", "all_reduce", "all_to_all"),
        expected=lambda **v: _collective_36("main", **v),
        params=P36,
        draw=_draw_3_6,
    ),
    "ch03_q6b_main_times": Key(
        names=("main_comms_s", "main_math_s"),
        kind="value",
        expected=lambda **v: _times_36("main", "main", **v),
        params=P36,
        draw=_draw_3_6,
    ),
    "ch03_q6c_part1_collective": Key(
        names=("part1_collective",),
        kind="choice",
        choices=("none", "all_gather", "all_reduce", "all_to_all"),
        expected=lambda **v: _collective_36("part1", **v),
        params=P36,
        draw=_draw_3_6,
    ),
    "ch03_q6d_part1_times": Key(
        names=("part1_comms_s", "part1_math_s"),
        kind="value",
        expected=lambda **v: _times_36("part1", "part1", **v),
        params=P36,
        draw=_draw_3_6,
    ),
    "ch03_q6e_part2_math": Key(
        names=("part2_math_s",),
        kind="value",
        expected=lambda **v: {"part2_math_s": _plan_36("part2", **v).matmul.t_math},
        params=P36,
        draw=_draw_3_6,
    ),
    "ch03_q7a_weight_bytes": Key(
        names=("weight_bytes_per_chip",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda tpu, x, y, b, d, f: {"weight_bytes_per_chip": _mlp_weight_bytes(d, f, x, y)},
        params=P37,
        draw=_draw_3_7,
        accept=_mlp_fits,
    ),
    "ch03_q7b_shard_dim": Key(
        names=("weight_split_dim",),
        kind="choice",
        choices=("D", "F"),
        expected=_mlp_best_dim,
        params=P37,
        draw=_draw_3_7,
        accept=_mlp_fits,
    ),
    "ch03_q7c_mlp_comms": Key(
        names=("mlp_comms_s",),
        kind="value",
        expected=lambda **v: {"mlp_comms_s": _mlp_times(**v)[0]},
        params=P37,
        draw=_draw_3_7,
        accept=_mlp_fits,
    ),
    "ch03_q7d_mlp_math": Key(
        names=("mlp_math_s",),
        kind="value",
        expected=lambda **v: {"mlp_math_s": _mlp_times(**v)[1]},
        params=P37,
        draw=_draw_3_7,
        accept=_mlp_fits,
    ),
    "ch03_q7e_weight_load": Key(
        names=("weight_load_s",),
        kind="value",
        expected=lambda **v: {"weight_load_s": _mlp_weight_load_s(**v)},
        params=P37,
        draw=_draw_3_7,
        accept=_mlp_fits,
    ),
    "ch03_q7f_mlp_bound": Key(
        names=("mlp_bound",),
        kind="choice",
        choices=("compute", "ici", "hbm"),
        expected=_mlp_bound,
        params=P37,
        draw=_draw_3_7,
        accept=_mlp_fits,
    ),
    "ch03_q8_all_to_all": Key(
        names=("rows_to_columns",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((2, 3), (4, 1)),
            inputs=lambda sizes, n, seed: ((_random((n * sizes[0], n * sizes[1]), seed),), ()),
            in_specs=(("X", None),),
            reference=lambda arrays, n: arrays[0],
            block=lambda sizes, n: (n * sizes[0], sizes[1]),
            collectives={"all-to-all": (1, 1), "all-gather": (0, 0), "all-reduce": (0, 0)},
            needs_primitives=("all_to_all",),
        ),
    ),
    "ch03_q9a_matmul_all_reduce": Key(
        names=("matmul_all_reduce",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((8, 4, 16), (3, 2, 5)),
            inputs=_matmul_inputs,
            in_specs=((None, "X"), ()),
            reference=lambda arrays, n: arrays[0].astype("float64") @ arrays[1].astype("float64"),
            atol=1e-3,
            per_device=True,
            collectives={"all-reduce": (1, 1), "all-gather": (0, 0), "reduce-scatter": (0, 0)},
            needs_primitives=("shard_map", "psum"),
        ),
    ),
    "ch03_q9b_matmul_reduce_scatter": Key(
        names=("matmul_reduce_scatter",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((8, 4, 2), (3, 2, 1)),
            inputs=lambda sizes, n, seed: _matmul_inputs((sizes[0], sizes[1], n * sizes[2]), n, seed),
            in_specs=((None, "X"), ()),
            reference=lambda arrays, n: arrays[0].astype("float64") @ arrays[1].astype("float64"),
            atol=1e-3,
            block=lambda sizes, n: (sizes[0], sizes[2]),
            collectives={"reduce-scatter": (1, 1), "all-gather": (0, 0), "all-reduce": (0, 0)},
            needs_primitives=("shard_map", "reduce_scatter"),  # psum_scatter traces to reduce_scatter
        ),
    ),
    "ch03_q9c_comm_ratio": Key(
        names=("gather_over_scatter",),
        kind="function",
        reference=_comm_ratio,
        cases=((1024, 4096, 1024), (512, 1000, 3000), (64, 8, 8)),
    ),
    "ch03_q10a_gather_link": Key(
        names=("gather_link_scalars",),
        kind="function",
        reference=_link("all_gather", False),
        cases=LINK_CASES,
    ),
    "ch03_q10b_all_to_all_link": Key(
        names=("all_to_all_link_scalars",),
        kind="function",
        reference=_link("all_to_all", False),
        cases=LINK_CASES,
    ),
    "ch03_q10c_ratio_one_way": Key(
        names=("link_ratio_one_way",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda d, num, den: {
            "link_ratio_one_way": collectives.link_load_fraction(num, d) / collectives.link_load_fraction(den, d)
        },
        params={"d": 16, "num": "all_to_all", "den": "all_gather"},
        draw=_draw_link_pair,
    ),
    "ch03_q10d_gather_link_both": Key(
        names=("gather_link_scalars_both",),
        kind="function",
        reference=_link("all_gather", True),
        cases=LINK_CASES,
    ),
    "ch03_q10e_all_to_all_link_both": Key(
        names=("all_to_all_link_scalars_both",),
        kind="function",
        reference=_link("all_to_all", True),
        cases=LINK_CASES_EVEN,
    ),
    "ch03_q10f_ratio_both": Key(
        names=("gather_over_all_to_all_both",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda d: {
            "gather_over_all_to_all_both": collectives.all_gather_time(
                1e9, d, "tpu-v5e", wraparound=True, hop_latency_s=0
            )
            / collectives.all_to_all_time(1e9, d, "tpu-v5e", wraparound=True, hop_latency_s=0)
        },
        params={"d": 16},
        draw=lambda r: {"d": r.choice((4, 6, 8, 10, 12, 24, 32, 64))},  # even: Q10e's split of the opposite piece
    ),
}


# Right values by the wrong route (tests/course/test_grading.py): the primitive the question asks to avoid, or to use.
PLAUSIBLE = {
    "ch03_q0f_ring_all_gather": """
def ring_all_gather(x):
    gather = lambda block: jax.lax.all_gather(block, "X", tiled=True)
    return jax.shard_map(gather, in_specs=jax.P("X"), out_specs=jax.P(), check_vma=False)(x)
""",
    "ch03_q9b_matmul_reduce_scatter": """
def matmul_reduce_scatter(a, b):
    def local(a_block, b_full):
        whole_a = jax.lax.all_gather(a_block, "X", axis=1, tiled=True)
        c = whole_a @ b_full
        width = c.shape[1] // jax.lax.axis_size("X")
        return jax.lax.dynamic_slice_in_dim(c, jax.lax.axis_index("X") * width, width, axis=1)
    return jax.shard_map(local, in_specs=(jax.P(None, "X"), jax.P()), out_specs=jax.P(None, "X"))(a, b)
""",
}

# The text's printed answers: the grader accepts each (tests/course/test_exercises.py).
PRINTED = {
    "ch03_q2a_gather_x": {"gather_x_s": 23e-6},
    "ch03_q2b_gather_xy": {"gather_xy_s": 46e-6},
    "ch03_q2c_all_reduce_z": {"all_reduce_z_s": 11.6e-6},
    "ch03_q4b_comms_bound_batch": {"comms_bound_below_tokens": 2550},
    "ch03_q4c_strategy_2_d": {"strategy_2_wins_above_d": 5100},
    "ch03_q0a_pop_quiz_bytes": {"bytes_per_device": 16_384, "bytes_all_devices": 512 * 1024},  # "512kiB"
    "ch03_q0b_gather_big": {"gather_big_s": 560e-6},  # 3 * 8.4e6 / 4.5e10: no wraparound on a 4-chip axis
    "ch03_q0c_gather_small": {"gather_small_s": 3e-6},  # 3 hops of 1 us
    "ch03_q0e_latency_bytes": {"latency_bound_below_bytes": 45e3},  # 4.5e10 * 1e-6 = 45kB
    "ch03_q1_replication": {"total_over_one_copy": 16},
    "ch03_q3a_small_gather": {"small_gather_s": 2e-6},  # 2 hops of 1 us
    "ch03_q10c_ratio_one_way": {"link_ratio_one_way": 0.5},  # an AllToAll is half an AllGather one way round
}

# Why the text's answer to each other question is not in PRINTED.
UNPRINTED: dict[str, str] = {
    "ch03_q0d_small_bound": "a choice question: PRINTED holds numbers only (the text's answer, latency-bound, is "
    "the key's)",
    "ch03_q0f_ring_all_gather": "a JAX program, judged by running it",
    "ch03_q3b_small_bound": "a choice question: PRINTED holds numbers only (the text's answer, latency-bound, is "
    "the key's)",
    "ch03_q4a_strategy_times": "a function question: graded on its inputs; the text prints the four times as "
    "formulas, no table of outputs",
    "ch03_q4d_better_strategy": "a choice question: PRINTED holds numbers only (the text's rule, strategy 2 when "
    "D > 5100, gives the key's answer)",
    "ch03_q5a_min_latency_dim": "a choice question, and the text prints no answer to problem 3.5 beyond naming "
    "the candidate shardings",
    "ch03_q5b_min_latency_s": "the text prints no numbers for problem 3.5",
    "ch03_q5c_flops_per_chip": "the text prints no numbers for problem 3.5",
    "ch03_q5d_contracting_s": "the text prints no numbers for problem 3.5",
    "ch03_q6a_main_collective": "a choice question, and the text prints no answer to problem 3.6",
    "ch03_q6b_main_times": "the text prints no answer to problem 3.6",
    "ch03_q6c_part1_collective": "a choice question, and the text prints no answer to problem 3.6",
    "ch03_q6d_part1_times": "the text prints no answer to problem 3.6",
    "ch03_q6e_part2_math": "the text prints no answer to problem 3.6",
    "ch03_q7a_weight_bytes": "the text prints each whole matrix's 536MB (in its current version), not the bytes "
    "per chip asked here",
    "ch03_q7b_shard_dim": "a choice question: PRINTED holds numbers only (the current text's partial answer "
    "favours tensor parallelism, splitting F, the key's answer)",
    "ch03_q7c_mlp_comms": "the text leaves the time of problem 3.7 as an exercise and prints no number",
    "ch03_q7d_mlp_math": "the text leaves the time of problem 3.7 as an exercise and prints no number",
    "ch03_q7e_weight_load": "the text prints no weight-load time for problem 3.7",
    "ch03_q7f_mlp_bound": "a choice question, and the text prints no answer to it",
    "ch03_q8_all_to_all": "a JAX program, judged by running it",
    "ch03_q9a_matmul_all_reduce": "a JAX program, judged by running it",
    "ch03_q9b_matmul_reduce_scatter": "a JAX program, judged by running it",
    "ch03_q9c_comm_ratio": "a function question: graded on its inputs; the text prints the ratio M / K, no table "
    "of outputs",
    "ch03_q10a_gather_link": "a function question: graded on its inputs; the text prints N^2 (1 - 1/D), no table "
    "of outputs",
    "ch03_q10b_all_to_all_link": "a function question: graded on its inputs; the text prints N^2 / 2 (1 - 1/D), "
    "no table of outputs",
    "ch03_q10d_gather_link_both": "a function question: graded on its inputs; the text prints half the one-way "
    "count, no table of outputs",
    "ch03_q10e_all_to_all_link_both": "a function question: graded on its inputs; the text prints only the "
    "large-D limit, no table of outputs",
    "ch03_q10f_ratio_both": "the text prints the large-ring limit, a factor of 4, not the ratio at the D = 16 "
    "this question asks for (3.75)",
}
