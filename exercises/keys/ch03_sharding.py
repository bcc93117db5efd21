"""Answer keys for the chapter 3 exercises (sharded matrices and collectives), computed with book_lib."""

from __future__ import annotations

from book_lib import collectives, hardware, ring, sharding, topology
from exercises.keys import JaxCheck, Key

V4 = hardware.get_chip("tpu-v4")
V5E = hardware.get_chip("tpu-v5e")
V5P = hardware.get_chip("tpu-v5p")

# The rates the statements print, each with the book_lib value it must match
# (tests/test_exercises.py checks that every one appears in a statement and agrees within 0.5 %).
GIVENS = [
    ("4.5 \\times 10^{10}", V5E.ici_bytes_per_s),
    ("4.5 \\times 10^{10}", V4.ici_bytes_per_s),
    ("1.97 \\times 10^{14}", V5E.bf16_flops_per_s),
    ("4.59 \\times 10^{14}", V5P.bf16_flops_per_s),
    ("2.8 \\times 10^{12}", V5P.hbm_bytes_per_s),
    ("9 \\times 10^{10}", V5P.ici_bytes_per_s),
]
HOP_S = collectives.HOP_LATENCY_S  # 1 us per ICI hop, stated in the header


# --- pop quizzes -----------------------------------------------------------------------------------


def _pop_quiz_bytes() -> dict[str, float]:
    a, sizes, mesh = sharding.parse("A[I_XY, J]"), {"I": 128, "J": 2048}, {"X": 2, "Y": 8, "Z": 2}
    return {
        "bytes_per_device": a.local_bytes(sizes, mesh, bytes_per_element=1),
        "bytes_all_devices": a.total_bytes(sizes, mesh, bytes_per_element=1),
    }


def _pop_quiz_gather(E: int, F: int) -> collectives.CollectiveTime:
    # AllGather_Y [E_Y, F] -> [E, F] on a v5e {X: 8, Y: 4}: an axis of 4 has no wraparound on a v5e.
    grid = topology.Slice.of(V5E, (8, 4))
    return collectives.collective_time("all_gather", 2 * E * F, 4, V5E, wraparound=grid.wraparound[1])


# --- problems 3.2 and 3.3: a v4 4x4x4 cube, every axis wraps ------------------------------------------

CUBE = topology.Slice.of(V4, "4x4x4")
B32, D32 = 1024, 4096


def _problem_3_2() -> dict[str, float]:
    wraps = CUBE.wraparound
    gather_x = collectives.all_gather_time(2 * B32 * D32 / 4, 4, V4, wraparound=wraps[0])  # [B_X, D_Y] keeps D / |Y|
    gather_xy = collectives.all_gather_time_multi(2 * B32 * D32, (4, 4), V4, wraparound=wraps[:2])
    reduce_z = collectives.all_reduce_time(2 * B32 * D32 / 16, 4, V4, wraparound=wraps[2])
    return {"gather_x_s": gather_x, "gather_xy_s": gather_xy, "all_reduce_z_s": reduce_z}


def _problem_3_3() -> collectives.CollectiveTime:
    return collectives.collective_time("all_gather", 2 * 128, 4, V4, wraparound=CUBE.wraparound[0])


# --- problem 3.4: two strategies for X[B, D] . W[D_X, F] on a v5p ring -----------------------------------


def _strategies(B: int, D: int, F: int, X: int) -> tuple[sharding.MatmulPlan, sharding.MatmulPlan]:
    sizes, mesh = {"B": B, "D": D, "F": F}, {"X": X}
    gather = sharding.matmul_plan("A[B, D]", "W[D_X, F]", contracting="D", sizes=sizes, mesh=mesh, chip=V5P)
    reduce = sharding.matmul_plan("A[B, D_X]", "W[D_X, F]", contracting="D", sizes=sizes, mesh=mesh, chip=V5P)
    return gather, reduce


def _strategy_times(B: int, D: int, F: int, X: int) -> tuple[float, float, float, float]:
    gather, reduce = _strategies(B, D, F, X)
    return (gather.matmul.t_math, gather.comms_s, reduce.matmul.t_math, reduce.comms_s)


STRATEGY_CASES = ((128, 8192, 32768, 16), (4096, 8192, 32768, 16), (64, 4096, 16384, 8), (1024, 2048, 8192, 4))
D34, F34, X34 = 8192, 32768, 16  # the shapes of questions 4b to 4d


