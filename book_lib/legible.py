"""Whether a figure reads on the page: no text under 9 px, no label drawn over another.

The HTML book shows a figure in its text column, `COLUMN_PX` wide at a 1280 px window, at its own
size or shrunk to fit: a font of s points is drawn s * dpi / 72 px high, times
min(1, COLUMN_PX / (width in inches * dpi)). `problems(fig)` names each text that ends up smaller
than `MIN_TEXT_PX` and each pair of texts whose boxes overlap. The figure functions of `plots` and
`model_plots` call `check` on what they draw when the environment variable `CHECK_ENV_VAR` is set,
as the test suite sets it, so every figure a chapter draws is checked where the chapter runs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.text import Text

COLUMN_PX = 684
MIN_TEXT_PX = 9.0
CHECK_ENV_VAR = "BOOK_LIB_CHECK_FIGURES"
_TOUCH_PX = 1.0  # boxes that share an edge do not overlap


def shown_scale(fig: Figure) -> float:
    """Page pixels per figure pixel in the text column: min(1, COLUMN_PX / (width_in * dpi))."""
    return min(1.0, COLUMN_PX / (fig.get_figwidth() * fig.dpi))


def _texts(fig: Figure) -> list[Text]:
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure is fig]


def problems(fig: Figure) -> list[str]:
    """Each text under MIN_TEXT_PX on the page, and each pair of overlapping texts, as a sentence."""
    scale = shown_scale(fig)
    texts = _texts(fig)
    found = []
    for t in texts:
        shown_px = t.get_fontsize() * fig.dpi / 72 * scale
        if shown_px < MIN_TEXT_PX:
            found.append(f"{t.get_text()!r} is {shown_px:.1f} px high on the page, under {MIN_TEXT_PX:g} px")
    fig.canvas.draw()  # lays out legends and tight boxes: the positions the page will show
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [t.get_window_extent(renderer).expanded(1.0, 1.0).padded(-_TOUCH_PX) for t in texts]
    for i, (a, box_a) in enumerate(zip(texts, boxes, strict=True)):
        for b, box_b in zip(texts[i + 1 :], boxes[i + 1 :], strict=True):
            if box_a.width > 0 and box_b.width > 0 and box_a.overlaps(box_b):
                found.append(f"{a.get_text()!r} overlaps {b.get_text()!r}")
    return found


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
