"""Every figure of the book: functions that take data and return `(fig, ax)`.

One colour per chip everywhere (`CHIP_COLORS`); TPUs solid, GPUs dashed; lowercase axis labels
with units; no titles (captions live in the notebook). `save` writes byte-identical files.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import EngFormatter

from book_lib import checks
from book_lib import roofline as _roofline
from book_lib.hardware import CHIPS, Chip

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

__all__ = [
    "CHIP_COLORS",
    "chip_style",
    "roofline",
    "measured_vs_predicted",
    "throughput_vs_batch",
    "attention_share",
    "memory_bars",
    "systolic_snapshots",
    "chip_rates",
    "bandwidth_bars",
    "save",
    "collective_time_vs_size",
    "STYLE",
]

_PALETTE = tuple(plt.get_cmap("tab10").colors) + ((0.0, 0.0, 0.0),)  # type: ignore[attr-defined]
CHIP_COLORS: dict[str, tuple[float, float, float]] = {name: _PALETTE[i % len(_PALETTE)] for i, name in enumerate(CHIPS)}

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


def _styled(plot: Callable[_P, _R]) -> Callable[_P, _R]:
    """`plot` drawing under `STYLE`; the settings it changes are put back when it returns.

    Only the keys of `STYLE` are saved and restored (matplotlib's own `rc_context` restores every
    setting, the backend included, which closes the figure a notebook is about to show).
    """

    @functools.wraps(plot)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        saved = {key: mpl.rcParams[key] for key in STYLE}
        mpl.rcParams.update(STYLE)
        try:
            return plot(*args, **kwargs)
        finally:
            mpl.rcParams.update(saved)

    return wrapper


INTENSITY_LABEL = "arithmetic intensity (FLOPs/byte)"
THROUGHPUT_LABEL = "attainable throughput (FLOPs/s)"


def chip_style(chip: Chip | str) -> dict:
    """Line keyword arguments for `chip`: its colour, solid for TPUs and dashed for GPUs."""
    chip = checks.chip(chip)
    return {"color": CHIP_COLORS[chip.name], "linestyle": "-" if chip.is_tpu else "--", "lw": 2}


def _new_axes(ax: Axes | None) -> tuple[Figure, Axes]:
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = cast("Figure", ax.figure)  # a SubFigure if `ax` is on one; the book's plots draw on figures
    return fig, ax


@_styled
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
    specs = [checks.chip(c, "chips") for c in chips]
    fig, ax = _new_axes(ax)
    intensities = np.geomspace(*intensity_range, 400)
    for chip in specs:
        peak = chip.peak_ops_per_s(dtype)
        style = chip_style(chip)
        ax.loglog(intensities, np.minimum(peak, intensities * chip.hbm_bytes_per_s), label=chip.name, **style)
        ridge = _roofline.critical_intensity(chip, dtype)
        ax.axvline(ridge, color=style["color"], linestyle=":", lw=1)
        if ridge_labels:
            ax.text(
                ridge * 1.05, 0.03, f"{ridge:.0f}", transform=ax.get_xaxis_transform(), fontsize=8, color=style["color"]
            )
    if points and specs:
        first = specs[0]
        peak = first.peak_ops_per_s(dtype)
        for label, intensity in points:
            y = min(peak, intensity * first.hbm_bytes_per_s)
            ax.plot([intensity], [y], "o", color="black", ms=5)
            ax.annotate(label, (intensity, y), textcoords="offset points", xytext=(5, -12), fontsize=9)
    ax.set_xlabel(INTENSITY_LABEL)
    ax.set_ylabel(THROUGHPUT_LABEL)
    ax.legend(loc="lower right", fontsize=8, ncol=2)
    return fig, ax


@_styled
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
        labels: a short label per point.
        groups: a group name per point (one colour and one legend entry each).
    """
    fig, ax = _new_axes(ax)
    predicted = np.asarray(predicted_s, dtype=float)
    measured = np.asarray(measured_s, dtype=float)
    groups = list(groups) if groups is not None else ["measured"] * len(predicted)
    for i, group in enumerate(dict.fromkeys(groups)):
        sel = np.array([g == group for g in groups])
        ax.loglog(predicted[sel], measured[sel], "o", color=_PALETTE[i], label=group, ms=6)
    for x, y, label in zip(predicted, measured, labels, strict=True):
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    lo = min(predicted.min(), measured.min()) / 1.5
    hi = max(predicted.max(), measured.max()) * 1.5
    ax.loglog([lo, hi], [lo, hi], color="gray", linestyle=":", lw=1, label="measured = predicted")
    ax.set_xlabel("predicted time (s)")
    ax.set_ylabel("measured time (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@_styled
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
    fig, ax = _new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        ax.loglog(batch_sizes, values, label=label, color=_PALETTE[i])
    ax.axhline(peak_flops_per_s, color="gray", linestyle=":", lw=1, label="peak")
    ax.set_xlabel("batch size B (tokens)")
    ax.set_ylabel(THROUGHPUT_LABEL)
    ax.legend(loc="lower right", fontsize=8)
    return fig, ax


@_styled
def attention_share(
    seq_lens: Sequence[float],
    shares: dict[str, Sequence[float]],
    *,
    quantity: str = "FLOPs",
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Fraction of a layer's FLOPs (or time) spent in dot-product attention against context length, log x.

    Book: Part 4 (Transformers), "Fractional cost of attention with context length".

    Args:
        seq_lens: context lengths (tokens).
        shares: label -> attention cost / (attention + weight-matmul cost) per length (fraction).
        quantity: what the cost counts, for the y label and the 1/2 line ("FLOPs" or "time").
    """
    fig, ax = _new_axes(ax)
    for i, (label, values) in enumerate(shares.items()):
        ax.semilogx(seq_lens, values, label=label, color=_PALETTE[i])
    ax.axhline(0.5, color="gray", linestyle=":", lw=1, label=f"half of the {quantity}")
    ax.set_xlabel("context length S (tokens)")
    ax.set_ylabel(f"attention share of layer {quantity} (fraction)")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@_styled
def memory_bars(
    labels: Sequence[str], parts: dict[str, Sequence[float]], *, ax: Axes | None = None
) -> tuple[Figure, Axes]:
    """Stacked horizontal bars of memory (bytes) per configuration, one colour per part.

    Book: Part 4 (Transformers), "Gradient checkpointing".

    Args:
        labels: one label per bar.
        parts: part name -> bytes per bar.
    """
    fig, ax = _new_axes(ax)
    left = np.zeros(len(labels))
    for i, (name, part) in enumerate(parts.items()):
        values = np.asarray(part, dtype=float)
        ax.barh(labels, values, left=left, label=name, color=_PALETTE[i])
        left += values
    ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set_xlabel("memory (bytes)")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="y", visible=False)
    return fig, ax


@_styled
def systolic_snapshots(active: np.ndarray, cycles_to_show: Sequence[int]) -> tuple[Figure, Axes]:
    """One panel per cycle: which elements of a systolic grid do a multiply-add (dark) at that cycle.

    Args:
        active: bool[T, K, N] from `book_lib.systolic.simulate`.
        cycles_to_show: the cycles to draw.
    """
    fig, axes = plt.subplots(1, len(cycles_to_show), figsize=(2.0 * len(cycles_to_show), 2.4), squeeze=False)
    for ax, t in zip(axes[0], cycles_to_show, strict=True):
        ax.imshow(active[t], cmap="Greys", vmin=0, vmax=1.6)
        ax.set_xlabel(f"cycle {t}: column")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    axes[0][0].set_ylabel("row of the grid")
    return fig, axes[0][0]


@_styled
def chip_rates(chips: Sequence[Chip | str], *, ax: Axes | None = None) -> tuple[Figure, Axes]:
    """Each chip's dense bf16 peak (FLOPs/s) against two bandwidths (bytes/s), log-log.

    Filled marker: HBM bandwidth; hollow marker: one ICI link in one direction (NVLink for GPUs),
    joined by a line in the chip's style. Dotted diagonals mark constant critical intensity
    (FLOPs/s over bytes/s) of 1e2, 1e3 and 1e4 FLOPs/byte. TPUs circles, GPUs squares.
    """
    fig, ax = _new_axes(ax)
    specs = [checks.chip(c, "chips") for c in chips]
    for chip in specs:
        style = chip_style(chip)
        marker = "o" if chip.is_tpu else "s"
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
            ax.annotate(f"{ridge:,.0f} FLOPs/byte", (stop, ridge * stop), fontsize=8, color="gray", ha="right")
    ax.set_xlabel("bandwidth: HBM filled, one ICI link hollow (bytes/s)")
    ax.set_ylabel("dense bf16 peak (FLOPs/s)")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig, ax


@_styled
def bandwidth_bars(chips: Sequence[Chip | str], *, ax: Axes | None = None) -> tuple[Figure, Axes]:
    """Grouped bars, log scale: per chip, HBM, one ICI link (one way), PCIe and its share of DCN (bytes/s).

    The DCN bar is the host's egress shared by its chips (`Chip.dcn_bytes_per_s_per_chip`).
    """
    fig, ax = _new_axes(ax)
    specs = [checks.chip(c, "chips") for c in chips]
    levels = {
        "HBM": [c.hbm_bytes_per_s for c in specs],
        "ICI (one link, one way)": [c.ici_bytes_per_s for c in specs],
        "PCIe": [c.pcie_bytes_per_s for c in specs],
        "DCN (per chip)": [c.dcn_bytes_per_s_per_chip for c in specs],
    }
    x = np.arange(len(specs))
    width = 0.8 / len(levels)
    for i, (label, values) in enumerate(levels.items()):
        ax.bar(x + (i - (len(levels) - 1) / 2) * width, values, width, label=label, color=_PALETTE[i])
    ax.set_yscale("log")
    ax.set_xticks(x, [c.name for c in specs], rotation=30, ha="right")
    ax.set_ylabel("bandwidth per chip (bytes/s)")
    ax.set_xlabel("chip")
    ax.grid(axis="x", visible=False)
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    return fig, ax


@_styled
def save(fig: Figure, path: str | Path) -> Path:
    """Write `fig` so that a rerun gives identical bytes (no dates, no software tag), then close it."""
    path = Path(path)
    metadata = {".png": {"Software": None}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}
    fig.savefig(path, metadata=metadata.get(path.suffix.lower()), bbox_inches="tight")
    plt.close(fig)
    return path


@_styled
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
    fig, ax = _new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        ax.loglog(array_bytes, values, label=label, color=_PALETTE[i])
        if knees and label in knees:
            ax.axvline(knees[label], color=_PALETTE[i], linestyle=":", lw=1)
    ax.set_xlabel("array size V (bytes)")
    ax.set_ylabel("time (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax
