"""Slices of chips: shape, hosts, wraparound links, hop counts and per-axis ICI bandwidth.

A TPU slice is a 2D or 3D grid of chips of one generation, each wired by ICI to its nearest
neighbours; a GPU slice is one NVSwitch node, where every pair of GPUs is a single hop apart.

Wraparound rule (one rule, applied everywhere in `book_lib`):

* 2D-torus chips (v2, v3, v5e, v6e): an axis wraps iff its size equals the pod's side
  (16; 32 for v3). An 8x16 v5e wraps its long axis only.
  Book: Part 2, "TPU Networking" (v5e/v6e wrap an axis of 16; smaller ones do not).
* 3D-torus chips (v4, v5p, 7x): every axis wraps iff the slice is built from whole 4x4x4
  cubes (every axis a multiple of 4); otherwise no axis wraps. A 2x2x4 has none, a 4x4x8 all.
  Book: Part 2, "TPU Networking" and its footnote on 2x2x4. The footnote on bidirectional
  bandwidth says instead that any axis that is a multiple of 4 wraps (so a 4x4x2 would wrap
  two axes); we follow the cube rule because the optical switches that close the rings sit on
  the faces of whole cubes.
* NVSwitch GPUs: no rings; every pair of distinct GPUs in the node is one hop apart.

Book: Part 2 (All About TPUs), "TPU Networking"; Part 2 Appendix A (GPUs).
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

from book_lib import checks
from book_lib.hardware import Chip, get_chip

__all__ = [
    "grid_hops",
    "axis_bytes_per_s",
    "axis_hops",
    "Slice",
    "pod",
    "parse_shape",
    "slice_shapes",
    "smallest_slice",
    "ring_flags",
]

_CUBE = 4  # side of the optically switched building block of 3D-torus pods (chips)


def axis_bytes_per_s(size: int, wraps: bool, link_bytes_per_s: float) -> float:
    """ICI bandwidth one chip uses to move data along one axis of `size` chips (bytes/s).

    0 for an axis of one chip; 2 * link_bytes_per_s on a ring (data leaves over the links to both
    neighbours at once: the book's "bidirectional" figure); link_bytes_per_s on a line (its end
    chips have one neighbour and set the pace). Book: Part 2 (All About TPUs), "Key Takeaways".
    """
    return 0.0 if size == 1 else (2 if wraps else 1) * link_bytes_per_s


def axis_hops(size: int, wraps: bool) -> int:
    """Hops between the two farthest chips of one axis of `size` chips (count): floor(size / 2) on a
    ring, size - 1 on a line. Book: Part 2 (All About TPUs), "TPU Networking"."""
    return size // 2 if wraps else size - 1


def parse_shape(shape: str | int | tuple[int, ...]) -> tuple[int, ...]:
    """A slice shape as a tuple of ints: `"4x4"` -> (4, 4), `8` -> (8,), (2, 2, 1) unchanged.

    Raises:
        ValueError: text that is not sizes joined by 'x', or a size that is not an integer.
    """
    if isinstance(shape, str):
        if not re.fullmatch(r"\s*\d+(\s*x\s*\d+)*\s*", shape):
            raise ValueError(f"shape={shape!r}: not a shape; allowed: sizes joined by 'x', e.g. '4x4' or '2x2x1'")
        return tuple(int(part) for part in shape.split("x"))
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        return (int(shape),)
    try:
        sizes = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"shape={shape!r}: not a shape; allowed: a tuple of ints or text like '4x4'") from None
    if not all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in sizes):
        raise ValueError(f"shape={shape!r}: sizes must be integers; allowed: a tuple of positive ints")
    return tuple(int(s) for s in sizes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Slice:
    """A set of ICI-connected chips of one generation, laid out as a grid of `shape`.

    Build one with `Slice.of("v5e", "4x4")` or `pod("v5p")`; the fields are the plain data.

    Attributes:
        chip: the chip every position holds.
        shape: chips along each axis; 2 axes for 2D-torus chips, 3 for 3D-torus chips,
            1 for NVSwitch GPUs.
    """

    chip: Chip
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.chip, Chip):
            raise ValueError(f"chip={self.chip!r}: not a Chip; allowed: a hardware.Chip (Slice.of takes names)")
        object.__setattr__(self, "shape", parse_shape(self.shape))
        shape, chip = self.shape, self.chip
        want = len(chip.pod_shape)
        if len(shape) != want:
            raise ValueError(
                f"shape={shape!r}: {len(shape)} axes, but {chip.name} ({chip.ici_topology}) slices have {want}; "
                f"allowed: {want} axes"
            )
        if any(s < 1 for s in shape):
            raise ValueError(f"shape={shape!r}: a size below 1; allowed: positive ints")
        # Compare sorted sides, so a 28x16x20 request fits a 16x20x28 pod (axes can be relabelled).
        if any(s > p for s, p in zip(sorted(shape), sorted(chip.pod_shape), strict=True)):
            raise ValueError(
                f"shape={shape!r}: larger than the {chip.name} pod {chip.pod_shape}; "
                f"allowed: sorted sides at most {tuple(sorted(chip.pod_shape))}"
            )

    @classmethod
    def of(cls, chip: Chip | str, shape: str | int | tuple[int, ...]) -> Slice:
        """The slice of `chip` (a `Chip` or a name for `hardware.get_chip`) with `shape` ("4x4", (4, 4))."""
        return cls(chip=get_chip(chip), shape=parse_shape(shape))

    @property
    def label(self) -> str:
        """Short name such as `"tpu-v5e 4x4"`."""
        return f"{self.chip.name} {'x'.join(str(s) for s in self.shape)}"

    @property
    def n_chips(self) -> int:
        """Chips in the slice (count)."""
        return math.prod(self.shape)

    @property
    def n_cores(self) -> int:
        """TensorCores (TPU) or SMs (GPU) in the slice (count): n_chips * cores_per_chip."""
        return self.n_chips * self.chip.cores_per_chip

    @property
    def chips_per_host(self) -> int:
        """Chips each host drives in this slice (count); a slice smaller than one host uses part of it."""
        return min(self.chip.chips_per_host, self.n_chips)

    @property
    def n_hosts(self) -> int:
        """Hosts (CPU VMs) the slice spans (count): ceil(n_chips / chips per host)."""
        return math.ceil(self.n_chips / self.chip.chips_per_host)

    @property
    def flops_per_s(self) -> float:
        """Peak dense bf16 rate of all chips together (FLOPs/s)."""
        return self.n_chips * self.chip.bf16_flops_per_s

    @property
    def hbm_bytes(self) -> float:
        """HBM of all chips together (bytes)."""
        return self.n_chips * self.chip.hbm_bytes

    @property
    def switched(self) -> bool:
        """True where chips reach each other through a switch (NVSwitch GPUs), not a grid."""
        return self.chip.ici_topology == "nvswitch"

    @property
    def wraparound(self) -> tuple[bool, ...]:
        """Per axis, whether the axis closes into a ring (see the module docstring for the rule).

        2D torus: shape[i] == pod side. 3D torus: all True iff every side is a multiple of 4.
        NVSwitch: (False,), since a switch is no ring.
        Book: Part 2 (All About TPUs), "TPU Networking".
        """
        chip, shape = self.chip, self.shape
        if chip.ici_topology == "2d-torus":
            return tuple(s == p for s, p in zip(shape, chip.pod_shape, strict=True))
        if chip.ici_topology == "3d-torus":
            cubes = all(s % _CUBE == 0 for s in shape)
            return (cubes,) * len(shape)
        return (False,) * len(shape)

    @property
    def axis_bytes_per_s(self) -> tuple[float, ...]:
        """Per axis, the ICI bandwidth one chip can use to move data along that axis (bytes/s).

        TPU, axis of size 1: 0. Wrapped axis: 2 * ici_bytes_per_s (data leaves over the links to
        both ring neighbours at once; the book's "bidirectional" figure). Unwrapped axis:
        ici_bytes_per_s (the end chips of a line have only one neighbour, and they set the pace).
        NVSwitch GPU: ici_links * ici_bytes_per_s (all NVLinks into the switch, one direction).
        Book: Part 2 (All About TPUs), "Key Takeaways" (one-way and bidi columns).
        """
        one_way = self.chip.ici_bytes_per_s
        if self.switched:
            return tuple(self.chip.ici_links * one_way if s > 1 else 0.0 for s in self.shape)
        return tuple(axis_bytes_per_s(s, w, one_way) for s, w in zip(self.shape, self.wraparound, strict=True))

    def _check_coords(self, name: str, coords: tuple[int, ...]) -> tuple[int, ...]:
        coords = tuple(coords)
        if len(coords) != len(self.shape) or any(
            not isinstance(c, numbers.Integral) or isinstance(c, bool) or not 0 <= c < s
            for c, s in zip(coords, self.shape, strict=False)
        ):
            raise ValueError(
                f"{name}={coords!r}: not a chip of the {self.label} slice; "
                f"allowed: {len(self.shape)} ints with 0 <= {name}[i] < shape[i]"
            )
        return coords

    def hop_count(self, a: tuple[int, ...], b: tuple[int, ...]) -> int:
        """ICI hops on a shortest path from chip `a` to chip `b` (count); see `grid_hops`.

        NVSwitch: 0 for the same GPU, else 1.
        Book: Part 2 (All About TPUs), "TPU Networking"; Worked problem 2.5.

        Raises:
            ValueError: a coordinate outside the slice.
        """
        a = self._check_coords("a", a)
        b = self._check_coords("b", b)
        if self.switched:
            return int(a != b)
        return grid_hops(self.shape, self.wraparound, a, b)

    @property
    def diameter_hops(self) -> int:
        """Largest hop count between two chips of the slice (count).

        Sum over axes of floor(n_i / 2) on wrapped axes and n_i - 1 on the others; 1 on a switch.
        """
        if self.switched:
            return int(self.n_chips > 1)
        return sum(axis_hops(n, w) for n, w in zip(self.shape, self.wraparound, strict=True))


def grid_hops(shape: tuple[int, ...], wraparound: tuple[bool, ...], a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Hops on a shortest path between positions `a` and `b` of a grid whose axes may wrap (count).

    Sum over axes of d_i = |a_i - b_i|, replaced by min(d_i, n_i - d_i) on wrapped axes.
    Book: Part 2 (All About TPUs), "TPU Networking".

    Raises:
        ValueError: lengths differ or a coordinate lies outside the grid.
    """
    shape, wraparound, a, b = tuple(shape), tuple(wraparound), tuple(a), tuple(b)
    if not len(shape) == len(wraparound) == len(a) == len(b):
        raise ValueError(f"shape={shape!r}: wraparound, a and b must have one entry per axis; allowed: equal lengths")
    for name, coords in (("a", a), ("b", b)):
        if any(not 0 <= c < n for c, n in zip(coords, shape, strict=True)):
            raise ValueError(f"{name}={coords!r}: outside the grid {shape}; allowed: 0 <= {name}[i] < shape[i]")
    hops = 0
    for ai, bi, n, wrap in zip(a, b, shape, wraparound, strict=True):
        d = abs(ai - bi)
        hops += min(d, n - d) if wrap else d
    return hops


def pod(chip: Chip | str) -> Slice:
    """The largest ICI-connected slice of `chip` (a `Chip` or a name): `Slice.of(chip, chip.pod_shape)`.

    Book: Part 2 (All About TPUs), "TPU Networking" (pod sizes).
    """
    chip = get_chip(chip)
    return Slice(chip=chip, shape=chip.pod_shape)


def slice_shapes(chip: Chip | str) -> tuple[tuple[int, ...], ...]:
    """The slice shapes one can rent of `chip`'s generation, smallest first.

    2D torus (v2, v3, v5e, v6e): 1x1, 2x2, then the shorter side doubles in turn (2x4, 4x4, 4x8, ...)
    up to the pod. 3D torus (v4, v5p, 7x): 2x2x1, 2x2x2, then the shortest side doubles in turn
    (2x2x4, 2x4x4, 4x4x4, 4x4x8, ...) while it fits the pod, then the full pod. NVSwitch GPUs:
    1, 2, 4, 8 GPUs of one node, up to the node.
    Source: Google Cloud TPU documentation, "TPU versions" (v5litepod-1 ... -256; v5p and v4
    topologies 2x2x1, 2x2x2, 2x2x4, 2x4x4 and whole 4x4x4 cubes); Part 8 of the book rounds to these.
    """
    chip = get_chip(chip)
    if chip.ici_topology == "nvswitch":
        return tuple((n,) for n in (1, 2, 4, 8) if n <= chip.pod_shape[0])
    pod_sides = sorted(chip.pod_shape)
    shapes: list[tuple[int, ...]] = [(1, 1)] if len(pod_sides) == 2 else [(2, 2, 1)]
    sides = [2] * len(pod_sides)
    while all(s <= p for s, p in zip(sides, pod_sides, strict=True)):
        shapes.append(tuple(sides))
        sides[sides.index(min(sides))] *= 2
        sides.sort()
    if math.prod(shapes[-1]) < math.prod(chip.pod_shape):
        shapes.append(chip.pod_shape)
    return tuple(shapes)


def smallest_slice(chip: Chip | str, n_chips: int) -> Slice:
    """The smallest slice of `slice_shapes(chip)` with at least `n_chips` chips.

    Raises:
        ValueError: n_chips not a count, or more chips than a pod holds.
    """
    chip = get_chip(chip)
    checks.count("n_chips", n_chips)
    for shape in slice_shapes(chip):
        if math.prod(shape) >= n_chips:
            return Slice(chip=chip, shape=shape)
    raise ValueError(
        f"n_chips={n_chips!r}: more than a {chip.name} pod holds; allowed: at most {math.prod(chip.pod_shape)}"
    )


def ring_flags(chip: Chip | str, axis_sizes: tuple[int, ...]) -> tuple[bool, ...]:
    """Which of a mesh's ICI axes close into rings on `chip` (one bool per axis): book_lib's one rule.

    The axes, padded with axes of one chip, taken as a slice of their own when they are one
    (`Slice.of(...).wraparound`: a v5e axis of 16 wraps, one of 4 does not). Otherwise (an axis made of
    pieces of several sides, such as a v5p data axis of 7 x 16 = 112) the smallest slice holding them
    all: every axis is a ring when all its sides wrap (the optical switches of a 3D pod close any
    piece, as the text assumes), else an axis is a ring when it is as long as a wrapped side.
    NVSwitch GPUs: all False (a switch is no ring).
    Book: Part 2 (All About TPUs), "TPU Networking"; Part 5, "Scaling Between Pods".

    Raises:
        ValueError: unknown chip; a size that is not a count; more chips than a pod holds.
    """
    chip = get_chip(chip)
    sizes = tuple(checks.count(f"axis_sizes[{i}]", s) for i, s in enumerate(axis_sizes))
    if math.prod(sizes) > chip.chips_per_pod:
        raise ValueError(
            f"axis_sizes={axis_sizes!r}: {math.prod(sizes)} chips exceed one {chip.name} pod; "
            f"allowed: <= {chip.chips_per_pod} chips"
        )
    pad = len(chip.pod_shape) - len(sizes)
    if pad >= 0:
        try:
            return Slice.of(chip, sizes + (1,) * pad).wraparound[: len(sizes)]
        except ValueError:
            pass  # no slice of its own: the enclosing slice decides
    enclosing = smallest_slice(chip, math.prod(sizes))
    if all(enclosing.wraparound):
        return (True,) * len(sizes)
    ring_sides = {side for side, wraps in zip(enclosing.shape, enclosing.wraparound, strict=True) if wraps}
    return tuple(size in ring_sides for size in sizes)
