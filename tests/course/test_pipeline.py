"""The grading pipeline's own preprocessors, without a kernel: `CheckMetadata` judges nbgrader's cell
metadata as nbgrader's `CheckCellMetadata` does, while checking the cell schema only once."""

import copy

import nbformat
import pytest
from jsonschema import ValidationError
from nbgrader.preprocessors import CheckCellMetadata

from exercises import build
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
