"""Each student's own notebook of an assignment (`make course ... ROSTER=students.csv`).

A handout is what nbgrader's generate_assignment makes of the course's source, with the student's
numbers instead of the class's: the template rendered with their values (`variants.render`), then the
same preprocessors the course's release goes through (`course.configure`), except the two that read or
write the gradebook: the class's render (`RenderVariant`) and `SaveCells`, which records the release
once for the whole class. Rendered with the class's values it is the release itself, byte for byte
(`tests/course/test_roster.py`). It is written to `DIR/handout/<student id>/<assignment>.ipynb` once
and never rewritten; the grader renders it again, in memory, to know what a student was given
(`pipeline.RestoreCells`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import nbformat

__all__ = ["HANDOUT_DIR", "path", "notebook", "write"]

HANDOUT_DIR = "handout"


def path(root: Path, student: str, assignment: str) -> Path:
    """Where the course at `root` keeps `student`'s handout of `assignment`."""
    return Path(root) / HANDOUT_DIR / student / f"{assignment}.ipynb"


@functools.cache
def _steps(root: Path) -> tuple[type, ...]:
    """The course's generate_assignment preprocessors that neither read the course's values nor write the gradebook."""
    from nbgrader.preprocessors import SaveCells
    from traitlets.config import Config

    from exercises.course import configure
    from exercises.variants import RenderVariant

    config = Config()
    configure(config, root)
    return tuple(step for step in config.GenerateAssignment.preprocessors if step not in (RenderVariant, SaveCells))


def notebook(root: Path, assignment: str, values: dict[str, dict], commit: str | None) -> str:
    """The text of the handout of `assignment` in the course at `root` for the numbers `values`
    (grade_id -> parameters), its setup cell installing `book_lib` at `commit`."""
    from nbconvert.exporters import NotebookExporter
    from traitlets.config import Config

    from exercises.course import configure
    from exercises.variants import render

    root = Path(root).resolve()
    source = root / "source" / assignment
    template = nbformat.read(source / f"{assignment}.ipynb", as_version=4)
    config = Config()
    configure(config, root)
    exporter = NotebookExporter(config=config)
    for step in _steps(root):
        exporter.register_preprocessor(step, enabled=True)
    resources = {
        "nbgrader": {"assignment": assignment, "notebook": assignment, "student": ".", "db_url": ""},
        "metadata": {"path": str(source), "name": assignment},
        "unique_key": assignment,
    }
    text, _ = exporter.from_notebook_node(render(template, assignment, values, commit=commit), resources=resources)
    return text


def write(root: Path, assignment: str, students: list[str], commit: str | None) -> list[Path]:
    """Write the handout of each of `students` who has none yet, with the numbers the course's key gives
    them (`variants.load`); the paths written."""
    from exercises.variants import load

    written = []
    for student in students:
        file = path(root, student, assignment)
        if file.exists():
            continue
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(notebook(root, assignment, load(root, assignment, student), commit), encoding="utf-8")
        written.append(file)
    return written
