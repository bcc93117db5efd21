"""HLO array types: how an XLA array sits in memory (element size, tiling's padding, memory space),
and the one reader of array types in a program's text, HLO's and StableHLO's.

An HLO array type reads `dtype[dims]{minor_to_major:T(tile)...S(space)}`, for example
`bf16[8,1024,2048]{2,1,0:T(8,128)(2,1)S(1)}`:

* `dtype[dims]`: the element type (`bf16` is 2 bytes) and the logical shape;
* `2,1,0`: the order of the dims in memory, from the fastest-varying (minor) to the slowest;
* `T(8,128)`: the outer tile, which covers the most minor dims; every tiled dim is padded up to a
  whole number of tiles. Inner tiles such as `(2,1)` (two bf16 values of one column packed into
  one 4-byte word) cut each outer tile again: they divide it and add no padding, but they decide
  the order of the values in memory (`tiled_offset`);
* `S(1)`: the memory space, VMEM; `S(0)`, usually left out, is HBM. The text names no other.

`parse_array` reads one such type exactly; `find_arrays` every one in a line of HLO (a result type,
a tuple of them), and `tensor_shapes` the `tensor<8x128xf32>` types of StableHLO. `hlo`, `profile`
and the grader's program checks read array types through these alone.

Pure Python: no JAX import. Book: Part 9 (How to Profile TPU Programs), "How to Read an XLA Op".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from book_lib import checks

__all__ = [
    "MEMORY_SPACES",
    "OTHER_SPACE",
    "padded_shape",
    "padding_expansion",
    "tiled_offset",
    "memory_space",
    "HloArray",
    "parse_array",
    "find_arrays",
    "tensor_shapes",
]

# What the text calls each memory-space code; S(2), S(3) and above are "other memory spaces".
MEMORY_SPACES = {0: "HBM", 1: "VMEM"}
OTHER_SPACE = "another memory space"

# One array type: an element type (`f32`, `bf16`, `pred`, `f8e4m3fn`), its dims, and its layout if printed.
_ARRAY = r"(?P<dtype>[a-z][a-z0-9]*)\[(?P<dims>[\d,\s]*)\](?:\{(?P<layout>[^}]*)\})?"
_ONE_ARRAY = re.compile(rf"^\s*{_ARRAY}\s*$")
_ANY_ARRAY = re.compile(rf"\b{_ARRAY}")
_TENSOR = re.compile(r"tensor<((?:\d+x)*)[a-z]+\d*>")


def _dims(arg: str, values: Sequence[int], minimum: int) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{arg}={values!r}: not a sequence of dims; allowed: a tuple of ints >= {minimum}")
    return tuple(checks.count(arg, v, minimum=minimum) for v in values)


def padded_shape(shape: Sequence[int], tile: Sequence[int]) -> tuple[int, ...]:
    """The shape an array occupies once its most minor dims are cut into whole tiles (elements).

    The tile covers the last len(tile) dims of `shape` (given in memory order, major to minor);
    each of those rounds up to a multiple of its tile side: padded_i = ceil(n_i / t_i) * t_i.
    An f32[3, 5] in T(2,2) tiles occupies [4, 6]. Book: Part 9, "How to Read an XLA Op".

    Args:
        shape: the array's dims (counts >= 0), major to minor.
        tile: the tile's sides (counts >= 1), at most len(shape) of them.

    Raises:
        ValueError: a negative or fractional dim, a tile side below 1, or a tile with more dims than the shape.
    """
    dims, sides = _dims("shape", shape, 0), _dims("tile", tile, 1)
    if len(sides) > len(dims):
        raise ValueError(f"tile={tuple(tile)!r}: more dims than shape {dims!r}; allowed: len(tile) <= len(shape)")
    head = dims[: len(dims) - len(sides)]
    tail = dims[len(head) :]
    return head + tuple(math.ceil(n / t) * t for n, t in zip(tail, sides, strict=True))


def padding_expansion(shape: Sequence[int], tile: Sequence[int]) -> float:
    """How many times its logical size an array takes in memory once tiled (dimensionless, >= 1).

    expansion = prod(padded_shape(shape, tile)) / prod(shape): 24 / 15 = 1.6 for an f32[3, 5] in
    T(2,2) tiles. Book: Part 9, "How to Read an XLA Op".

    Raises:
        ValueError: as `padded_shape`, or an empty array (a dim of 0), whose expansion is undefined.
    """
    padded = padded_shape(shape, tile)
    size = math.prod(_dims("shape", shape, 0))
    if size == 0:
        raise ValueError(f"shape={tuple(shape)!r}: an empty array; allowed: dims >= 1")
    return math.prod(padded) / size


def tiled_offset(index: Sequence[int], shape: Sequence[int], tiles: Sequence[Sequence[int]]) -> int:
    """Where one element sits in memory under levels of tiling: its offset in elements, padding counted.

    Each level, outer first, cuts the most minor dims of the shape so far into tiles: dims n_i under
    a tile t_i become [ceil(n_i / t_i), t_i] (tile counts, then the place inside a tile), and the
    index i_i becomes [i_i // t_i, i_i % t_i]. The next level cuts the last dims of that shape, the
    inside of the tile before it. The offset is the row-major position in the final shape. So in
    bf16[4,8]{1,0:T(2,4)(2,1)} each (2, 4) tile holds four (2, 1) pairs, one column's two rows in
    one 4-byte word: (0, 0) sits at 0, (1, 0) at 1, (0, 1) at 2, and (2, 0), in the next tile
    down, at 16. Book: Part 9 (How to Profile TPU Programs), "How to Read an XLA Op".

    Args:
        index: the element's position (counts), in memory order like `shape`.
        shape: the array's dims (counts >= 1), major to minor.
        tiles: the tiling levels, outer first, e.g. ((8, 128), (2, 1)); () for an untiled array.

    Raises:
        ValueError: an index outside the shape, a tile side below 1, or a tile with more dims than
            the shape it cuts.
    """
    dims, where = list(_dims("shape", shape, 1)), list(_dims("index", index, 0))
    if len(where) != len(dims) or any(i >= n for i, n in zip(where, dims, strict=True)):
        raise ValueError(f"index={tuple(index)!r}: not inside shape {tuple(dims)!r}; allowed: 0 <= index < shape")
    if isinstance(tiles, (str, bytes)) or not isinstance(tiles, Sequence):
        raise ValueError(f"tiles={tiles!r}: not a sequence of tiles; allowed: e.g. ((8, 128), (2, 1))")
    for level in tiles:
        sides = _dims("tile", level, 1)
        if len(sides) > len(dims):
            raise ValueError(f"tile={tuple(level)!r}: more dims than {tuple(dims)!r}; allowed: len(tile) <= its dims")
        head = len(dims) - len(sides)
        counts = [math.ceil(n / t) for n, t in zip(dims[head:], sides, strict=True)]
        places = [i % t for i, t in zip(where[head:], sides, strict=True)]
        where = where[:head] + [i // t for i, t in zip(where[head:], sides, strict=True)] + places
        dims = dims[:head] + counts + list(sides)
    offset = 0
    for i, n in zip(where, dims, strict=True):
        offset = offset * n + i
    return offset


def memory_space(code: int) -> str:
    """The memory an `S(code)` annotation names: "HBM" (0, or no annotation), "VMEM" (1), else `OTHER_SPACE`.

    Book: Part 9, "How to Read an XLA Op" (S(1) is VMEM, S(0) HBM, S(2) and S(3) other spaces).

    Raises:
        ValueError: a negative or fractional code.
    """
    return MEMORY_SPACES.get(checks.count("code", code, minimum=0), OTHER_SPACE)


@dataclass(frozen=True, slots=True, kw_only=True)
class HloArray:
    """One HLO array type, as `parse_array` reads it.

    Attributes:
        dtype: the element type as HLO spells it (`bf16`, `f32`, `s8`, `pred`), sized by `checks.DTYPES`.
        shape: the logical dims (elements).
        minor_to_major: the layout's dim order, minor first; () when the text gives none.
        tile: the outer tile's sides (elements); () for an untiled array.
        space: the memory-space code (0 for HBM when the text gives none).
        inner_tiles: the tiles inside the outer one, in order: ((2, 1),) for `T(8,128)(2,1)`.
    """

    dtype: str
    shape: tuple[int, ...]
    minor_to_major: tuple[int, ...] = ()
    tile: tuple[int, ...] = ()
    space: int = 0
    inner_tiles: tuple[tuple[int, ...], ...] = ()

    @property
    def memory_shape(self) -> tuple[int, ...]:
        """The dims in memory order, major to minor (the logical order when no layout is given)."""
        order = self.minor_to_major or tuple(reversed(range(len(self.shape))))
        return tuple(self.shape[i] for i in reversed(order))

    @property
    def bytes(self) -> int:
        """Bytes of the values themselves: ceil(prod(shape) * bytes of dtype) (`checks.dtype_bytes`; s4 packs two)."""
        return math.ceil(math.prod(self.shape) * checks.dtype_bytes(self.dtype))

    @property
    def padded_bytes(self) -> int:
        """Bytes the array occupies, tiles included: ceil(prod(padded memory shape) * bytes of dtype)."""
        return math.ceil(math.prod(padded_shape(self.memory_shape, self.tile)) * checks.dtype_bytes(self.dtype))

    @property
    def memory(self) -> str:
        """Where it lives: `memory_space(space)`."""
        return memory_space(self.space)


def _layout(layout: str) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...], int]:
    """(minor_to_major, tiles outer first, memory-space code) of a layout like `2,1,0:T(8,128)(2,1)S(1)`."""
    order_text, _, rest = layout.partition(":")
    order = tuple(int(d) for d in order_text.split(",") if d.strip())
    tiling = re.search(r"T((?:\([\d,]+\))+)", rest)
    levels = re.findall(r"\(([\d,]+)\)", tiling.group(1)) if tiling else []
    space = re.search(r"S\((\d+)\)", rest)
    tiles = tuple(tuple(int(t) for t in level.split(",") if t) for level in levels)
    return order, tiles, int(space.group(1)) if space else 0


def parse_array(text: str) -> HloArray:
    """Read one HLO array type, `f32[3,5]{1,0:T(2,2)}` or `bf16[8,1024,2048]{2,1,0:T(8,128)(2,1)S(1)}`.

    The first tile of `T(...)(...)` is `tile`, the rest `inner_tiles`.
    Book: Part 9 (How to Profile TPU Programs), "How to Read an XLA Op".

    Raises:
        ValueError: text that is not one array type, an unknown dtype, a layout that is not a
            permutation of the dims, or a tile with more dims than the array.
    """
    match = _ONE_ARRAY.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"text={text!r}: not an HLO array type; allowed: e.g. 'f32[3,5]{{1,0:T(2,2)}}'")
    checks.dtype(match["dtype"])  # an element type `checks.DTYPES` knows
    array = _array(match)
    order, rank = array.minor_to_major, len(array.shape)
    if order and sorted(order) != list(range(rank)):
        raise ValueError(f"text={text!r}: layout {order} is not a permutation of {rank} dims; allowed: e.g. {{1,0}}")
    padded_shape(array.memory_shape, array.tile)  # refuses a tile with more dims than the array
    return array


def _array(match: re.Match[str]) -> HloArray:
    shape = tuple(int(d) for d in match["dims"].split(",") if d.strip())
    order, tiles, space = _layout(match["layout"] or "")
    tile, inner = (tiles[0], tiles[1:]) if tiles else ((), ())
    return HloArray(dtype=match["dtype"], shape=shape, minor_to_major=order, tile=tile, space=space, inner_tiles=inner)


def find_arrays(text: str) -> list[HloArray]:
    """Every HLO array type in `text`, in order: `(f32[4,16]{1,0}, u32[])` gives f32[4,16] and u32[].

    Each is read as `parse_array` reads one; element types are kept as printed, unchecked (`token[]`
    too), so a whole instruction of any program can be scanned. A scalar has shape ().
    Book: Part 9 (How to Profile TPU Programs), "How to Read an XLA Op".
    """
    return [_array(match) for match in _ANY_ARRAY.finditer(text)]


def tensor_shapes(text: str) -> list[tuple[int, ...]]:
    """Every ranked tensor type of StableHLO in `text`, as its dims: `tensor<8x128xf32>` -> (8, 128), a
    scalar `tensor<f32>` -> (). The same arrays as `find_arrays` reads once XLA has compiled them."""
    return [tuple(int(d) for d in dims.split("x") if d) for dims in _TENSOR.findall(text)]
