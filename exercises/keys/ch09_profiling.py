"""Answer keys for the chapter 9 exercises (profiling TPU programs), computed with book_lib."""

from __future__ import annotations

import random

from book_lib import collectives, hlo_arrays, roofline
from book_lib.hardware import get_chip
from exercises.keys import JaxCheck, Key

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


def _read_op(dtype: str, d0: int, d1: int, d_in: int, ways: int) -> dict[str, float]:
    out = hlo_arrays.parse_array(_array_text(dtype, (d0, d1, d_in // ways), "S(1)"))
    operand = hlo_arrays.parse_array(_array_text(dtype, (d0, d1, d_in), "S(1)"))
    return {"output_bytes": out.bytes, "input_bytes": operand.bytes, "scatter_ways": operand.shape[-1] / out.shape[-1]}


def _draw_read_op(r: random.Random) -> dict:
    ways = r.choice((2, 4, 8))
    return {
        "dtype": r.choice(("bf16", "f32")),
        "d0": r.choice((8, 16, 32, 64)),
        "d1": r.choice((16, 32, 64, 128)),
        "d_in": ways * r.choice((1024, 2048, 4096, 8192)),
        "ways": ways,
    }


def _memory(space: str) -> str:
    return hlo_arrays.parse_array(f"f32[512,1024]{{1,0:T(8,128){space}}}").memory


def _tiling(rows: int, cols: int, tile_rows: int, tile_cols: int) -> dict[str, float]:
    padded_rows, padded_cols = hlo_arrays.padded_shape((rows, cols), (tile_rows, tile_cols))
    return {
        "padded_rows": padded_rows,
        "padded_cols": padded_cols,
        "expansion": hlo_arrays.padding_expansion((rows, cols), (tile_rows, tile_cols)),
    }


def _draw_tiling(r: random.Random) -> dict:
    tile_rows, tile_cols = r.choice(TILES)
    return {
        "rows": r.randrange(1, 4 * tile_rows),
        "cols": r.randrange(1, 4 * tile_cols),
        "tile_rows": tile_rows,
        "tile_cols": tile_cols,
    }


def _padded(rows: int, cols: int, tile_rows: int, tile_cols: int) -> tuple[float, float, float]:
    out = _tiling(rows, cols, tile_rows, tile_cols)
    return out["padded_rows"], out["padded_cols"], out["expansion"]


def _compute_s(tpu: str, cores: int, B: int, D: int, F: int) -> float:
    """A compute-bound bf16 matmul of 2 B D F FLOPs spread evenly over `cores` TensorCores (s)."""
    chip = get_chip(tpu)
    return roofline.matmul_cost(B, D, F).flops / (cores / chip.cores_per_chip * chip.bf16_flops_per_s)


def _up_projection(B: int, T: int, D: int, F: int, tpu: str, cores: int) -> dict[str, float]:
    return {"up_projection_s": _compute_s(tpu, cores, B * T, D, F)}


def _draw_shape(r: random.Random) -> dict:
    return {
        "B": r.choice((32, 64, 128)),
        "T": r.choice((512, 1024, 2048)),
        "D": r.choice((4096, 8192, 16384)),
        "tpu": r.choice(TPUS),
        "cores": r.choice((8, 16, 32)),
    }


def _draw_up_projection(r: random.Random) -> dict:
    shape = _draw_shape(r)
    return {**shape, "F": r.choice((2, 4, 8)) * shape["D"]}


def _reduce_scatter(B: int, T: int, D: int, dp: int, mp: int, tpu: str) -> dict[str, float]:
    # one device's partial sums, bf16[B / dp, T, D], reduce-scattered over the mp devices of the model axis
    partial_bytes = 2 * (B // dp) * T * D
    return {"reduce_scatter_s": collectives.reduce_scatter_time(partial_bytes, mp, tpu)}


def _draw_reduce_scatter(r: random.Random) -> dict:
    shape = _draw_shape(r)
    return {"B": shape["B"], "T": shape["T"], "D": shape["D"], "dp": r.choice((2, 4, 8)), "mp": 2, "tpu": shape["tpu"]}


def _q_projection(B: int, T: int, D: int, heads: int, d_qkv: int, tpu: str, cores: int) -> dict[str, float]:
    # X[B, T, D] . W_Q[D, N, H] -> Q[B, T, N, H]: a matmul of width N H; Megatron sharding over the
    # heads needs no communication, so it is the FLOPs over the cores' rate
    return {"q_projection_s": _compute_s(tpu, cores, B * T, D, heads * d_qkv)}


def _draw_q_projection(r: random.Random) -> dict:
    return {**_draw_shape(r), "heads": r.choice((16, 32, 64)), "d_qkv": r.choice((64, 128, 256))}


def _mlp_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """x: f32[B, n d] (replicated), w_in: f32[n d, n f] (columns over "X"), w_out: f32[n f, n d] (rows over "X")."""
    import numpy as np

    b, d, f = sizes
    rng = np.random.default_rng(seed)
    shapes = ((b, n * d), (n * d, n * f), (n * f, n * d))
    return tuple(
        rng.standard_normal(s).astype(np.float32) / np.sqrt(s[0] if i else 1) for i, s in enumerate(shapes)
    ), ()


def _mlp_reference(arrays, n: int):
    import numpy as np

    x, w_in, w_out = (a.astype("float64") for a in arrays)
    return np.maximum(x @ w_in, 0.0) @ w_out


KEYS = {
    "ch09_q1_read_op": Key(
        names=("output_bytes", "input_bytes", "scatter_ways"),
        kind="value",
        rel_tol=0,
        expected=_read_op,
        # the text's op is bf16[32,32,4096] from bf16[32,32,8192]; quoting it whole would copy the text
        # word for word, so the statement's op keeps its form with a wider operand
        params={"dtype": "bf16", "d0": 32, "d1": 32, "d_in": 12288, "ways": 2},
        draw=_draw_read_op,
    ),
    "ch09_q2_memory_space": Key(
        names=("memory_space",),
        kind="choice",
        choices=(*hlo_arrays.MEMORY_SPACES.values(), hlo_arrays.OTHER_SPACE),
        expected=_memory,
        params={"space": "S(1)"},
        draw=lambda r: {"space": r.choice(("", "S(0)", "S(1)", "S(2)", "S(3)"))},
    ),
    "ch09_q3a_tiling_example": Key(
        names=("padded_rows", "padded_cols", "expansion"),
        kind="value",
        expected=_tiling,
        params={"rows": 3, "cols": 5, "tile_rows": 2, "tile_cols": 2},
        draw=_draw_tiling,
    ),
    "ch09_q3b_padding": Key(
        names=("padded",),
        kind="function",
        reference=_padded,
        cases=((3, 5, 2, 2), (4, 100, 8, 128), (13, 130, 8, 128), (32, 4096, 8, 128), (1, 1, 8, 128)),
    ),
    "ch09_q4_up_projection": Key(
        names=("up_projection_s",),
        kind="value",
        expected=_up_projection,
        params={**PROFILE, "F": 32768},
        draw=_draw_up_projection,
    ),
    "ch09_q5_reduce_scatter": Key(
        names=("reduce_scatter_s",),
        kind="value",
        rel_tol=0.02,
        expected=_reduce_scatter,
        params={"B": 32, "T": 1024, "D": 8192, "dp": 4, "mp": 2, "tpu": "tpu-v2"},
        draw=_draw_reduce_scatter,
    ),
    "ch09_q6_q_projection": Key(
        names=("q_projection_s",),
        kind="value",
        expected=_q_projection,
        params={**PROFILE, "heads": 32, "d_qkv": 256},
        draw=_draw_q_projection,
    ),
    "ch09_q7_mlp_reduce_scatter": Key(
        names=("mlp_reduce_scatter",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((4, 3, 5), (2, 4, 8)),
            inputs=_mlp_inputs,
            in_specs=((None, None), (None, "X"), ("X", None)),
            reference=_mlp_reference,
            atol=1e-4,
            block=lambda sizes, n: (sizes[0], sizes[1]),
            collectives={"reduce-scatter": (1, 1), "all-reduce": (0, 0), "all-gather": (0, 0), "all-to-all": (0, 0)},
            needs_primitives=("shard_map", "reduce_scatter"),
        ),
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
    "ch09_q3a_tiling_example": {"padded_rows": 4, "padded_cols": 6, "expansion": 1.6},
    "ch09_q4_up_projection": {"up_projection_s": 95.6e-3},
    "ch09_q5_reduce_scatter": {"reduce_scatter_s": 1.1e-3},
}
UNPRINTED = {
    "ch09_q1_read_op": "the text reads its op in words (bf16, 2 bytes a value) and prints no byte count",
    "ch09_q2_memory_space": (
        "a choice question: PRINTED holds numbers only; the text's answer, VMEM for S(1), is the key's"
    ),
    "ch09_q3b_padding": "a function question: graded on its inputs; the text's one printed case is Q3a's",
    "ch09_q6_q_projection": "the text leaves the Q projection's time to the reader and prints no answer",
    "ch09_q7_mlp_reduce_scatter": "a JAX program, judged by running it",
}