def _comms_bound_batch() -> float:
    # Strategy 1's gather does not depend on B and its math grows as B: they meet at B = comms / (math per token).
    gather, _ = _strategies(1, D34, F34, X34)
    return gather.comms_s / gather.matmul.t_math


def _strategy_2_wins_d() -> float:
    # Large B, both bandwidth-bound on their own terms: Strategy 2's AllReduce (no D) against Strategy 1's math (D).
    big_b = 2**20
    gather, reduce = _strategies(big_b, D34, F34, X34)
    return reduce.comms_s / (gather.matmul.t_math / D34)


def _better_strategy() -> str:
    gather, reduce = _strategies(128, D34, F34, X34)
    t1 = max(gather.matmul.t_math, gather.comms_s)
    t2 = max(reduce.matmul.t_math, reduce.comms_s)
    return "strategy_1" if t1 < t2 else "strategy_2"


# --- problem 3.5: lowest latency on a v5p 4x4x4 ----------------------------------------------------------

SIZES35 = {"B": 128, "D": 8192, "F": 32768}
MESH35 = {"X": 4, "Y": 4, "Z": 4}
SPLITS35 = {
    "B": ("A[B_XYZ, D]", "W[D, F]"),
    "D": ("A[B, D_XYZ]", "W[D_XYZ, F]"),
    "F": ("A[B, D]", "W[D, F_XYZ]"),
}


def _plan_35(dim: str) -> sharding.MatmulPlan:
    lhs, rhs = SPLITS35[dim]
    wraps = dict(zip(MESH35, topology.Slice.of(V5P, "4x4x4").wraparound, strict=True))
    return sharding.matmul_plan(lhs, rhs, contracting="D", sizes=SIZES35, mesh=MESH35, chip=V5P, wraparound=wraps)


def _fastest_35() -> str:
    return min(SPLITS35, key=lambda dim: _plan_35(dim).time_lower_s)


# --- problem 3.6: three shardings on a v5e 4x4 (no wraparound) --------------------------------------------

SIZES36 = {"I": 8192, "J": 8192, "K": 32768}
MESH36 = {"X": 4, "Y": 4}
PARTS36 = {
    "main": ("A[I_X, J_Y]", "B[J_Y, K]"),
    "part1": ("A[I_X, J]", "B[J_X, K_Y]"),
    "part2": ("A[I_X, J]", "B[J, K_Y]"),
}


def _plan_36(part: str) -> sharding.MatmulPlan:
    lhs, rhs = PARTS36[part]
    wraps = dict(zip(MESH36, topology.Slice.of(V5E, "4x4").wraparound, strict=True))
    return sharding.matmul_plan(lhs, rhs, contracting="J", sizes=SIZES36, mesh=MESH36, chip=V5E, wraparound=wraps)


def _collective_36(part: str) -> str:
    ops = [s.op for s in _plan_36(part).steps if s.op != "Matmul"]
    names = {"AllGather": "all_gather", "AllReduce": "all_reduce", "ReduceScatter": "reduce_scatter"}
    return names[ops[0]] if ops else "none"


def _times_36(part: str, prefix: str) -> dict[str, float]:
    plan = _plan_36(part)
    return {f"{prefix}_comms_s": plan.comms_s, f"{prefix}_math_s": plan.matmul.t_math}


# --- problem 3.7: an MLP block on a v5e 2x2 with 300 MB free per chip -------------------------------------

B37, D37, F37 = 128, 8192, 32768
MESH37 = {"X": 2, "Y": 2}
WRAPS37 = dict(zip(MESH37, topology.Slice.of(V5E, "2x2").wraparound, strict=True))


def _mlp_plans(dim: str) -> tuple[sharding.MatmulPlan, sharding.MatmulPlan]:
    """x[B, D] . Win[D, F] -> h, then h . Wout[F, D], both weights split over X and Y along `dim`."""
    sizes = {"B": B37, "D": D37, "F": F37}
    common = dict(sizes=sizes, mesh=MESH37, chip=V5E, wraparound=WRAPS37)
    if dim == "F":
        up = sharding.matmul_plan("x[B, D]", "Win[D, F_XY]", contracting="D", out_name="h", **common)
        down = sharding.matmul_plan(
            up.result, "Wout[F_XY, E]", contracting="F", **{**common, "sizes": {**sizes, "E": D37}}
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
            up.result, "Wout[F, E_XY]", contracting="F", **{**common, "sizes": {**sizes, "E": D37}}
        )
    return up, down


