"""Collective matmuls: compute on the chunk you hold while `ppermute` brings the next one round the ring.

How to call them (chapter 10), on float inputs, with a mesh axis of n devices (default: a 1-D
mesh named "Y" over `devices.mesh_devices()`):

    from book_lib import collective_matmul as cm
    # A[B, D_Y] @ W[D, F_Y] -> Out[B, F_Y]
    out = cm.allgather_matmul(a, w)
    # AllGather_Y(A), then the local matmul
    ref = cm.allgather_matmul_blocking(a, w)
    # Tmp[B, F_Y] @ W2[F_Y, D] -> Out[B, D_Y]
    out = cm.matmul_reducescatter(t, w2)
    ref = cm.matmul_reducescatter_blocking(t, w2)
    # HLO: collective-permutes only
    compiled = jax.jit(cm.allgather_matmul).lower(a, w).compile()

Pass `mesh=` and `axis_name=` for another mesh; `batch_axis=` shards B over a second axis, as
the text's A[B_X, D_Y]. The collective versions run n - 1 `ppermute`s of one chunk each and no
AllGather (ReduceScatter); the blocking ones call `jax.lax.all_gather` (`psum_scatter`).

Book: Part 10 (Programming TPUs in JAX), "Collective matmul" and Exercise 10.2; the algorithm is
Wang et al. 2023 (https://dl.acm.org/doi/10.1145/3567955.3567959).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from book_lib import checks, devices

__all__ = [
    "allgather_matmul",
    "allgather_matmul_blocking",
    "matmul_reducescatter",
    "matmul_reducescatter_blocking",
]


def _mesh(mesh: jax.sharding.Mesh | None, axis_name: str, batch_axis: str | None) -> jax.sharding.Mesh:
    """`mesh`, or a 1-D mesh named `axis_name` over every mesh device; both axes checked."""
    if mesh is None:
        mesh = devices.make_mesh((devices.n_devices(),), (axis_name,), axis_types="explicit")
    checks.one_of("axis_name", axis_name, tuple(mesh.axis_names))
    if batch_axis is not None:
        others = tuple(a for a in mesh.axis_names if a != axis_name)
        checks.one_of("batch_axis", batch_axis, others)
    return mesh


def _run(body: Callable, mesh: jax.sharding.Mesh, specs: tuple[Any, Any, Any], x: jax.Array, y: jax.Array) -> jax.Array:
    """jit(shard_map(body)) over `mesh` with (in, in, out) `specs`, the inputs first placed as `specs` say."""
    mapped = jax.shard_map(body, mesh=mesh, in_specs=specs[:2], out_specs=specs[2], check_vma=False)
    x, y = (jax.device_put(arr, jax.NamedSharding(mesh, spec)) for arr, spec in zip((x, y), specs[:2], strict=True))
    return jax.jit(mapped)(x, y)


def _sharded(
    body: Callable,
    x: jax.Array,
    y: jax.Array,
    y_spec: Any,
    mesh: jax.sharding.Mesh | None,
    axis: str,
    batch: str | None,
) -> jax.Array:
    """Check the inputs, then run `body` over the mesh: x[B_batch, ._axis], y as `y_spec`, out[B_batch, ._axis]."""
    mesh = _mesh(mesh, axis, batch)
    _check_split(x, y, mesh, axis)
    return _run(body, mesh, (jax.P(batch, axis), y_spec, jax.P(batch, axis)), x, y)


def _allgather_body(a: jax.Array, w: jax.Array, axis: str) -> jax.Array:
    """Local view: a = A[:, chunk me], w = W[:, F block me].

    Step s holds chunk (me + s) mod n: collectives.ring_chunks(n)[s][me].
    (Chapter 10 prints this body: keep it within 80 columns.)
    """
    n, me = jax.lax.axis_size(axis), jax.lax.axis_index(axis)
    width = a.shape[1]
    # every device sends to its left, so the next chunk arrives from the right
    to_left = [(src, (src - 1) % n) for src in range(n)]
    out = None
    for step in range(n):
        start = ((me + step) % n) * width  # the rows of chunk (me + step) mod n
        rows = jax.lax.dynamic_slice_in_dim(w, start, width, axis=0)
        part = a @ rows
        out = part if out is None else out + part
        if step < n - 1:
            a = jax.lax.ppermute(a, axis, to_left)
    return out  # type: ignore[return-value]  # n >= 1, so the loop ran


def allgather_matmul(
    a: jax.Array,
    w: jax.Array,
    *,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str = "Y",
    batch_axis: str | None = None,
) -> jax.Array:
    """A[B, D_Y] @ W[D, F_Y] -> Out[B, F_Y], overlapping the AllGather of A with the matmul.

    Out[:, F_me] = sum over s of A[:, D_(me+s)] @ W[D_(me+s), F_me]: at step s a device multiplies
    the chunk of A it holds while `ppermute` hands that chunk to its left neighbour (n - 1 sends of
    B D / n values, no AllGather).
    Book: Part 10 (Programming TPUs in JAX), "Collective matmul".

    Args:
        a: A[B, D] (float); D a multiple of |axis_name|.
        w: W[D, F] (float); F a multiple of |axis_name|.
        mesh: the mesh (default: 1-D over every mesh device, named `axis_name`).
        axis_name: the axis D and F are split over.
        batch_axis: another mesh axis to split B over (the text's A[B_X, D_Y]), or None.

    Raises:
        ValueError: unknown axis, non-float or non-matrix input, or sizes that do not split.
    """
    return _sharded(
        lambda x, y: _allgather_body(x, y, axis_name), a, w, jax.P(None, axis_name), mesh, axis_name, batch_axis
    )


def _check_split(a: Any, w: Any, mesh: jax.sharding.Mesh, axis: str) -> None:
    """a[B, D], w[D, F] float matrices; D and F divide by |axis|."""
    for arg, array in (("a", a), ("w", w)):
        if getattr(array, "ndim", None) != 2 or "float" not in str(array.dtype):
            raise ValueError(f"{arg}.shape={getattr(array, 'shape', None)!r}: not a float matrix; allowed: 2-D float")
    if a.shape[1] != w.shape[0]:
        raise ValueError(f"w.shape={w.shape!r}: rows differ from a.shape[1]={a.shape[1]}; allowed: equal")
    n = mesh.shape[axis]
    for arg, size in (("a.shape[1]", a.shape[1]), ("w.shape[1]", w.shape[1])):
        if size % n:
            raise ValueError(f"{arg}={size!r}: does not split over {axis!r}; allowed: a multiple of {n}")


def allgather_matmul_blocking(
    a: jax.Array,
    w: jax.Array,
    *,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str = "Y",
    batch_axis: str | None = None,
) -> jax.Array:
    """The same product the blocking way: A[B, D] = AllGather_Y(A[B, D_Y]), then A @ W[D, F_Y].

    Arguments and errors as `allgather_matmul`. Book: Part 10, "Collective matmul" (the naive version).
    """
    body = lambda x, y: jax.lax.all_gather(x, axis_name, axis=1, tiled=True) @ y  # noqa: E731
    return _sharded(body, a, w, jax.P(None, axis_name), mesh, axis_name, batch_axis)


def _reducescatter_body(t: jax.Array, w2: jax.Array, axis: str) -> jax.Array:
    """Local view: t = Tmp[:, F chunk me], w2 = W2[F chunk me, :]. Step s adds to block (me - 1 - s) mod n."""
    n, me = jax.lax.axis_size(axis), jax.lax.axis_index(axis)
    width = w2.shape[1] // n
    to_right = [(src, (src + 1) % n) for src in range(n)]
    acc = None
    for step in range(n):
        cols = jax.lax.dynamic_slice_in_dim(w2, ((me - 1 - step) % n) * width, width, axis=1)
        part = t @ cols
        acc = part if acc is None else acc + part
        if step < n - 1:
            acc = jax.lax.ppermute(acc, axis, to_right)
    return acc  # type: ignore[return-value]  # n >= 1, so the loop ran


def matmul_reducescatter(
    t: jax.Array,
    w2: jax.Array,
    *,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str = "Y",
    batch_axis: str | None = None,
) -> jax.Array:
    """Tmp[B, F_Y] @ W2[F_Y, D] -> Out[B, D_Y], passing partial sums round the ring (no ReduceScatter).

    Out[:, D_j] = sum over devices d of Tmp[:, F_d] @ W2[F_d, D_j]. At step s device d adds its term
    for block j = (d - 1 - s) mod n to the running sum it received and hands it right; after n - 1
    sends of B D / n values each device holds the whole sum of its own block j = d.
    Book: Part 10, Exercise 10.2 (the ReduceScatter collective matmul).

    Args:
        t: Tmp[B, F] (float); F a multiple of |axis_name|.
        w2: W2[F, D] (float); D a multiple of |axis_name|.
        mesh, axis_name, batch_axis: as `allgather_matmul`.

    Raises:
        ValueError: unknown axis, non-float or non-matrix input, or sizes that do not split.
    """
    return _sharded(
        lambda x, y: _reducescatter_body(x, y, axis_name), t, w2, jax.P(axis_name, None), mesh, axis_name, batch_axis
    )


def matmul_reducescatter_blocking(
    t: jax.Array,
    w2: jax.Array,
    *,
    mesh: jax.sharding.Mesh | None = None,
    axis_name: str = "Y",
    batch_axis: str | None = None,
) -> jax.Array:
    """The same product the blocking way: the local Tmp[B, F_Y] @ W2[F_Y, D], then ReduceScatter_Y over D.

    Arguments and errors as `matmul_reducescatter`. Book: Part 3, "Case 3" (ReduceScatter).
    """
    body = lambda x, y: jax.lax.psum_scatter(x @ y, axis_name, scatter_dimension=1, tiled=True)  # noqa: E731
    return _sharded(body, t, w2, jax.P(axis_name, None), mesh, axis_name, batch_axis)
