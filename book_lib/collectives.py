"""Time of the four collectives (AllGather, ReduceScatter, AllReduce, AllToAll) on ICI, DCN or PCIe.

Conventions, shared by every function here:

* `array_bytes` (V) is the array as one device holds it AFTER an AllGather, or BEFORE a
  ReduceScatter or AllReduce: the whole array when nothing else shards it, a shard of it when
  other mesh axes do (AllGather_X of [B_X, D_Y] gathers B*D/|Y| elements). For an AllToAll it is
  the whole array over the group; each device holds V / N before and after.
* N (n) is the number of devices in the group: `axis_size`, or the product of `axis_sizes`.
* W is `chip.ici_bytes_per_s`, one link in one direction.
* The time is max(bandwidth time, latency time): large arrays are bandwidth-bound, small ones
  pay about `hop_latency_s` (1 us by default, the book's figure for ICI) per hop.

Which axes close into rings: by default the physical answer, `topology.ring_flags` of the axes
(book_lib's one rule: a v5e axis of 16 wraps, one of 4 does not); a group of more chips than a pod
holds is refused. Passing `wraparound` (a bool, or one per axis) is the abstract mode of the text's
idealised examples: rings or lines of any size that fits a pod. For an axis inside a larger mesh,
pass `topology.ring_flags` of the whole mesh for it.

Bandwidth a device can use (B, bytes/s), by `link`:

    link               B
    "ici" on a TPU     per axis of size > 1: 2 W on a ring (both directions
                       carry data), W on a line; axes add
                       (`topology.axis_bytes_per_s`)
    "ici" on NVSwitch  ici_links * W, every NVLink into the switch
    "dcn"              `Chip.dcn_bytes_per_s_per_chip`: each device on
                       another host, where every chip runs its own copy
    "pcie"             pcie_bytes_per_s, through host memory

Bandwidth time, exact for the ring/line model (the book's rule of thumb, "V / bidirectional
bandwidth", drops the (N - 1) / N factor, which only matters for small N):

    op                        bandwidth time
    AllGather, ReduceScatter  (N - 1) / N * V / B
    AllReduce                 2 (N - 1) / N * V / B  (ReduceScatter + AllGather)
    AllToAll, TPU ring        (N^2 - N mod 2) / (8 N^2) * V / W
    AllToAll, TPU line        floor(N^2 / 4) / N^2 * V / W
    AllToAll, switched        (N - 1) / N^2 * V / B  (NVSwitch, DCN, PCIe)

An AllGather's device must receive the N - 1 shards it lacks, V / N bytes each, no faster than B.
An AllToAll sends a V / N^2 piece from every device to every other: on a ring each goes the shorter
way and the busiest link carries N^2 / 8 pieces (a quarter of the AllGather time for large N); on a
line the pieces that cross the middle link; through a switch, the pieces one device sends. The
book's factor 1/2 for "no wraparound" is a ring whose links carry one direction only (Worked
problem 3.10); a line whose links carry both directions does better.

Hops (latency time = hops * hop_latency_s; doubled for an AllReduce):

* TPU ring of n: floor(n / 2) (the farthest chip; the book writes n / 2, or ceil(n / 2) in a
  footnote, which differs only for odd n). TPU line of n: n - 1. Several axes: the sum
  (`topology.axis_hops`).
* Switched links: 1.

Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 2" (AllGather time and latency),
"Case 3" (AllReduce, ReduceScatter), "Our final communication primitive: the AllToAll", and
Worked problem 3.10; Part 2 (All About TPUs), "TPU Networking" (DCN per host).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

from book_lib import checks, topology
from book_lib.hardware import Chip, get_chip

__all__ = [
    "CollectiveNames",
    "NAMES",
    "HOP_LATENCY_S",
    "LINKS",
    "OPS",
    "CollectiveTime",
    "collective_time",
    "all_gather_time",
    "reduce_scatter_time",
    "all_reduce_time",
    "all_to_all_time",
    "all_gather_time_multi",
    "reduce_scatter_time_multi",
    "all_reduce_time_multi",
    "permute_steps",
    "ring_chunks",
    "all_gather_blocks",
    "link_load_fraction",
    "NCCL_BASE_LATENCY_S",
    "NCCL_STEP_LATENCY_S",
    "call_latency_s",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveNames:
    """One collective as each of the book's sources spells it.

    Attributes:
        op: book_lib's name (`collective_time(op, ...)`, `CollectiveCost.op`).
        book: the text's word.
        lax: the `jax.lax` function that issues it.
        primitive: the JAX primitive it traces to (what a jaxpr shows).
        hlo: the compiled HLO op (`-start` and `-done` halves when asynchronous).
        stablehlo: the StableHLO operation `jax.export` serialises.
        nccl: the word in NCCL's kernel names on a GPU trace (`ncclDevKernel_AllGather_RING_LL`).
    """

    op: str
    book: str
    lax: str
    primitive: str
    hlo: str
    stablehlo: str
    nccl: str


# The one table of collective names; `OPS` are the four `collective_time` models. Sources: jax.lax's API
# (https://docs.jax.dev/en/latest/jax.lax.html), XLA's operation semantics
# (https://openxla.org/xla/operation_semantics), StableHLO's spec (https://openxla.org/stablehlo/spec),
# NCCL's kernels (https://github.com/NVIDIA/nccl/blob/master/src/device/generate.py).
NAMES: MappingProxyType[str, CollectiveNames] = MappingProxyType({
    n.op: n
    for n in (
        CollectiveNames(op="all_gather", book="AllGather", lax="all_gather", primitive="all_gather",
                        hlo="all-gather", stablehlo="stablehlo.all_gather", nccl="AllGather"),
        CollectiveNames(op="reduce_scatter", book="ReduceScatter", lax="psum_scatter", primitive="reduce_scatter",
                        hlo="reduce-scatter", stablehlo="stablehlo.reduce_scatter", nccl="ReduceScatter"),
        CollectiveNames(op="all_reduce", book="AllReduce", lax="psum", primitive="psum",
                        hlo="all-reduce", stablehlo="stablehlo.all_reduce", nccl="AllReduce"),
        CollectiveNames(op="all_to_all", book="AllToAll", lax="all_to_all", primitive="all_to_all",
                        hlo="all-to-all", stablehlo="stablehlo.all_to_all", nccl="SendRecv"),
        CollectiveNames(op="permute", book="collective permute", lax="ppermute", primitive="ppermute",
                        hlo="collective-permute", stablehlo="stablehlo.collective_permute", nccl="SendRecv"),
    )
})  # fmt: skip
OPS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")
HOP_LATENCY_S = 1e-6  # per ICI hop; Book: Part 3, "A note on ICI latency"
LINKS = ("ici", "dcn", "pcie")
# NCCL's own cost model of a ring collective in its low-latency protocol (src/graph/tuning.cc, baseLat and
# hwLat for Ring/LL: https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc): a fixed 6.6 us per
# call, plus 0.6 us per ring step over NVLink and 2.7 us per step that crosses the network.
NCCL_BASE_LATENCY_S = 6.6e-6
NCCL_STEP_LATENCY_S = {"ici": 0.6e-6, "dcn": 2.7e-6, "pcie": 1.0e-6}


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveTime:
    """Estimate of one collective, with its parts; times in seconds.

    total_s = max(bandwidth_s, latency_s).

    Attributes:
        op: one of `OPS`.
        link: one of `LINKS`.
        array_bytes: V, as defined in the module docstring (bytes).
        axis_sizes: devices along each mesh axis the collective runs over (counts).
        wraparound: per axis, whether it closed into a ring (ICI on a TPU; False elsewhere).
        bytes_per_s: bandwidth B one device uses (bytes/s); 0 when the group is one device.
        bandwidth_s: time if only bandwidth counted (s).
        hops: hops on the longest path the data takes (count; doubled for an AllReduce).
        latency_s: hops * hop latency (s).
    """

    op: str
    link: str
    array_bytes: float
    axis_sizes: tuple[int, ...]
    wraparound: tuple[bool, ...]
    bytes_per_s: float
    bandwidth_s: float
    hops: int
    latency_s: float

    @property
    def total_s(self) -> float:
        """Estimated time (s): the larger of the bandwidth and latency times."""
        return max(self.bandwidth_s, self.latency_s)

    @property
    def bound(self) -> str:
        """`"bandwidth"` when bandwidth_s >= latency_s, else `"latency"`."""
        return "bandwidth" if self.bandwidth_s >= self.latency_s else "latency"

    @property
    def rule_of_thumb_s(self) -> float:
        """The text's estimate (s): V / B for a gather or a scatter, 2 V / B for an AllReduce.

        That is `bandwidth_s` without the (N - 1) / N of a ring (a device already holds its own
        block), the form the book's worked answers use; the two agree for large N.
        Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 2" (the rule of thumb).

        Raises:
            ValueError: an AllToAll, whose count has no such factor.
        """
        if self.op == "all_to_all":
            raise ValueError("op='all_to_all': no rule of thumb; allowed: all_gather, reduce_scatter, all_reduce")
        n = math.prod(self.axis_sizes)
        return 0.0 if n == 1 else self.bandwidth_s * n / (n - 1)


@dataclass(frozen=True, slots=True)
class _Path:
    """How data moves for one collective: B (bytes/s), hops, and per axis whether it is a ring."""

    bytes_per_s: float
    hops: int
    wraparound: tuple[bool, ...]
    switched: bool


def _axis_sizes(axis_sizes: int | tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """(the argument's name, the sizes as a tuple of ints); a list is refused, not read as two axes."""
    name = "axis_sizes" if isinstance(axis_sizes, tuple) else "axis_size"
    values = axis_sizes if isinstance(axis_sizes, tuple) else (axis_sizes,)
    if not values or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in values):
        raise ValueError(f"{name}={axis_sizes!r}: not a device count; allowed: an int, or a tuple of ints >= 1")
    return name, tuple(values)


