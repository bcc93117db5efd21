"""The four collectives written by hand as ring algorithms, one `jax.lax.ppermute` per step.

Each collective function runs inside `jax.shard_map` over one mesh axis of n devices and returns
what the `jax.lax` primitive beside it returns (blocks along axis 0, "tiled"):

* `all_gather(x, axis)`     == `jax.lax.all_gather(x, axis, tiled=True)`
* `reduce_scatter(x, axis)` == `jax.lax.psum_scatter(x, axis, scatter_dimension=0, tiled=True)`
* `all_reduce(x, axis)`     == `jax.lax.psum(x, axis)` (a reduce_scatter, then an all_gather)
* `all_to_all(x, axis)`     == `jax.lax.all_to_all(x, axis, 0, 0, tiled=True)`

Every step sends one buffer to the next device of the ring (device i to device i + 1 mod n), so
the compiled program holds `collectives.permute_steps(op, n)` collective-permutes and none of the
primitives.
On TPU ICI each step is one hop between neighbours; the primitives XLA emits do the same work, with
both ring directions and overlapped steps.

The counting that goes with them (`permute_steps`, `link_load_fraction`) is pure arithmetic and
lives in `book_lib.collectives`.

Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 2" (the ring AllGather),
"Case 3" (ReduceScatter, AllReduce), "Our final communication primitive: the AllToAll", and
Worked problems 3.8 and 3.10.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from book_lib.notation import ShardedArray, parse

if TYPE_CHECKING:
    import jax

__all__ = [
    "all_gather",
    "reduce_scatter",
    "all_reduce",
    "all_to_all",
    "partition_spec",
]


def _ring(n: int) -> list[tuple[int, int]]:
    """(source, destination) pairs that pass a buffer to the next device of a ring of n."""
    return [(i, (i + 1) % n) for i in range(n)]


def _blocks(x: jax.Array, n: int, name: str) -> jax.Array:
    """x with its first axis split into n equal blocks: shape (n, rows / n, ...)."""
    if x.ndim == 0 or x.shape[0] % n:
        raise ValueError(
            f"{name}.shape={tuple(x.shape)!r}: axis 0 does not split into {n} equal blocks; "
            f"allowed: a first axis that is a multiple of {n}"
        )
    return x.reshape((n, x.shape[0] // n) + tuple(x.shape[1:]))


def all_gather(x: jax.Array, axis_name: str, *, bidirectional: bool = False) -> jax.Array:
    """Every device's block of `axis_name`, concatenated along axis 0 in device order.

    Ring algorithm: keep your own block; n - 1 times, pass on the block you received last and file
    the one that arrives under the device it started from. With `bidirectional=True` blocks travel
    both ways round the ring at once, so ceil((n - 1) / 2) steps suffice instead of n - 1 (the
    same n - 1 ppermutes, two per step).
    Book: Part 3, "Case 2" (how an AllGather is performed).

    Args:
        x: this device's block, shape (rows, ...); call inside `jax.shard_map`.
        axis_name: the mesh axis to gather over.
        bidirectional: send half the blocks each way round the ring.

    Returns:
        shape (n * rows, ...), the same on every device of the axis.
    """
    import jax
    import jax.numpy as jnp

    n = jax.lax.axis_size(axis_name)
    me = jax.lax.axis_index(axis_name)
    out = jnp.zeros((n,) + tuple(x.shape), x.dtype).at[me].set(x)
    clockwise = n // 2 if bidirectional else n - 1  # blocks that arrive from the left neighbour
    counter = n - 1 - clockwise  # blocks that arrive from the right neighbour
    left_pairs = [(dst, src) for src, dst in _ring(n)]
    from_left = from_right = x
    for step in range(1, max(clockwise, counter) + 1):
        if step <= clockwise:
            from_left = jax.lax.ppermute(from_left, axis_name, _ring(n))  # started on device me - step
            out = out.at[(me - step) % n].set(from_left)
        if step <= counter:
            from_right = jax.lax.ppermute(from_right, axis_name, left_pairs)  # started on device me + step
            out = out.at[(me + step) % n].set(from_right)
    return out.reshape((n * x.shape[0],) + tuple(x.shape[1:]))


def reduce_scatter(x: jax.Array, axis_name: str) -> jax.Array:
    """Block `me` of the sum of every device's `x`: split axis 0 into n blocks, sum, keep your own.

    Ring algorithm: start with block me - 1 of your own x; n - 1 times, pass the running sum to the
    next device and add your own copy of the block it is for. After the last step device me holds
    block me summed over all n devices. Same traffic as an AllGather, plus the additions.
    Book: Part 3, "Case 3" (ReduceScatter) and "More about the ReduceScatter".

    Args:
        x: this device's partial sums, shape (n * rows, ...); call inside `jax.shard_map`.
        axis_name: the mesh axis to sum over.

    Returns:
        shape (rows, ...): this device's block of the total.

    Raises:
        ValueError: axis 0 of `x` is not a multiple of the axis size.
    """
    import jax

    n = jax.lax.axis_size(axis_name)
    me = jax.lax.axis_index(axis_name)
    blocks = _blocks(x, n, "x")
    total = blocks[(me - 1) % n]
    for step in range(1, n):
        total = jax.lax.ppermute(total, axis_name, _ring(n)) + blocks[(me - step - 1) % n]
    return total


def all_reduce(x: jax.Array, axis_name: str) -> jax.Array:
    """The sum of every device's `x` over `axis_name`, on every device: reduce_scatter then all_gather.

    2 (n - 1) ring steps, each moving one block of rows / n: twice an AllGather's traffic.
    Book: Part 3, "Case 3" (an AllReduce is a ReduceScatter followed by an AllGather).

    Raises:
        ValueError: axis 0 of `x` is not a multiple of the axis size.
    """
    return all_gather(reduce_scatter(x, axis_name), axis_name)


def all_to_all(x: jax.Array, axis_name: str) -> jax.Array:
    """Block j of axis 0 goes to device j; device me returns the blocks it received, in source order.

    Ring algorithm: each device packs the n - 1 blocks meant for the others (for me + 1, me + 2, ...)
    and sends the pack to the next device; every device keeps the first block of the pack it
    receives and forwards the rest, so packs shrink by one block per step: n - 1 steps carrying
    (n - 1) + (n - 2) + ... + 1 blocks, half what an AllGather sends over a one-way ring.
    Book: Part 3, "Our final communication primitive: the AllToAll"; Worked problem 3.10.

    Args:
        x: this device's array, shape (n * rows, ...); call inside `jax.shard_map`.
        axis_name: the mesh axis to exchange over.

    Returns:
        shape (n * rows, ...): block j is block me of device j's `x`.

    Raises:
        ValueError: axis 0 of `x` is not a multiple of the axis size.
    """
    import jax
    import jax.numpy as jnp

    n = jax.lax.axis_size(axis_name)
    me = jax.lax.axis_index(axis_name)
    blocks = _blocks(x, n, "x")
    out = jnp.zeros_like(blocks).at[me].set(blocks[me])
    pack = jnp.roll(blocks, -(me + 1), axis=0)[: n - 1]  # blocks for me + 1, me + 2, ..., me + n - 1
    for step in range(1, n):
        pack = jax.lax.ppermute(pack, axis_name, _ring(n))  # packed on device me - step
        out = out.at[(me - step) % n].set(pack[0])
        pack = pack[1:]
    return out.reshape(x.shape)


def partition_spec(array: ShardedArray | str) -> jax.sharding.PartitionSpec:
    """The `jax.P` that lays an array out as the book's notation says: A[I_XY, J] -> P(("X", "Y"), None).

    One entry per dimension: None when unsplit, the axis name when one mesh axis splits it, a tuple
    of names (major first) when several do. Unreduced axes ({U_X}) have no PartitionSpec form.
    Book: Part 3, "A quick aside: how would we describe this in code?"

    Raises:
        ValueError: notation that `notation.parse` rejects, or an array with unreduced axes.
    """
    import jax

    array = parse(array) if isinstance(array, str) else array
    if array.unreduced:
        raise ValueError(f"array={str(array)!r}: holds partial sums; allowed: an array without {{U_...}}")
    return jax.P(*[None if not axes else axes[0] if len(axes) == 1 else tuple(axes) for axes in array.axes])