def _mlp_weight_bytes() -> float:
    sizes, mesh = {"D": D37, "F": F37}, MESH37
    return sharding.parse("Win[D, F_XY]").local_bytes(sizes, mesh) + sharding.parse("Wout[F_XY, D]").local_bytes(
        sizes, mesh
    )


def _mlp_best_dim() -> str:
    return min(("D", "F"), key=lambda dim: sum(p.comms_s for p in _mlp_plans(dim)))


def _mlp_times() -> tuple[float, float]:
    up, down = _mlp_plans(_mlp_best_dim())
    return up.comms_s + down.comms_s, up.matmul.t_math + down.matmul.t_math


# --- problem 3.9: gather-then-multiply against multiply-then-reduce-scatter --------------------------------


def _comm_ratio(N: int, M: int, K: int) -> float:
    # AllGather A[N, M_X] moves 2 N M bytes; ReduceScatter of C[N, K]{U_X} moves 2 N K; X = 8, bandwidth-bound.
    gather = collectives.collective_time("all_gather", 2 * N * M, 8, V5E, hop_latency_s=0).bandwidth_s
    scatter = collectives.collective_time("reduce_scatter", 2 * N * K, 8, V5E, hop_latency_s=0).bandwidth_s
    return gather / scatter


# --- problem 3.10: scalars over one link of a ring ---------------------------------------------------------

LINK_CASES = ((1024, 4), (4096, 8), (96, 3), (512, 16), (100, 5))
LINK_CASES_EVEN = ((1024, 4), (4096, 8), (512, 16), (96, 6))


def _link(op: str, both: bool):
    def scalars(N: int, D: int) -> float:
        # link_load_fraction is the share of V = N^2 scalars (the whole matrix) the busiest link carries;
        # for the gather V is the gathered matrix, for the AllToAll the matrix over all devices.
        return ring.link_load_fraction(op, D, bidirectional=both) * N * N

    return scalars


# --- the JAX questions: inputs drawn at grading time ------------------------------------------------------

NO_OTHER_COLLECTIVE = {"all-gather": (0, 0), "all-reduce": (0, 0), "reduce-scatter": (0, 0), "all-to-all": (0, 0)}


def _random(shape: tuple[int, ...], seed: int):
    import numpy as np

    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _matmul_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """A: f32[I, n * J] (columns split over "X") and B: f32[n * J, K] (replicated)."""
    rows, inner, cols = sizes
    return (_random((rows, n * inner), seed), _random((n * inner, cols), seed + 1)), ()