def _wraps(wraparound: bool | tuple[bool, ...], n_axes: int) -> tuple[bool, ...]:
    if isinstance(wraparound, bool):
        return (wraparound,) * n_axes
    bools = isinstance(wraparound, tuple) and all(isinstance(w, bool) for w in wraparound)
    if not bools or len(wraparound) != n_axes:
        raise ValueError(f"wraparound={wraparound!r}: not one bool per axis; allowed: None, a bool or {n_axes} bools")
    return wraparound


def _switched_path(chip: Chip, sizes: tuple[int, ...], name: str, link: str) -> _Path:
    """DCN, PCIe, or NVSwitch ICI: every device one hop from every other, at the link's full rate."""
    n = math.prod(sizes)
    if link == "pcie" and n > chip.chips_per_host:
        raise ValueError(
            f"{name}={sizes if name == 'axis_sizes' else n!r}: {n} chips exceed one {chip.name} host over PCIe; "
            f"allowed: <= {chip.chips_per_host}"
        )
    if link == "ici" and n > chip.chips_per_pod:
        raise ValueError(
            f"{name}={sizes if name == 'axis_sizes' else n!r}: {n} GPUs exceed one {chip.name} NVSwitch node; "
            f"allowed: <= {chip.chips_per_pod}"
        )
    rate = {
        "dcn": chip.dcn_bytes_per_s_per_chip,
        "pcie": chip.pcie_bytes_per_s,
        "ici": chip.ici_links * chip.ici_bytes_per_s,
    }[link]
    return _Path(bytes_per_s=rate, hops=1, wraparound=(False,) * len(sizes), switched=True)


