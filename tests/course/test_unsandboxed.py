"""Without the sandbox (`sandbox="none"`, the instructor's explicit choice), graded through `nbgrader
autograde` with the text's numbers: a late gradebook writer and detached processes gain nothing; every
run says what a submission can do; an interrupt caught in a loop costs only its own question; and, run
as the grader's own user, a submission that changes the grader's own files stops grading, each change
named and the course's and library's put back. The kernel as a user of its own: `test_sandbox.py`.
"""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from exercises import build, class_key
from exercises.grading.sandbox import unboxed_user_works
from exercises.keys import keys_for
from tests.course.attacks import (
    CATCHES_INTERRUPT,
    CH01,
    DETACHED_WRITER,
    DETACHES,
    IGNORES_SIGINT,
    POISONS,
    total,
    with_attack,
    wrong_answers,
)
from tests.course.course_kit import SANDBOX, Course, reference_answers


@pytest.fixture(scope="module")
def unboxed(tmp_path_factory):
    """Without a sandbox (the instructor's explicit `sandbox="none"`), the text's numbers: a late gradebook
    writer and 30 detached processes, each on answers that are all wrong; and the reference answers with
    two of them endless loops, one that catches the interrupt and one that ignores it."""
    root = tmp_path_factory.mktemp("unboxed")
    course = Course(root, [CH01], cell_timeout_s=6, sandbox="none")
    wrong = wrong_answers(CH01)
    tag = f"book-unboxed-{time.monotonic_ns()}"
    db = str(root / "gradebook.db")
    course.submit(CH01, "late_writer", with_attack(wrong, DETACHED_WRITER.format(db=db)))
    course.submit(CH01, "detaches", with_attack(wrong, DETACHES.format(tag=tag)))
    catches, ignores = sorted(keys_for(CH01))[1:4:2]
    stuck = {catches + "_answer": CATCHES_INTERRUPT, ignores + "_answer": IGNORES_SIGINT}
    course.submit(CH01, "stuck_cells", {**reference_answers(CH01), **stuck})
    first = course.autograde(CH01)
    time.sleep(6)  # the late writer's 4 s
    return course, first, tag


@pytest.fixture(scope="module")
def poisoned(unboxed):
    """The same unsandboxed course: a submission that rewrites the gradebook, gives the class a key of
    its own (numbers it chose, over the key's file), rewrites the course configuration, the library
    and the Python, then an honest one. Its poisons are shared files: only where every other test
    process grades in the sandbox (which does not watch them)."""
    if SANDBOX != "bwrap":
        pytest.skip("the poisons would stop the other test processes' unsandboxed grading")
    course, *_ = unboxed
    root = course.root
    db = str(root / "gradebook.db")
    wrong = wrong_answers(CH01)
    library = Path(build.ROOT) / "book_lib" / "__pycache__" / "zz_poisoned.cpython-311.pyc"
    python = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    startup = python / "zz_book_grading_test.pth"  # every later Python would run it (this one is a comment)
    raises_scores = (
        f"import sqlite3\nsqlite3.connect({db!r}).execute('UPDATE grade SET auto_score = 99').connection.commit()\n"
    )
    key_file = class_key.path(root, CH01)
    key_text = key_file.read_text()
    own_values = f"open({str(key_file)!r}, 'w').write('{{\"seed\": 0, \"class\": {{}}}}')\n"
    attack = raises_scores + own_values
    attack += POISONS.format(config=str(root / "nbgrader_config.py"), library=str(library))
    attack += f"\npathlib.Path({str(startup)!r}).write_text('# poisoned')\n"
    with (root / "nbgrader_config.py").open("a") as config_file:  # its kernel runs as the grader's own user
        config_file.write("get_config().BookExecute.own_user = False\n")
    config = (root / "nbgrader_config.py").read_text()
    course.submit(CH01, "poisons", with_attack(wrong, attack))
    course.submit(CH01, "zz_after_poison", reference_answers(CH01))
    try:
        second = course.autograde(CH01, "[pz]*")  # nbgrader takes one student, or a glob: these two
        restored = {
            "config": (root / "nbgrader_config.py").read_text() == config,
            "values": key_file.read_text() == key_text,
            "library": not library.exists(),
            "startup": not startup.exists(),
        }
    finally:
        library.unlink(missing_ok=True)
        startup.unlink(missing_ok=True)
    return course, second, restored


def test_without_a_sandbox_late_writers_and_detached_processes_gain_nothing(unboxed):
    course, first, tag = unboxed
    assert first.returncode == 0, first.stderr[-3000:]
    scores = course.scores(CH01)
    for student in ("late_writer", "detaches"):
        assert total(scores, student) == 0, (student, scores[student])
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert not left, f"{len(left)} detached processes outlived grading"


def test_every_run_without_a_sandbox_says_what_a_submission_can_do(unboxed):
    """The exposure of this machine's unsandboxed kernel (`sandbox.unboxed_exposure`), printed for each one."""
    course, first, _ = unboxed
    said = (
        "The submission's kernel runs as a user of its own"
        if unboxed_user_works()
        else "The submission's kernel runs as the grader's own user"
    )
    assert first.stderr.count(said) == len(course.scores(CH01)), first.stderr[-3000:]


def test_without_a_sandbox_an_interrupt_caught_or_ignored_in_a_loop_costs_only_its_own_question(unboxed):
    """The kernel that ignores the interrupt is restarted and the cells before the next question replayed."""
    course, *_ = unboxed
    looping = sorted(keys_for(CH01))[1:4:2]
    for gid, (score, top) in course.scores(CH01)["stuck_cells"].items():
        assert score == (0 if gid in looping else top), (gid, score, top)


def test_without_a_sandbox_a_submission_that_changes_the_graders_files_stops_grading(poisoned):
    """The gradebook, the class's values, the configuration, the library and the Python: each named, the
    course's and the library's put back, and nothing graded after a change that cannot be."""
    course, second, restored = poisoned
    assert second.returncode != 0
    assert "changed while a submission ran" in second.stderr, second.stderr[-3000:]
    for name in ("gradebook.db", f"{CH01}.json", "nbgrader_config.py", "zz_poisoned", "zz_book_grading_test.pth"):
        assert name in second.stderr, name
    assert "zz_book_grading_test.pth cannot be put back" in second.stderr
    assert "nothing more is graded until the instructor has checked them" in second.stderr
    assert restored == {"config": True, "values": True, "library": True, "startup": False}
    scores = course.scores(CH01)
    for student in ("late_writer", "detaches", "poisons", "zz_after_poison"):
        assert student not in scores or total(scores, student) == 0, (student, scores.get(student))
