"""Figures of a model's costs: a Transformer layer, attention's share, memory, training and serving.

The figures of Parts 4 to 8: what a layer computes and holds, how a training step's communication
compares with its math across parallelism schemes and batch sizes, and what decode latency buys in
throughput. Each function takes numbers (from `transformer`, `training`, `inference`) and returns
`(fig, ax)`, drawn under `plots.STYLE` in its palette; the chip figures, rooflines and the style
itself are in `plots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter, ScalarFormatter

from book_lib.plots import _PALETTE, _new_axes, _styled

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from book_lib.transformer import TransformerConfig

__all__ = [
    "attention_share",
    "memory_bars",
    "transformer_layer_diagram",
    "comms_ratio_vs_fsdp_degree",
    "math_over_comms_vs_batch",
    "comms_time_vs_batch",
    "latency_vs_throughput",
    "predicted_vs_published",
]


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
    fig, ax = _new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        if len(values) != len(degrees):
            raise ValueError(f"curves[{label!r}]={len(values)} values: not one per degree; allowed: {len(degrees)}")
        ax.semilogx(degrees, values, label=label, color=_PALETTE[i])
    for j, (label, (xs, ys)) in enumerate((points or {}).items(), start=len(curves)):
        ax.semilogx(xs, ys, "o", label=label, color=_PALETTE[j], ms=7)
    ax.axhline(1.0, color="gray", linestyle=":", lw=1, label="compute-bound below 1")
    ax.xaxis.set_major_locator(LogLocator(base=2))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("FSDP degree X (chips)")
    ax.set_ylabel("T_comms / T_math (ratio)")
    ax.legend(loc="upper center", fontsize=8)
    return fig, ax


@_styled
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
    fig, ax = _new_axes(ax)
    for i, (label, (throughput, latency)) in enumerate(curves.items()):
        x, y = np.asarray(throughput, dtype=float), np.asarray(latency, dtype=float)
        if len(x) != len(batches) or len(y) != len(batches):
            raise ValueError(
                f"curves[{label!r}]={len(x)}, {len(y)} points: not one per batch; allowed: {len(batches)} of each"
            )
        ok = np.asarray(fits[label], dtype=bool) if fits is not None else np.ones(len(x), dtype=bool)
        ax.loglog(x, y, color=_PALETTE[i], label=label)
        ax.loglog(x[ok], y[ok], "o", color=_PALETTE[i], ms=5)
        ax.loglog(x[~ok], y[~ok], "o", mfc="white", mec=_PALETTE[i], ms=5)
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


@_styled
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
    fig, ax = _new_axes(ax)
    for i, (label, values) in enumerate(ratios.items()):
        ax.loglog(batch_per_chip, values, label=label, color=_PALETTE[i])
    ax.axhline(1.0, color="gray", linestyle=":", lw=1, label="T_math = T_comms")
    ax.set_xlabel("batch per chip B / N (tokens)")
    ax.set_ylabel("T_math / T_comms (ratio)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


@_styled
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
    fig, ax = _new_axes(ax)
    for i, (label, values) in enumerate(t_comms.items()):
        ax.loglog(batch_tokens, values, label=label, color=_PALETTE[i])
    ax.loglog(batch_tokens, t_math, color="black", linestyle="--", label="T_math")
    ax.set_xlabel("batch B (tokens per step)")
    ax.set_ylabel("time per step (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax


_LAYER_LEVELS = (  # (row names side by side, shape of the activations they produce), top to bottom
    (("norms",), "[B,T,D]"),
    (("W_Q", "W_K", "W_V"), "[B,T,N,H], [B,S,K,H] x 2"),
    (("Q K^T",), "[B,T,S,K,G]"),
    (("softmax",), "[B,T,S,K,G]"),
    (("P V",), "[B,T,N,H]"),
    (("W_O",), "[B,T,D]"),
    (("norms",), "[B,T,D]"),
    (("W_in1 (gate)", "W_in2 (up)", "W_in"), "[B,T,F]"),
    (("activation x up", "activation"), "[B,T,F]"),
    (("W_out (down)",), "[B,T,D]"),
)


def _flow_arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], gid: str) -> None:
    """A one-headed arrow from `start` to `end` (data flowing down the layer)."""
    ax.add_patch(
        mpl.patches.FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=9, color="0.3", lw=1, gid=gid)
    )


@_styled
def transformer_layer_diagram(config: TransformerConfig) -> tuple[Figure, Axes]:
    """One decoder layer of `config`, top to bottom: a box per operation of `config.op_rows`, arrows between.

    Each box shows the operation with its operand shapes in the book's letters (input on the left,
    weights on the right: A[B,T,D] . W_in1[D,F]), its training FLOPs and its weights; the label on
    each arrow is the shape it carries. Two residual adds close the attention and MLP halves. Patches
    carry `gid` "op:<row name>"; arrows "flow" and "residual". An MoE router is not drawn.
    Book: Part 4 (Transformers), Figure 8.
    """
    rows = {("norms" if r.group == "norms" else r.name): r for r in config.op_rows(0) if r.count == config.n_layers}
    fig, ax = plt.subplots(figsize=(6.8, 8.16))  # the column width: its 6.5 pt text stays 9 px
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, len(_LAYER_LEVELS) + 1.6)
    ax.set_axis_off()
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=0.98)
    top = len(_LAYER_LEVELS) + 0.9
    ax.text(5, top + 0.35, "input x: [B,T,D]", ha="center", fontsize=8, gid="layer-input")
    for level, (names, shape) in enumerate(_LAYER_LEVELS):
        y = top - 1 - level
        here = [rows[n] for n in names if n in rows]
        if not here:
            continue
        width = 8.4 / len(here) - 0.2
        for i, row in enumerate(here):
            x = 0.8 + i * (width + 0.2)
            shade = 0.5 if row.weight_matmul else (0.25 if row.group == "dot_product" else 0.08)
            face = (1.0 - 0.35 * shade, 1.0 - 0.25 * shade, 1.0 - 0.1 * shade)
            ax.add_patch(
                mpl.patches.Rectangle((x, y), width, 0.62, facecolor=face, edgecolor="0.25", gid=f"op:{row.name}")
            )
            weights = (
                ", D weights" if row.group == "norms" else (f", {row.params_formula} weights" if row.params else "")
            )
            text = f"${row.operation}$\n{row.flops_formula} train FLOPs{weights}"
            ax.text(x + width / 2, y + 0.31, text, ha="center", va="center", fontsize=6.5 if len(here) > 1 else 7.5)
        _flow_arrow(ax, (5, y + 1.0), (5, y + 0.62), "flow")
        ax.text(5.1, y - 0.2, shape, fontsize=6.5, color="0.3", va="center", gid="shape")
    for start, end, label in ((top + 0.2, top - 6.2, "+ x"), (top - 6.2, top - 10.2, "+ h")):
        style: dict[str, Any] = {"arrowstyle": "-|>", "mutation_scale": 9, "color": "0.5", "lw": 1, "ls": "--"}
        ax.add_patch(mpl.patches.FancyArrowPatch((0.3, start), (0.3, end), gid="residual", **style))
        ax.text(0.05, end - 0.15, label, fontsize=7, color="0.3")
    sizes = f"D={config.d_model}, F={config.d_ff}, N={config.n_heads}, K={config.n_kv_heads}, H={config.head_dim}"
    ax.text(
        5,
        -0.45,
        f"{config.name or 'model'}: {sizes}; weight matmuls dark, attention products mid",
        ha="center",
        fontsize=7,
    )
    return fig, ax


@_styled
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
    fig, ax = _new_axes(ax)
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
            face = _PALETTE[j] if i == 0 else "white"
            ax.loglog(x[pick], y[pick], marker, mfc=face, mec=_PALETTE[j], ms=6, ls="none",
                      label=f"{name}: {label}")  # fmt: skip
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("published time for the work (s)")
    ax.set_ylabel("predicted time (s)")
    ax.legend(loc="upper left", fontsize=8)
    return fig, ax
