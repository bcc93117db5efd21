"""`make exercises`: refresh the expected values in source/, then regenerate release/ and solutions/.

1. Each hidden test's `expected = ...` line is rewritten from `exercises/keys/<assignment>.py`.
2. nbgrader's own API generates the student notebooks in `exercises/release/` (solutions replaced
   by stubs, hidden tests removed, outputs cleared); cells marked solution-only are then dropped.
3. The reference solutions are the source notebooks without the solution markers and hidden
   tests, executed, in `solutions/<assignment>.ipynb`.

    python exercises/build.py [ASSIGNMENT ...]
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
COURSE = ROOT / "exercises"
SOLUTIONS = ROOT / "solutions"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# nbgrader runs the `alembic` command of its own environment: make sure it is on PATH.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

from exercises.keys import keys_for  # noqa: E402

EXPECTED_LINE = re.compile(r"^(\s*)expected = .*$", re.MULTILINE)
HIDDEN = re.compile(r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*", re.DOTALL)
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", re.MULTILINE)


def assignments() -> list[str]:
    """Every assignment in `exercises/source/`, sorted."""
    return sorted(p.name for p in (COURSE / "source").iterdir() if p.is_dir())


def source_path(assignment: str) -> Path:
    return COURSE / "source" / assignment / f"{assignment}.ipynb"


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def is_solution_only(cell) -> bool:
    """Cells only the reference solution shows (explanations, errata)."""
    return bool(cell.get("metadata", {}).get("book", {}).get("solution_only"))


def refresh_expected(nb, assignment: str):
    """Rewrite the `expected = ...` line of every graded test cell from the assignment's keys."""
    keys = keys_for(assignment)
    seen = set()
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade") or meta.get("solution"):
            continue
        gid = meta["grade_id"]
        if gid not in keys:
            raise ValueError(f"grade_id={gid!r}: no key in exercises/keys/{assignment}.py; allowed: {sorted(keys)}")
        if len(EXPECTED_LINE.findall(cell.source)) != 1:
            raise ValueError(f"grade_id={gid!r}: its hidden test needs exactly one 'expected = ...' line")
        literal = repr(keys[gid].expected())
        cell.source = EXPECTED_LINE.sub(lambda m, lit=literal: f"{m.group(1)}expected = {lit}", cell.source)
        seen.add(gid)
    missing = set(keys) - seen
    if missing:
        raise ValueError(f"keys={sorted(missing)!r}: no graded test cell in {assignment}; allowed: {sorted(seen)}")
    return nb


def solution_notebook(nb, assignment: str):
    """The reference solution: markers and hidden tests removed, titles and links pointed at it."""
    nb = nbformat.from_dict(nb)
    release = f"exercises/release/{assignment}/{assignment}.ipynb"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = MARKER.sub("", HIDDEN.sub("", cell.source)).rstrip()
            cell.outputs, cell.execution_count = [], None
        else:
            cell.source = cell.source.replace(release, f"solutions/{assignment}.ipynb")
            cell.source = cell.source.replace("](../../../", "](../")
            cell.source = re.sub(r"^# (.*?) exercises:", r"# \1 solutions:", cell.source, count=1)
        cell.metadata.pop("nbgrader", None)
        cell.metadata.pop("book", None)
    return nb


def generate_release(assignment: str, course_root: Path = COURSE) -> Path:
    """Run nbgrader's generate_assignment into `course_root/release/` and drop solution-only cells."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course_root)
    config.CourseDirectory.db_url = f"sqlite:///{course_root / 'gradebook.db'}"
    config.Execute.kernel_name = "python3"
    config.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    config.ClearSolutions.enforce_metadata = True
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result['log']}")
    path = course_root / "release" / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if not is_solution_only(c)]
    nbformat.write(nb, path)
    return path


def execute(nb, cwd: Path, timeout_s: int = 600):
    """Execute `nb` in a fresh python3 kernel with `cwd` as its working directory."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def build(assignment: str) -> None:
    src = source_path(assignment)
    nb = refresh_expected(nbformat.read(src, as_version=4), assignment)
    nbformat.write(nb, src)
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
        shutil.copy(COURSE / "nbgrader_config.py", course)
        made = generate_release(assignment, course)
        out = COURSE / "release" / assignment
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        shutil.copy(made, out / made.name)
    SOLUTIONS.mkdir(exist_ok=True)
    solution = execute(solution_notebook(nb, assignment), SOLUTIONS)
    nbformat.write(solution, SOLUTIONS / f"{assignment}.ipynb")
    print(f"{assignment}: source refreshed, release and solution written")


def main(argv: list[str]) -> int:
    for assignment in argv or assignments():
        build(assignment)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
