"""The house style and the figures of chips: rooflines, ridge points, rates, bandwidths, collective times, traces.

Every figure function takes data and returns `(fig, ax)`, drawn under `STYLE`. One colour per chip
everywhere (`chip_style`): the book's chips each have their own (`CHIP_COLORS`), a board of
`hardware.VARIANTS` takes its chip's colour with a dash-dotted line, and any other chip a colour of
the palette picked from its name. TPUs solid, GPUs dashed; lowercase axis labels with units; no
titles (captions live in the notebook). `save` writes byte-identical files. `styled`, `new_axes`
and `PALETTE` are what `model_plots` (the figures of a model's costs, Parts 4 to 8) and `diagrams`
(drawings: a chip, a layer, a schedule) draw with.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import EngFormatter

from book_lib import checks, legible
from book_lib import roofline as _roofline
from book_lib.hardware import CHIPS, VARIANTS, Chip, get_chip
from book_lib.numfmt import fmt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

__all__ = [
    "PALETTE",
    "STYLE",
    "styled",
    "new_axes",
    "CHIP_COLORS",
    "chip_style",
    "roofline",
    "roofline_two_bandwidths",
    "measured_vs_predicted",
    "throughput_vs_batch",
    "chip_rates",
    "bandwidth_bars",
    "ridge_points",
    "save",
    "collective_time_vs_size",
    "op_timeline",
]

# The colours of every figure: matplotlib's ten "tab10" colours, then black (a chip's is `CHIP_COLORS`).
PALETTE = tuple(plt.get_cmap("tab10").colors) + ((0.0, 0.0, 0.0),)  # type: ignore[attr-defined]


def _base_chip(name: str) -> str | None:
    """The chip of `CHIPS` that `name` is or extends with a dash ("h100-pcie" -> "h100"), else None."""
    bases = [base for base in CHIPS if name == base or name.startswith(f"{base}-")]
    return max(bases, key=len) if bases else None


# One colour per chip of `CHIPS`; each board of `VARIANTS` shares its chip's.
CHIP_COLORS: dict[str, tuple[float, float, float]] = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(CHIPS)}
CHIP_COLORS.update({name: CHIP_COLORS[base] for name in VARIANTS if (base := _base_chip(name)) is not None})

# The house style, applied inside every function here (importing this module changes no setting).
STYLE: dict[RcKeyType, Any] = {
    "lines.linewidth": 2,
    "figure.figsize": (7.0, 4.2),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "svg.hashsalt": "book_lib",
}

_P = ParamSpec("_P")
_R = TypeVar("_R")


def styled(plot: Callable[_P, _R]) -> Callable[_P, _R]:
    """`plot` drawing under `STYLE`; the settings it changes are put back when it returns.

    With `legible.CHECK_ENV_VAR` set, the figure drawn is checked (`legible.check`) before it returns.
    Only the keys of `STYLE` are saved and restored (matplotlib's own `rc_context` restores every
    setting, the backend included, which closes the figure a notebook is about to show).
    """

    @functools.wraps(plot)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        saved = {key: mpl.rcParams[key] for key in STYLE}
        mpl.rcParams.update(STYLE)
        try:
            drawn = plot(*args, **kwargs)
            if legible.checking() and isinstance(drawn, tuple) and isinstance(drawn[0], mpl.figure.Figure):
                legible.check(drawn[0])
            return drawn
        finally:
            mpl.rcParams.update(saved)

    return wrapper


INTENSITY_LABEL = "arithmetic intensity (FLOPs/byte)"
_RIDGE_LABEL_SPAN = 1.6  # a three-digit ridge label spans this factor of intensity on the default axes
THROUGHPUT_LABEL = "attainable throughput (FLOPs/s)"


def chip_style(chip: Chip | str) -> dict:
    """Line keyword arguments for `chip`: its colour, solid for TPUs and dashed for GPUs.

    The colour is `CHIP_COLORS[name]`; a chip outside it whose name extends a book chip's with a
    dash (a board built with `dataclasses.replace`, say) takes that chip's colour, and any other
    chip the palette's entry number crc32(name) mod 11, so every `Chip` draws, always in one colour.
    A board that is not one of `CHIPS` (`hardware.VARIANTS`, say) is dash-dotted, to tell it from
    its chip. Book: every figure that compares chips (Parts 1, 2 and 12).

    Raises:
        ValueError: an unknown chip name (the closest names are listed).
    """
    chip = get_chip(chip)
    base = _base_chip(chip.name)
    color = CHIP_COLORS.get(chip.name) or (
        CHIP_COLORS[base] if base is not None else PALETTE[zlib.crc32(chip.name.encode()) % len(PALETTE)]
    )
    linestyle = ("-" if chip.is_tpu else "--") if chip.name in CHIPS else "-."
    return {"color": color, "linestyle": linestyle, "lw": 2}


def new_axes(ax: Axes | None) -> tuple[Figure, Axes]:
    """`(fig, ax)`: a new figure with one axes when `ax` is None, else `ax` and the figure it is on."""
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = cast("Figure", ax.figure)  # a SubFigure if `ax` is on one; the book's plots draw on figures
    return fig, ax


@styled
def roofline(
    chips: Sequence[Chip | str],
    *,
    dtype: str = "bf16",
    intensity_range: tuple[float, float] = (1.0, 1e4),
    points: Sequence[tuple[str, float]] = (),
    ridge_labels: bool = True,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Log-log rooflines of `chips`: min(peak FLOPs/s, intensity x HBM bytes/s) against intensity.

    Each chip's ridge point (critical intensity) is a dotted vertical line labelled with its value;
    each of `points` (label, intensity in FLOPs/byte) is marked on the first chip's roof.

    Book: Part 1 (Rooflines), "Visualizing rooflines"
    """
    dtype = checks.dtype(dtype)
    specs = [get_chip(c, arg="chips") for c in chips]
    fig, ax = new_axes(ax)
    intensities = np.geomspace(*intensity_range, 400)
    for chip in specs:
        peak = chip.peak_ops_per_s(dtype)
        style = chip_style(chip)
        ax.loglog(intensities, np.minimum(peak, intensities * chip.hbm_bytes_per_s), label=chip.name, **style)
        ax.axvline(_roofline.critical_intensity(chip, dtype), color=style["color"], linestyle=":", lw=1)
    if ridge_labels:
        _ridge_labels(ax, specs, dtype)
    if points and specs:
        first = specs[0]
        peak = first.peak_ops_per_s(dtype)
        for label, intensity in points:
            y = min(peak, intensity * first.hbm_bytes_per_s)
            ax.plot([intensity], [y], "o", color="black", ms=5)
            ax.annotate(label, (intensity, y), textcoords="offset points", xytext=(5, -12), fontsize=9)
    ax.set_xlabel(INTENSITY_LABEL)
    ax.set_ylabel(THROUGHPUT_LABEL)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    return fig, ax


