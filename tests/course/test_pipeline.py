"""The grading pipeline's own pieces, without a kernel: `CheckMetadata` judges nbgrader's cell metadata
as nbgrader's `CheckCellMetadata` does, while checking the cell schema only once; a new gradebook is
stamped with the revision nbgrader's own `alembic heads` gives."""

import copy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jsonschema import ValidationError
from nbgrader.preprocessors import CheckCellMetadata

from exercises import build, course
from exercises.grading.pipeline import CheckMetadata


def _verdict(check, nb) -> str:
    try:
        check().preprocess(copy.deepcopy(nb), {})
    except ValidationError as err:
        return f"refused: {err}"
    return "accepted"


def _broken(nb, change) -> nbformat.NotebookNode:
    nb = copy.deepcopy(nb)
    change(next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")).metadata["nbgrader"])
    return nb


@pytest.mark.parametrize(
    "change",
    [
        None,
        lambda meta: meta.update(points="two"),  # not a number
        lambda meta: meta.update(grade_id="a b"),  # not an id
        lambda meta: meta.pop("solution"),  # a field missing
    ],
    ids=["as released", "points not a number", "grade id with a space", "solution missing"],
)
def test_check_metadata_judges_as_nbgrader_does(change):
    nb = nbformat.read(build.source_path("ch01_rooflines"), as_version=4)
    nb = nb if change is None else _broken(nb, change)
    mine, theirs = _verdict(CheckMetadata, nb), _verdict(CheckCellMetadata, nb)
    assert mine == theirs
    assert (change is None) == (mine == "accepted"), mine


def test_duplicate_grade_ids_are_refused_the_same_way():
    nb = nbformat.read(build.source_path("ch01_rooflines"), as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    graded[1].metadata["nbgrader"]["grade_id"] = graded[0].metadata["nbgrader"]["grade_id"]
    assert _verdict(CheckMetadata, nb) == _verdict(CheckCellMetadata, nb) != "accepted"


def test_a_new_gradebook_gets_the_revision_alembic_heads_gives(tmp_path):
    from nbgrader.dbutil import _temp_alembic_ini

    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'gradebook.db'}") as ini:
        alembic = Path(sys.executable).parent / "alembic"
        heads = subprocess.run([str(alembic), "-c", ini, "heads"], capture_output=True, text=True, check=True)
    assert heads.stdout.split()[0] == course.gradebook_revision()
