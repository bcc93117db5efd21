"""Answer keys for the chapter 3 exercises (sharded matrices and collectives), computed with book_lib."""

from __future__ import annotations

import random

from book_lib import checks, collectives, hardware, notation, sharding, topology
from book_lib.hardware import get_chip
from exercises.keys import choice, function, pick, program, value
from exercises.keys.arrays import normal, product
from exercises.keys.chips import TPUS_2D, TPUS_3D, givens

# The rates problem 3.4's function question (Q4a) prints, each with the book_lib value it must match; the
# value and choice problems print their chip's rates from book_lib through the templates.
GIVENS = givens("tpu-v5p", bf16_flops_per_s="4.59 \\times 10^{14}", ici_bytes_per_s="9 \\times 10^{10}")
# 3D slices (X, Y, Z): whole 4x4x4 cubes (every axis a ring) and smaller ones (every axis a line).
SHAPES_3D = tuple(
    map(
        topology.parse_shape,
        ("4x4x4", "4x4x8", "4x8x4", "8x4x4", "4x8x8", "8x8x8", "4x4x16", "2x4x4", "4x2x4", "2x2x4"),
    )
)
# Rings of X chips each chip family can close: an axis of whole cubes, or a 2D pod's full side.
RINGS = {**dict.fromkeys(TPUS_3D, (4, 8, 16)), **{tpu: (get_chip(tpu).pod_shape[0],) for tpu in TPUS_2D}}
# A 2D-torus chip and a mesh {X: x, Y: y} of a slice with both axes shorter than its pod's side.
_draw_2d_mesh = pick(tpu=TPUS_2D, x=(2, 4, 8), y=(2, 4, 8))


def _draw_3d_mesh(r: random.Random) -> dict:
    x, y, z = r.choice(SHAPES_3D)
    return {"tpu": r.choice(TPUS_3D), "x": x, "y": y, "z": z}


# --- pop quizzes -----------------------------------------------------------------------------------


def _pop_quiz_bytes(dtype: str, i: int, j: int, x: int, y: int, z: int) -> tuple[float, float]:
    """A[I_XY, J]'s bytes on one device and on all of them."""
    a, sizes, mesh = notation.parse("A[I_XY, J]"), {"I": i, "J": j}, {"X": x, "Y": y, "Z": z}
    width = checks.dtype_bytes(dtype)
    return (a.local_bytes(sizes, mesh, bytes_per_element=width), a.total_bytes(sizes, mesh, bytes_per_element=width))


def _gather_y(tpu: str, x: int, y: int, e: int, f: int) -> collectives.CollectiveTime:
    """AllGather_Y [E_Y, F] -> [E, F] (bf16) on a slice x by y; an axis wraps only at the pod's side."""
    y_ring = topology.ring_flags(tpu, (x, y))[1]
    return collectives.collective_time("all_gather", 2 * e * f, y, tpu, wraparound=y_ring)


def _clear_of_crossover(gather: collectives.CollectiveTime) -> bool:
    """Not too near the latency-bandwidth crossover (a clear answer)."""
    return not 0.8 < gather.bandwidth_s / gather.latency_s < 1.25


def _replication(x: int, y: int, z: int, axis: str) -> float:
    sizes, mesh = {"I": 1024, "J": 8, "K": 8}, {"X": x, "Y": y, "Z": z}
    total = notation.parse(f"A[I_{axis}, J, K]").total_bytes(sizes, mesh)
    return total / notation.parse("A[I, J, K]").global_bytes(sizes)


# --- problems 3.2 and 3.3: a 3D slice; whole cubes wrap every axis ------------------------------------------


def _problem_3_2(tpu: str, x: int, y: int, z: int, b: int, d: int) -> tuple[collectives.CollectiveTime, ...]:
    """bf16[B_X, D_Y] gathered over X (it keeps D / |Y|), then over X and Y; bf16[B, D]{U_Z} reduced over Z."""
    wraps = topology.ring_flags(tpu, (x, y, z))
    return (
        collectives.collective_time("all_gather", 2 * b * d / y, x, tpu, wraparound=wraps[0]),
        collectives.collective_time("all_gather", 2 * b * d, (x, y), tpu, wraparound=wraps[:2]),
        collectives.collective_time("all_reduce", 2 * b * d / (x * y), z, tpu, wraparound=wraps[2]),
    )


def _key_3_2(name: str, step: int):
    """Problem 3.2's `step`: its time with the ring's (N - 1) / N, or (the text's model) by its rule of thumb.

    The three steps are one problem on one slice: the first draws it, the others take it up."""
    numbers = (
        {"draw": pick(_draw_3d_mesh, b=(256, 512, 2048, 4096), d=(2048, 8192, 16384))}
        if step == 0
        else {"follows": "ch03_q2a_gather_x"}
    )
    return value(
        name,
        lambda **v: _problem_3_2(**v)[step].total_s,
        also=(lambda **v: _problem_3_2(**v)[step].rule_of_thumb_s,),
        rel_tol=0.02,
        params={"tpu": "tpu-v4", "x": 4, "y": 4, "z": 4, "b": 1024, "d": 4096},  # a v4 4x4x4 cube
        **numbers,
    )


def _problem_3_3(tpu: str, x: int, y: int, z: int, b: int) -> collectives.CollectiveTime:
    return collectives.collective_time("all_gather", 2 * b, x, tpu, wraparound=topology.ring_flags(tpu, (x, y, z))[0])


# --- problem 3.4: two strategies for X[B, D] . W[D_X, F] on a ring -----------------------------------------


def _strategies(B: int, D: int, F: int, X: int, tpu: str = "tpu-v5p") -> tuple[sharding.MatmulPlan, ...]:
    """Strategy 1 gathers W's rows, strategy 2 reduces the partial products, on the problem's ring, idealised."""
    ring = {"sizes": {"B": B, "D": D, "F": F}, "mesh": {"X": X}, "chip": tpu, "wraparound": True}
    return tuple(sharding.matmul_plan(a, "W[D_X, F]", contracting="D", **ring) for a in ("A[B, D]", "A[B, D_X]"))


def _rule(op: str, array_bytes: float, x: int, tpu: str = "tpu-v5p") -> float:
    """The text's model of a collective on the ring: V / W_bidirectional (an AllReduce twice that)."""
    return collectives.collective_time(op, array_bytes, x, tpu, wraparound=True).rule_of_thumb_s


def _strategy_times(B: int, D: int, F: int, X: int) -> tuple[float, float, float, float]:
    gather, reduce = _strategies(B, D, F, X)
    return (gather.matmul.t_math, gather.comms_s, reduce.matmul.t_math, reduce.comms_s)


def _strategy_times_text(B: int, D: int, F: int, X: int) -> tuple[float, float, float, float]:
    """The text's model: each collective by its rule of thumb, without the ring's (X - 1) / X or the hops' latency."""
    gather, reduce = _strategies(B, D, F, X)
    return (
        gather.matmul.t_math,
        _rule("all_gather", 2 * D * F, X),
        reduce.matmul.t_math,
        _rule("all_reduce", 2 * B * F, X),
    )


def _comms_bound_batch(tpu: str, x: int, d: int, f: int, *, text: bool = False) -> float:
    """Strategy 1's gather does not grow with B and its math grows as B: they meet at comms / (math per token)."""
    gather, _ = _strategies(1, d, f, x, tpu)
    return (_rule("all_gather", 2 * d * f, x, tpu) if text else gather.comms_s) / gather.matmul.t_math


def _strategy_2_wins_d(tpu: str, x: int, f: int, *, text: bool = False) -> float:
    """Large B, both bandwidth-bound on their own terms: strategy 2's AllReduce (no D) against strategy 1's math (D)."""
    big_b, d = 2**20, 8192
    gather, reduce = _strategies(big_b, d, f, x, tpu)
    return (_rule("all_reduce", 2 * big_b * f, x, tpu) if text else reduce.comms_s) / (gather.matmul.t_math / d)


