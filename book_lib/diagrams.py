"""Diagrams of how a program moves data: schedules drawn from `book_lib`'s own counts.

Each function takes the sizes that fix the schedule, reads the schedule from the pure layer and
returns `(fig, ax)`, drawn under `plots.STYLE` (importing this module changes no matplotlib
setting). Every patch carries a `gid` that names what it stands for, so a test can count them.
Text is at least 9 pt; captions live in the notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib as mpl
import matplotlib.pyplot as plt

from book_lib import checks, collectives
from book_lib.plots import _PALETTE, _styled

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["MAX_RING", "collective_matmul_ring"]

MAX_RING = 8  # the most devices a ring diagram draws legibly on the page's width
_BOX_W, _BOX_H, _GAP = 0.62, 0.62, 0.38  # a step's column and the gap its arrows cross (data units)
_FONT = 10.0


def _chunk_box(ax: Axes, step: int, row: float, chunk: int, gid: str) -> None:
    """One device's chunk at one step: a box in the chunk's colour, its number inside."""
    color = _PALETTE[chunk % len(_PALETTE)]
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


@_styled
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
