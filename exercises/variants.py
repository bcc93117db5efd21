"""Per-class variants: a course seed gives a class its own numbers in every value question.

The source notebooks are templates. A cell may hold `<% expression %>`, evaluated with the
parameters of the question whose statement it follows (`Key.params`: the text's values by default),
the helpers below and the points (`<% pts %>`, "2 pts", and `<% total_points %>`, read from the test
cells' nbgrader metadata, the one place a question's points are written). In a code cell the result
is written as a Python literal (`py`), in a Markdown cell as text. Rendering with the defaults
gives the text's own problems (the book, the public release and solutions); a course seed draws
each question's values with its `Key.draw`, again until they meet its `Key.accept` and every answer
of a value question differs from the text's (`Key.drawn`), so the public solutions do not answer a
class's questions.

A class folder keeps its values in `variant.json` beside its gradebook: the grader reads them there
(hidden from the student's kernel by the sandbox), and nbgrader's generate_assignment renders the
release with them (`RenderVariant`, first in the pipeline `exercises/course.py` configures).
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from book_lib import hardware, numfmt
from exercises.keys import Key, keys_for

__all__ = [
    "VALUES_FILE",
    "draw",
    "load",
    "render",
    "save",
    "course_root",
    "RenderVariant",
    "DropSolutionOnly",
    "HELPERS",
    "TEMPLATE_NAMES",
    "points",
    "pts",
]

VALUES_FILE = "variant.json"
TEMPLATE = re.compile(r"<%(.+?)%>", re.DOTALL)
# A class's notebook is handed out by its instructor: a badge would open the text's version instead.
COLAB_BADGE = re.compile(r"^\[!\[Open In Colab\]\(.*\n\n?", re.MULTILINE)


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
# its statement to the next question's), the assignment's total (`<% total_points %>`, anywhere), and a
# value question's accepted answers for these numbers (`<% answers[1]["name"] %>`: the key's, then one
# per model of `Key.also`), for a solution that shows the text's model beside the exact one.
TEMPLATE_NAMES = ("pts", "total_points", "answers")
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


def draw(seed: int, assignment: str) -> dict[str, dict]:
    """grade_id -> the class's parameter values of each question of `assignment` that has any."""
    out = {}
    for gid, key in keys_for(assignment).items():
        if not key.params:
            continue
        rng = random.Random(f"{seed}:{assignment}:{gid}")
        try:
            out[gid] = key.drawn(rng, differs=lambda values, key=key: _differs(key, values))
        except ValueError as err:
            raise ValueError(f"seed={seed}: {gid}: {err}; its draw is too narrow") from err
    return out


def save(root: Path, seed: int, assignments: list[str]) -> Path:
    """Write the class's values (the private key of its numbers) to `root/variant.json`."""
    path = Path(root) / VALUES_FILE
    data = {"seed": seed, "values": {a: draw(seed, a) for a in assignments}}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def load(root: Path | None, assignment: str) -> dict[str, dict]:
    """grade_id -> parameter values for `assignment` in the course at `root`: its class's, else the text's."""
    keys = keys_for(assignment)
    values = {gid: dict(key.params) for gid, key in keys.items() if key.params}
    path = Path(root) / VALUES_FILE if root is not None else None
    if path is not None and path.exists():
        mine = json.loads(path.read_text())["values"].get(assignment, {})
        for gid, v in mine.items():
            if gid not in keys or set(v) != set(keys[gid].params):
                raise ValueError(f"{path}: {gid} has parameters {sorted(v)}; allowed: {sorted(keys[gid].params)}")
            values[gid] = v
    return values


def render(nb, assignment: str, values: dict[str, dict] | None = None, *, text_only: bool | None = None):
    """A copy of the template notebook `nb` with every `<% ... %>` filled in.

    Args:
        nb: the source notebook (a template).
        assignment: its name, for its keys.
        values: grade_id -> parameter values (from `draw` or `load`); None for the text's own.
        text_only: keep the cells marked `book.text_only` (notes on the text's printed numbers);
            by default only when rendering the text's values.

    A class's render also drops the Colab badge, which opens the text's version from the repository.
    """
    keys = keys_for(assignment)
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
            scope = {**mine, **total, "pts": pts(marks.get(question, 0)), "answers": answers}
        if cell.get("metadata", {}).get("book", {}).get("text_only") and not keep_text_only:
            continue
        cell.source = _fill(cell.source, scope, code=cell.cell_type == "code", where=gid or cell.get("id", "?"))
        if not is_text:
            cell.source = COLAB_BADGE.sub("", cell.source)
        cells.append(cell)
    nb.cells = cells
    return nb


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
    """generate_assignment's first step: fill the templates with the course's values (variant.json)."""

    def preprocess(self, nb, resources):
        assignment = resources["nbgrader"]["assignment"]
        return render(nb, assignment, load(course_root(resources), assignment)), resources


class DropSolutionOnly(NbGraderPreprocessor):
    """generate_assignment's last step: drop the cells only the reference solution shows."""

    def preprocess(self, nb, resources):
        from exercises.build import is_solution_only

        nb.cells = [c for c in nb.cells if not is_solution_only(c)]
        return nb, resources
