"""From a student's download to the gradebook: an LMS's zip placed by `make collect`, its file times
graded against the assignment's due date and the course's late policy (`make course DUE=... LATE=...`)."""

from __future__ import annotations

import datetime
import io
import zipfile
from pathlib import Path

import nbformat
import pytest

from exercises import build, collect, handout, variants
from exercises.course import gradebook_url
from exercises.grading.late import LatePolicy, parse_policy
from tests.course.course_kit import Course, reference_answers

CH01 = "ch01_rooflines"
ROSTER = "id,first_name,last_name,email\nada,Ada,L,\nbob,Bob,M,\nbob_jr,Bob,Jr,\ncy,Cy,Y,\n"
NOTEBOOK = nbformat.writes(nbformat.v4.new_notebook()).encode()
DUE = datetime.datetime(2026, 12, 1, 12, 0)


@pytest.mark.parametrize(
    ("name", "roster", "student"),
    [
        ("ada/Copy of ch01_rooflines.ipynb", [], "ada"),
        ("submissions/ada/ch01_rooflines (2).ipynb", [], "ada"),
        ("bob_ch01_rooflines (1).ipynb", [], "bob"),
        ("bob_123_456_ch01_rooflines.ipynb", ["bob", "bob_jr"], "bob"),
        ("bob_jr_123_456_Copy of ch01_rooflines.ipynb", ["bob", "bob_jr"], "bob_jr"),
        ("bob_LATE_123_ch01_rooflines.ipynb", [], "bob"),
        ("bob/ada_ch01_rooflines.ipynb", ["ada", "bob"], "bob"),  # bob's folder: his file, whatever he named it
        ("submissions/ada_ch01_rooflines.ipynb", ["ada", "bob"], "ada"),
    ],
)
def test_a_student_is_read_from_a_folder_or_a_name_in_colab_and_lms_forms(name, roster, student):
    assert collect.student_of(name, CH01, roster) == (student, "")


@pytest.mark.parametrize(
    ("name", "roster", "why"),
    [
        ("ada/notes.ipynb", [], "its name does not hold ch01_rooflines"),
        ("ada/ch01_rooflines.pdf", [], "not a notebook (.ipynb)"),
        ("Copy of ch01_rooflines.ipynb", [], "no student in its name or folder"),
        ("zed_ch01_rooflines.ipynb", ["ada"], "'zed' names no student of the roster"),
        ("zed/ch01_rooflines.ipynb", ["ada"], "'zed' is not on the roster"),
        ("ada/../ch01_rooflines.ipynb", [], "no usable student id"),
    ],
)
def test_what_names_no_student_of_this_assignment_is_left_out_with_the_reason(name, roster, why):
    assert collect.student_of(name, CH01, roster) == (None, why)


def _handin(name: str, day: int, data: bytes = NOTEBOOK) -> collect.Handin:
    return collect.Handin(name, data, datetime.datetime(2026, 11, day, 9, 30))


def test_the_latest_file_of_each_student_is_placed_and_nothing_is_lost(tmp_path):
    (tmp_path / "roster.csv").write_text(ROSTER)
    first = collect.collect(
        tmp_path,
        CH01,
        [
            _handin("ada/Copy of ch01_rooflines.ipynb", 20),
            _handin("bob_ch01_rooflines (1).ipynb", 20),
            _handin("bob_ch01_rooflines (2).ipynb", 21),
            _handin("cy_ch01_rooflines.ipynb", 20, b"not json"),
            _handin("README.txt", 20),
        ],
    )
    assert first.placed == {"ada": "ada/Copy of ch01_rooflines.ipynb", "bob": "bob_ch01_rooflines (2).ipynb"}
    assert sorted(name for name, _ in first.left_out) == [
        "README.txt",
        "bob_ch01_rooflines (1).ipynb",
        "cy_ch01_rooflines.ipynb",
    ]
    placed = tmp_path / "submitted" / "bob" / CH01
    assert (placed / f"{CH01}.ipynb").read_bytes() == NOTEBOOK
    assert (placed / "timestamp.txt").read_text() == "2026-11-21 09:30:00.000000 UTC\n"
    again = collect.collect(
        tmp_path, CH01, [_handin("ada/ch01_rooflines.ipynb", 19), _handin("bob/x_ch01_rooflines.ipynb", 25)]
    )
    assert again.placed == {"bob": "bob/x_ch01_rooflines.ipynb"}
    assert again.left_out == [
        ("ada/ch01_rooflines.ipynb", "older than ada's submission already collected (2026-11-20 09:30:00)")
    ]
    (kept,) = (tmp_path / "collected" / "replaced" / "bob").iterdir()
    assert (kept / f"{CH01}.ipynb").exists() and kept.name == f"{CH01}-20261121T093000"
    assert again.notes == [f"bob: replaced the submission of 2026-11-21 09:30:00, kept in {kept}"]


