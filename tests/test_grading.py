"""The nbgrader round trip through its Python API, in a temporary course.

For every assignment: the unmodified release scores 0 on every question; the reference solution
scores full marks; an answer made wrong loses its question's points (each question is tried);
a submission that also rebinds book_lib gains nothing; and in one notebook an answer that raises,
an answer that never ends and one wrong value lose only their own points while the rest are graded.
"""

import importlib
import shutil
from pathlib import Path

import nbformat
import pytest

from exercises import build
from exercises.keys import keys_for

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 20  # per cell; the endless loop below costs exactly this


def _api(course: Path):
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.Execute.timeout = TIMEOUT_S
    config.Execute.interrupt_on_timeout = True
    config.Execute.kernel_name = "python3"
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def _solutions(assignment):
    src = nbformat.read(build.source_path(assignment), as_version=4)
    return {
        build.grade_id(c): build.MARKER.sub("", c.source)
        for c in src.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def _wrong(key, gid, solution):
    """The reference answer followed by lines that make it wrong."""
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
        wrong = next(c for c in key.choices if c != key.expected())
        lines.append(f"{key.names[0]} = {wrong!r}")
    return "\n".join(lines)


REBIND = """
import book_lib.roofline, book_lib.hardware
for _name in book_lib.roofline.__all__:
    setattr(book_lib.roofline, _name, lambda *a, **k: 0.0)
"""


def _submission(release, answers, extra_first=""):
    nb = nbformat.read(release, as_version=4)
    for cell in nb.cells:
        gid = build.grade_id(cell)
        if gid in answers:
            cell.source = answers[gid]
        if gid == "imports" and extra_first:
            cell.source += "\n" + extra_first
    return nb


@pytest.fixture(scope="module", params=build.assignments())
def graded(request, tmp_path_factory):
    """Autograde four submissions of one assignment; returns (keys, points, scores by student)."""
    assignment = request.param
    course = tmp_path_factory.mktemp(assignment)
    shutil.copytree(ROOT / "exercises" / "source" / assignment, course / "source" / assignment)
    release = build.generate_release(assignment, course)
    keys = keys_for(assignment)
    reference = _solutions(assignment)
    gids = sorted(keys)
    broken = {gids[1]: "raise RuntimeError('a bug in this answer')", gids[2]: "while True:\n    pass"}
    last = gids[-1]
    mixed = {
        **reference,
        **{g + "_answer": src for g, src in broken.items()},
        last + "_answer": _wrong(keys[last], last, reference[last + "_answer"]),
    }
    plausible = getattr(importlib.import_module(f"exercises.keys.{assignment}"), "PLAUSIBLE", {})
    students = {
        "blank": {},
        "reference": reference,
        "wrong": {g + "_answer": _wrong(keys[g], g, reference[g + "_answer"]) for g in gids},
        "mixed": mixed,
    }
    if plausible:
        students["plausible"] = {**reference, **{g + "_answer": src for g, src in plausible.items()}}
    for student, answers in students.items():
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        extra = REBIND if student == "wrong" else ""
        nbformat.write(_submission(release, answers, extra), target / release.name)
    api = _api(course)
    for student in students:
        result = api.autograde(assignment, student, force=True, create=True)
        assert result["success"], result["log"]
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            notebook = gb.find_submission_notebook(assignment, assignment, student)
            scores[student] = {g.name: (g.score, g.max_score) for g in notebook.grades}
    return keys, gids, broken, scores, set(plausible)


def test_blank_release_scores_zero_everywhere(graded):
    keys, _, _, scores, _ = graded
    assert set(scores["blank"]) == set(keys)
    assert all(score == 0 for score, _ in scores["blank"].values()), scores["blank"]


def test_reference_solution_scores_full_marks(graded):
    _, _, _, scores, _ = graded
    short = {gid: pair for gid, pair in scores["reference"].items() if pair[0] != pair[1] or pair[1] <= 0}
    assert not short, short


def test_every_wrong_answer_loses_its_points_even_with_book_lib_rebound(graded):
    _, _, _, scores, _ = graded
    assert all(score == 0 for score, _ in scores["wrong"].values()), scores["wrong"]


def test_errors_and_endless_loops_cost_only_their_own_points(graded):
    _, gids, broken, scores, _ = graded
    lost = set(broken) | {gids[-1]}
    for gid, (score, top) in scores["mixed"].items():
        assert score == (0 if gid in lost else top), (gid, score, top)


def test_plausible_wrong_answers_lose_only_their_points(graded):
    """Keys may list answers that look right but break the question's rules (a full score matrix...)."""
    _, _, _, scores, plausible = graded
    if not plausible:
        pytest.skip("this assignment lists no plausible wrong answers")
    for gid, (score, top) in scores["plausible"].items():
        assert score == (0 if gid in plausible else top), (gid, score, top)
