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

Bandwidth a device can use (B, bytes/s), by `link`:

* `"ici"` on a TPU: per mesh axis of size > 1, 2 W on an axis with a wraparound (both ring
  directions carry data) and W without (the end chips of a line have one neighbour); axes add.
* `"ici"` on an NVSwitch GPU: ici_links * W, every NVLink into the switch; wraparound is ignored.
* `"dcn"`: dcn_bytes_per_s / chips_per_host. Each of the N devices sits on a different host (or
  slice), and every chip of a host runs its own copy of the collective at the same time (the
  multi-slice data-parallel pattern), so the host's egress is shared by its chips.
* `"pcie"`: pcie_bytes_per_s; the N chips of one host exchange through host memory.

Bandwidth time, exact for the ring/line model (the book's rule of thumb, "V / bidirectional
bandwidth", drops the (N - 1) / N factor, which only matters for small N):

* AllGather, ReduceScatter: (N - 1) / N * V / B. Each device must receive the N - 1 shards it
  lacks, V / N bytes each, and can take them in no faster than B.
* AllReduce: 2 x the above (a ReduceScatter followed by an AllGather).
* AllToAll on a TPU ring (wraparound): (N^2 - N mod 2) / (8 N^2) * V / W. Every device sends a
  V / N^2 piece to each other device over the shorter way round; the busiest link carries
  N^2 / 8 pieces (even N, the opposite piece split both ways), so for large N this is a quarter
  of the AllGather time.
* AllToAll on a TPU line (no wraparound): floor(N^2 / 4) / N^2 * V / W, the pieces that must cross
  the middle link. Again about a quarter of the (line) AllGather. The book's factor 1/2 for
  "no wraparound" is the figure for a ring whose links carry one direction only (Worked problem
  3.10); a line whose links carry both directions does better.
* AllToAll through a switch (NVSwitch, DCN, PCIe): (N - 1) / N^2 * V / B, the pieces one device
  must send, since the switch gives full bisection bandwidth.

Hops (latency time = hops * hop_latency_s; doubled for an AllReduce):

* TPU ring of n: floor(n / 2) (the farthest chip; the book writes n / 2, or ceil(n / 2) in a
  footnote, which differs only for odd n). TPU line of n: n - 1. Several axes: the sum.
* Switched links: 1.

Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 2" (AllGather time and latency),
"Case 3" (AllReduce, ReduceScatter), "Our final communication primitive: the AllToAll", and
Worked problem 3.10; Part 2 (All About TPUs), "TPU Networking" (DCN per host).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from book_lib.hardware import Chip, get_chip

__all__ = [
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
]

HOP_LATENCY_S = 1e-6  # per ICI hop; Book: Part 3, "A note on ICI latency"
LINKS = ("ici", "dcn", "pcie")
OPS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveTime:
    """Estimate of one collective, with its parts; times in seconds.

    total_s = max(bandwidth_s, latency_s).

    Attributes:
        op: one of `OPS`.
        link: one of `LINKS`.
        array_bytes: V, as defined in the module docstring (bytes).
        axis_sizes: devices along each mesh axis the collective runs over (counts).
        bytes_per_s: bandwidth B one device uses (bytes/s); 0 when the group is one device.
        bandwidth_s: time if only bandwidth counted (s).
        hops: hops on the longest path the data takes (count; doubled for an AllReduce).
        latency_s: hops * hop latency (s).
    """

    op: str
    link: str
    array_bytes: float
    axis_sizes: tuple[int, ...]
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


def _as_chip(chip: Chip | str) -> Chip:
    try:
        return get_chip(chip)
    except ValueError as err:
        raise ValueError(f"chip={chip!r}: {str(err).split(': ', 1)[-1]}") from None


def _check_sizes(name: str, sizes: object) -> tuple[int, ...]:
    values = sizes if isinstance(sizes, tuple) else (sizes,)
    if not values or any(not isinstance(s, numbers.Integral) or isinstance(s, bool) or s < 1 for s in values):
        raise ValueError(f"{name}={sizes!r}: not a device count; allowed: ints >= 1")
    return tuple(int(s) for s in values)


def _check_wraps(wraparound: bool | tuple[bool, ...], n_axes: int) -> tuple[bool, ...]:
    if isinstance(wraparound, bool):
        return (wraparound,) * n_axes
    if (
        not isinstance(wraparound, tuple)
        or len(wraparound) != n_axes
        or not all(isinstance(w, bool) for w in wraparound)
    ):
        raise ValueError(f"wraparound={wraparound!r}: not one bool per axis; allowed: a bool or {n_axes} bools")
    return wraparound


def collective_time(
    op: str,
    array_bytes: float,
    axis_sizes: int | tuple[int, ...],
    chip: Chip | str,
    *,
    wraparound: bool | tuple[bool, ...] = True,
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
        axis_sizes: devices along each mesh axis (counts, >= 1); an int for one axis.
        chip: a `Chip` or a name for `hardware.get_chip`.
        wraparound: whether each axis closes into a ring (a bool for all, or one per axis);
            only used for `"ici"` on TPUs. `topology.Slice.wraparound` gives the true values.
        link: `"ici"`, `"dcn"` or `"pcie"`.
        hop_latency_s: fixed cost of one hop (s), >= 0. The 1 us default is the book's ICI figure;
            pass a larger one for DCN.

    Raises:
        ValueError: unknown op, link or chip; non-positive bytes; a size below 1; an AllToAll
            over several axes; a PCIe group larger than a host or an NVSwitch group larger
            than a node.
    """
    if op not in OPS:
        raise ValueError(f"op={op!r}: unknown collective; allowed: {', '.join(OPS)}")
    if (
        isinstance(array_bytes, bool)
        or not isinstance(array_bytes, numbers.Real)
        or not math.isfinite(array_bytes)
        or array_bytes <= 0
    ):
        raise ValueError(f"array_bytes={array_bytes!r}: not a positive finite number; allowed: > 0")
    if isinstance(axis_sizes, list):
        axis_sizes = tuple(axis_sizes)
    name = "axis_sizes" if isinstance(axis_sizes, tuple) else "axis_size"
    sizes = _check_sizes(name, axis_sizes)
    if link not in LINKS:
        raise ValueError(f"link={link!r}: unknown link; allowed: {', '.join(LINKS)}")
    if (
        isinstance(hop_latency_s, bool)
        or not isinstance(hop_latency_s, numbers.Real)
        or not math.isfinite(hop_latency_s)
        or hop_latency_s < 0
    ):
        raise ValueError(f"hop_latency_s={hop_latency_s!r}: not a non-negative finite number; allowed: >= 0")
    chip = _as_chip(chip)
    wraps = _check_wraps(wraparound, len(sizes))
    if op == "all_to_all" and sum(s > 1 for s in sizes) > 1:
        raise ValueError(f"{name}={axis_sizes!r}: AllToAll over several mesh axes is not modelled; allowed: one axis")

    n = math.prod(sizes)
    v = float(array_bytes)
    switched = link != "ici" or chip.ici_topology == "nvswitch"
    if link == "pcie" and n > chip.chips_per_host:
        raise ValueError(
            f"{name}={axis_sizes!r}: {n} chips exceed one {chip.name} host over PCIe; allowed: <= {chip.chips_per_host}"
        )
    if link == "ici" and switched and n > chip.chips_per_pod:
        raise ValueError(
            f"{name}={axis_sizes!r}: {n} GPUs exceed one {chip.name} NVSwitch node; allowed: <= {chip.chips_per_pod}"
        )
    if n == 1:
        return CollectiveTime(
            op=op, link=link, array_bytes=v, axis_sizes=sizes, bytes_per_s=0.0, bandwidth_s=0.0, hops=0, latency_s=0.0
        )

    one_way = chip.ici_bytes_per_s
    if link == "dcn":
        bytes_per_s = chip.dcn_bytes_per_s / chip.chips_per_host
    elif link == "pcie":
        bytes_per_s = chip.pcie_bytes_per_s
    elif switched:
        bytes_per_s = chip.ici_links * one_way
    else:
        bytes_per_s = sum((2 if w else 1) * one_way for s, w in zip(sizes, wraps, strict=True) if s > 1)

    if switched:
        hops = 1
    else:
        hops = sum((s // 2 if w else s - 1) for s, w in zip(sizes, wraps, strict=True) if s > 1)

    gather_s = (n - 1) / n * v / bytes_per_s
    if op in ("all_gather", "reduce_scatter"):
        bandwidth_s = gather_s
    elif op == "all_reduce":
        bandwidth_s, hops = 2 * gather_s, 2 * hops
    elif switched:
        bandwidth_s = (n - 1) / n**2 * v / bytes_per_s
    elif wraps[next(i for i, s in enumerate(sizes) if s > 1)]:
        bandwidth_s = (n * n - n % 2) / (8 * n * n) * v / one_way
    else:
        bandwidth_s = (n * n // 4) / (n * n) * v / one_way
    return CollectiveTime(
        op=op,
        link=link,
        array_bytes=v,
        axis_sizes=sizes,
        bytes_per_s=bytes_per_s,
        bandwidth_s=bandwidth_s,
        hops=hops,
        latency_s=hops * hop_latency_s,
    )


def all_gather_time(
    array_bytes: float,
    axis_size: int,
    chip: Chip | str,
    *,
    wraparound: bool = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to AllGather over one mesh axis of `axis_size` devices; V = `array_bytes` gathered.

    t = max((N - 1) / N * V / B, hops * hop_latency_s), B = 2 W with a wraparound, W without
    (ICI on a TPU; see the module docstring for GPUs, DCN and PCIe).
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 2".

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "all_gather", array_bytes, axis_size, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s


def reduce_scatter_time(
    array_bytes: float,
    axis_size: int,
    chip: Chip | str,
    *,
    wraparound: bool = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to ReduceScatter over one axis; V = `array_bytes` of the unreduced array per device.

    Same time as an AllGather of V: t = max((N - 1) / N * V / B, hops * hop_latency_s); the
    additions are not counted.
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 3".

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "reduce_scatter", array_bytes, axis_size, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s


def all_reduce_time(
    array_bytes: float,
    axis_size: int,
    chip: Chip | str,
    *,
    wraparound: bool = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to AllReduce over one axis; V = `array_bytes` of the unreduced array per device.

    A ReduceScatter then an AllGather: t = max(2 (N - 1) / N * V / B, 2 hops * hop_latency_s).
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 3".

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "all_reduce", array_bytes, axis_size, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s


def all_to_all_time(
    array_bytes: float,
    axis_size: int,
    chip: Chip | str,
    *,
    wraparound: bool = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to AllToAll over one axis; V = `array_bytes` of the whole array (V / N per device).

    TPU ring: (N^2 - N mod 2) / (8 N^2) * V / W; TPU line: floor(N^2 / 4) / N^2 * V / W;
    switched links: (N - 1) / N^2 * V / B; then the max with hops * hop_latency_s.
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Our final communication
    primitive: the AllToAll"; Worked problem 3.10.

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "all_to_all", array_bytes, axis_size, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s


def all_gather_time_multi(
    array_bytes: float,
    axis_sizes: tuple[int, ...],
    chip: Chip | str,
    *,
    wraparound: bool | tuple[bool, ...] = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to AllGather over several mesh axes at once (AllGather_XY); V = gathered bytes.

    t = max((n - 1) / n * V / sum_i B_i, sum_i hops_i * hop_latency_s), n = prod(axis_sizes);
    on ICI each axis brings its own links, so the bandwidths add.
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "What happens when we AllGather
    over multiple axes?"

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "all_gather", array_bytes, axis_sizes, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s


def reduce_scatter_time_multi(
    array_bytes: float,
    axis_sizes: tuple[int, ...],
    chip: Chip | str,
    *,
    wraparound: bool | tuple[bool, ...] = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to ReduceScatter over several mesh axes at once; same time as `all_gather_time_multi`.

    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 3".

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "reduce_scatter",
        array_bytes,
        axis_sizes,
        chip,
        wraparound=wraparound,
        link=link,
        hop_latency_s=hop_latency_s,
    ).total_s


def all_reduce_time_multi(
    array_bytes: float,
    axis_sizes: tuple[int, ...],
    chip: Chip | str,
    *,
    wraparound: bool | tuple[bool, ...] = True,
    link: str = "ici",
    hop_latency_s: float = HOP_LATENCY_S,
) -> float:
    """Seconds to AllReduce over several mesh axes at once: twice `all_gather_time_multi` (both parts).

    Book: Part 3 (Sharded Matrices and How to Multiply Them), "Case 3".

    Raises:
        ValueError: see `collective_time`.
    """
    return collective_time(
        "all_reduce", array_bytes, axis_sizes, chip, wraparound=wraparound, link=link, hop_latency_s=hop_latency_s
    ).total_s
