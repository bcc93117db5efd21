"""The book's sharding notation: A[I_X, J], A[I_XY, J], C[I, K]{U_Y}, and what a device holds of it.

Each array dimension carries the mesh axes it is split over as a subscript (`I_XY`: split over X,
then Y, |X| * |Y| blocks), and `{U_X}` marks an array that holds partial sums still to be added
over mesh axis X. Axis names of one letter are written together (`I_XY`); longer names go in
braces (`I_{data,model}`, `{U_{data}}`). A mesh is a mapping from axis name to size,
`{"X": 4, "Y": 8}`; sizes map dimension names to lengths.

`parse` reads the notation into a `ShardedArray`, which gives the block one device holds, the
devices that hold each block (`owners`) and the array after each collective (a change of
subscripts, no cost: `collectives` has the times, `sharding` the plan of a sharded matmul).

Book: Part 3 (Sharded Matrices and How to Multiply Them), "A unified notation for sharding".
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from book_lib import checks

__all__ = ["ShardedArray", "parse", "subscript", "check_mesh"]

_NAME = r"[A-Za-z][A-Za-z0-9]*"
_ARRAY = re.compile(rf"\s*({_NAME})?\s*\[([^\[\]]*)\]\s*(?:\{{(.*)\}})?\s*")
_DIM = re.compile(rf"({_NAME})(?:_(\{{[^{{}}]*\}}|[A-Za-z]+))?")
_UNREDUCED = re.compile(r"U_(\{[^{}]*\}|[A-Za-z]+)")
_EXAMPLE = "notation like 'A[I_X, J]', 'A[I_XY, J]' or 'C[I, K]{U_Y}'"


def subscript(axes: tuple[str, ...]) -> str:
    """Subscript text of mesh axes, as the notation writes them: 'XY' for one-letter names, '{data,model}' otherwise.

    Raises:
        ValueError: `axes` not a tuple of names.
    """
    if not isinstance(axes, tuple) or not all(isinstance(a, str) and re.fullmatch(_NAME, a) for a in axes):
        raise ValueError(f"axes={axes!r}: not mesh axis names; allowed: a tuple of letters-then-digits names")
    return "".join(axes) if all(len(a) == 1 for a in axes) else "{" + ",".join(axes) + "}"


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _parse_sub(sub: str) -> tuple[str, ...] | None:
    if sub.startswith("{"):
        names = tuple(n.strip() for n in sub[1:-1].split(","))
        return names if all(re.fullmatch(_NAME, n) for n in names) else None
    return tuple(sub)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardedArray:
    """A named array and how it lies on a device mesh, in the book's notation.

    `str(ShardedArray.parse("A[I_XY, J]{U_Z}")) == "A[I_XY, J]{U_Z}"`.

    Attributes:
        name: array name (`"A"`), may be empty.
        dims: dimension names, in order (`("I", "J")`).
        axes: per dimension, the mesh axes it is split over, major first (`(("X", "Y"), ())`).
        unreduced: mesh axes over which the array holds unsummed partial sums.
    """

    name: str = ""
    dims: tuple[str, ...]
    axes: tuple[tuple[str, ...], ...]
    unreduced: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "axes", tuple(tuple(a) for a in self.axes))
        object.__setattr__(self, "unreduced", tuple(self.unreduced))
        if self.name and not re.fullmatch(_NAME, self.name):
            raise ValueError(f"name={self.name!r}: not a name; allowed: a letter then letters or digits, or ''")
        bad = [d for d in self.dims if not isinstance(d, str) or not re.fullmatch(_NAME, d)]
        if bad:
            raise ValueError(f"dims={self.dims!r}: {bad[0]!r} is not a name; allowed: a letter then letters or digits")
        for d in self.dims:
            if self.dims.count(d) > 1:
                raise ValueError(f"dims={self.dims!r}: dimension {d!r} appears twice; allowed: distinct names")
        if len(self.axes) != len(self.dims):
            raise ValueError(
                f"axes={self.axes!r}: {len(self.axes)} entries for {len(self.dims)} dims; allowed: one each"
            )
        used = [a for axes in self.axes for a in axes] + list(self.unreduced)
        bad = [a for a in used if not isinstance(a, str) or not re.fullmatch(_NAME, a)]
        if bad:
            raise ValueError(f"axes={self.axes!r}: mesh axis {bad[0]!r} is not a name; allowed: letters and digits")
        for a in used:
            if used.count(a) > 1:
                raise ValueError(
                    f"axes={self.axes!r}, unreduced={self.unreduced!r}: mesh axis {a!r} used twice in one array; "
                    "allowed: each mesh axis at most once"
                )

    @classmethod
    def parse(cls, text: str) -> ShardedArray:
        """The array that `text` writes in the book's notation; see `parse`."""
        return parse(text)

    def __str__(self) -> str:
        body = ", ".join(d + (f"_{subscript(a)}" if a else "") for d, a in zip(self.dims, self.axes, strict=True))
        tail = f"{{U_{subscript(self.unreduced)}}}" if self.unreduced else ""
        return f"{self.name}[{body}]{tail}"

    @property
    def sharded_axes(self) -> tuple[str, ...]:
        """Mesh axes that split some dimension, in dimension order."""
        return tuple(a for axes in self.axes for a in axes)

    def axes_of(self, dim: str) -> tuple[str, ...]:
        """Mesh axes that split dimension `dim`.

        Raises:
            ValueError: `dim` is not a dimension of this array.
        """
        if dim not in self.dims:
            raise ValueError(f"dim={dim!r}: not a dimension of {self}; allowed: {', '.join(self.dims)}")
        return self.axes[self.dims.index(dim)]

    # --- sizes -------------------------------------------------------------------------------

    def _check_on(self, sizes: Mapping[str, int], mesh: Mapping[str, int] | None) -> None:
        if mesh is not None:
            check_mesh(mesh)
            for a in self.sharded_axes + self.unreduced:
                if a not in mesh:
                    raise ValueError(
                        f"mesh={dict(mesh)!r}: no axis {a!r}, which {self} uses; allowed: {', '.join(mesh)}"
                    )
        if not isinstance(sizes, Mapping):
            raise ValueError(f"sizes={sizes!r}: not a mapping; allowed: dict of dimension name -> length")
        for d in self.dims:
            size = sizes.get(d)
            if size is None:
                raise ValueError(f"sizes={dict(sizes)!r}: no length for dimension {d!r} of {self}; allowed: add it")
            checks.count(f"sizes[{d!r}]", size)

    def local_shape(self, sizes: Mapping[str, int], mesh: Mapping[str, int]) -> tuple[int, ...]:
        """Shape of the block one device holds (counts): size[d] / prod(|axis| for axes of d).

        Book: Part 3, "A unified notation for sharding".

        Raises:
            ValueError: a dimension without a size, a mesh axis not in `mesh`, or a size that the
                product of its mesh axes does not divide.
        """
        self._check_on(sizes, mesh)
        shape = []
        for d, axes in zip(self.dims, self.axes, strict=True):
            ways = math.prod(mesh[a] for a in axes)
            if sizes[d] % ways:
                raise ValueError(
                    f"sizes[{d!r}]={sizes[d]!r}: not divisible by {ways} (mesh axes {subscript(axes)} of {self}); "
                    f"allowed: a multiple of {ways}"
                )
            shape.append(sizes[d] // ways)
        return tuple(shape)

    def local_bytes(self, sizes: Mapping[str, int], mesh: Mapping[str, int], bytes_per_element: float = 2) -> float:
        """Bytes one device holds: prod(local_shape) * bytes_per_element.

        Raises:
            ValueError: as `local_shape`, or a non-positive `bytes_per_element`.
        """
        checks.positive("bytes_per_element", bytes_per_element)
        return float(math.prod(self.local_shape(sizes, mesh)) * bytes_per_element)

    def global_bytes(self, sizes: Mapping[str, int], bytes_per_element: float = 2) -> float:
        """Bytes of one full copy of the array: prod(sizes of dims) * bytes_per_element.

        Raises:
            ValueError: a dimension without a size, or a non-positive `bytes_per_element`.
        """
        checks.positive("bytes_per_element", bytes_per_element)
        self._check_on(sizes, None)
        return float(math.prod(sizes[d] for d in self.dims) * bytes_per_element)

    def total_bytes(self, sizes: Mapping[str, int], mesh: Mapping[str, int], bytes_per_element: float = 2) -> float:
        """Bytes held by all devices of `mesh` together: local_bytes * prod(mesh sizes).

        Replicated (and unreduced) copies count once per device that holds them.
        """
        return self.local_bytes(sizes, mesh, bytes_per_element) * math.prod(check_mesh(mesh).values())

    def owners(self, mesh: Mapping[str, int]) -> dict[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        """Which devices hold each block: {block index per dimension: mesh coordinates of its holders}.

        A device's coordinate has one entry per axis of `mesh`, in the mesh's order. Along a dimension
        split over axes (A1, A2), it holds block c[A1] * |A2| + c[A2]: the first axis is the slower
        digit, as JAX numbers the blocks. Blocks come in index order, holders in coordinate order; each
        block has prod(|axis| over the mesh axes that split no dimension) holders, its copies (partial
        sums over an unreduced axis count as copies of one block).
        Book: Part 3, "A unified notation for sharding".

        Raises:
            ValueError: `mesh` is not a mesh, or lacks an axis this array uses.
        """
        self._check_on(dict.fromkeys(self.dims, 1), mesh)
        held: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for coord in itertools.product(*(range(size) for size in mesh.values())):
            at = dict(zip(mesh, coord, strict=True))
            block = []
            for axes in self.axes:
                index = 0
                for a in axes:  # the first axis is the slower digit
                    index = index * mesh[a] + at[a]
                block.append(index)
            held.setdefault(tuple(block), []).append(coord)
        return {block: tuple(held[block]) for block in sorted(held)}

    # --- collectives as notation transforms (no cost; see book_lib.collectives) -----------------

    def all_gather(self, *axes: str) -> ShardedArray:
        """The array after AllGather over `axes`: those subscripts are removed (A[I_XY] -> A[I_Y] for X).

        Raises:
            ValueError: an axis that splits no dimension of the array.
        """
        for a in axes:
            if a not in self.sharded_axes:
                raise ValueError(
                    f"axes={axes!r}: {a!r} splits no dimension of {self}; allowed: {', '.join(self.sharded_axes)}"
                )
        return replace(self, axes=tuple(tuple(x for x in ax if x not in axes) for ax in self.axes))

    def all_reduce(self, *axes: str) -> ShardedArray:
        """The array after AllReduce over `axes` (all unreduced axes when none are named): {U_..} shrinks.

        Raises:
            ValueError: an axis the array is not unreduced over.
        """
        axes = axes or self.unreduced
        self._check_unreduced(axes)
        return replace(self, unreduced=tuple(a for a in self.unreduced if a not in axes))

    def reduce_scatter(self, *axes: str, dim: str) -> ShardedArray:
        """The array after ReduceScatter over `axes` onto `dim`: C[I, K]{U_X} -> C[I, K_X] for dim K.

        Raises:
            ValueError: an axis the array is not unreduced over, or an unknown `dim`.
        """
        self._check_unreduced(axes)
        self.axes_of(dim)
        new_axes = tuple(ax + tuple(axes) if d == dim else ax for d, ax in zip(self.dims, self.axes, strict=True))
        return replace(self, axes=new_axes, unreduced=tuple(a for a in self.unreduced if a not in axes))

    def all_to_all(self, axis: str, dim: str) -> ShardedArray:
        """The array after AllToAll moving mesh axis `axis` onto `dim`: A[I_X, J] -> A[I, J_X] for J.

        Raises:
            ValueError: `axis` splits no other dimension, or `dim` is unknown.
        """
        if axis not in self.sharded_axes or axis in self.axes_of(dim):
            raise ValueError(f"axis={axis!r}: splits no dimension of {self} other than {dim!r}; allowed: another axis")
        moved = tuple(tuple(x for x in ax if x != axis) for ax in self.axes)
        return replace(
            self, axes=tuple(ax + (axis,) if d == dim else ax for d, ax in zip(self.dims, moved, strict=True))
        )

    def _check_unreduced(self, axes: tuple[str, ...]) -> None:
        if not axes:
            raise ValueError(
                f"axes={axes!r}: no axis given and {self} has nothing unreduced; allowed: an unreduced axis"
            )
        for a in axes:
            if a not in self.unreduced:
                raise ValueError(
                    f"axes={axes!r}: {self} is not unreduced over {a!r}; allowed: {', '.join(self.unreduced) or 'none'}"
                )


def parse(text: str) -> ShardedArray:
    """Read the book's notation: `"A[I_X, J]"`, `"A[I_XY, J]"`, `"C[I, K]{U_Y}"`, `"W[D_{data}, F]"`.

    `{U_X, U_Y}` and `{U_XY}` mean the same; `str()` writes the second.
    Book: Part 3, "A unified notation for sharding" and "Case 3" (the {U_X} suffix).

    Raises:
        ValueError: text that is not the notation, or a mesh axis used twice in the array.
    """
    if not isinstance(text, str):
        raise ValueError(f"text={text!r}: not a string; allowed: {_EXAMPLE}")
    match = _ARRAY.fullmatch(text)
    if not match:
        raise ValueError(f"text={text!r}: not sharding notation; allowed: {_EXAMPLE}")
    name, body, tail = match.group(1) or "", match.group(2), match.group(3)
    dims: list[str] = []
    axes: list[tuple[str, ...]] = []
    for term in _split_top(body) if body.strip() else []:
        m = _DIM.fullmatch(term)
        sub = _parse_sub(m.group(2)) if m and m.group(2) else ()
        if not m or sub is None:
            raise ValueError(f"text={text!r}: cannot read dimension {term!r}; allowed: {_EXAMPLE}")
        dims.append(m.group(1))
        axes.append(sub)
    unreduced: list[str] = []
    for term in _split_top(tail) if tail is not None else []:
        m = _UNREDUCED.fullmatch(term)
        sub = _parse_sub(m.group(1)) if m else None
        if sub is None:
            raise ValueError(f"text={text!r}: cannot read unreduced part {term!r}; allowed: {{U_X}} or {{U_XY}}")
        unreduced.extend(sub)
    used = [a for ax in axes for a in ax] + unreduced
    for a in used:
        if used.count(a) > 1:
            raise ValueError(f"text={text!r}: mesh axis {a!r} used twice in one array; allowed: each axis at most once")
    for d in dims:
        if dims.count(d) > 1:
            raise ValueError(f"text={text!r}: dimension {d!r} appears twice; allowed: distinct names")
    return ShardedArray(name=name, dims=tuple(dims), axes=tuple(axes), unreduced=tuple(unreduced))


def check_mesh(mesh: Mapping[str, int]) -> Mapping[str, int]:
    """`mesh` itself, once it is checked to be a mapping from axis name to device count: `{"X": 4, "Y": 8}`.

    Raises:
        ValueError: not a non-empty mapping, an axis name that is not a name, or a size below 1.
    """
    if not isinstance(mesh, Mapping) or not mesh:
        raise ValueError(f"mesh={mesh!r}: not a mesh; allowed: a non-empty dict of axis name -> size")
    for a, n in mesh.items():
        if not isinstance(a, str) or not re.fullmatch(_NAME, a):
            raise ValueError(f"mesh={dict(mesh)!r}: axis name {a!r} is not a name; allowed: letters and digits")
        checks.count(f"mesh[{a!r}]", n)
    return mesh