def _strategy_totals(tpu: str, x: int, b: int, d: int, f: int) -> tuple[float, ...]:
    """Each strategy's time, its math and its communication overlapped."""
    return tuple(max(plan.matmul.t_math, plan.comms_s) for plan in _strategies(b, d, f, x, tpu))


def _draw_ring(r: random.Random) -> dict:
    """A chip family and a ring it can close."""
    tpu = r.choice(tuple(RINGS))
    return {"tpu": tpu, "x": r.choice(RINGS[tpu])}


def _strategies_differ(v: dict) -> bool:
    """The two strategies' times differ by more than 10 % (a clear answer)."""
    t1, t2 = _strategy_totals(**v)
    return max(t1, t2) > 1.1 * min(t1, t2)


# --- problem 3.5: lowest latency on a 3D slice ------------------------------------------------------------

SPLITS35 = {"B": ("A[B_XYZ, D]", "W[D, F]"), "D": ("A[B, D_XYZ]", "W[D_XYZ, F]"), "F": ("A[B, D]", "W[D, F_XYZ]")}


def _plan_35(dim: str, tpu: str, x: int, y: int, z: int, b: int, d: int, f: int) -> sharding.MatmulPlan:
    mesh = {"X": x, "Y": y, "Z": z}  # its rings: the physical default, topology.ring_flags
    return sharding.matmul_plan(*SPLITS35[dim], contracting="D", sizes={"B": b, "D": d, "F": f}, mesh=mesh, chip=tpu)


def _fastest_35(**values) -> str:
    return min(SPLITS35, key=lambda dim: _plan_35(dim, **values).time_lower_s)


def _one_split_fastest(v: dict) -> bool:
    """Sizes every split divides, with one split at least 10 % faster than the others (a clear answer)."""
    n = v["x"] * v["y"] * v["z"]
    if any(v[s] % n for s in ("b", "d", "f")):
        return False
    first, second = sorted(_plan_35(dim, **v).time_lower_s for dim in SPLITS35)[:2]
    return second > 1.1 * first


P35 = {
    "params": {"tpu": "tpu-v5p", "x": 4, "y": 4, "z": 4, "b": 128, "d": 8192, "f": 32768},
    "draw": pick(
        _draw_3d_mesh, b=(128, 256, 512, 2048, 8192, 65536), d=(4096, 8192, 16384), f=(8192, 16384, 32768, 65536)
    ),
    "accept": _one_split_fastest,
}
# Q5b to Q5d: the matmul and slice of Q5a.
P35_AGAIN = {"params": P35["params"], "follows": "ch03_q5a_min_latency_dim"}

# --- problem 3.6: three shardings on a 2D slice without wraparound -----------------------------------------

PARTS36 = {
    "main": ("A[I_X, J_Y]", "B[J_Y, K]"),
    "part1": ("A[I_X, J]", "B[J_X, K_Y]"),
    "part2": ("A[I_X, J]", "B[J, K_Y]"),
}
COLLECTIVES36 = ("none", "all_gather", "all_reduce", "all_to_all")


def _plan_36(part: str, tpu: str, x: int, y: int, i: int, j: int, k: int) -> sharding.MatmulPlan:
    mesh = {"X": x, "Y": y}  # its rings: the physical default, topology.ring_flags
    return sharding.matmul_plan(*PARTS36[part], contracting="J", sizes={"I": i, "J": j, "K": k}, mesh=mesh, chip=tpu)


def _collective_36(part: str, **values) -> str:
    ops = [s.op for s in _plan_36(part, **values).steps if s.op != "Matmul"]
    names = {"AllGather": "all_gather", "AllReduce": "all_reduce", "ReduceScatter": "reduce_scatter"}
    return names[ops[0]] if ops else "none"