def test_a_late_policy_takes_its_share_per_day_begun():
    policy = LatePolicy(penalty="10%/day")
    assert policy.late_submission_penalty("s", 10.0, 0) is None
    assert policy.late_submission_penalty("s", 10.0, 3600) == pytest.approx(1.0)
    assert policy.late_submission_penalty("s", 10.0, 1.5 * 86400) == pytest.approx(2.0)
    assert policy.late_submission_penalty("s", 10.0, 30 * 86400) == pytest.approx(10.0)
    assert LatePolicy(penalty="zero").late_submission_penalty("s", 7.0, 1) == 7.0
    assert LatePolicy(penalty="none").late_submission_penalty("s", 7.0, 1e6) is None
    with pytest.raises(ValueError, match=r"^late='10%': unknown; allowed: none, zero, or P%/day"):
        parse_policy("10%")


def test_a_zip_from_an_lms_is_placed_and_graded_with_its_times_and_the_late_policy(tmp_path):
    (tmp_path / "students.csv").write_text(ROSTER)
    root = tmp_path / "class"
    course = Course(root, [CH01], seed=5, roster=tmp_path / "students.csv", late="10%/day")
    build.make_course(root, [CH01], due="2026-12-01T13:00+01:00", solutions=False, echo=lambda line: None)
    with pytest.raises(ValueError, match=r"^late='zero': the course's late policy is '10%/day'; allowed: that one"):
        build.make_course(root, [CH01], late="zero", solutions=False, echo=lambda line: None)
    with pytest.raises(ValueError, match=r"^due='Dec 1': not a date and time"):
        build.make_course(root, [CH01], due="Dec 1", solutions=False, echo=lambda line: None)
    zipped = tmp_path / "download.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for name, student, when in (
            ("ada/Copy of ch01_rooflines.ipynb", "ada", DUE - datetime.timedelta(hours=1)),
            ("bob_ch01_rooflines (1).ipynb", "bob", DUE + datetime.timedelta(hours=36)),
        ):
            nb = nbformat.read(handout.path(root, student, CH01), as_version=4)
            answers = reference_answers(CH01, variants.load(root, CH01, student))
            for cell in nb.cells:
                cell.source = answers.get(build.grade_id(cell), cell.source)
            archive.writestr(zipfile.ZipInfo(name, when.timetuple()[:6]), nbformat.writes(nb))
    said = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(said):
        assert collect.main([str(root), CH01, "--zip", str(zipped)]) == 0
    assert said.getvalue().splitlines()[-1] == f"2 placed in {root / 'submitted'}, 0 left out"
    done = course.autograde(CH01)
    assert done.returncode == 0, done.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook(gradebook_url(root)) as gb:
        assert gb.find_assignment(CH01).duedate == DUE
        ada, bob = (gb.find_submission(CH01, s) for s in ("ada", "bob"))
        assert ada.score == ada.max_score and not ada.late_submission_penalty
        assert bob.total_seconds_late == 36 * 3600
        assert bob.late_submission_penalty == pytest.approx(0.2 * bob.max_score), "two days begun, 10 % each"


def test_make_collect_passes_its_source_on():
    import subprocess

    said = subprocess.run(
        ["make", "-n", "--no-print-directory", "collect", "DIR=/tmp/c", "ASSIGNMENT=ch01_rooflines", "ZIP=d.zip"],
        capture_output=True,
        text=True,
        cwd=build.ROOT,
        check=True,
    ).stdout
    assert said.splitlines()[-1].endswith('-m exercises.collect "/tmp/c" "ch01_rooflines" --zip "d.zip"'), said
    assert Path(build.ROOT / "Makefile").read_text().count("LATE=") >= 1
