"""Per-class variants: a course seed gives a class its own numbers in every value question.

The source notebooks are templates. A cell may hold `<% expression %>`, evaluated with the
parameters of the question whose statement it follows (`Key.params`: the text's values by default),
the helpers below and the points (`<% pts %>`, "2 pts", and `<% total_points %>`, read from the test
cells' nbgrader metadata, the one place a question's points are written). In a code cell the result
is written as a Python literal (`py`), in a Markdown cell as text. Rendering with the defaults
gives the text's own problems (the book, the public release and solutions); a course seed draws
each question's values (`draw`: the class's, or one rostered student's own) with its `Key.draw`, a
question that takes up another's numbers together with that one (`Key.follows`), again until they meet
its `Key.accept` and every answer of a value question differs from the text's, so the public solutions
do not answer a class's or a student's questions.

A class folder keeps its values in its key, `key/<assignment>.json` beside its gradebook
(`exercises/class_key.py`): the grader reads them there (hidden from the student's kernel by the
sandbox), nbgrader's generate_assignment renders the release with them (`RenderVariant`, first in the
pipeline `exercises/course.py` configures), and each rostered student's handout is rendered with their
own (`exercises/handout.py`).
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from book_lib import hardware, numfmt
from exercises.keys import Key, draw_linked, keys_for, linked_groups, manual_for

__all__ = [
    "draw",
    "load",
    "render",
    "course_root",
    "RenderVariant",
    "DropSolutionOnly",
    "HELPERS",
    "TEMPLATE_NAMES",
    "points",
    "pts",
]

TEMPLATE = re.compile(r"<%(.+?)%>", re.DOTALL)
# A class's notebook is handed out by its instructor: a badge would open the text's version instead.
COLAB_BADGE = re.compile(r"^\[!\[Open In Colab\]\(.*\n\n?", re.MULTILINE)
# The revision the setup cell installs book_lib from (`tools/notebooks.py`'s SETUP_CELL): a class's
# notebook installs the commit its course was built from.
INSTALLED_REVISION = re.compile(r'(f"book_lib @ git\+\{repo\}\.git@)[^"]*(")')


def sci(x: float, digits: int = 3) -> str:
    """`x` as LaTeX scientific notation with at most `digits` significant digits: 9.89e14 -> 9.89 \\times 10^{14}.

    A mantissa of exactly 1 is dropped (1e12 -> 10^{12}); numbers from 0.1 to 1000 print plainly.
    """
    if x == 0 or 0.1 <= abs(x) < 1000:
        return f"{x:.{digits}g}"
    exponent = math.floor(math.log10(abs(x)))
    mantissa = float(f"{x / 10**exponent:.{digits}g}")
    if abs(mantissa) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    head = f"{mantissa:.{digits}g}"
    return f"10^{{{exponent}}}" if head == "1" else f"{head} \\times 10^{{{exponent}}}"


def comma(x: float) -> str:
    """`x` with comma thousands, to the nearest integer: 16384 -> 16,384.

    For LaTeX math only, as `comma(x).replace(",", "{,}")`; prose writes a number with `grouped`
    or `fmt` (`book_lib.numfmt`), never with a comma.
    """
    return f"{round(x):,}"


def grouped(x: float) -> str:
    """`x` to the nearest integer, its thousands split by a thin no-break space: 16384 -> "16 384"."""
    return numfmt.grouped(round(x))


def py(value) -> str:
    """`value` as a short Python literal that reads back the same: 10.0 -> 10.0, 1e12 -> 1e12, "h100" -> "h100"."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float) and "e" not in repr(value) and len(repr(value)) <= 8:
        return repr(value)  # 10.0, 0.25, 123456.0: plain reads best
    if isinstance(value, float):
        for digits in range(1, 18):
            text = f"{value:.{digits}g}"
            if float(text) == value:
                text = text if any(ch in text for ch in ".en") else text + ".0"
                return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m.group(1).replace("+", "") + m.group(2), text)
    return repr(value)