def _ridge_labels(ax: Axes, specs: Sequence[Chip], dtype: str) -> None:
    """Each chip's ridge intensity written beside its line, low in the axes; a label that would touch
    the one to its left goes up a row."""
    row_ends: list[float] = []  # per row, the intensity where its last label ends
    for chip in sorted(specs, key=lambda c: _roofline.critical_intensity(c, dtype)):
        ridge = _roofline.critical_intensity(chip, dtype)
        row = next((i for i, end in enumerate(row_ends) if ridge * 1.05 > end), len(row_ends))
        if row == len(row_ends):
            row_ends.append(0.0)
        row_ends[row] = ridge * _RIDGE_LABEL_SPAN
        color = chip_style(chip)["color"]
        ax.text(ridge * 1.05, 0.03 + 0.06 * row, f"{ridge:.0f}", transform=ax.get_xaxis_transform(), fontsize=8,
                color=color)  # fmt: skip


_REGION_COLORS = ("tab:red", "gold", "tab:green")


@styled
def roofline_two_bandwidths(
    chip: Chip | str,
    bandwidths: Sequence[tuple[str, float]],
    *,
    dtype: str = "bf16",
    intensity_range: tuple[float, float] = (0.1, 1e5),
    points: Sequence[tuple[str, float]] = (),
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Log-log rooflines of one chip fed over two links: min(peak FLOPs/s, intensity x bytes/s) for each.

    Each roof has three vertices, so its knee sits exactly at the link's critical intensity
    (`roofline.critical_intensity(chip, dtype, bytes_per_s=...)`), marked by a dotted line with its
    value. The knees split the axis into three shaded regions: bandwidth-bound on both links (red),
    on the slower link only (yellow), compute-bound on both (green). Each of `points` (label,
    FLOPs/byte) is marked on both roofs, filled on the faster and hollow on the slower, joined by a
    thin line: the throughput the faster link buys at that intensity.
    Book: Part 1 (Rooflines), "Visualizing rooflines" (the plot with two bandwidths, BW1 and BW2).

    Args:
        chip: a `Chip` or a name; its peak of `dtype` is the flat roof.
        bandwidths: exactly two (label, bytes/s) pairs, in any order (e.g. HBM and one ICI link).
        intensity_range: the x range (FLOPs/byte), low before high.
        points: (label, intensity in FLOPs/byte) of operations to mark.

    Raises:
        ValueError: not two bandwidths, a non-positive rate or intensity, or an unknown chip or dtype.
    """
    if len(bandwidths) != 2:
        raise ValueError(
            f"bandwidths={bandwidths!r}: {len(bandwidths)} given; allowed: exactly two (label, bytes/s) pairs"
        )
    links = sorted(bandwidths, key=lambda link: -checks.positive(f"bandwidth of {link[0]!r}", link[1]))
    low, high = (checks.positive("intensity_range", x) for x in intensity_range)
    if not low < high:
        raise ValueError(f"intensity_range={intensity_range!r}: not increasing; allowed: (low, high) with low < high")
    chip, dtype = get_chip(chip), checks.dtype(dtype)
    peak, color = chip.peak_ops_per_s(dtype), chip_style(chip)["color"]
    ridges = [_roofline.critical_intensity(chip, dtype, bytes_per_s=bw) for _, bw in links]
    fig, ax = new_axes(ax)
    edges = [low, *(min(max(r, low), high) for r in ridges), high]
    names = ("bandwidth-bound on both", f"bandwidth-bound on {links[1][0]} only", "compute-bound on both")
    for start, stop, name, shade in zip(edges[:-1], edges[1:], names, _REGION_COLORS, strict=True):
        ax.axvspan(start, stop, color=shade, alpha=0.1, lw=0, label=name)
    for (label, bw), ridge, style in zip(links, ridges, ("-", "-."), strict=True):
        xs = np.array([low, min(max(ridge, low), high), high])
        ax.loglog(xs, np.minimum(peak, xs * bw), color=color, linestyle=style, label=f"{label} ({fmt(bw, 'B/s')})")
        ax.axvline(ridge, color=color, linestyle=":", lw=1)
        ax.text(ridge * 1.05, 0.03, fmt(round(ridge)), transform=ax.get_xaxis_transform(), fontsize=8, color=color)
    for label, intensity in points:
        checks.positive(f"intensity of {label!r}", intensity)
        fast, slow = (min(peak, intensity * bw) for _, bw in links)
        ax.plot([intensity, intensity], [slow, fast], color="black", lw=1)
        ax.plot([intensity], [fast], "o", color="black", ms=5)
        ax.plot([intensity], [slow], "o", color="black", mfc="white", ms=5)
        ax.annotate(label, (intensity, slow), textcoords="offset points", xytext=(6, -13), fontsize=9)
    ax.set_xlabel(INTENSITY_LABEL)
    ax.set_ylabel(THROUGHPUT_LABEL)
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@styled
def measured_vs_predicted(
    predicted_s: Sequence[float],
    measured_s: Sequence[float],
    labels: Sequence[str],
    *,
    groups: Sequence[str] | None = None,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Measured against predicted time (s), log-log, with the line measured = predicted.

    Args:
        predicted_s, measured_s: one time per point (s).
        labels: a short label per point, placed clear of the others (`_place_labels`).
        groups: a group name per point (one colour and one legend entry each).
    """
    fig, ax = new_axes(ax)
    predicted = np.asarray(predicted_s, dtype=float)
    measured = np.asarray(measured_s, dtype=float)
    groups = list(groups) if groups is not None else ["measured"] * len(predicted)
    for i, group in enumerate(dict.fromkeys(groups)):
        sel = np.array([g == group for g in groups])
        ax.loglog(predicted[sel], measured[sel], "o", color=PALETTE[i], label=group, ms=6)
    lo = min(predicted.min(), measured.min()) / 1.5
    hi = max(predicted.max(), measured.max()) * 1.5
    ax.loglog([lo, hi], [lo, hi], color="gray", linestyle=":", lw=1, label="measured = predicted")
    ax.set_xlabel("predicted time (s)")
    ax.set_ylabel("measured time (s)")
    ax.legend(loc="upper left", fontsize=8)
    _place_labels(ax, list(predicted), list(measured), labels)
    return fig, ax


# Offsets (points) tried in turn for a point's label: right-above, right-below, left-above, left-below, further.
_LABEL_OFFSETS = ((4, 4), (4, -11), (-4, 4), (-4, -11), (4, 13), (4, -20), (-4, 13), (-4, -20))


def _place_labels(ax: Axes, xs: Sequence[float], ys: Sequence[float], labels: Sequence[str]) -> None:
    """Label each point at the first offset where the label overlaps no other label and not the legend.

    Measured points can land anywhere, so no offset is fixed; a label with no free place is left out
    (its point is still drawn), so that no two labels are ever drawn over each other.
    """
    fig = ax.get_figure()
    fig.canvas.draw()  # type: ignore[union-attr]
    renderer = fig.canvas.get_renderer()  # type: ignore[union-attr]
    legend = ax.get_legend()
    taken = [legend.get_window_extent(renderer)] if legend is not None else []
    for x, y, label in sorted(zip(xs, ys, labels, strict=True)):
        for dx, dy in _LABEL_OFFSETS:
            ha = "left" if dx > 0 else "right"
            text = ax.annotate(label, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=8, ha=ha)
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            text.remove()


@styled
def throughput_vs_batch(
    batch_sizes: Sequence[int],
    curves: dict[str, Sequence[float]],
    *,
    peak_flops_per_s: float,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Attainable throughput (FLOPs/s) against batch size, one curve per label, with the peak.

    Args:
        batch_sizes: x values (tokens).
        curves: label -> throughput per batch size (FLOPs/s).
        peak_flops_per_s: the chip's peak, drawn as a dotted line (FLOPs/s).
    """
    fig, ax = new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        ax.loglog(batch_sizes, values, label=label, color=PALETTE[i])
    ax.axhline(peak_flops_per_s, color="gray", linestyle=":", lw=1, label="peak")
    ax.set_xlabel("batch size B (tokens)")
    ax.set_ylabel(THROUGHPUT_LABEL)
    ax.legend(loc="lower right", fontsize=8)
    return fig, ax


@styled
def chip_rates(chips: Sequence[Chip | str], *, ax: Axes | None = None) -> tuple[Figure, Axes]:
    """Each chip's dense bf16 peak (FLOPs/s) against two bandwidths (bytes/s), log-log.

    Filled marker: HBM bandwidth; hollow marker: one ICI link in one direction (NVLink for GPUs),
    joined by a line in the chip's style. Dotted diagonals mark constant critical intensity
    (FLOPs/s over bytes/s) of 1e2, 1e3 and 1e4 FLOPs/byte. TPUs circles, GPUs squares, any board
    outside `CHIPS` (`hardware.VARIANTS`) diamonds. Book: Part 2 (All About TPUs), Part 12 (GPUs).
    """
    fig, ax = new_axes(ax)
    specs = [get_chip(c, arg="chips") for c in chips]
    for chip in specs:
        style = chip_style(chip)
        marker = ("o" if chip.is_tpu else "s") if chip.name in CHIPS else "D"
        xs = (chip.ici_bytes_per_s, chip.hbm_bytes_per_s)
        ax.loglog(xs, (chip.bf16_flops_per_s,) * 2, lw=1, color=style["color"], linestyle=style["linestyle"])
        ax.loglog(xs[1], chip.bf16_flops_per_s, marker, ms=7, color=style["color"], label=chip.name)
        ax.loglog(xs[0], chip.bf16_flops_per_s, marker, ms=7, mfc="white", color=style["color"])
    x_low, x_high = min(c.ici_bytes_per_s for c in specs) / 2, max(c.hbm_bytes_per_s for c in specs) * 2
    y_low, y_high = min(c.bf16_flops_per_s for c in specs) / 2, max(c.bf16_flops_per_s for c in specs) * 2
    for ridge in (1e2, 1e3, 1e4):
        start, stop = max(x_low, y_low / ridge), min(x_high, y_high / ridge)
        if start < stop:
            line = np.geomspace(start, stop)
            ax.loglog(line, ridge * line, color="gray", linestyle=":", lw=1)
            ax.annotate(f"{fmt(round(ridge))} FLOPs/byte", (stop, ridge * stop), fontsize=8, color="gray", ha="right")
    ax.set_xlabel("bandwidth: HBM filled, one ICI link hollow (bytes/s)")
    ax.set_ylabel("dense bf16 peak (FLOPs/s)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig, ax


@styled
def bandwidth_bars(chips: Sequence[Chip | str], *, ax: Axes | None = None) -> tuple[Figure, Axes]:
    """Grouped bars, log scale: per chip, HBM, one ICI link (one way), PCIe and its share of DCN (bytes/s).

    The DCN bar is the host's egress shared by its chips (`Chip.dcn_bytes_per_s_per_chip`).
    """
    fig, ax = new_axes(ax)
    specs = [get_chip(c, arg="chips") for c in chips]
    levels = {
        "HBM": [c.hbm_bytes_per_s for c in specs],
        "ICI (one link, one way)": [c.ici_bytes_per_s for c in specs],
        "PCIe": [c.pcie_bytes_per_s for c in specs],
        "DCN (per chip)": [c.dcn_bytes_per_s_per_chip for c in specs],
    }
    x = np.arange(len(specs))
    width = 0.8 / len(levels)
    for i, (label, values) in enumerate(levels.items()):
        ax.bar(x + (i - (len(levels) - 1) / 2) * width, values, width, label=label, color=PALETTE[i])
    ax.set_yscale("log")
    ax.set_xticks(x, [c.name for c in specs], rotation=30, ha="right")
    ax.set_ylabel("bandwidth per chip (bytes/s)")
    ax.set_xlabel("chip")
    ax.grid(axis="x", visible=False)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    return fig, ax


@styled
def ridge_points(chips: Sequence[Chip | str], *, dtype: str = "bf16", ax: Axes | None = None) -> tuple[Figure, Axes]:
    """A bar per chip of its ridge point (FLOPs/byte), labelled with its value, top to bottom as given.

    The ridge point is `roofline.critical_intensity(chip, dtype)`: the chip's peak of `dtype`
    (FLOPs/s) over its HBM bandwidth (bytes/s), the arithmetic intensity above which a kernel is
    compute-bound. Bars in each chip's colour (`chip_style`): TPUs plain, GPUs hatched "//", a
    board outside `CHIPS` (`hardware.VARIANTS`) hatched "..". Patches: gid "ridge-<chip name>";
    the value beside it, written by `numfmt.fmt`, "ridge-<chip name>-label".
    Book: Part 1 (Rooflines), "Visualizing rooflines"; Part 11 (Conclusions).

    Raises:
        ValueError: no chip, an unknown chip, or a dtype a chip has no peak for.
    """
    specs, dtype = [get_chip(c, arg="chips") for c in chips], checks.dtype(dtype)
    if not specs:
        raise ValueError(f"chips={chips!r}: nothing to draw; allowed: one chip or more")
    ridges = [_roofline.critical_intensity(chip, dtype) for chip in specs]
    own = ax is None  # a figure of its own is sized to its bars and laid out tight
    fig, ax = plt.subplots(figsize=(7.0, 0.9 + 0.34 * len(specs))) if own else new_axes(ax)
    for row, (chip, ridge) in enumerate(zip(specs, ridges, strict=True)):
        hatch = (None if chip.is_tpu else "//") if chip.name in CHIPS else ".."
        ax.barh(row, ridge, color=chip_style(chip)["color"], hatch=hatch, edgecolor="white", gid=f"ridge-{chip.name}")
        ax.annotate(fmt(ridge), (ridge, row), xytext=(5, 0), textcoords="offset points", va="center", fontsize=10,
                    gid=f"ridge-{chip.name}-label")  # fmt: skip
    ax.set_yticks(range(len(specs)), [chip.name for chip in specs], fontsize=10)
    ax.set_ylim(len(specs) - 0.4, -0.6)
    ax.set_xlim(0, 1.15 * max(ridges))
    ax.set_xlabel(f"ridge point: {dtype} FLOPs/s over HBM bytes/s (FLOPs/byte)")
    ax.grid(axis="y", visible=False)
    if own:
        fig.tight_layout()
    return fig, ax


@styled
def save(fig: Figure, path: str | Path) -> Path:
    """Write `fig` so that a rerun gives identical bytes (no dates, no software tag), then close it."""
    path = Path(path)
    metadata = {".png": {"Software": None}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}
    fig.savefig(path, metadata=metadata.get(path.suffix.lower()), bbox_inches="tight")
    plt.close(fig)
    return path


@styled
def op_timeline(events: Sequence[Any], *, n_named: int = 5, ax: Axes | None = None) -> tuple[Figure, Axes]:
    """A trace as a timeline: one row per device (or thread), one bar per XLA op execution.

    The `n_named` compute ops with the longest total time get a colour and a legend entry each,
    the other compute ops are grey, and every communication op is red: the Trace Viewer's
    "XLA Ops" rows, drawn from `book_lib.profile.OpEvent`s.
    Book: Part 9 (How to Profile TPU Programs), "Trace Viewer".

    Args:
        events: objects with `name`, `category`, `start_s`, `duration_s` (s) and `lane`.
        n_named: compute ops to name in the legend (count >= 0).
    """
    checks.count("n_named", n_named, minimum=0)
    if not events:
        raise ValueError("events=(): nothing to draw; allowed: the events of a profile.capture")
    totals: dict[str, float] = {}
    for e in events:
        if e.category != "communication":
            totals[e.name] = totals.get(e.name, 0.0) + e.duration_s
    colors = [c for i, c in enumerate(PALETTE) if i != 3]  # tab10's red is kept for communication
    named = {n: colors[i % len(colors)] for i, n in enumerate(sorted(totals, key=lambda n: -totals[n])[:n_named])}
    lanes = sorted({e.lane for e in events}, key=lambda lane: (len(lane), lane))
    fig, ax = new_axes(ax)
    for e in events:
        comm = e.category == "communication"
        color = (0.84, 0.15, 0.16) if comm else named.get(e.name, (0.75, 0.75, 0.75))
        ax.broken_barh([(e.start_s, e.duration_s)], (lanes.index(e.lane) - 0.4, 0.8), color=color, lw=0)
    handles = [mpl.patches.Patch(color=c, label=n) for n, c in named.items()]
    if any(e.category == "communication" for e in events):
        handles.append(mpl.patches.Patch(color=(0.84, 0.15, 0.16), label="communication"))
    handles.append(mpl.patches.Patch(color=(0.75, 0.75, 0.75), label="other compute"))
    ax.set_yticks(range(len(lanes)), lanes)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(EngFormatter(unit="s"))
    ax.set_xlabel("time since the first traced op (s)")
    ax.set_ylabel("device or thread")
    ax.grid(axis="y", visible=False)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig, ax


@styled
def collective_time_vs_size(
    array_bytes: Sequence[float],
    curves: dict[str, Sequence[float]],
    *,
    knees: dict[str, float] | None = None,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Time of collectives (s) against the array size V (bytes), log-log, one curve per label.

    Each of `knees` (label -> bytes) is a dotted vertical line in its curve's colour at the size
    where the bandwidth time overtakes the fixed per-hop latency: left of it the collective is
    latency-bound (flat), right of it bandwidth-bound (time proportional to V).
    Book: Part 3 (Sharded Matrices and How to Multiply Them), "A note on ICI latency".

    Args:
        array_bytes: x values, V as `book_lib.collectives` defines it (bytes).
        curves: label -> time per size (s).
        knees: label -> size where the curve turns from flat to rising (bytes).
    """
    fig, ax = new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        ax.loglog(array_bytes, values, label=label, color=PALETTE[i])
        if knees and label in knees:
            ax.axvline(knees[label], color=PALETTE[i], linestyle=":", lw=1)
    ax.set_xlabel("array size V (bytes)")
    ax.set_ylabel("time (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax
