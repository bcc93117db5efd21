"""Answer keys for the chapter 9 exercises (profiling TPU programs), computed with book_lib."""

from __future__ import annotations

import random

from book_lib import collectives, hlo_arrays, roofline
from book_lib.hardware import get_chip
from exercises.keys import choice, function, pick, program, value
from exercises.keys.arrays import normal, relu_mlp

# What a class's variant may draw: chips whose JAX devices are TensorCores, two to a chip, as in the text.
TPUS = ("tpu-v2", "tpu-v3")
# Tiles a variant may draw for the padding example: (rows, cols) of the outer tile.
TILES = ((2, 2), (2, 4), (4, 4), (8, 8), (8, 128), (16, 128))

# Part 9's example profile: X bf16[32, 1024, 8192], W_in bf16[8192, 32768] on a TPU v2 4x2 (8 cores),
# 4-way data parallel over the batch, 2-way model parallel over the hidden dim; W_Q [8192, 32, 256].
PROFILE = {"B": 32, "T": 1024, "D": 8192, "tpu": "tpu-v2", "cores": 8}


def _array_text(dtype: str, dims: tuple[int, ...], space: str = "") -> str:
    """The text's way of writing an operand: row-major, (8, 128) tiles, bf16 packed in pairs."""
    order = ",".join(str(i) for i in reversed(range(len(dims))))
    packed = "(2,1)" if dtype == "bf16" else ""
    return f"{dtype}[{','.join(map(str, dims))}]{{{order}:T(8,128){packed}{space}}}"


def _read_op(dtype: str, d0: int, d1: int, d_in: int, ways: int) -> tuple[float, float, float]:
    """The op's output and input bytes, and how many ways its input's last dimension is split."""
    out = hlo_arrays.parse_array(_array_text(dtype, (d0, d1, d_in // ways), "S(1)"))
    operand = hlo_arrays.parse_array(_array_text(dtype, (d0, d1, d_in), "S(1)"))
    return (out.bytes, operand.bytes, operand.shape[-1] / out.shape[-1])


def _draw_read_op(r: random.Random) -> dict:
    ways = r.choice((2, 4, 8))
    return {
        "dtype": r.choice(("bf16", "f32")),
        "d0": r.choice((8, 16, 32, 64)),
        "d1": r.choice((16, 32, 64, 128)),
        "d_in": ways * r.choice((1024, 2048, 4096, 8192)),
        "ways": ways,
    }


def _tiling(rows: int, cols: int, tile_rows: int, tile_cols: int) -> tuple[float, float, float]:
    """The padded rows and columns of an array in tiles, and its size over the unpadded one."""
    padded_rows, padded_cols = hlo_arrays.padded_shape((rows, cols), (tile_rows, tile_cols))
    return (padded_rows, padded_cols, hlo_arrays.padding_expansion((rows, cols), (tile_rows, tile_cols)))


def _draw_tiling(r: random.Random) -> dict:
    tile_rows, tile_cols = r.choice(TILES)
    return {
        "rows": r.randrange(1, 4 * tile_rows),
        "cols": r.randrange(1, 4 * tile_cols),
        "tile_rows": tile_rows,
        "tile_cols": tile_cols,
    }


def _compute_s(tpu: str, cores: int, B: int, D: int, F: int) -> float:
    """A compute-bound bf16 matmul of 2 B D F FLOPs spread evenly over `cores` TensorCores (s)."""
    chip = get_chip(tpu)
    return roofline.matmul_cost(B, D, F).flops / (cores / chip.cores_per_chip * chip.bf16_flops_per_s)


_draw_shape = pick(B=(32, 64, 128), T=(512, 1024, 2048), D=(4096, 8192, 16384), tpu=TPUS, cores=(8, 16, 32))


def _draw_up_projection(r: random.Random) -> dict:
    shape = _draw_shape(r)
    return {**shape, "F": r.choice((2, 4, 8)) * shape["D"]}


def _reduce_scatter(B: int, T: int, D: int, dp: int, mp: int, tpu: str, cores: int) -> float:
    # one device's partial sums, bf16[B / dp, T, D], reduce-scattered over the mp devices of the model axis
    # (the `cores` of Q4's layer, dp times mp)
    return collectives.reduce_scatter_time(2 * (B // dp) * T * D, mp, tpu)


def _mlp_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """x: f32[B, n d] (replicated), w_in: f32[n d, n f] (columns over "X"), w_out: f32[n f, n d] (rows over "X")."""
    b, d, f = sizes
    return normal(((b, n * d), (n * d, n * f), (n * f, n * d)), seed), ()


KEYS = {
    "ch09_q1_read_op": value(
        ("output_bytes", "input_bytes", "scatter_ways"),
        _read_op,
        rel_tol=0,
        # the text's op is bf16[32,32,4096] from bf16[32,32,8192]; quoting it whole would copy the text
        # word for word, so the statement's op keeps its form with a wider operand
        params={"dtype": "bf16", "d0": 32, "d1": 32, "d_in": 12288, "ways": 2},
        draw=_draw_read_op,
    ),
    "ch09_q2_memory_space": choice(
        "memory_space",
        lambda space: hlo_arrays.parse_array(f"f32[512,1024]{{1,0:T(8,128){space}}}").memory,
        (*hlo_arrays.MEMORY_SPACES.values(), hlo_arrays.OTHER_SPACE),
        params={"space": "S(1)"},
        draw=pick(space=("", "S(0)", "S(1)", "S(2)", "S(3)")),
    ),
    "ch09_q3a_tiling_example": value(
        ("padded_rows", "padded_cols", "expansion"),
        _tiling,
        params={"rows": 3, "cols": 5, "tile_rows": 2, "tile_cols": 2},
        draw=_draw_tiling,
    ),
    "ch09_q3b_padding": function(
        "padded", _tiling, ((3, 5, 2, 2), (4, 100, 8, 128), (13, 130, 8, 128), (32, 4096, 8, 128), (1, 1, 8, 128))
    ),
    "ch09_q4_up_projection": value(
        "up_projection_s",
        lambda B, T, D, F, tpu, cores: _compute_s(tpu, cores, B * T, D, F),
        params={**PROFILE, "F": 32768},
        draw=_draw_up_projection,
    ),
    "ch09_q5_reduce_scatter": value(
        "reduce_scatter_s",
        _reduce_scatter,
        rel_tol=0.02,
        params={"B": 32, "T": 1024, "D": 8192, "dp": 4, "mp": 2, "tpu": "tpu-v2", "cores": 8},
        draw=pick(dp=(4, 8, 16)),
        accept=lambda v: v["dp"] * v["mp"] == v["cores"],  # Q4's cores, split data- and model-parallel
        follows="ch09_q4_up_projection",  # the layer of Q4: its X, chip and cores
    ),
    "ch09_q6_q_projection": value(
        "q_projection_s",
        # X[B, T, D] . W_Q[D, N, H] -> Q[B, T, N, H]: a matmul of width N H; Megatron sharding over the
        # heads needs no communication, so it is the FLOPs over the cores' rate
        lambda B, T, D, heads, d_qkv, tpu, cores: _compute_s(tpu, cores, B * T, D, heads * d_qkv),
        params={**PROFILE, "heads": 32, "d_qkv": 256},
        draw=pick(heads=(16, 32, 64), d_qkv=(64, 128, 256)),
        follows="ch09_q4_up_projection",  # the same layer: Q4's X, chip and cores
    ),
    "ch09_q7_mlp_reduce_scatter": program(
        "mlp_reduce_scatter",
        cases=((4, 3, 5), (2, 4, 8)),
        inputs=_mlp_inputs,
        in_specs=((None, None), (None, "X"), ("X", None)),
        reference=relu_mlp,
        atol=1e-4,
        block=lambda sizes, n: (sizes[0], sizes[1]),
        collectives={"reduce-scatter": (1, 1), "all-reduce": (0, 0), "all-gather": (0, 0), "all-to-all": (0, 0)},
        needs_primitives=("shard_map", "reduce_scatter"),
    ),
}

# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py).
PLAUSIBLE = {
    "ch09_q7_mlp_reduce_scatter": """
def mlp_reduce_scatter(x, w_in, w_out):
    # right values and the right block, but every device adds up the whole output (an AllReduce)
    # and then keeps its slice: twice the bytes of a ReduceScatter
    def local(x_all, w_in_cols, w_out_rows):
        full = jax.lax.psum(jax.nn.relu(x_all @ w_in_cols) @ w_out_rows, "X")
        d = full.shape[1] // jax.lax.axis_size("X")
        return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index("X") * d, d, axis=1)

    specs = (jax.P(None, None), jax.P(None, "X"), jax.P("X", None))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, "X"))(x, w_in, w_out)
""",
}

# The text's printed answers, each accepted (tests/course/test_exercises.py); UNPRINTED says why the rest are not.
# The profile's measured 96 ms and 1.13 ms are measurements, not the model's answers.
PRINTED = {
    "ch09_q2_memory_space": {"memory_space": "VMEM"},  # S(1)
    "ch09_q3a_tiling_example": {"padded_rows": 4, "padded_cols": 6, "expansion": 1.6},
    "ch09_q4_up_projection": {"up_projection_s": 95.6e-3},
    "ch09_q5_reduce_scatter": {"reduce_scatter_s": 1.1e-3},
}
UNPRINTED = {
    "ch09_q1_read_op": "the text reads its op in words (bf16, 2 bytes a value) and prints no byte count",
    "ch09_q3b_padding": "the text's one printed case is Q3a's",
    "ch09_q6_q_projection": "the text leaves the Q projection's time to the reader and prints no answer",
}