KEYS = {
    "ch03_q0a_pop_quiz_bytes": Key(
        names=("bytes_per_device", "bytes_all_devices"), kind="value", rel_tol=1e-6, expected=_pop_quiz_bytes
    ),
    "ch03_q0b_gather_big": Key(
        names=("gather_big_s",), kind="value", expected=lambda: {"gather_big_s": _pop_quiz_gather(2048, 8192).total_s}
    ),
    "ch03_q0c_gather_small": Key(
        names=("gather_small_s",), kind="value", expected=lambda: {"gather_small_s": _pop_quiz_gather(256, 256).total_s}
    ),
    "ch03_q0d_small_bound": Key(
        names=("gather_small_bound",),
        kind="choice",
        choices=("latency", "bandwidth"),
        expected=lambda: _pop_quiz_gather(256, 256).bound,
    ),
    "ch03_q0e_latency_bytes": Key(
        names=("latency_bound_below_bytes",),
        kind="value",
        expected=lambda: {"latency_bound_below_bytes": V5E.ici_bytes_per_s * HOP_S},
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
        expected=lambda: {
            "total_over_one_copy": sharding.parse("A[I_X, J, K]").total_bytes(
                {"I": 64, "J": 8, "K": 8}, {"X": 4, "Y": 8, "Z": 2}
            )
            / sharding.parse("A[I, J, K]").global_bytes({"I": 64, "J": 8, "K": 8})
        },
    ),
    "ch03_q2a_gather_x": Key(
        names=("gather_x_s",), kind="value", expected=lambda: {"gather_x_s": _problem_3_2()["gather_x_s"]}
    ),
    "ch03_q2b_gather_xy": Key(
        names=("gather_xy_s",), kind="value", expected=lambda: {"gather_xy_s": _problem_3_2()["gather_xy_s"]}
    ),
    "ch03_q2c_all_reduce_z": Key(
        names=("all_reduce_z_s",), kind="value", expected=lambda: {"all_reduce_z_s": _problem_3_2()["all_reduce_z_s"]}
    ),
    "ch03_q3a_small_gather": Key(
        names=("small_gather_s",), kind="value", expected=lambda: {"small_gather_s": _problem_3_3().total_s}
    ),
    "ch03_q3b_small_bound": Key(
        names=("small_gather_bound",),
        kind="choice",
        choices=("latency", "bandwidth"),
        expected=lambda: _problem_3_3().bound,
    ),
    "ch03_q4a_strategy_times": Key(
        names=("strategy_times_s",),
        kind="function",
        reference=_strategy_times,
        cases=STRATEGY_CASES,
        rel_tol=1e-4,
    ),
    "ch03_q4b_comms_bound_batch": Key(
        names=("comms_bound_below_tokens",),
        kind="value",
        expected=lambda: {"comms_bound_below_tokens": _comms_bound_batch()},
    ),
    "ch03_q4c_strategy_2_d": Key(
        names=("strategy_2_wins_above_d",),
        kind="value",
        expected=lambda: {"strategy_2_wins_above_d": _strategy_2_wins_d()},
    ),
    "ch03_q4d_better_strategy": Key(
        names=("better_strategy",), kind="choice", choices=("strategy_1", "strategy_2"), expected=_better_strategy
    ),
    "ch03_q5a_min_latency_dim": Key(
        names=("min_latency_dim",), kind="choice", choices=tuple(SPLITS35), expected=_fastest_35
    ),
    "ch03_q5b_min_latency_s": Key(
        names=("min_latency_s",), kind="value", expected=lambda: {"min_latency_s": _plan_35(_fastest_35()).time_lower_s}
    ),
    "ch03_q5c_flops_per_chip": Key(
        names=("flops_per_chip",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda: {"flops_per_chip": _plan_35(_fastest_35()).matmul.flops},
    ),
    "ch03_q5d_contracting_s": Key(
        names=("contracting_split_s",),
        kind="value",
        expected=lambda: {"contracting_split_s": _plan_35("D").time_lower_s},
    ),
    "ch03_q6a_main_collective": Key(
        names=("main_collective",),
        kind="choice",
        choices=("none", "all_gather", "all_reduce", "all_to_all"),
        expected=lambda: _collective_36("main"),
    ),
    "ch03_q6b_main_times": Key(
        names=("main_comms_s", "main_math_s"), kind="value", expected=lambda: _times_36("main", "main")
    ),
    "ch03_q6c_part1_collective": Key(
        names=("part1_collective",),
        kind="choice",
        choices=("none", "all_gather", "all_reduce", "all_to_all"),
        expected=lambda: _collective_36("part1"),
    ),
    "ch03_q6d_part1_times": Key(
        names=("part1_comms_s", "part1_math_s"), kind="value", expected=lambda: _times_36("part1", "part1")
    ),
    "ch03_q6e_part2_math": Key(
        names=("part2_math_s",), kind="value", expected=lambda: {"part2_math_s": _plan_36("part2").matmul.t_math}
    ),
    "ch03_q7a_weight_bytes": Key(
        names=("weight_bytes_per_chip",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda: {"weight_bytes_per_chip": _mlp_weight_bytes()},
    ),
    "ch03_q7b_shard_dim": Key(names=("weight_split_dim",), kind="choice", choices=("D", "F"), expected=_mlp_best_dim),
    "ch03_q7c_mlp_comms": Key(names=("mlp_comms_s",), kind="value", expected=lambda: {"mlp_comms_s": _mlp_times()[0]}),
    "ch03_q7d_mlp_math": Key(names=("mlp_math_s",), kind="value", expected=lambda: {"mlp_math_s": _mlp_times()[1]}),
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
            needs_in_jaxpr=("all_to_all",),
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
            needs_in_jaxpr=("shard_map", "psum"),
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
            needs_in_jaxpr=("shard_map", "reduce_scatter"),  # psum_scatter traces to reduce_scatter
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
        names=("all_to_all_over_gather_one_way",),
        kind="value",
        rel_tol=1e-6,
        expected=lambda: {
            "all_to_all_over_gather_one_way": ring.link_load_fraction("all_to_all", 16)
            / ring.link_load_fraction("all_gather", 16)
        },
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
        expected=lambda: {
            "gather_over_all_to_all_both": collectives.all_gather_time(1e9, 16, V5E, hop_latency_s=0)
            / collectives.all_to_all_time(1e9, 16, V5E, hop_latency_s=0)
        },
    ),
}

# Right values by the wrong route (tests/test_grading.py): the primitive the question asks to avoid, or to use.
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
