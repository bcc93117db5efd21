"""Whose numbers a submitted notebook shows, read from its statements, for the feedback and the summary.

Every submission is graded against its own student's numbers (the course's key, `class_key`). A
student who works in another notebook (a classmate's handout, the class's release, the book's public
edition) answers other numbers and would score 0 without knowing why, so the grader compares the
statements of the questions with numbers in the submission with those it renders itself for each
notebook the course handed out, and names the one they match best. Nothing in the notebook is taken
on trust (no metadata, nothing the kernel says): only what the grader renders decides, and it only
ever adds a note; the grade is the same.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import nbformat

from exercises import class_key, variants
from exercises.keys import keys_for

__all__ = ["NOTE", "PUBLIC", "CLASS", "CHANGED", "statements", "whose", "note"]

NOTE = "graded against your own numbers"
PUBLIC = "the public edition (the book's own numbers)"
CLASS = "the class's release (its shared numbers), not your own handout"
CHANGED = "not one the course handed out: its statements were changed"


def statements(nb, assignment: str) -> dict[str, str]:
    """grade_id -> statement source of each question of `assignment` with numbers, as `nb` shows it."""
    drawn = {gid for gid, key in keys_for(assignment).items() if key.params}
    out = {}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or ""
        if gid.endswith("_statement") and gid.removesuffix("_statement") in drawn:
            out[gid.removesuffix("_statement")] = cell.source
    return out


@functools.lru_cache(maxsize=4096)
def _rendered(template: Path, stamp: float, assignment: str, values_json: str) -> tuple[tuple[str, str], ...]:
    nb = nbformat.read(template, as_version=4)
    return tuple(sorted(statements(variants.render(nb, assignment, json.loads(values_json)), assignment).items()))


def _candidates(root: Path, assignment: str, student: str) -> dict[str, dict[str, dict]]:
    """Who else's numbers a notebook may show: label -> values (the student's own first)."""
    key = class_key.read(root, assignment)
    text = {gid: dict(k.params) for gid, k in keys_for(assignment).items() if k.params}
    if key is None:
        return {"own": text}
    out = {"own": variants.load(root, assignment, student), PUBLIC: text}
    if student in key.students and key.values:
        out[CLASS] = {**text, **key.values}
    out.update({f"{other}'s": {**text, **mine} for other, mine in key.students.items() if other != student})
    return out


def whose(root: Path, assignment: str, student: str, nb) -> str | None:
    """None when `nb`'s statements are the ones `student` was given; else whose they are ("bea's",
    `PUBLIC`, `CLASS`), or `CHANGED` when they match no notebook the course handed out better."""
    root = Path(root).resolve()
    template = root / "source" / assignment / f"{assignment}.ipynb"
    shown = statements(nb, assignment)
    if not shown:
        return None
    stamp = template.stat().st_mtime

    def matches(values: dict) -> int:
        mine = dict(_rendered(template, stamp, assignment, json.dumps(values, sort_keys=True)))
        return sum(shown.get(gid) == text for gid, text in mine.items())

    candidates = _candidates(root, assignment, student)
    own = matches(candidates.pop("own"))
    if own == len(shown):
        return None
    scores = {label: matches(values) for label, values in candidates.items()}
    best = max(scores, key=scores.__getitem__, default=None)
    return best if best is not None and scores[best] > own else CHANGED


def note(holder: str) -> str:
    """The sentence the feedback and the grading summary give a notebook `whose` named."""
    return f"{NOTE}: this notebook is {holder}"