def _times_36(part: str, **values) -> tuple[float, float]:
    plan = _plan_36(part, **values)
    return (plan.comms_s, plan.matmul.t_math)


P36 = {
    "params": {"tpu": "tpu-v5e", "x": 4, "y": 4, "i": 8192, "j": 8192, "k": 32768},  # a v5e 4x4
    "draw": pick(_draw_2d_mesh, i=(4096, 8192, 16384), j=(4096, 8192, 16384), k=(16384, 32768, 65536)),
}
# Q6b to Q6e: the slice and sizes of Q6a.
P36_AGAIN = {"params": P36["params"], "follows": "ch03_q6a_main_collective"}

# --- problem 3.7: an MLP block on a 2D slice without wraparound ---------------------------------------------


def _mlp_plans(dim: str, tpu: str, x: int, y: int, b: int, d: int, f: int):
    """x[B, D] . Win[D, F] -> h, then h . Wout[F, D], both weights split over X and Y along `dim`."""
    mesh = {"X": x, "Y": y}  # its rings: the physical default, topology.ring_flags
    common = dict(sizes={"B": b, "D": d, "F": f, "E": d}, mesh=mesh, chip=tpu)
    if dim == "F":
        up = sharding.matmul_plan("x[B, D]", "Win[D, F_XY]", contracting="D", out_name="h", **common)
        return up, sharding.matmul_plan(up.result, "Wout[F_XY, E]", contracting="F", **common)
    scatter = {"reduce": "reduce_scatter", "scatter_dim": "F"}
    up = sharding.matmul_plan("x[B, D_XY]", "Win[D_XY, F]", contracting="D", out_name="h", **scatter, **common)
    return up, sharding.matmul_plan(up.result, "Wout[F, E_XY]", contracting="F", **common)


def _mlp_weight_bytes(tpu: str, x: int, y: int, b: int, d: int, f: int) -> float:
    sizes, mesh = {"D": d, "F": f}, {"X": x, "Y": y}
    return sum(notation.parse(w).local_bytes(sizes, mesh) for w in ("Win[D, F_XY]", "Wout[F_XY, D]"))


def _mlp_best_dim(**values) -> str:
    return min(("D", "F"), key=lambda dim: sum(p.comms_s for p in _mlp_plans(dim, **values)))


def _mlp_times(**values) -> tuple[float, float]:
    up, down = _mlp_plans(_mlp_best_dim(**values), **values)
    return up.comms_s + down.comms_s, up.matmul.t_math + down.matmul.t_math


def _mlp_weight_load_s(**values) -> float:
    """Seconds for one chip to read its share of both weight matrices from HBM (the text's crux)."""
    return _mlp_weight_bytes(**values) / get_chip(values["tpu"]).hbm_bytes_per_s


def _mlp_bound(**values) -> str:
    comms_s, math_s = _mlp_times(**values)
    bounds = {"compute": math_s, "ici": comms_s, "hbm": _mlp_weight_load_s(**values)}
    return max(bounds, key=bounds.__getitem__)


def _draw_3_7(r: random.Random) -> dict:
    """A 2D slice of 4 to 16 chips and an MLP (F > D)."""
    d = r.choice((4096, 6144, 8192, 12288, 16384))
    mesh = pick(tpu=TPUS_2D, x=(2, 4), y=(2, 4))(r)
    return {**mesh, "b": r.choice((64, 128, 256, 512)), "d": d, "f": r.choice((2, 3, 4, 8)) * d}


P37 = {
    "params": {"tpu": "tpu-v5e", "x": 2, "y": 2, "b": 128, "d": 8192, "f": 32768},  # a v5e 2x2
    "draw": _draw_3_7,
    # the MLP's weights per chip fit well within the chip's HBM (a quarter of it)
    "accept": lambda v: _mlp_weight_bytes(**v) < get_chip(v["tpu"]).hbm_bytes / 4,
}
# Q7b to Q7f: the MLP and slice of Q7a.
P37_AGAIN = {"params": P37["params"], "follows": "ch03_q7a_weight_bytes"}

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


