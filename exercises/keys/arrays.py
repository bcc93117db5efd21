"""What the JAX questions share (`exercises.keys.program`): inputs, float64 NumPy references and rules.

A check's `inputs(sizes, n_devices, seed)` builds float32 arrays with `normal`; its
`reference(arrays, n_devices, *statics)` is the answer the grader compares with, in float64.
NumPy is imported inside each function: only the grader's worker builds arrays.
"""

from __future__ import annotations

__all__ = ["FSDP_GATHERS", "normal", "product", "relu_mlp"]

# The rules of an FSDP forward pass (chapters 5 and 6): each device keeps its rows of x, [b, n d], and
# gathers the weights' blocks (an AllGather per matrix, which XLA may fuse into one), never summing them.
FSDP_GATHERS = {
    "block": lambda sizes, n: (sizes[0], n * sizes[1]),
    "collectives": {"all-gather": (1, 2), "all-reduce": (0, 0), "reduce-scatter": (0, 0)},
    "needs_primitives": ("shard_map", "all_gather"),
}


def normal(shapes: tuple[tuple[int, ...], ...], seed: int) -> tuple:
    """Float32 standard normals of `shapes`, drawn in order from one generator seeded with `seed`.

    Every array after the first is divided by the square root of its rows, so a chain of products of
    them stays of order one.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    return tuple(
        (rng.standard_normal(s) / (np.sqrt(s[0]) if i else 1.0)).astype(np.float32) for i, s in enumerate(shapes)
    )


def product(arrays, n_devices: int):
    """arrays[0] @ arrays[1] @ ... in float64 (a chain of matmuls)."""
    import numpy as np

    out, *rest = (np.asarray(a, dtype=np.float64) for a in arrays)
    for a in rest:
        out = out @ a
    return out


def relu_mlp(arrays, n_devices: int):
    """relu(x @ w_in) @ w_out in float64, for `arrays` = (x, w_in, w_out)."""
    import numpy as np

    x, w_in, w_out = (np.asarray(a, dtype=np.float64) for a in arrays)
    return np.maximum(x @ w_in, 0.0) @ w_out