def _torus_path(chip: Chip, sizes: tuple[int, ...], name: str, wraparound: bool | tuple[bool, ...] | None) -> _Path:
    """ICI on a TPU: the physical rings of `topology.ring_flags` (wraparound None) or the ones asked for."""
    if math.prod(sizes) > chip.chips_per_pod:
        raise ValueError(
            f"{name}={sizes if name == 'axis_sizes' else sizes[0]!r}: {math.prod(sizes)} chips exceed one "
            f"{chip.name} pod; allowed: <= {chip.chips_per_pod} chips"
        )
    wraps = topology.ring_flags(chip, sizes) if wraparound is None else _wraps(wraparound, len(sizes))
    link = chip.ici_bytes_per_s
    return _Path(
        bytes_per_s=sum(topology.axis_bytes_per_s(s, w, link) for s, w in zip(sizes, wraps, strict=True)),
        hops=sum(topology.axis_hops(s, w) for s, w in zip(sizes, wraps, strict=True)),
        wraparound=wraps,
        switched=False,
    )


def _bandwidth_s(op: str, v: float, sizes: tuple[int, ...], path: _Path, link_bytes_per_s: float) -> float:
    """The bandwidth time of the module docstring's formulas (s)."""
    n = math.prod(sizes)
    gather_s = (n - 1) / n * v / path.bytes_per_s
    if op in ("all_gather", "reduce_scatter"):
        return gather_s
    if op == "all_reduce":
        return 2 * gather_s
    if path.switched:
        return (n - 1) / n**2 * v / path.bytes_per_s
    if path.wraparound[next(i for i, s in enumerate(sizes) if s > 1)]:
        return (n * n - n % 2) / (8 * n * n) * v / link_bytes_per_s
    return (n * n // 4) / (n * n) * v / link_bytes_per_s


def collective_time(
    op: str,
    array_bytes: float,
    axis_sizes: int | tuple[int, ...],
    chip: Chip | str,
    *,
    wraparound: bool | tuple[bool, ...] | None = None,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> CollectiveTime:
    """Bandwidth and latency time of collective `op` over mesh axes of `axis_sizes` devices (s).

    Formulas: see the module docstring (AllGather (N - 1) / N * V / B, and so on).
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 2", "Case 3",
    "Our final communication primitive: the AllToAll".

    Args:
        op: `"all_gather"`, `"reduce_scatter"`, `"all_reduce"` or `"all_to_all"`.
        array_bytes: V (bytes), > 0; see the module docstring for which array that is.
        axis_sizes: devices along each mesh axis (counts, >= 1): an int for one axis, a tuple for several.
        chip: a `Chip` or a name for `hardware.get_chip`.
        wraparound: None for the physical rings (`topology.ring_flags`); a bool for all axes, or one per axis,
            for the text's idealised rings and lines. Only used for `"ici"` on TPUs.
        link: `"ici"`, `"dcn"` or `"pcie"`.
        hop_latency_s: fixed cost of one hop (s), >= 0. The 1 us default is the book's ICI figure;
            pass a larger one for DCN.

    Raises:
        ValueError: unknown op, link or chip; non-positive bytes; a size below 1 or a list of sizes;
            an AllToAll over several axes; a group larger than a pod, a host (PCIe) or a node (NVSwitch).
    """
    op = checks.one_of("op", op, OPS)
    link = checks.one_of("link", link, LINKS)
    v = float(checks.positive("array_bytes", array_bytes))
    checks.non_negative("hop_latency_s", hop_latency_s)
    chip = get_chip(chip)
    name, sizes = _axis_sizes(axis_sizes)
    if op == "all_to_all" and sum(s > 1 for s in sizes) > 1:
        raise ValueError(f"{name}={axis_sizes!r}: AllToAll over several mesh axes is not modelled; allowed: one axis")
    if link != "ici" or chip.ici_topology == "nvswitch":
        path = _switched_path(chip, sizes, name, link)
    else:
        path = _torus_path(chip, sizes, name, wraparound)
    n = math.prod(sizes)
    hops = 0 if n == 1 else path.hops * (2 if op == "all_reduce" else 1)
    return CollectiveTime(
        op=op,
        link=link,
        array_bytes=v,
        axis_sizes=sizes,
        wraparound=path.wraparound,
        bytes_per_s=0.0 if n == 1 else path.bytes_per_s,
        bandwidth_s=0.0 if n == 1 else _bandwidth_s(op, v, sizes, path, chip.ici_bytes_per_s),
        hops=hops,
        latency_s=hops * hop_latency_s,
    )


def permute_steps(op: str, n_devices: int) -> int:
    """ppermutes (collective-permutes in the compiled program) `ring`'s hand-written `op` issues (count).

    n - 1 for all_gather, reduce_scatter and all_to_all; 2 (n - 1) for all_reduce; 0 when n == 1.

    Raises:
        ValueError: unknown op, or a device count below 1.
    """
    checks.one_of("op", op, OPS)
    n = checks.count("n_devices", n_devices)
    return (2 if op == "all_reduce" else 1) * (n - 1)


def ring_chunks(n_devices: int) -> tuple[tuple[int, ...], ...]:
    """Which chunk each device holds at each step of a one-way ring AllGather that passes to the left.

    chunks[s][d] = (d + s) mod n: device d starts with its own chunk and, after each of the
    permute_steps("all_gather", n) = n - 1 sends to device d - 1, holds its right-hand neighbour's,
    so chunks[s + 1][d] = chunks[s][(d + 1) mod n]. n steps; every device sees every chunk once.
    In the collective matmul, step s multiplies chunk chunks[s][d] of A by the matching rows of W.
    Book: Part 10 (Programming TPUs in JAX), "Collective matmul"; Part 3 for the ring itself.

    Raises:
        ValueError: a device count below 1.
    """
    n = checks.count("n_devices", n_devices)
    return tuple(tuple((d + s) % n for d in range(n)) for s in range(n))


def all_gather_blocks(n_devices: int, *, bidirectional: bool = False) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Which blocks each device holds after each step of `ring.all_gather`: blocks[s][d], sorted.

    A block is numbered by the device it starts on. Device d starts with block d; at step s it
    receives from its left-hand neighbour the block that started on device d - s (mod n) and, with
    `bidirectional`, from its right-hand neighbour the one from d + s. One way round takes
    permute_steps("all_gather", n) = n - 1 steps; both ways round floor(n / 2) blocks come from the
    left and the rest from the right, ceil((n - 1) / 2) steps in all (the same n - 1 sends).
    blocks[0] is the start; in blocks[-1] every device holds every block.
    Book: Part 3, "Case 2" (how an AllGather is performed).

    Raises:
        ValueError: a device count below 1, or `bidirectional` not a bool.
    """
    n = checks.count("n_devices", n_devices)
    if not isinstance(bidirectional, bool):
        raise ValueError(f"bidirectional={bidirectional!r}: not a bool; allowed: True or False")
    from_left = n // 2 if bidirectional else n - 1
    from_right = n - 1 - from_left
    held = [{d} for d in range(n)]
    blocks: list[tuple[tuple[int, ...], ...]] = [tuple((d,) for d in range(n))]
    for s in range(1, max(from_left, from_right) + 1):
        for d in range(n):
            if s <= from_left:  # the block that started s devices back
                held[d].add((d - s) % n)
            if s <= from_right:  # and, both ways round, the one s devices ahead
                held[d].add((d + s) % n)
        blocks.append(tuple(tuple(sorted(h)) for h in held))
    return tuple(blocks)


def link_load_fraction(op: str, n_devices: int, *, bidirectional: bool = False) -> float:
    """Bytes the busiest link of a ring carries, as a fraction of V (dimensionless).

    Found by listing pieces: every device's piece for every other device, routed the short way
    round on a bidirectional ring (split in half when both ways are equally long) or always
    clockwise on a one-way ring; each link in each direction sums what crosses it. A gathered
    block crosses a link once however many devices downstream need it, so a link carries the
    largest share of a block routed through it; AllToAll pieces are all different and add.
    V is as in `book_lib.collectives`: the gathered array (AllGather), the unreduced array on one
    device (ReduceScatter, AllReduce), the whole array over the group (AllToAll, V / n^2 per piece).

    Closed forms: AllGather and ReduceScatter (n - 1) / n one way, half that both ways; AllReduce
    twice those; AllToAll (n - 1) / (2 n) one way and (n^2 - n mod 2) / (8 n^2) both ways.
    The enumeration takes about n^3 / 4 steps: meant for rings of up to a few hundred devices.
    Book: Part 3, "Our final communication primitive: the AllToAll" (footnote) and Worked problem 3.10.

    Raises:
        ValueError: unknown op, or a device count below 1.
    """
    checks.one_of("op", op, OPS)
    n = checks.count("n_devices", n_devices)
    if n == 1:
        return 0.0
    # load[(direction, link)]: direction +1 is clockwise, link i joins device i and i + direction.
    load: dict[tuple[int, int], float] = {}
    for src in range(n):
        through: dict[tuple[int, int], float] = {}
        for dst in range(n):
            d = (dst - src) % n
            if d == 0:
                continue
            if not bidirectional or 2 * d < n:
                routes = [(+1, d, 1.0)]
            elif 2 * d > n:
                routes = [(-1, n - d, 1.0)]
            else:
                routes = [(+1, d, 0.5), (-1, d, 0.5)]
            for direction, hops, share in routes:
                for h in range(hops):
                    link = (direction, (src + direction * h) % n)
                    if op == "all_to_all":
                        through[link] = through.get(link, 0.0) + share
                    else:
                        through[link] = max(through.get(link, 0.0), share)
        for link, pieces in through.items():
            load[link] = load.get(link, 0.0) + pieces
    piece = 1 / n**2 if op == "all_to_all" else 1 / n
    return max(load.values()) * piece * (2 if op == "all_reduce" else 1)


def _total_s(
    op: str, array_bytes: float, sizes: int | tuple[int, ...], chip: Chip | str,
    wraparound: bool | tuple[bool, ...] | None, link: str, hop_latency_s: float, *, several: bool,
) -> float:  # fmt: skip
    """`collective_time(...).total_s` for the seven shorthands below; `several` picks the multi-axis form."""
    if several and not isinstance(sizes, tuple):  # collective_time takes both; each shorthand takes one
        raise ValueError(f"axis_sizes={sizes!r}: not a tuple; allowed: a tuple of ints >= 1, one per axis")
    if not several and isinstance(sizes, tuple):
        raise ValueError(f"axis_size={sizes!r}: not a count; allowed: an int >= 1")
    return collective_time(
        op, array_bytes, sizes, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s


def all_gather_time(
    array_bytes: float, axis_size: int, chip: Chip | str, *,
    wraparound: bool | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """AllGather of V = `array_bytes` over one axis of N = `axis_size` devices (s): `collective_time`'s total_s,
    max((N - 1) / N * V / B, hops * hop_latency_s). Book: Part 3, "Case 2"."""
    return _total_s("all_gather", array_bytes, axis_size, chip, wraparound, link, hop_latency_s, several=False)


def reduce_scatter_time(
    array_bytes: float, axis_size: int, chip: Chip | str, *,
    wraparound: bool | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """ReduceScatter of V = `array_bytes` (unreduced, per device) over one axis of N = `axis_size` devices (s),
    as long as the AllGather of V (additions not counted). Book: Part 3, "Case 3"."""
    return _total_s("reduce_scatter", array_bytes, axis_size, chip, wraparound, link, hop_latency_s, several=False)


def all_reduce_time(
    array_bytes: float, axis_size: int, chip: Chip | str, *,
    wraparound: bool | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """AllReduce of V = `array_bytes` (per device) over one axis of N = `axis_size` devices (s): a ReduceScatter
    then an AllGather, max(2 (N - 1) / N * V / B, 2 hops * hop_latency_s). Book: Part 3, "Case 3"."""
    return _total_s("all_reduce", array_bytes, axis_size, chip, wraparound, link, hop_latency_s, several=False)


def all_to_all_time(
    array_bytes: float, axis_size: int, chip: Chip | str, *,
    wraparound: bool | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """AllToAll of V = `array_bytes` (the whole array) over one axis of N = `axis_size` devices (s); the module
    docstring's table gives the ring, line and switched forms. Book: Part 3, "the AllToAll"; Worked problem 3.10."""
    return _total_s("all_to_all", array_bytes, axis_size, chip, wraparound, link, hop_latency_s, several=False)


def all_gather_time_multi(
    array_bytes: float, axis_sizes: tuple[int, ...], chip: Chip | str, *,
    wraparound: bool | tuple[bool, ...] | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """AllGather of V = `array_bytes` over several axes at once, N = prod(`axis_sizes`) devices (s): the axes
    add their bandwidths and hops. Book: Part 3, "What happens when we AllGather over multiple axes?"."""
    return _total_s("all_gather", array_bytes, axis_sizes, chip, wraparound, link, hop_latency_s, several=True)


def reduce_scatter_time_multi(
    array_bytes: float, axis_sizes: tuple[int, ...], chip: Chip | str, *,
    wraparound: bool | tuple[bool, ...] | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """ReduceScatter of V = `array_bytes` over several axes at once (s), as long as `all_gather_time_multi`.
    Book: Part 3, "Case 3"."""
    return _total_s("reduce_scatter", array_bytes, axis_sizes, chip, wraparound, link, hop_latency_s, several=True)


def all_reduce_time_multi(
    array_bytes: float, axis_sizes: tuple[int, ...], chip: Chip | str, *,
    wraparound: bool | tuple[bool, ...] | None = None, link: str = "ici", hop_latency_s: float = HOP_LATENCY_S,
) -> float:  # fmt: skip
    """AllReduce of V = `array_bytes` over several axes at once (s): twice `all_gather_time_multi`'s bandwidth
    time and hops. Book: Part 3, "Case 3"."""
    return _total_s("all_reduce", array_bytes, axis_sizes, chip, wraparound, link, hop_latency_s, several=True)


def call_latency_s(op: str, n_devices: int, chip: Chip | str, *, link: str = "ici", hops: int | None = None) -> float:
    """Fixed time of one call of `op` over n devices, whatever its size (s): what a step pays per call
    on top of the bandwidth time when calls run one after another.

    GPUs (and any switched link: DCN, PCIe): NCCL's ring model, NCCL_BASE_LATENCY_S + steps *
    NCCL_STEP_LATENCY_S[link], with 2 (n - 1) steps for an AllReduce and n - 1 otherwise (8 GPUs on NVLink,
    AllReduce: 6.6 + 14 x 0.6 = 15 us). TPU ICI: the book's hops * HOP_LATENCY_S (`hops` as
    `collective_time` counts them, doubled for an AllReduce). 0 on one device.
    Book: Part 3, "A note on ICI latency"; Part 12 (GPUs), collectives.

    Raises:
        ValueError: unknown op, link or chip; n_devices not a count; TPU ICI without hops.
    """
    op, link = checks.one_of("op", op, OPS), checks.one_of("link", link, LINKS)
    n, chip = checks.count("n_devices", n_devices), get_chip(chip)
    if n == 1:
        return 0.0
    if link == "ici" and chip.ici_topology != "nvswitch":
        if hops is None:
            raise ValueError("hops=None: a TPU ICI call's latency needs its hops; allowed: a count")
        return checks.count("hops", hops) * HOP_LATENCY_S
    steps = (2 if op == "all_reduce" else 1) * (n - 1)
    return NCCL_BASE_LATENCY_S + steps * NCCL_STEP_LATENCY_S[link]
