"""Answer keys for the chapter 10 exercises (programming TPUs in JAX): JAX programs, judged on the mesh.

Every question here asks for code. Each is graded on an 8-device mesh with one axis "X": on its
result against float64 NumPy, and on the structure of its compiled program (which collectives, how
large the pieces they move, which way round the ring) or, for the Pallas kernel, of its traced one.
"""

from __future__ import annotations

from exercises.keys import program
from exercises.keys.arrays import normal, product, relu_mlp

# The Pallas question's blocks: f32 tiles of (8, 128) on the TPU, so a block of (8, 128) outputs
# walks K in steps of 128.
BLOCK_M, BLOCK_N, BLOCK_K = 8, 128, 128
NOT_COLLECTIVE = {"all-gather": (0, 0), "all-reduce": (0, 0), "reduce-scatter": (0, 0), "all-to-all": (0, 0)}
PERMUTES = (1, 64)  # an unrolled ring of 8 runs 7 or 14 permutes; a fori_loop shows one per direction
CASES = ((4, 2, 3), (8, 4, 2))  # (B, D, F): each device's block sizes


def _matmul_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """A f32[B, n D], W f32[n D, n F]."""
    b, d, f = sizes
    return normal(((b, n * d), (n * d, n * f)), seed), ()


def _reducescatter_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """Tmp f32[B, n F], W2 f32[n F, n D]."""
    b, d, f = sizes
    return normal(((b, n * f), (n * f, n * d)), seed), ()


def _block_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """In f32[B, n D], W_in f32[n D, n F], W_out f32[n F, n D]."""
    b, d, f = sizes
    return normal(((b, n * d), (n * d, n * f), (n * f, n * d)), seed), ()


def _chunk(sizes, n: int) -> int:
    """One device's chunk of A (or one block of the output): B x D values."""
    return sizes[0] * sizes[1]


def _ring(name: str, inputs, in_specs, reference, block, **extra):
    """A ring question (Q0, Q2 to Q4): a shard_map of ppermutes, no other collective, no piece larger
    than one chunk; `extra` adds rules (Q4: `permute_shifts`, data sent each way round the ring)."""
    return program(
        name,
        cases=CASES,
        inputs=inputs,
        in_specs=in_specs,
        reference=reference,
        atol=1e-4,
        block=block,
        needs_primitives=("shard_map", "ppermute"),
        max_collective_elements=_chunk,
        collectives={**NOT_COLLECTIVE, "collective-permute": PERMUTES},
        **extra,
    )


def _allgather(name: str, **extra):
    """Q0 and Q4b: A[B, D_X] passed round the ring while multiplying by W[D, F_X]; out[B, F_X]."""
    return _ring(name, _matmul_inputs, ((None, "X"), (None, "X")), product, lambda s, n: (s[0], s[2]), **extra)


def _reducescatter(name: str, **extra):
    """Q2 and Q4a: partial sums of A[B, D_X] W[D_X, F] passed round the ring; out[B, F_X]."""
    return _ring(name, _reducescatter_inputs, ((None, "X"), ("X", None)), product, _chunk_block, **extra)


def _chunk_block(sizes, n: int) -> tuple[int, int]:
    return (sizes[0], sizes[1])


KEYS = {
    "ch10_q0_allgather_matmul": _allgather("allgather_matmul"),
    "ch10_q1_allreduce_matmul": program(
        "allreduce_matmul",
        cases=CASES,
        inputs=_matmul_inputs,  # W's rows over "X": the contraction is cut
        in_specs=((None, "X"), ("X", None)),
        reference=product,
        atol=1e-4,
        per_device=True,
        block=lambda sizes, n: (sizes[0], n * sizes[2]),
        collectives={"all-gather": (0, 0), "reduce-scatter": (0, 0), "all-to-all": (0, 0)},
        needs_primitives=("shard_map",),
        # at least two pieces: no collective sums as much as half of Out[B, n F] at once
        max_collective_elements=lambda sizes, n: sizes[0] * n * sizes[2] // 2,
    ),
    "ch10_q2_matmul_reducescatter": _reducescatter("matmul_reducescatter"),
    "ch10_q3_mlp_block": _ring(
        "mlp_block", _block_inputs, ((None, "X"), (None, "X"), ("X", None)), relu_mlp, _chunk_block
    ),
    "ch10_q4a_bidirectional_reducescatter": _reducescatter("matmul_reducescatter_bidi", permute_shifts=(1, -1)),
    "ch10_q4b_bidirectional_allgather": _allgather("allgather_matmul_bidi", permute_shifts=(1, -1)),
    "ch10_q5_pallas_matmul": program(
        "tiled_matmul",
        recorder="traced",
        cases=((2, 2, 2), (3, 1, 2)),
        # sizes (M, K, N) as multiples of the blocks: X f32[M, K], Y f32[K, N]
        inputs=lambda sizes, n, seed: (
            normal(((sizes[0] * BLOCK_M, sizes[1] * BLOCK_K), (sizes[1] * BLOCK_K, sizes[2] * BLOCK_N)), seed),
            (),
        ),
        reference=product,
        atol=1e-4,
        kernel_blocks=((BLOCK_M, BLOCK_K), (BLOCK_K, BLOCK_N), (BLOCK_M, BLOCK_N)),
    ),
}

# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py):
# the blocking programs the questions replace, each with the right values and the right layout.
PLAUSIBLE = {
    "ch10_q0_allgather_matmul": """
def allgather_matmul(a, w):
    # gather all of A first, then multiply: right values, but one blocking AllGather
    local = lambda a_cols, w_cols: jax.lax.all_gather(a_cols, "X", axis=1, tiled=True) @ w_cols
    return jax.shard_map(local, in_specs=(jax.P(None, "X"), jax.P(None, "X")), out_specs=jax.P(None, "X"))(a, w)
""",
    "ch10_q1_allreduce_matmul": """
def allreduce_matmul(a, w):
    # one psum of the whole product: right values, nothing left to overlap
    local = lambda a_cols, w_rows: jax.lax.psum(a_cols @ w_rows, "X")
    return jax.shard_map(local, in_specs=(jax.P(None, "X"), jax.P("X", None)), out_specs=jax.P())(a, w)
""",
    "ch10_q2_matmul_reducescatter": """
def matmul_reducescatter(t, w2):
    # passing the whole [B, n D] partial sum round the ring: n times the bytes of a block per hop
    def local(t_cols, w2_rows):
        n, me = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        part, total = t_cols @ w2_rows, t_cols @ w2_rows
        for _ in range(n - 1):
            part = jax.lax.ppermute(part, "X", [(i, (i + 1) % n) for i in range(n)])
            total = total + part
        d = total.shape[1] // n
        return jax.lax.dynamic_slice_in_dim(total, me * d, d, axis=1)

    specs = (jax.P(None, "X"), jax.P("X", None))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, "X"))(t, w2)
""",
    "ch10_q3_mlp_block": """
def mlp_block(x, w_in, w_out):
    # the blocking block: AllGather the input, then ReduceScatter the output
    def local(x_cols, w_in_cols, w_out_rows):
        x_all = jax.lax.all_gather(x_cols, "X", axis=1, tiled=True)
        partial = jax.nn.relu(x_all @ w_in_cols) @ w_out_rows
        return jax.lax.psum_scatter(partial, "X", scatter_dimension=1, tiled=True)

    specs = (jax.P(None, "X"), jax.P(None, "X"), jax.P("X", None))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, "X"))(x, w_in, w_out)
""",
    "ch10_q4a_bidirectional_reducescatter": """
def matmul_reducescatter_bidi(t, w2):
    # the one-way ring of Q2: right values and pieces, but every hop goes to the right
    def local(t_cols, w2_rows):
        n, me = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        d = w2_rows.shape[1] // n
        acc = None
        for step in range(n):
            cols = jax.lax.dynamic_slice_in_dim(w2_rows, ((me - 1 - step) % n) * d, d, axis=1)
            acc = t_cols @ cols if acc is None else acc + t_cols @ cols
            if step < n - 1:
                acc = jax.lax.ppermute(acc, "X", [(i, (i + 1) % n) for i in range(n)])
        return acc

    specs = (jax.P(None, "X"), jax.P("X", None))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, "X"))(t, w2)
""",
    "ch10_q4b_bidirectional_allgather": """
def allgather_matmul_bidi(a, w):
    # the one-way ring of Q0: every chunk of A travels to the left only
    def local(a_cols, w_cols):
        n, me = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        d = a_cols.shape[1]
        out = None
        for step in range(n):
            rows = jax.lax.dynamic_slice_in_dim(w_cols, ((me + step) % n) * d, d, axis=0)
            out = a_cols @ rows if out is None else out + a_cols @ rows
            if step < n - 1:
                a_cols = jax.lax.ppermute(a_cols, "X", [(i, (i - 1) % n) for i in range(n)])
        return out

    specs = (jax.P(None, "X"), jax.P(None, "X"))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, "X"))(a, w)
""",
    "ch10_q5_pallas_matmul": """
def tiled_matmul(x, y):
    # a Pallas kernel, but one block holding the whole matrices: nothing is tiled
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] @ y_ref[...]

    out = jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype)
    return pl.pallas_call(kernel, out_shape=out, interpret=kernels.backend().interpret)(x, y)
""",
}

# The text prints no answer to its chapter 10 exercises (its answers chapter stops at Part 9), and
# the one set of numbers in the part, 311 us against 244 us, are profiles of one run on a TPU, not
# a model's answer: there is nothing here for the grader to accept.
PRINTED: dict[str, dict[str, float]] = {}
NOTHING_PRINTED = "the text prints no answer to its chapter 10 exercises"
