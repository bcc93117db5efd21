"""The one nbgrader configuration: a class's `nbgrader_config.py` (`make course`), `make exercises`, the tests.

Autograding runs nbgrader's own pipeline with the pieces of `exercises/grading/` in it: answers are
recorded in the student's kernel and judged by the grader (a JAX program compiled and run by its own
worker), the kernel runs sandboxed and bounded, deleted test cells are restored from the gradebook,
and the saved scores are read back. Generating an assignment first
fills the source's templates with the course's numbers (`exercises/variants.py`: the class's own
where the folder's key has them, `exercises/class_key.py`, else the text's) and last drops the
solution-only cells.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["COURSE_ID", "configure", "gradebook_revision", "gradebook_url", "write_config"]

COURSE_ID = "how-to-scale-your-model"
CONFIG_FILE = """\
\"\"\"nbgrader configuration of this class's course folder (written by `make course`).\"\"\"
import sys
from pathlib import Path

sys.path.insert(0, {repo!r})
from exercises.course import configure

configure(get_config(), Path(__file__).resolve().parent{limits})
"""


def gradebook_url(root: Path, db: str | None = None) -> str:
    """The SQLAlchemy URL of a course's gradebook: SQLite in `root` (one machine), or the PostgreSQL
    database `db` names (`postgresql://USER@HOST/NAME`, which several grading machines can write at once).

    Raises:
        ValueError: `db` is neither None nor a PostgreSQL URL.
    """
    if db is None:
        # several graders may share a SQLite gradebook (`make grade JOBS=n`): wait for its lock, up to a minute
        return f"sqlite:///{Path(root).resolve() / 'gradebook.db'}?timeout=60"
    for scheme in ("postgresql://", "postgresql+psycopg://"):
        if db.startswith(scheme):
            return "postgresql+psycopg://" + db.removeprefix(scheme)
    raise ValueError(f"db={db!r}: not a PostgreSQL URL; allowed: postgresql://USER@HOST[:PORT]/NAME, or none (SQLite)")


@functools.cache
def gradebook_revision() -> str:
    """The alembic revision nbgrader stamps a new gradebook with, the head of its migrations.

    Read here, once per process, instead of by the `alembic heads` subprocess nbgrader starts for every
    new gradebook (about 4 s of a course's first step, and an `alembic` it looks for on the PATH);
    `configure` puts it in place of `nbgrader.api.get_alembic_version`.
    """
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader import dbutil

    config = Config()
    config.set_main_option("script_location", dbutil.ALEMBIC_DIR)
    head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:
        raise RuntimeError(f"{dbutil.ALEMBIC_DIR}: no alembic head; nbgrader's migrations are missing")
    return head


def configure(
    c,
    root: Path,
    *,
    cell_timeout_s: int = 60,
    notebook_timeout_s: int = 600,
    sandbox: str = "bwrap",
    db: str | None = None,
    late: str = "none",
) -> None:
    """Fill the traitlets config `c` for the course rooted at `root`.

    Args:
        c: a `traitlets.config.Config` (or nbgrader's `get_config()`).
        root: the course folder (`source/`, `release/`, `submitted/`, `gradebook.db`).
        cell_timeout_s: one cell's limit (s); a question must finish in 10 s on two cores, and
            importing JAX takes a few more.
        notebook_timeout_s: one submitted notebook's limit (s), all cells together.
        sandbox: "bwrap" (grading refuses to run where bubblewrap does not work) or "none" (no
            isolation: the grader checks its own files around each submission instead; README,
            "Grading").
        db: the gradebook: None for SQLite in `root`, or a PostgreSQL URL (`gradebook_url`).
        late: the late policy (`exercises/grading/late.py`): "none", "zero" or "P%/day".

    Raises:
        ValueError: an unknown late policy.
    """
    import nbgrader.api
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        CheckCellMetadata,
        ClearOutput,
        DeduplicateIds,
        IgnorePattern,
        LimitOutput,
        OverwriteKernelspec,
        SaveAutoGrades,
    )

    from exercises.grading.execute import BookExecute
    from exercises.grading.late import LatePolicy, parse_policy
    from exercises.grading.pipeline import (
        CheckMetadata,
        CheckSavedGrades,
        CompareAnswers,
        RecordAnswers,
        RestoreCells,
    )
    from exercises.variants import DropSolutionOnly, RenderVariant

    parse_policy(late)
    nbgrader.api.get_alembic_version = gradebook_revision
    root = Path(root).resolve()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.db_url = gradebook_url(root, db)
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.ClearSolutions.enforce_metadata = True
    generate = GenerateAssignment.class_traits()["preprocessors"].default()
    c.GenerateAssignment.preprocessors = [
        RenderVariant,
        *(CheckMetadata if step is CheckCellMetadata else step for step in generate),
        DropSolutionOnly,
    ]
    c.Autograde.sanitize_preprocessors = [
        ClearOutput,
        DeduplicateIds,
        OverwriteKernelspec,
        RestoreCells,
        CheckMetadata,
    ]
    c.RestoreCells.add_missing_cells = True
    c.Autograde.autograde_preprocessors = [
        RecordAnswers,
        BookExecute,
        CompareAnswers,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SaveAutoGrades,
        CheckSavedGrades,
        AssignLatePenalties,
        CheckMetadata,
    ]
    c.BookExecute.timeout = cell_timeout_s
    c.BookExecute.notebook_timeout = notebook_timeout_s
    c.BookExecute.interrupt_on_timeout = True
    c.BookExecute.kernel_name = "python3"
    c.BookExecute.sandbox = sandbox
    c.Execute.kernel_name = "python3"
    c.AssignLatePenalties.plugin_class = LatePolicy
    c.LatePolicy.penalty = late


def write_config(root: Path, **limits) -> Path:
    """Write `root/nbgrader_config.py` for a course folder outside the repository (`configure`'s keywords)."""
    repo = Path(__file__).resolve().parent.parent
    extra = "".join(f", {name}={value!r}" for name, value in limits.items())
    path = Path(root) / "nbgrader_config.py"
    path.write_text(CONFIG_FILE.format(repo=str(repo), limits=extra))
    return path
