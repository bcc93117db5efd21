"""Figures of a model's costs: attention's share, memory, training and serving.

The figures of Parts 4 to 8: what a model holds, how a training step's communication
compares with its math across parallelism schemes and batch sizes, and what decode latency buys in
throughput. Each function takes numbers (from `transformer`, `training`, `inference`) and returns
`(fig, ax)`, drawn under `plots.STYLE` in its palette; the chip figures, rooflines and the style
itself are in `plots`, the drawing of a layer in `diagrams`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter, ScalarFormatter

from book_lib.plots import PALETTE, new_axes, styled

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


__all__ = [
    "attention_share",
    "memory_bars",
    "comms_ratio_vs_fsdp_degree",
    "math_over_comms_vs_batch",
    "comms_time_vs_batch",
    "latency_vs_throughput",
    "predicted_vs_published",
]


@styled
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
    fig, ax = new_axes(ax)
    for i, (label, values) in enumerate(shares.items()):
        ax.semilogx(seq_lens, values, label=label, color=PALETTE[i])
    ax.axhline(0.5, color="gray", linestyle=":", lw=1, label=f"half of the {quantity}")
    ax.set_xlabel("context length S (tokens)")
    ax.set_ylabel(f"attention share of layer {quantity} (fraction)")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@styled
def memory_bars(
    labels: Sequence[str], parts: dict[str, Sequence[float]], *, ax: Axes | None = None
) -> tuple[Figure, Axes]:
    """Stacked horizontal bars of memory (bytes) per configuration, one colour per part.

    Book: Part 4 (Transformers), "Gradient checkpointing".

    Args:
        labels: one label per bar.
        parts: part name -> bytes per bar.
    """
    fig, ax = new_axes(ax)
    left = np.zeros(len(labels))
    for i, (name, part) in enumerate(parts.items()):
        values = np.asarray(part, dtype=float)
        ax.barh(labels, values, left=left, label=name, color=PALETTE[i])
        left += values
    ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.set_xlabel("memory (bytes)")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="y", visible=False)
    return fig, ax


@styled
def comms_ratio_vs_fsdp_degree(
    degrees: Sequence[float],
    curves: dict[str, Sequence[float]],
    *,
    points: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """T_comms / T_math against the FSDP degree X of mixed FSDP + tensor parallelism, log x.

    Lines are models evaluated on `degrees`; markers are single meshes. Below the dotted line at 1 the
    step is compute-bound. Book: Part 6, "How to shard LLaMA 3-70B for training".

    Args:
        degrees: FSDP degrees X for the lines (chips).
        curves: label -> ratio per degree (ratio).
        points: label -> (degrees, ratios) drawn as markers.

    Raises:
        ValueError: a curve without one value per degree.
    """
    fig, ax = new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        if len(values) != len(degrees):
            raise ValueError(f"curves[{label!r}]={len(values)} values: not one per degree; allowed: {len(degrees)}")
        ax.semilogx(degrees, values, label=label, color=PALETTE[i])
    for j, (label, (xs, ys)) in enumerate((points or {}).items(), start=len(curves)):
        ax.semilogx(xs, ys, "o", label=label, color=PALETTE[j], ms=7)
    ax.axhline(1.0, color="gray", linestyle=":", lw=1, label="compute-bound below 1")
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("FSDP degree X (chips)")
    ax.set_ylabel("T_comms / T_math (ratio)")
    ax.legend(loc="upper center", fontsize=8)
    return fig, ax


@styled
def latency_vs_throughput(
    curves: dict[str, tuple[Sequence[float], Sequence[float]]],
    batches: Sequence[int],
    *,
    fits: dict[str, Sequence[bool]] | None = None,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Decode step latency (s) against throughput per chip (tokens/s/chip), log-log, one line per setup.

    Each point is one batch size; moving right along a line buys throughput with latency, and the
    lower-right envelope of all lines is the Pareto frontier. Points whose weights and KV caches do
    not fit in HBM are drawn hollow.
    Book: Part 7 (All About Transformer Inference), "Theoretical estimates for LLM latency and throughput".

    Args:
        curves: label -> (tokens/s/chip per batch, step latency in s per batch).
        batches: the batch size of each point (sequences), labelled along the first line.
        fits: label -> whether each point fits in HBM; None when all do.
    """
    fig, ax = new_axes(ax)
    for i, (label, (throughput, latency)) in enumerate(curves.items()):
        x, y = np.asarray(throughput, dtype=float), np.asarray(latency, dtype=float)
        if len(x) != len(batches) or len(y) != len(batches):
            raise ValueError(
                f"curves[{label!r}]={len(x)}, {len(y)} points: not one per batch; allowed: {len(batches)} of each"
            )
        ok = np.asarray(fits[label], dtype=bool) if fits is not None else np.ones(len(x), dtype=bool)
        ax.loglog(x, y, color=PALETTE[i], label=label)
        ax.loglog(x[ok], y[ok], "o", color=PALETTE[i], ms=5)
        ax.loglog(x[~ok], y[~ok], "o", mfc="white", mec=PALETTE[i], ms=5)
        if i == 0:
            for b, xb, yb in zip(batches, x, y, strict=True):
                ax.annotate(f"B={b}", (xb, yb), textcoords="offset points", xytext=(-4, 6), fontsize=7, ha="right")
    if fits is not None and not all(all(v) for v in fits.values()):
        ax.plot([], [], "o", mfc="white", mec="gray", ls="none", label="does not fit in HBM")
    ax.set_xlabel("throughput per chip (tokens/s/chip)")
    ax.set_ylabel("decode step latency (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


def _one_per_batch(arg: str, curves: dict[str, Sequence[float]], batches: Sequence[float]) -> None:
    for label, values in curves.items():
        if len(values) != len(batches):
            raise ValueError(
                f"{arg}[{label!r}]={len(values)} points: not one per batch; allowed: {len(batches)} values"
            )


@styled
def math_over_comms_vs_batch(
    batch_per_chip: Sequence[float],
    ratios: dict[str, Sequence[float]],
    *,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """T_math / T_comms of a training step (ratio) against the batch per chip B / N (tokens), log-log.

    One curve per parallelism scheme; above the dotted line at 1 the scheme is compute-bound (its
    collectives can hide under its matmuls). Book: Part 5, "Mixed FSDP and Tensor Parallelism".

    Args:
        batch_per_chip: x values, tokens per chip.
        ratios: scheme -> T_math / T_comms at each batch.

    Raises:
        ValueError: a curve without one value per batch.
    """
    _one_per_batch("ratios", ratios, batch_per_chip)
    fig, ax = new_axes(ax)
    for i, (label, values) in enumerate(ratios.items()):
        ax.loglog(batch_per_chip, values, label=label, color=PALETTE[i])
    ax.axhline(1.0, color="gray", linestyle=":", lw=1, label="T_math = T_comms")
    ax.set_xlabel("batch per chip B / N (tokens)")
    ax.set_ylabel("T_math / T_comms (ratio)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@styled
def comms_time_vs_batch(
    batch_tokens: Sequence[float],
    t_comms: dict[str, Sequence[float]],
    t_math: Sequence[float],
    *,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Communication time of a training step (s) per scheme against the batch B (tokens), log-log.

    The math time is the black dashed line: a scheme whose curve lies above it is communication-bound
    at that batch. Book: Part 5, "Mixed FSDP and Tensor Parallelism" (the 16x16x16 TPU v5p figure).

    Args:
        batch_tokens: x values, tokens per step.
        t_comms: scheme -> T_comms at each batch (s).
        t_math: T_math at each batch (s), the same for every scheme.

    Raises:
        ValueError: a curve without one value per batch.
    """
    _one_per_batch("t_comms", {**t_comms, "t_math": t_math}, batch_tokens)
    fig, ax = new_axes(ax)
    for i, (label, values) in enumerate(t_comms.items()):
        ax.loglog(batch_tokens, values, label=label, color=PALETTE[i])
    ax.loglog(batch_tokens, t_math, color="black", linestyle="--", label="T_math")
    ax.set_xlabel("batch B (tokens per step)")
    ax.set_ylabel("time per step (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@styled
def predicted_vs_published(
    published_s: Sequence[float],
    predicted: dict[str, Sequence[float]],
    groups: Sequence[str],
    *,
    band: float = 0.3,
    ax: Axes | None = None,
) -> tuple[Figure, Axes]:
    """Predicted against published time for the same work (s), log-log: one marker per run and prediction.

    The diagonal is a perfect prediction; the shaded band is within +-`band` of it. A bound sits on or
    under the diagonal (never slower than measured). Marker shape tells the predictions apart (the first
    filled, the others hollow), colour the groups of runs (training steps, decode steps, ...).
    Book: Part 6 (MFU of published runs); Part 7 (latency).

    Args:
        published_s: the published time of each run (s, > 0).
        predicted: label -> each run's predicted time (s), e.g. {"expected": ..., "roofline (bound)": ...}.
        groups: each run's group, for its colour.
        band: the relative width of the shaded band (ratio, > 0).
    """
    fig, ax = new_axes(ax)
    x = np.asarray(published_s, dtype=float)
    if len(groups) != len(x) or any(len(v) != len(x) for v in predicted.values()):
        raise ValueError(f"groups={len(groups)}, predicted: not one value per run; allowed: {len(x)} of each")
    if not np.all(x > 0) or not band > 0:
        raise ValueError(f"published_s, band={band!r}: not positive; allowed: > 0")
    ys = [np.asarray(v, dtype=float) for v in predicted.values()]
    lo, hi = min(x.min(), *(y.min() for y in ys)) / 2, max(x.max(), *(y.max() for y in ys)) * 2
    line = np.geomspace(lo, hi, 50)
    ax.fill_between(line, line * (1 - band), line * (1 + band), color="0.9", label=f"within {band:.0%}")
    ax.loglog(line, line, color="0.4", lw=1, label="predicted = published")
    names = list(dict.fromkeys(groups))
    for i, (label, y) in enumerate(zip(predicted, ys, strict=True)):
        marker = ("o", "v", "s")[i % 3]
        for j, name in enumerate(names):
            pick = np.array([g == name for g in groups])
            face = PALETTE[j] if i == 0 else "white"
            ax.loglog(x[pick], y[pick], marker, mfc=face, mec=PALETTE[j], ms=6, ls="none",
                      label=f"{name}: {label}")  # fmt: skip
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published time for the work (s)")
    ax.set_ylabel("predicted time (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax
