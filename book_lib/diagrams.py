"""Diagrams: what a chip is made of, what a Transformer layer computes, how a program moves data.

Every picture of the book that is a drawing rather than a plot of numbers: a TPU chip's block
diagram (Part 2), a systolic array's wave of work (Part 2), a sharded array's blocks on a mesh and a
ring AllGather step by step (Part 3), one decoder layer's operations (Part 4), pipeline schedules
and their bubbles (Part 5) and the collective matmul's ring (Part 10). Each function reads its
figures from the pure layer (`hardware`, `notation`, `collectives`, `bounds`,
`transformer.op_rows`) and returns `(fig, ax)`, or `(fig, axes)` for several panels, drawn under
`plots.STYLE` (importing this module changes no matplotlib setting). Every patch carries a `gid`
that names what it stands for, so a test can count them; captions live in the notebook.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

from book_lib import checks, collectives
from book_lib.bounds import PipelineSchedule
from book_lib.hardware import VMEM_OVER_HBM_BANDWIDTH_RATIO, Chip, get_chip
from book_lib.notation import ShardedArray, parse, subscript
from book_lib.numfmt import fmt
from book_lib.plots import PALETTE, styled

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from book_lib.transformer import TransformerConfig

__all__ = [
    "MAX_RING",
    "MAX_GATHER_RING",
    "MAX_PANELS",
    "tpu_chip",
    "systolic_snapshots",
    "sharded_blocks",
    "ring_all_gather",
    "transformer_layer",
    "pipeline_schedules",
    "collective_matmul_ring",
]

MAX_RING = 8  # the most devices a ring diagram draws legibly on the page's width
_BOX_W, _BOX_H, _GAP = 0.62, 0.62, 0.38  # a step's column and the gap its arrows cross (data units)
_FONT = 10.0


def _chunk_box(ax: Axes, step: int, row: float, chunk: int, gid: str) -> None:
    """One device's chunk at one step: a box in the chunk's colour, its number inside."""
    color = PALETTE[chunk % len(PALETTE)]
    x = step * (_BOX_W + _GAP)
    ax.add_patch(
        mpl.patches.FancyBboxPatch(
            (x, row - _BOX_H / 2), _BOX_W, _BOX_H, boxstyle="round,pad=0.02",
            facecolor=(*color, 0.3), edgecolor=color, lw=1.5, gid=gid,
        )
    )  # fmt: skip
    ax.text(x + _BOX_W / 2, row, f"chunk {chunk}", ha="center", va="center", fontsize=_FONT, gid=f"{gid}-label")


def _hop(ax: Axes, step: int, rows: tuple[float, float], wraps: bool, gid: str) -> None:
    """The ppermute after `step`: from a device's box to its left-hand neighbour's next box."""
    start = (step * (_BOX_W + _GAP) + _BOX_W + 0.03, rows[0])
    end = ((step + 1) * (_BOX_W + _GAP) - 0.03, rows[1])
    ax.add_patch(
        mpl.patches.FancyArrowPatch(
            start, end, arrowstyle="-|>", mutation_scale=11, lw=1.2, color="0.45" if wraps else "0.15",
            linestyle="--" if wraps else "-", gid=gid,
        )
    )  # fmt: skip


@styled
def collective_matmul_ring(n_devices: int) -> tuple[Figure, Axes]:
    """The ring schedule of the AllGather collective matmul: which chunk of A each device multiplies.

    One column per step s, one row per device d of the ring axis: the box holds chunk
    collectives.ring_chunks(n)[s][d] = (d + s) mod n, the chunk device d multiplies at step s by
    the matching rows of its block of W. Between columns an arrow per device shows the ppermute
    that hands the chunk to the device above (device d - 1; the dashed one wraps round from
    device 0 to device n - 1): n steps, collectives.permute_steps("all_gather", n) = n - 1 sends.
    Patches: gid "chunk-s-d" for boxes, "hop-s-d" for the arrow leaving device d after step s.
    Book: Part 10 (Programming TPUs in JAX), "Collective matmul".

    Raises:
        ValueError: a device count below 1 or above `MAX_RING`.
    """
    n = checks.count("n_devices", n_devices)
    if n > MAX_RING:
        raise ValueError(f"n_devices={n_devices!r}: too many rows to read; allowed: 1 to {MAX_RING}")
    chunks = collectives.ring_chunks(n)
    assert len(chunks) - 1 == collectives.permute_steps("all_gather", n), "one send between steps"
    fig, ax = plt.subplots(figsize=(1.4 + 1.1 * n, 0.5 + 0.6 * n))
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.99)
    row = {d: float(n - 1 - d) for d in range(n)}  # device 0 at the top
    for s, held in enumerate(chunks):
        ax.text(s * (_BOX_W + _GAP) + _BOX_W / 2, n - 0.4, f"step {s}", ha="center", fontsize=_FONT)
        for d, chunk in enumerate(held):
            _chunk_box(ax, s, row[d], chunk, f"chunk-{s}-{d}")
            if s < n - 1:
                _hop(ax, s, (row[d], row[(d - 1) % n]), d == 0, f"hop-{s}-{d}")
    for d in range(n):
        ax.text(-0.12, row[d], f"device {d}", ha="right", va="center", fontsize=_FONT)
    ax.set_xlim(-1.15, n * (_BOX_W + _GAP) - _GAP + 0.05)
    ax.set_ylim(-0.4, n - 0.15)
    ax.set_axis_off()
    return fig, ax


@styled
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


def _box(ax: Axes, xy: tuple[float, float], w: float, h: float, text: str, gid: str, shade: float) -> None:
    """A labelled rectangle of the chip diagram; `gid` names the unit so a test can find it."""
    face = (1.0 - 0.35 * shade, 1.0 - 0.25 * shade, 1.0 - 0.1 * shade)
    rect = mpl.patches.Rectangle(xy, w, h, facecolor=face, edgecolor="0.25", lw=1.2, gid=gid)
    ax.add_patch(rect)
    ax.text(xy[0] + w / 2, xy[1] + h / 2, text, ha="center", va="center", fontsize=7, gid=f"{gid}-label")


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], text: str, gid: str) -> None:
    """A two-headed arrow of the chip diagram with its label beside its middle."""
    arrow = mpl.patches.FancyArrowPatch(start, end, arrowstyle="<|-|>", mutation_scale=9, color="0.2", lw=1.2, gid=gid)
    ax.add_patch(arrow)
    if text:
        mid = ((start[0] + end[0]) / 2 + 0.12, (start[1] + end[1]) / 2)
        ax.text(*mid, text, fontsize=6.5, va="center", ha="left", color="0.15", gid=f"{gid}-label")


def _core(ax: Axes, chip: Chip, x: float, w: float, core: int) -> None:
    """One TensorCore between x and x + w: scalar unit, VREGs, VPU, MXUs and VMEM, with their data paths."""
    sublanes, lanes = chip.vpu_shape or (8, 128)
    vregs = f"{chip.vregs_per_core} VREGs" if chip.vregs_per_core else "VREGs"
    vmem = f"VMEM {chip.vmem_bytes / 2**20:.0f} MiB" if chip.vmem_bytes else "VMEM (size unpublished)"
    _box(ax, (x, 2.5), w, 4.2, "", "tensorcore", 0.15)
    ax.text(x + 0.1, 6.5, f"TensorCore {core}", fontsize=7.5, weight="bold", va="center")
    _box(ax, (x + 0.15, 5.45), 0.42 * w, 0.7, "scalar unit\n+ SMEM", "scalar", 0.4)
    _box(ax, (x + 0.15, 4.4), 0.42 * w, 0.7, f"{vregs}\n{sublanes} x {lanes} words", "vregs", 0.5)
    _box(ax, (x + 0.15, 3.45), 0.42 * w, 0.65, f"VPU\n{sublanes} x {lanes} lanes", "vpu", 0.6)
    _box(ax, (x + 0.15, 2.65), w - 0.3, 0.4, vmem, "vmem", 0.3)
    n = chip.mxus_per_core or 0
    cols = math.ceil(math.sqrt(n)) if n else 1
    rows = math.ceil(n / cols) if n else 1
    side = min((0.4 * w - 0.1 * cols) / cols, (2.0 - 0.1 * rows) / rows, 0.9)
    for i in range(n):
        corner = (x + 0.55 * w + (i % cols) * (side + 0.1), 6.15 - (i // cols + 1) * (side + 0.1))
        _box(ax, corner, side, side, "MXU", "mxu", 0.8)
    ax.text(
        x + 0.75 * w,
        6.1 - rows * (side + 0.1),
        f"{n} x {chip.mxu_size} x {chip.mxu_size}",
        fontsize=6.5,
        ha="center",
        va="top",
    )
    _arrow(ax, (x + 0.36 * w, 5.45), (x + 0.36 * w, 5.1), "", "control")
    _arrow(ax, (x + 0.36 * w, 4.4), (x + 0.36 * w, 4.1), "", "vregs-vpu")
    _arrow(ax, (x + 0.2 * w, 3.05), (x + 0.2 * w, 3.45), "", "vmem-vpu")
    fast = VMEM_OVER_HBM_BANDWIDTH_RATIO * chip.hbm_bytes_per_s / chip.cores_per_chip
    label = f"~{_bandwidth(fast)}" if core == 0 else ""
    _arrow(ax, (x + 0.62 * w, 3.05), (x + 0.62 * w, 5.95 - rows * (side + 0.1) - 0.35), label, "vmem-mxu")


def _bandwidth(bytes_per_s: float) -> str:
    """A bandwidth in two significant figures by the house rule ("810 GB/s")."""
    return fmt(bytes_per_s, "B/s", digits=2)


@styled
def tpu_chip(chip: Chip | str) -> tuple[Figure, Axes]:
    """A block diagram of one TPU chip: TensorCores (scalar unit, VREGs, VPU, MXUs, VMEM), HBM and links.

    Arrows carry per-chip bandwidths from `book_lib.hardware` (bytes/s, one direction): HBM to VMEM by
    DMA, VMEM to the MXUs at `VMEM_OVER_HBM_BANDWIDTH_RATIO` times HBM's rate (the text's estimate,
    split over the cores), PCIe to the host and one arrow per ICI link. Patches carry a `gid` naming
    their unit ("mxu", "tensorcore", "ici", ...). Book: Part 2 (All About TPUs), Figure 3 and Appendix C.

    Raises:
        ValueError: an unknown chip, or a GPU (no TensorCore figures).
    """
    chip = get_chip(chip)
    if not chip.is_tpu:
        raise ValueError(f"chip={chip.name!r}: a GPU has no TensorCore figures; allowed: a TPU")
    fig, ax = plt.subplots(figsize=(6.8, 4.76))  # the column width: its 6.5 pt text stays 9 px
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 8.4)
    ax.set_axis_off()
    _box(ax, (1.5, 0.6), 9.0, 6.4, "", "chip", 0.05)
    ax.text(1.6, 6.8, f"{chip.name} chip", fontsize=8, weight="bold", va="center")
    _box(ax, (2.0, 0.9), 8.0, 0.8, f"HBM {chip.hbm_bytes / 2**30:.0f} GiB", "hbm", 0.45)
    w = (8.0 - 0.3 * (chip.cores_per_chip - 1)) / chip.cores_per_chip
    for core in range(chip.cores_per_chip):
        x = 2.0 + core * (w + 0.3)
        _core(ax, chip, x, w, core)
        label = f"DMA {_bandwidth(chip.hbm_bytes_per_s)}" if core == 0 else ""
        _arrow(ax, (x + 0.3 * w, 1.7), (x + 0.3 * w, 2.65), label, "hbm-vmem")
    _box(ax, (4.5, 7.55), 3.0, 0.65, "CPU host", "host", 0.2)
    _arrow(ax, (6.0, 7.0), (6.0, 7.55), f"PCIe {_bandwidth(chip.pcie_bytes_per_s)}", "pcie")
    per_side = math.ceil(chip.ici_links / 2)
    for i in range(chip.ici_links):
        left = i % 2 == 0
        y = 1.3 + (i // 2) * 5.0 / max(1, per_side - 1)
        start, end = ((1.5, y), (0.4, y)) if left else ((10.5, y), (11.6, y))
        _arrow(ax, start, end, "", "ici")
    ax.text(0.05, 0.25, f"ICI: {chip.ici_links} links x {_bandwidth(chip.ici_bytes_per_s)} each way", fontsize=7)
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


@styled
def transformer_layer(config: TransformerConfig) -> tuple[Figure, Axes]:
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


MAX_PANELS = 4  # the most panels one of the figures below stacks legibly in the column


def _math_name(array: ShardedArray) -> str:
    """`array` in TeX, for a label: A[I_XY, J] -> $A[I_{XY}, J]$."""
    dims = [d + (f"_{{{subscript(a).strip('{}')}}}" if a else "") for d, a in zip(array.dims, array.axes, strict=True)]
    tail = rf"\{{U_{{{subscript(array.unreduced).strip('{}')}}}\}}" if array.unreduced else ""
    return f"${array.name}[{', '.join(dims)}]{tail}$"


def _holders(coords: Sequence[tuple[int, ...]]) -> str:
    """Mesh coordinates as a label, two to a line: "(0, 0)  (0, 1)"."""
    names = ["(" + ", ".join(map(str, c)) + ")" for c in coords]
    return "\n".join("  ".join(names[i : i + 2]) for i in range(0, len(names), 2))


@styled
def sharded_blocks(arrays: Sequence[ShardedArray | str], mesh: Mapping[str, int]) -> tuple[Figure, list[Axes]]:
    """One panel per 2-D array: its blocks on `mesh`, each labelled with the devices that hold it.

    Rows (the first dimension) run top to bottom, columns (the second) left to right. Each block of
    `ShardedArray.owners(mesh)` is a box in a colour of its own, labelled with the mesh coordinates
    (one entry per axis of `mesh`, in its order) of every device that holds it: a replicated block
    names several. Patches: gid "block-a-i-j" for block (i, j) of the a-th array, its label
    "block-a-i-j-label". Book: Part 3 (Sharded Matrices), "A unified notation for sharding".

    Args:
        arrays: arrays in the book's notation ("A[I_X, J_Y]") or `ShardedArray`s, 2-D each.
        mesh: axis name -> device count, {"X": 2, "Y": 2}.

    Raises:
        ValueError: no array or more than `MAX_PANELS`, one that is not 2-D, or a mesh that lacks an
            axis one of them uses.
    """
    specs = [parse(a) if isinstance(a, str) else a for a in arrays]
    if not 1 <= len(specs) <= MAX_PANELS:
        raise ValueError(f"arrays={arrays!r}: {len(specs)} arrays; allowed: 1 to {MAX_PANELS}")
    for array in specs:
        if len(array.dims) != 2:
            raise ValueError(f"arrays={arrays!r}: {array} has {len(array.dims)} dimensions; allowed: 2 (rows, columns)")
    fig, axes = plt.subplots(1, len(specs), figsize=(2.5 * len(specs), 2.9), squeeze=False)
    for a, (ax, array) in enumerate(zip(axes[0], specs, strict=True)):
        held = array.owners(mesh)
        rows, cols = (max(block[axis] for block in held) + 1 for axis in (0, 1))
        for k, ((i, j), coords) in enumerate(held.items()):
            x0, y0, gid = j / cols, 1 - (i + 1) / rows, f"block-{a}-{i}-{j}"
            face = (*PALETTE[k % len(PALETTE)], 0.35)
            ax.add_patch(mpl.patches.Rectangle((x0, y0), 1 / cols, 1 / rows, facecolor=face, edgecolor="0.2", gid=gid))
            ax.text(x0 + 0.5 / cols, y0 + 0.5 / rows, _holders(coords), ha="center", va="center", fontsize=_FONT,
                    gid=f"{gid}-label")  # fmt: skip
        ax.set(xlim=(0, 1), ylim=(0, 1), xticks=[], yticks=[])
        ax.grid(False)
        ax.spines[:].set_visible(True)
        ax.set_xlabel(f"columns ${array.dims[1]}$ of {_math_name(array)}")
        if a == 0 or array.dims[0] != specs[a - 1].dims[0]:  # the rows' name, where it changes
            ax.set_ylabel(f"rows ${array.dims[0]}$")
    fig.tight_layout()
    return fig, list(axes[0])


MAX_GATHER_RING = 4  # the most devices `ring_all_gather` draws legibly: n (n + 1) slots across a panel
_WAYS = ("one-way", "both-ways")


def _gather_panel(ax: Axes, way: str, blocks: tuple[tuple[tuple[int, ...], ...], ...], n: int) -> None:
    """One panel of `ring_all_gather`: a row per step, a group of n slots per device."""
    for s, holding in enumerate(blocks):
        for d, held in enumerate(holding):
            for b in range(n):
                x, gid = d * (n + 1) + b, f"{'held' if b in held else 'slot'}-{way}-{s}-{d}-{b}"
                face = (*PALETTE[b % len(PALETTE)], 0.5) if b in held else "white"
                ax.add_patch(mpl.patches.Rectangle((x, -s), 0.9, 0.8, facecolor=face, edgecolor="0.6", gid=gid))
                if b in held:
                    ax.text(x + 0.45, -s + 0.4, str(b), ha="center", va="center", fontsize=9, gid=f"{gid}-label")
    ax.set_xlim(-0.3, n * (n + 1) - 0.7)
    ax.set_ylim(-n + 0.8, 1)
    ax.set_xticks([d * (n + 1) + n / 2 - 0.05 for d in range(n)], [f"device {d}" for d in range(n)])
    ax.set_yticks([-s + 0.4 for s in range(n)], ["start"] + [f"after step {s}" for s in range(1, n)])
    ax.tick_params(length=0)
    ax.grid(False)
    ax.set_xlabel(way.replace("-", " ") + " round")


@styled
def ring_all_gather(n_devices: int) -> tuple[Figure, list[Axes]]:
    """A ring AllGather step by step: one way round (left panel) and both ways round (right).

    A row per step (the start at the top, then after each step), a group of n slots per device: slot
    b of device d is filled in block b's colour and numbered b once d holds the block that started on
    device b, as `collectives.all_gather_blocks(n, bidirectional=...)` lists them (the routing of
    `ring.all_gather`): n - 1 steps one way, ceil((n - 1) / 2) both ways. Patches: gid
    "held-w-s-d-b" for a filled slot (w "one-way" or "both-ways", after step s), "slot-w-s-d-b" for an
    empty one; a filled slot's number "held-w-s-d-b-label".
    Book: Part 3 (Sharded Matrices), "Case 2" (how an AllGather is performed).

    Raises:
        ValueError: a device count below 1 or above `MAX_GATHER_RING`.
    """
    n = checks.count("n_devices", n_devices)
    if n > MAX_GATHER_RING:
        raise ValueError(f"n_devices={n_devices!r}: too many slots to read; allowed: 1 to {MAX_GATHER_RING}")
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 0.8 + 0.6 * n), sharey=True)
    for ax, way in zip(axes, _WAYS, strict=True):
        _gather_panel(ax, way, collectives.all_gather_blocks(n, bidirectional=way == "both-ways"), n)
    fig.tight_layout()
    return fig, list(axes)


_OP_COLORS = {"F": PALETTE[1], "B": PALETTE[2], "W": PALETTE[0]}  # tab10's orange, green and blue
_OP_NAMES = {"F": "forward (F)", "B": "input gradient (B)", "W": "weight gradient (W)"}


def _schedule_panel(ax: Axes, panel: int, name: str, schedule: PipelineSchedule) -> None:
    """One panel of `pipeline_schedules`: a row per device, a box per op and time unit."""
    for d, ops in enumerate(schedule.timeline):
        for op in ops:
            parts = "BW" if op.kind == "B" and not schedule.split_backward else op.kind  # B and W as one
            for i, part in enumerate(parts):
                ax.add_patch(
                    mpl.patches.Rectangle(
                        (op.start + i, d - 0.4), 1, 0.8, facecolor=_OP_COLORS[part], edgecolor="white",
                        lw=0 if len(parts) > 1 else 1, gid=f"{part}-{panel}-{d}-{op.microbatch}",
                    )
                )  # fmt: skip
            ax.text(op.start + len(parts) / 2, d, str(op.microbatch), ha="center", va="center", fontsize=9,
                    gid=f"{op.kind}-{panel}-{d}-{op.microbatch}-label")  # fmt: skip
    ax.text(0, -0.75, name, fontsize=_FONT, va="bottom", gid=f"name-{panel}")
    bubble = f"{fmt(schedule.span_units)} units\nbubble {fmt(100 * schedule.bubble_fraction, '%')}"
    ax.text(
        schedule.span_units + 0.5, (schedule.stages - 1) / 2, bubble, va="center", fontsize=9, gid=f"bubble-{panel}"
    )
    ax.set(yticks=range(schedule.stages), ylim=(schedule.stages - 0.5, -1.3), ylabel="device")
    ax.grid(False)


@styled
def pipeline_schedules(schedules: Mapping[str, PipelineSchedule]) -> tuple[Figure, list[Axes]]:
    """Pipeline timelines of one training step, one panel per schedule, stacked, on one time axis.

    A row per device, a box per op and time unit (one stage's forward pass), coloured forward (F),
    input gradient (B) or weight gradient (W) and numbered with its microbatch; an unsplit backward
    is one two-unit box, green then blue. Beside each panel its span and bubble (idle over useful
    time, `PipelineSchedule.bubble_fraction`). Patches: gid "k-p-d-m" for op kind k ("F", "B", "W")
    of microbatch m on device d in panel p, so each panel has stages x microbatches of each kind;
    the number in a box "k-p-d-m-label" (k "B" for an unsplit backward).
    Book: Part 5 (How to Parallelize a Transformer for Training), "Pipelining".

    Args:
        schedules: panel name -> `bounds.pipeline_schedule(...)`, top to bottom.

    Raises:
        ValueError: no schedule or more than `MAX_PANELS`, or a value that is not a `PipelineSchedule`.
    """
    if not 1 <= len(schedules) <= MAX_PANELS:
        raise ValueError(f"schedules={schedules!r}: {len(schedules)} schedules; allowed: 1 to {MAX_PANELS}")
    for name, schedule in schedules.items():
        if not isinstance(schedule, PipelineSchedule):
            raise ValueError(f"schedules[{name!r}]={schedule!r}: allowed: a bounds.PipelineSchedule")
    fig, axes = plt.subplots(len(schedules), 1, figsize=(7.5, 0.5 + 1.9 * len(schedules)), sharex=True, squeeze=False)
    for panel, (ax, (name, schedule)) in enumerate(zip(axes[:, 0], schedules.items(), strict=True)):
        _schedule_panel(ax, panel, name, schedule)
    longest = max(schedule.span_units for schedule in schedules.values())
    axes[-1][0].set(xlabel="time (units of one stage's forward pass)", xlim=(0, longest + 6))
    handles = [mpl.patches.Patch(color=color, label=_OP_NAMES[kind]) for kind, color in _OP_COLORS.items()]
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / fig.get_figheight()))
    return fig, list(axes[:, 0])