def chip_name(name: str) -> str:
    """How a statement names a chip: "tpu-v5e" -> "TPU v5e", "h100" -> "NVIDIA H100"."""
    chip = hardware.get_chip(name)
    if chip.name.startswith("tpu-"):
        return "TPU " + chip.name.removeprefix("tpu-")
    return "NVIDIA " + chip.name.upper()


# Names a template gets from the notebook itself: a question's points (`<% pts %>`, in the cells from
# its statement to the next question's), the assignment's total (`<% total_points %>`, anywhere), a
# value question's accepted answers for these numbers (`<% answers[1]["name"] %>`: the key's, then one
# per model of `Key.also`), for a solution that shows the text's model beside the exact one, and whether
# the question shows the text's own numbers (`is_text`; `<% text_note(", which allows the text's 240") %>`
# is the words given where it does and nothing where a class's numbers stand); a question graded by
# hand gets its rubric (`<% rubric %>`, `keys.Rubric.markdown`).
TEMPLATE_NAMES = ("pts", "total_points", "answers", "is_text", "text_note", "rubric")
HELPERS = {
    "sci": sci,
    "comma": comma,
    "grouped": grouped,
    "fmt": numfmt.fmt,
    "py": py,
    "chip_name": chip_name,
    "get_chip": hardware.get_chip,
    "hardware": hardware,
    "math": math,
}


def _differs(key: Key, values: dict) -> bool:
    """True when every number a value question expects moves beyond its tolerance from the text's."""
    if key.kind != "value":
        return values != dict(key.params)
    text, mine = key.expected(**key.params), key.expected(**values)
    return all(
        not math.isclose(float(a), float(b), rel_tol=3 * key.rel_tol, abs_tol=0)
        for name in text
        for a, b in zip(_flat(text[name]), _flat(mine[name]), strict=True)
    )


def _flat(v) -> list:
    return list(v) if isinstance(v, (tuple, list)) else [v]


def draw(seed: int, assignment: str, student: str | None = None) -> dict[str, dict]:
    """grade_id -> the parameter values of each question of `assignment` that has any: the class's, or
    one `student`'s own, from the class's `seed`.

    The questions that take up another's numbers (`Key.follows`) are drawn with it (`draw_linked`);
    each group from its own random stream, seeded by the seed, the assignment, the student and the
    group's first question, so adding a question, an assignment or a student changes no other draw.
    """
    keys = keys_for(assignment)
    out = {}
    for root, group in linked_groups(keys).items():
        tag = f"{seed}:{assignment}:{root}" if student is None else f"{seed}:{assignment}:{student}:{root}"
        try:
            out.update(draw_linked(group, random.Random(tag), differs=lambda gid, values: _differs(keys[gid], values)))
        except ValueError as err:
            raise ValueError(f"seed={seed}: {root}: {err}; its draw is too narrow") from err
    return out


def load(root: Path | None, assignment: str, student: str | None = None) -> dict[str, dict]:
    """grade_id -> parameter values for `assignment` in the course at `root`: `student`'s own where the
    course's key has them, else the class's, else the text's (`exercises/class_key.py`)."""
    from exercises import class_key

    values = {gid: dict(key.params) for gid, key in keys_for(assignment).items() if key.params}
    key = class_key.read(root, assignment) if root is not None else None
    if key is not None:
        values.update(key.for_student(student))
    return values


