"""Whether a figure reads on the page: no text under 9 px, no label drawn over another.

The HTML book shows a figure in its text column, `COLUMN_PX` wide at a 1280 px window, at its own
size or shrunk to fit: a font of s points is drawn s * dpi / 72 px high, times
min(1, COLUMN_PX / (width in inches * dpi)). `problems(fig)` names each text that ends up smaller
than `MIN_TEXT_PX` and each pair of texts whose boxes overlap. The figure functions of `plots` and
`model_plots` call `check` on what they draw when the environment variable `CHECK_ENV_VAR` is set,
as the test suite sets it, so every figure a chapter draws is checked where the chapter runs.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

__all__ = ["COLUMN_PX", "MIN_TEXT_PX", "CHECK_ENV_VAR", "shown_scale", "problems", "check", "checking"]

COLUMN_PX = 684
MIN_TEXT_PX = 9.0
CHECK_ENV_VAR = "BOOK_LIB_CHECK_FIGURES"
_TOUCH_PX = 1.0  # texts that share an edge do not overlap


def shown_scale(fig: Figure) -> float:
    """Page pixels per figure pixel in the text column: min(1, COLUMN_PX / (width_in * dpi))."""
    return min(1.0, COLUMN_PX / (fig.get_figwidth() * fig.dpi))


def _texts(fig: Figure) -> list[Text]:
    """The texts drawn: visible, not empty, and no tick label of a tick outside its axis' view."""
    from matplotlib.text import Text

    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(float(v) for v in axis.get_view_interval())
            slack = 1e-9 * (high - low)
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not low - slack <= float(tick.get_loc()) <= high + slack:
                    hidden |= {id(tick.label1), id(tick.label2)}
    texts = fig.findobj(Text)
    return [t for t in texts if t.get_visible() and t.get_text().strip() and t.figure is fig and id(t) not in hidden]


def problems(fig: Figure) -> list[str]:
    """Each text under MIN_TEXT_PX on the page, and each pair of overlapping texts, as a sentence."""
    scale = shown_scale(fig)
    texts = _texts(fig)
    found = []
    for t in texts:
        shown_px = float(t.get_fontsize()) * fig.dpi / 72 * scale
        if shown_px < MIN_TEXT_PX:
            found.append(f"{t.get_text()!r} is {shown_px:.1f} px high on the page, under {MIN_TEXT_PX:g} px")
    fig.canvas.draw()  # lays out legends and tight boxes: the positions the page will show
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    shapes = [_outline(t.get_window_extent(renderer), float(t.get_rotation())) for t in texts]
    for i, (a, shape_a) in enumerate(zip(texts, shapes, strict=True)):
        for b, shape_b in zip(texts[i + 1 :], shapes[i + 1 :], strict=True):
            if shape_a and shape_b and _overlap(shape_a, shape_b):
                found.append(f"{a.get_text()!r} overlaps {b.get_text()!r}")
    return found


def _outline(box: Bbox, degrees: float) -> list[tuple[float, float]]:
    """The corners of a text's own rectangle, rotated as drawn, from its axis-aligned box W x H.

    A w x h rectangle turned by t has W = w|cos t| + h|sin t| and H = w|sin t| + h|cos t| about the
    same centre; solved for w and h (near 45 degrees, where that fails, the box itself is used).
    Shrunk by _TOUCH_PX so that texts which only touch do not count.
    """
    if box.width <= 0 or box.height <= 0:
        return []
    turn = math.radians(degrees)
    c, s = abs(math.cos(turn)), abs(math.sin(turn))
    det = c * c - s * s
    w, h, turn = (box.width, box.height, 0.0) if s < 1e-6 or abs(det) < 0.2 else (
        (c * box.width - s * box.height) / det, (c * box.height - s * box.width) / det, turn)  # fmt: skip
    w, h = max(w - 2 * _TOUCH_PX, 0.0), max(h - 2 * _TOUCH_PX, 0.0)
    x0, y0 = box.x0 + box.width / 2, box.y0 + box.height / 2
    cos_t, sin_t = math.cos(turn), math.sin(turn)
    return [(x0 + dx * cos_t - dy * sin_t, y0 + dx * sin_t + dy * cos_t)
            for dx, dy in ((-w / 2, -h / 2), (w / 2, -h / 2), (w / 2, h / 2), (-w / 2, h / 2))]  # fmt: skip


def _overlap(p: list[tuple[float, float]], q: list[tuple[float, float]]) -> bool:
    """Two convex outlines overlap unless some edge's normal separates them (separating axes)."""
    for shape in (p, q):
        for (x1, y1), (x2, y2) in zip(shape, shape[1:] + shape[:1], strict=True):
            nx, ny = y1 - y2, x2 - x1
            on_p = [nx * x + ny * y for x, y in p]
            on_q = [nx * x + ny * y for x, y in q]
            if max(on_p) <= min(on_q) or max(on_q) <= min(on_p):
                return False
    return True


def check(fig: Figure) -> None:
    """Raise when `fig` has a problem (`problems`); the message lists them all.

    Raises:
        ValueError: a text too small or two texts overlapping.
    """
    found = problems(fig)
    if found:
        raise ValueError(f"fig: not legible in the book's column; {'; '.join(found)}")


def checking() -> bool:
    """True when `CHECK_ENV_VAR` asks the figure functions to check what they draw."""
    return os.environ.get(CHECK_ENV_VAR, "") not in ("", "0")