def _bidirectional_s(op: str, d: int) -> float:
    return collectives.collective_time(op, 1e9, d, "tpu-v5e", wraparound=True, hop_latency_s=0).total_s


# --- the JAX questions: inputs drawn at grading time ------------------------------------------------------

NO_OTHER_COLLECTIVE = {"all-gather": (0, 0), "all-reduce": (0, 0), "reduce-scatter": (0, 0), "all-to-all": (0, 0)}


def _matmul_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """A: f32[I, n * J] (columns split over "X") and B: f32[n * J, K] (replicated)."""
    rows, inner, cols = sizes
    return normal(((rows, n * inner), (n * inner, cols)), seed), ()


P0C = {"tpu": "tpu-v5e", "x": 8, "y": 4, "e": 256, "f": 256}  # pop quiz 2: a v5e 8x4
P33 = {"tpu": "tpu-v4", "x": 4, "y": 4, "z": 4, "b": 128}  # problem 3.3
GROWING = (16384, 28672, 32768, 53248, 65536)  # problem 3.4's F

KEYS = {
    "ch03_q0a_pop_quiz_bytes": value(
        ("bytes_per_device", "bytes_all_devices"),
        _pop_quiz_bytes,
        rel_tol=1e-6,
        params={"dtype": "int8", "i": 128, "j": 2048, "x": 2, "y": 8, "z": 2},
        draw=pick(
            dtype=("int8", "bf16", "f32"),
            i=(128, 256, 512, 1024),
            j=(1024, 4096, 8192),
            x=(2, 4, 8),
            y=(2, 4, 8, 16),
            z=(2, 4, 8),
        ),
    ),
    "ch03_q0b_gather_big": value(
        "gather_big_s",
        lambda **v: _gather_y(**v).total_s,
        params={**P0C, "e": 2048, "f": 8192},
        draw=pick(_draw_2d_mesh, e=(1024, 2048, 4096, 8192), f=(2048, 4096, 8192, 16384)),
        # a bandwidth-bound AllGather: the bandwidth time at least 3 times the latency
        accept=lambda v: _gather_y(**v).bandwidth_s >= 3 * _gather_y(**v).latency_s,
    ),
    "ch03_q0c_gather_small": value(  # Q0b's chip and mesh, a smaller array
        "gather_small_s",
        lambda **v: _gather_y(**v).total_s,
        params=P0C,
        draw=pick(e=(64, 128, 256, 512), f=(128, 256, 512, 1024)),
        follows="ch03_q0b_gather_big",
        shares=("tpu", "x", "y"),
    ),
    "ch03_q0d_small_bound": choice(  # the same chip and mesh, an array of its own
        "gather_small_bound",
        lambda **v: _gather_y(**v).bound,
        ("latency", "bandwidth"),
        params=P0C,
        draw=pick(e=(64, 128, 256, 512), f=(128, 256, 512, 1024, 2048)),  # both sides of the crossover
        accept=lambda v: _clear_of_crossover(_gather_y(**v)),
        follows="ch03_q0c_gather_small",
        shares=("tpu", "x", "y"),
    ),
    "ch03_q0e_latency_bytes": value(
        "latency_bound_below_bytes",
        lambda tpu: get_chip(tpu).ici_bytes_per_s * collectives.HOP_LATENCY_S,
        params={"tpu": "tpu-v5e"},
        draw=pick(tpu=hardware.chip_names(family="tpu")),
    ),
    "ch03_q0f_ring_all_gather": program(
        "ring_all_gather",
        cases=((2, 3), (4, 8)),
        inputs=lambda sizes, n, seed: (normal(((n * sizes[0], sizes[1]),), seed), ()),
        in_specs=(("X",),),
        reference=lambda arrays, n: arrays[0],
        per_device=True,
        collectives={"collective-permute": (1, 10**6), **NO_OTHER_COLLECTIVE},
    ),
    "ch03_q1_replication": value(
        "total_over_one_copy",
        _replication,
        rel_tol=1e-6,
        params={"x": 4, "y": 8, "z": 2, "axis": "X"},
        draw=pick(x=(2, 4, 8, 16), y=(2, 4, 8, 16), z=(2, 4, 8), axis=("X", "Y", "Z")),
    ),
    "ch03_q2a_gather_x": _key_3_2("gather_x_s", 0),
    "ch03_q2b_gather_xy": _key_3_2("gather_xy_s", 1),
    "ch03_q2c_all_reduce_z": _key_3_2("all_reduce_z_s", 2),
    "ch03_q3a_small_gather": value(
        "small_gather_s",
        lambda **v: _problem_3_3(**v).total_s,
        params=P33,
        # a vector small enough that every slice's gather is latency-bound
        draw=pick(_draw_3d_mesh, b=(64, 128, 256, 512, 1024)),
    ),
    "ch03_q3b_small_bound": choice(  # Q3a's slice, a vector of its own
        "small_gather_bound",
        lambda **v: _problem_3_3(**v).bound,
        ("latency", "bandwidth"),
        params=P33,
        draw=pick(b=(128, 1024, 2**14, 2**17, 2**19, 2**21)),
        accept=lambda v: _clear_of_crossover(_problem_3_3(**v)),
        follows="ch03_q3a_small_gather",
        shares=("tpu", "x", "y", "z"),
    ),
    "ch03_q4a_strategy_times": function(
        "strategy_times_s",
        _strategy_times,
        ((128, 8192, 32768, 16), (4096, 8192, 32768, 16), (64, 4096, 16384, 8), (1024, 2048, 8192, 4)),
        also=(_strategy_times_text,),
        rel_tol=1e-4,
    ),
    "ch03_q4b_comms_bound_batch": value(
        "comms_bound_below_tokens",
        _comms_bound_batch,
        also=(lambda **v: _comms_bound_batch(**v, text=True),),
        params={"tpu": "tpu-v5p", "x": 16, "d": 8192, "f": 32768},
        draw=pick(_draw_ring, d=(4096, 8192, 12288, 16384), f=GROWING),
    ),
    "ch03_q4c_strategy_2_d": value(
        "strategy_2_wins_above_d",
        _strategy_2_wins_d,
        also=(lambda **v: _strategy_2_wins_d(**v, text=True),),
        params={"tpu": "tpu-v5p", "x": 16, "f": 32768},
        follows="ch03_q4b_comms_bound_batch",  # Q4b's ring and F
    ),
    "ch03_q4d_better_strategy": choice(
        "better_strategy",
        lambda **v: "strategy_1" if _strategy_totals(**v)[0] < _strategy_totals(**v)[1] else "strategy_2",
        ("strategy_1", "strategy_2"),
        params={"tpu": "tpu-v5p", "x": 16, "b": 128, "d": 8192, "f": 32768},
        draw=pick(b=(64, 128, 512, 2048, 8192)),
        accept=_strategies_differ,
        follows="ch03_q4b_comms_bound_batch",  # Q4b's ring, D and F, at a batch of its own
    ),
    "ch03_q5a_min_latency_dim": choice("min_latency_dim", _fastest_35, tuple(SPLITS35), **P35),
    "ch03_q5b_min_latency_s": value(
        "min_latency_s", lambda **v: _plan_35(_fastest_35(**v), **v).time_lower_s, **P35_AGAIN
    ),
    "ch03_q5c_flops_per_chip": value(
        "flops_per_chip", lambda **v: _plan_35(_fastest_35(**v), **v).matmul.flops, rel_tol=1e-6, **P35_AGAIN
    ),
    "ch03_q5d_contracting_s": value("contracting_split_s", lambda **v: _plan_35("D", **v).time_lower_s, **P35_AGAIN),
    "ch03_q6a_main_collective": choice(
        "main_collective", lambda **v: _collective_36("main", **v), COLLECTIVES36, **P36
    ),
    "ch03_q6b_main_times": value(("main_comms_s", "main_math_s"), lambda **v: _times_36("main", **v), **P36_AGAIN),
    "ch03_q6c_part1_collective": choice(
        "part1_collective", lambda **v: _collective_36("part1", **v), COLLECTIVES36, **P36_AGAIN
    ),
    "ch03_q6d_part1_times": value(("part1_comms_s", "part1_math_s"), lambda **v: _times_36("part1", **v), **P36_AGAIN),
    "ch03_q6e_part2_math": value("part2_math_s", lambda **v: _times_36("part2", **v)[1], **P36_AGAIN),
    "ch03_q7a_weight_bytes": value("weight_bytes_per_chip", _mlp_weight_bytes, rel_tol=1e-6, **P37),
    "ch03_q7b_shard_dim": choice("weight_split_dim", _mlp_best_dim, ("D", "F"), **P37_AGAIN),
    "ch03_q7c_mlp_comms": value("mlp_comms_s", lambda **v: _mlp_times(**v)[0], **P37_AGAIN),
    "ch03_q7d_mlp_math": value("mlp_math_s", lambda **v: _mlp_times(**v)[1], **P37_AGAIN),
    "ch03_q7e_weight_load": value("weight_load_s", _mlp_weight_load_s, **P37_AGAIN),
    "ch03_q7f_mlp_bound": choice("mlp_bound", _mlp_bound, ("compute", "ici", "hbm"), **P37_AGAIN),
    "ch03_q8_all_to_all": program(
        "rows_to_columns",
        cases=((2, 3), (4, 1)),
        inputs=lambda sizes, n, seed: (normal(((n * sizes[0], n * sizes[1]),), seed), ()),
        in_specs=(("X", None),),
        reference=lambda arrays, n: arrays[0],
        block=lambda sizes, n: (n * sizes[0], sizes[1]),
        collectives={"all-to-all": (1, 1), "all-gather": (0, 0), "all-reduce": (0, 0)},
        needs_primitives=("all_to_all",),
    ),
    "ch03_q9a_matmul_all_reduce": program(
        "matmul_all_reduce",
        cases=((8, 4, 16), (3, 2, 5)),
        inputs=_matmul_inputs,
        in_specs=((None, "X"), ()),
        reference=product,
        atol=1e-3,
        per_device=True,
        collectives={"all-reduce": (1, 1), "all-gather": (0, 0), "reduce-scatter": (0, 0)},
        needs_primitives=("shard_map", "psum"),
    ),
    "ch03_q9b_matmul_reduce_scatter": program(
        "matmul_reduce_scatter",
        cases=((8, 4, 2), (3, 2, 1)),
        inputs=lambda sizes, n, seed: _matmul_inputs((sizes[0], sizes[1], n * sizes[2]), n, seed),
        in_specs=((None, "X"), ()),
        reference=product,
        atol=1e-3,
        block=lambda sizes, n: (sizes[0], sizes[2]),
        collectives={"reduce-scatter": (1, 1), "all-gather": (0, 0), "all-reduce": (0, 0)},
        needs_primitives=("shard_map", "reduce_scatter"),  # psum_scatter traces to reduce_scatter
    ),
    "ch03_q9c_comm_ratio": function(
        "gather_over_scatter", _comm_ratio, ((1024, 4096, 1024), (512, 1000, 3000), (64, 8, 8))
    ),
    "ch03_q10a_gather_link": function("gather_link_scalars", _link("all_gather", False), LINK_CASES),
    "ch03_q10b_all_to_all_link": function("all_to_all_link_scalars", _link("all_to_all", False), LINK_CASES),
    "ch03_q10c_ratio_one_way": value(
        "link_ratio_one_way",
        lambda d, num, den: collectives.link_load_fraction(num, d) / collectives.link_load_fraction(den, d),
        rel_tol=1e-6,
        params={"d": 16, "num": "all_to_all", "den": "all_gather"},
        draw=_draw_link_pair,
    ),
    "ch03_q10d_gather_link_both": function("gather_link_scalars_both", _link("all_gather", True), LINK_CASES),
    "ch03_q10e_all_to_all_link_both": function(
        "all_to_all_link_scalars_both", _link("all_to_all", True), LINK_CASES_EVEN
    ),
    "ch03_q10f_ratio_both": value(
        "gather_over_all_to_all_both",
        lambda d: _bidirectional_s("all_gather", d) / _bidirectional_s("all_to_all", d),
        rel_tol=1e-6,
        params={"d": 16},
        draw=pick(d=(4, 6, 8, 10, 12, 24, 32, 64)),  # even: Q10e's split of the opposite piece
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
    "ch03_q4d_better_strategy": {"better_strategy": "strategy_2"},  # its rule: strategy 2 when D > 5100
    "ch03_q0a_pop_quiz_bytes": {"bytes_per_device": 16_384, "bytes_all_devices": 512 * 1024},  # "512kiB"
    "ch03_q0b_gather_big": {"gather_big_s": 560e-6},  # 3 * 8.4e6 / 4.5e10: no wraparound on a 4-chip axis
    "ch03_q0c_gather_small": {"gather_small_s": 3e-6},  # 3 hops of 1 us
    "ch03_q0d_small_bound": {"gather_small_bound": "latency"},
    "ch03_q0e_latency_bytes": {"latency_bound_below_bytes": 45e3},  # 4.5e10 * 1e-6 = 45kB
    "ch03_q1_replication": {"total_over_one_copy": 16},
    "ch03_q3a_small_gather": {"small_gather_s": 2e-6},  # 2 hops of 1 us
    "ch03_q3b_small_bound": {"small_gather_bound": "latency"},
    "ch03_q7b_shard_dim": {"weight_split_dim": "F"},  # the current text's partial answer: tensor parallelism
    "ch03_q10c_ratio_one_way": {"link_ratio_one_way": 0.5},  # an AllToAll is half an AllGather one way round
}

# Why the text's answer to a question is not in PRINTED, where that says more than its kind.
UNPRINTED = {
    "ch03_q5a_min_latency_dim": "the text prints no answer to problem 3.5 beyond naming the candidate shardings",
    "ch03_q5b_min_latency_s": "the text prints no numbers for problem 3.5",
    "ch03_q5c_flops_per_chip": "the text prints no numbers for problem 3.5",
    "ch03_q5d_contracting_s": "the text prints no numbers for problem 3.5",
    "ch03_q6a_main_collective": "the text prints no answer to problem 3.6",
    "ch03_q6b_main_times": "the text prints no answer to problem 3.6",
    "ch03_q6c_part1_collective": "the text prints no answer to problem 3.6",
    "ch03_q6d_part1_times": "the text prints no answer to problem 3.6",
    "ch03_q6e_part2_math": "the text prints no answer to problem 3.6",
    "ch03_q7a_weight_bytes": "the text prints each whole matrix's 536MB (in its current version), not the bytes "
    "per chip asked here",
    "ch03_q7c_mlp_comms": "the text leaves the time of problem 3.7 as an exercise and prints no number",
    "ch03_q7d_mlp_math": "the text leaves the time of problem 3.7 as an exercise and prints no number",
    "ch03_q7e_weight_load": "the text prints no weight-load time for problem 3.7",
    "ch03_q7f_mlp_bound": "the text prints no answer to it",
    "ch03_q10e_all_to_all_link_both": "the text prints only the large-D limit",
    "ch03_q10f_ratio_both": "the text prints the large-ring limit, a factor of 4, not the ratio at the D = 16 "
    "this question asks for (3.75)",
}