def render(
    nb,
    assignment: str,
    values: dict[str, dict] | None = None,
    *,
    text_only: bool | None = None,
    commit: str | None = None,
):
    """A copy of the template notebook `nb` with every `<% ... %>` filled in.

    Args:
        nb: the source notebook (a template).
        assignment: its name, for its keys.
        values: grade_id -> parameter values (from `draw` or `load`); None for the text's own.
        text_only: keep the cells marked `book.text_only` (notes on the text's printed numbers);
            by default only when rendering the text's values.
        commit: the revision the setup cell installs `book_lib` from (a class's course: the commit
            it was built from); None keeps the repository's branch.

    A class's render also drops the Colab badge, which opens the text's version from the repository.
    """
    keys, by_hand = keys_for(assignment), manual_for(assignment)
    values = values if values is not None else {gid: dict(k.params) for gid, k in keys.items()}
    is_text = all(values.get(gid, {}) == dict(k.params) for gid, k in keys.items())
    keep_text_only = is_text if text_only is None else text_only
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    marks = points(nb)
    total = {"total_points": sum(marks.values())}
    scope: dict = total
    cells = []
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or ""
        question = gid.removesuffix("_statement")
        if gid.endswith("_statement") and question in keys:
            key, mine = keys[question], values.get(question, {})
            answers = key.answers(mine) if key.kind == "value" else []  # the key's, then each of `also`'s
            shows_text = mine == dict(key.params)
            scope = {
                **mine,
                **total,
                "pts": pts(marks.get(question, 0)),
                "answers": answers,
                "is_text": shows_text,
                "text_note": functools.partial(_text_note, shows_text),
            }
        elif gid.endswith("_statement") and question in by_hand:
            scope = {**total, "pts": pts(marks.get(question, 0)), "rubric": by_hand[question].markdown()}
        if cell.get("metadata", {}).get("book", {}).get("text_only") and not keep_text_only:
            continue
        cell.source = _fill(cell.source, scope, code=cell.cell_type == "code", where=gid or cell.get("id", "?"))
        if not is_text:
            cell.source = COLAB_BADGE.sub("", cell.source)
        if commit is not None and cell.cell_type == "code":
            cell.source = INSTALLED_REVISION.sub(lambda m: f"{m.group(1)}{commit}{m.group(2)}", cell.source)
        cells.append(cell)
    nb.cells = cells
    return nb


def _text_note(shows_text: bool, words: str) -> str:
    """`words` (a note on the text's own figures) where a question shows the text's numbers; else nothing."""
    return words if shows_text else ""


def points(nb) -> dict[str, float]:
    """grade_id -> points of every graded test cell of `nb` (its nbgrader metadata, the one place they are written)."""
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell.metadata["nbgrader"].get("points", 0)
        for cell in nb.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
    }


def pts(n: float) -> str:
    """A question's points as its statement's heading gives them: 1 -> "1 pt", 2 -> "2 pts"."""
    return f"{n:g} pt" if n == 1 else f"{n:g} pts"


def _fill(source: str, scope: dict, *, code: bool, where: str) -> str:
    def one(match: re.Match) -> str:
        try:
            value = eval(match.group(1).strip(), {**HELPERS, **scope})  # noqa: S307 (the course's own template)
        except Exception as err:
            raise ValueError(f"template <%{match.group(1)}%> in cell {where}: {type(err).__name__}: {err}") from err
        if code:
            return py(value)
        return value if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)

    return TEMPLATE.sub(one, source)


def course_root(resources) -> Path:
    """The course folder nbgrader is working in: where a SQLite gradebook is; with a PostgreSQL one, the
    folder above the notebook's `source/ASSIGNMENT/` or `submitted/STUDENT/ASSIGNMENT/` (never a
    folder a student's own files could name)."""
    db_url = resources["nbgrader"]["db_url"]
    if db_url.startswith("sqlite:///"):
        return Path(db_url.removeprefix("sqlite:///")).parent
    path = Path(resources.get("metadata", {}).get("path") or ".").resolve()
    if path.parent.name in ("source", "release"):
        return path.parent.parent
    if path.parent.parent.name in ("submitted", "autograded", "feedback"):
        return path.parent.parent.parent
    raise ValueError(f"path={str(path)!r}: not in a course's source/ or submitted/; allowed: a course's notebook")


class RenderVariant(NbGraderPreprocessor):
    """generate_assignment's first step: fill the templates with the class's values, the setup cell
    installing `book_lib` at the commit the course's key records (`exercises/class_key.py`)."""

    def preprocess(self, nb, resources):
        from exercises import class_key

        assignment, root = resources["nbgrader"]["assignment"], course_root(resources)
        key = class_key.read(root, assignment)
        commit = key.commit if key is not None else None
        return render(nb, assignment, load(root, assignment), commit=commit), resources


class DropSolutionOnly(NbGraderPreprocessor):
    """generate_assignment's last step: drop the cells only the reference solution shows."""

    def preprocess(self, nb, resources):
        from exercises.build import is_solution_only

        nb.cells = [c for c in nb.cells if not is_solution_only(c)]
        return nb, resources
