"""A throwaway nbgrader course graded through the instructor's real command, for the grading tests.

`Course` makes a course folder as `make course` does (with shorter limits, and without executing
the solutions unless asked), files submissions, and
runs `nbgrader autograde ASSIGNMENT` once for every student of an assignment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

from exercises import build, variants
from exercises.course import gradebook_url
from exercises.grading.sandbox import sandbox_works
from exercises.keys import Key

ROOT = Path(__file__).resolve().parents[2]
# Courses are graded in the sandbox; on a machine where bubblewrap cannot run (no user namespaces),
# in the mode an instructor must name to grade without one, and the sandbox's own tests skip.
SANDBOX = "bwrap" if sandbox_works() else "none"


def reference_answers(assignment: str, values: dict | None = None) -> dict[str, str]:
    """grade_id of each answer cell -> its reference solution (markers removed), for a class's `values`."""
    src = build.rendered_source(assignment, values)
    return {
        build.grade_id(c): build.MARKER.sub("", c.source)
        for c in src.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def wrong_answer(key: Key, gid: str, solution: str, values: dict | None = None) -> str:
    """The reference answer followed by lines that make it wrong (for a class's `values`)."""
    lines = [solution]
    if key.kind == "value":
        lines += [f"{n} = {n} * 1.5 + 1.0" for n in key.names]
    elif key.kind in ("function", "jax"):
        name = key.names[0]
        lines += [
            f"_right_{gid} = {name}",
            f"def {name}(*args, **kwargs):",
            f"    result = _right_{gid}(*args, **kwargs)",
            "    return tuple(v * 1.5 + 1 for v in result) if isinstance(result, tuple) else result * 1.5 + 1",
        ]
    else:
        wrong = next(c for c in key.choices if c != key.answer(values))
        lines.append(f"{key.names[0]} = {wrong!r}")
    return "\n".join(lines)


def gradebook_scores(root: Path, assignment: str, db: str | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    """student -> grade_id -> (score, max score), from the gradebook of the course folder at `root` (on
    PostgreSQL at `db`)."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(gradebook_url(root, db)) as gb:
        for submission in gb.assignment_submissions(assignment):
            notebook = gb.find_submission_notebook(assignment, assignment, submission.student.id)
            out[submission.student.id] = {g.name: (g.score, g.max_score) for g in notebook.grades}
    return out


class Course:
    """A course folder under `root` holding `assignments`, graded with these limits (a class's numbers with
    `seed`, each student's own with a `roster` file; its gradebook on PostgreSQL at `db`)."""

    def __init__(
        self,
        root: Path,
        assignments: list[str],
        *,
        cell_timeout_s: int = 20,
        notebook_timeout_s: int = 300,
        sandbox: str = SANDBOX,
        seed: int | None = None,
        db: str | None = None,
        roster: Path | None = None,
        solutions: bool = False,
        late: str = "none",
    ):
        self.root = root
        self.db = db
        build.make_course(
            root,
            assignments,
            seed=seed,
            roster_file=roster,
            echo=lambda line: None,
            solutions=solutions,
            cell_timeout_s=cell_timeout_s,
            notebook_timeout_s=notebook_timeout_s,
            sandbox=sandbox,
            db=db,
            late=late,
        )
        self.releases = {a: root / "release" / a / f"{a}.ipynb" for a in assignments}
        self.values = {a: variants.load(root, a) for a in assignments}

    def submit(
        self, assignment: str, student: str, answers: dict[str, str], *, edit=None, notebook: Path | None = None
    ) -> Path:
        """File a submission: the release (or the `notebook` given, a handout say) with `answers` (grade_id ->
        source); `edit(nb)` may change more."""
        nb = nbformat.read(notebook or self.releases[assignment], as_version=4)
        for cell in nb.cells:
            if build.grade_id(cell) in answers:
                cell.source = answers[build.grade_id(cell)]
        if edit is not None:
            edit(nb)
        target = self.root / "submitted" / student / assignment
        target.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target / f"{assignment}.ipynb")
        return target

    def autograde(self, assignment: str, *students: str, path: str | None = None) -> subprocess.CompletedProcess:
        """`nbgrader autograde ASSIGNMENT` from the course folder (`"*"`: every assignment; all students, or
        those named; `path`: its PATH)."""
        nbgrader = Path(sys.executable).parent / "nbgrader"
        args = [str(nbgrader), "autograde", assignment, "--force"]
        for student in students:
            args += ["--student", student]
        path = path or f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = {**os.environ, "PATH": path}
        return subprocess.run(args, cwd=self.root, capture_output=True, text=True, env=env)

    def scores(self, assignment: str) -> dict[str, dict[str, tuple[float, float]]]:
        """student -> grade_id -> (score, max score), from the gradebook."""
        return gradebook_scores(self.root, assignment, self.db)

    def autograded(self, assignment: str, student: str):
        return nbformat.read(self.root / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4)
