"""Hostile submissions in the sandbox, graded through `nbgrader autograde`: none gains anything over its answers.

Each attack is one that fooled an older grader (the grading issues list them), written into an
answer cell, since locked cells are restored from the gradebook before a submission runs. Most
ride on answers that are all wrong, so any point they win is a point stolen; the rest check that
a misbehaving answer costs only its own points. They run as one batch of chapter 1 submissions of
a class with its own numbers. Also here: feedback leaks no expected value or hidden code, a box
that cannot be built grades nothing, and a notebook is bounded as a whole. Without the sandbox:
`test_unsandboxed.py`; the cheats on later assignments and forged JAX evidence: `test_cheats.py`;
each wall of the box attacked directly: `test_sandbox.py`; forged JAX programs for every question:
`test_programs.py`.
"""

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exercises import build, class_key
from exercises.grading.pipeline import MARKER
from exercises.grading.recorder import MIME
from exercises.keys import keys_for
from tests.course.attacks import (
    ANY_STRING,
    BLANKS_LATER_CELLS,
    CATCHES_INTERRUPT,
    CH01,
    DETACHED_WRITER,
    DETACHES,
    ESCAPES,
    FLOODS_OUTPUT,
    HOLDS_LOCK,
    IGNORES_SIGINT,
    MEMORY_BOMB,
    PROCESS_BOMB,
    READS_CLASS_VALUES,
    READS_EXPECTED,
    REWRITES_TESTS,
    SANDBOXED,
    SHADOW_BUILTINS,
    SWALLOWS_ERRORS,
    delete_test_cells,
    total,
    with_attack,
    wrong_answers,
)
from tests.course.course_kit import Course, reference_answers

SEED = 7  # the hostile class has its own numbers, so reading them would pay


@pytest.fixture(scope="module")
def ch01(tmp_path_factory):
    """One batch of hostile ch01 submissions, graded by one `nbgrader autograde` run."""
    root = tmp_path_factory.mktemp("hostile")
    course = Course(root, [CH01], cell_timeout_s=6, seed=SEED)
    db = str(root / "gradebook.db")
    listener = socket.create_server(("127.0.0.1", 0))  # what a kernel outside the box would listen on
    listener.setblocking(False)
    host_file = root.parent / "kernel-outside.json"
    host_file.write_text(json.dumps({"transport": "tcp", "ip": "127.0.0.1", "shell_port": listener.getsockname()[1]}))
    other = tmp_path_factory.mktemp("another-class")
    (other / class_key.KEY_DIR).mkdir()
    class_key.path(other, CH01).write_text('{"seed": 1, "class": {}}')
    facts = {"db": db, "marker": root.parent / "escaped-marker", "tag": f"book-hostile-{time.monotonic_ns()}"}
    escapes = ESCAPES.format(
        host_file=str(host_file),
        port=listener.getsockname()[1],
        other_values=str(class_key.path(other, CH01)),
        marker=str(facts["marker"]),
    )
    values = course.values[CH01]
    keys, reference, wrong = keys_for(CH01), reference_answers(CH01, values), wrong_answers(CH01, values)
    gids = sorted(keys)
    choice = next(g for g, k in keys.items() if k.kind == "choice")
    value = next(g for g, k in keys.items() if k.kind == "value")
    wrong_choice = next(c for c in keys[choice].choices if c != keys[choice].answer(values.get(choice)))
    students = {
        "shadows_builtins": with_attack(wrong, SHADOW_BUILTINS),
        "any_string": {
            **with_attack(wrong, ANY_STRING),
            choice + "_answer": f"{keys[choice].names[0]} = _Anything({wrong_choice!r})",
        },
        "reads_expected": {
            **with_attack(wrong, READS_EXPECTED),
            **{value + "_answer": "\n".join(f"{n} = _Spy()" for n in keys[value].names)},
        },
        "blanks_later_cells": with_attack(wrong, BLANKS_LATER_CELLS),
        "swallows_errors": with_attack(wrong, SWALLOWS_ERRORS),
        "detached_writer": with_attack(wrong, DETACHED_WRITER.format(db=db)),
        "rewrites_tests": with_attack(wrong, REWRITES_TESTS.format(db=db)),
        "holds_lock": with_attack(wrong, HOLDS_LOCK.format(db=db)),
        "reads_class_values": {
            **wrong,
            "ch01_q5_h100_batch_answer": READS_CLASS_VALUES.format(path=str(class_key.path(root, CH01))),
        },
        "zz_after_attacks": wrong,
        "mixed": {
            **reference,
            gids[1] + "_answer": "raise RuntimeError('a bug in this answer')",
            gids[2] + "_answer": "while True:\n    pass",
            gids[3] + "_answer": wrong[gids[3] + "_answer"],
            gids[4] + "_answer": IGNORES_SIGINT,
            gids[5] + "_answer": CATCHES_INTERRUPT,
        },
        "escapes": with_attack(wrong, escapes),
        "memory_bomb": with_attack(wrong, MEMORY_BOMB),
        "process_bomb": with_attack(wrong, PROCESS_BOMB),
        "detaches": with_attack(wrong, DETACHES.format(tag=facts["tag"])),
        "floods_output": with_attack(wrong, FLOODS_OUTPUT),
    }
    for student, answers in students.items():
        course.submit(CH01, student, answers)
    course.submit(CH01, "deletes_tests", wrong, edit=delete_test_cells)
    # right answers that print to stderr, their test cells deleted: full marks all the same
    noisy = {g: "import sys\nprint('debugging', file=sys.stderr)\n" + src for g, src in reference.items()}
    course.submit(CH01, "right_noisy_deletes_tests", noisy, edit=delete_test_cells)
    done = course.autograde(CH01)
    time.sleep(6)  # give any detached process the time it asked for
    try:
        listener.accept()
        facts["loopback_connections"] = 1
    except BlockingIOError:
        facts["loopback_connections"] = 0
    listener.close()
    return course, done, gids, facts, {"choice": choice, "value": value}


@SANDBOXED
def test_the_batch_completes_despite_every_attack(ch01):
    course, done, *_ = ch01
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not graded" not in done.stderr


@pytest.mark.parametrize(
    "student",
    [
        "shadows_builtins",
        "any_string",
        "reads_expected",
        "blanks_later_cells",
        "swallows_errors",
        pytest.param("detached_writer", marks=SANDBOXED),
        pytest.param("rewrites_tests", marks=SANDBOXED),
        pytest.param("holds_lock", marks=SANDBOXED),
        pytest.param("reads_class_values", marks=SANDBOXED),
        pytest.param("zz_after_attacks", marks=SANDBOXED),
        "deletes_tests",
        pytest.param("escapes", marks=SANDBOXED),
        pytest.param("memory_bomb", marks=SANDBOXED),
        pytest.param("process_bomb", marks=SANDBOXED),
        pytest.param("detaches", marks=SANDBOXED),
        pytest.param("floods_output", marks=SANDBOXED),
    ],
)
def test_an_attack_on_wrong_answers_scores_what_the_wrong_answers_score(ch01, student):
    course, *_ = ch01
    scores = course.scores(CH01)
    assert total(scores, "zz_after_attacks") == 0, "the wrong answers alone, graded after every attack"
    assert total(scores, student) == 0, scores[student]


@SANDBOXED
def test_nothing_rewrote_the_gradebook_after_grading(ch01):
    course, _, _, db, _ = ch01
    scores = course.scores(CH01)
    assert all(score <= top for student in scores for score, top in scores[student].values())
    with sqlite3.connect(db["db"]) as conn:
        assert conn.execute("SELECT COUNT(*) FROM grade WHERE auto_score = 99").fetchone()[0] == 0


def _printed(course, student: str, word: str) -> list[str]:
    """Lines a submission printed that start with `word`, from its autograded notebook."""
    lines = []
    for cell in course.autograded(CH01, student).cells:
        for out in cell.get("outputs", []):
            lines += [line for line in out.get("text", "").splitlines() if line.startswith(word)]
    return lines


@SANDBOXED
def test_from_inside_the_box_nothing_outside_is_reached(ch01):
    """Connection files, the host's loopback, another class's values, the host's files: all out of reach."""
    course, _, _, facts, _ = ch01
    (line,) = _printed(course, "escapes", "REACHED")
    reached = json.loads(line.split(" ", 1)[1])
    assert set(reached) == {"connection_files", "host_file", "loopback", "other_class", "marker"}
    assert all(what.startswith("denied") for what in reached.values()), reached
    assert facts["loopback_connections"] == 0 and not facts["marker"].exists()


@SANDBOXED
def test_memory_and_process_bombs_are_bounded_and_nothing_outlives_grading(ch01):
    course, _, _, facts, _ = ch01
    assert not _printed(course, "memory_bomb", "ALLOCATED")
    (forked,) = _printed(course, "process_bomb", "FORKED")
    assert int(forked.split()[1]) < 256, forked
    left = subprocess.run(["pgrep", "-f", facts["tag"]], capture_output=True, text=True).stdout.split()
    assert not left, f"{len(left)} detached processes outlived grading"


@SANDBOXED
def test_a_flood_of_output_is_cut_in_the_grader(ch01):
    course, *_ = ch01
    assert _printed(course, "floods_output", "[the grader dropped this cell's output past")
    path = course.root / "autograded" / "floods_output" / CH01 / f"{CH01}.ipynb"
    assert path.stat().st_size < 3_000_000, path.stat().st_size


def test_grading_refuses_a_box_it_cannot_build_and_a_submission_that_links_outside(tmp_path):
    """No bubblewrap on the PATH, and no `sandbox="none"` in the configuration: nothing is graded. A
    submission holding a link to the class's values (nbgrader would copy what it points to): refused."""
    course = Course(tmp_path, [CH01], seed=SEED, sandbox="bwrap")
    reference = reference_answers(CH01, course.values[CH01])
    course.submit(CH01, "student", reference)
    done = course.autograde(CH01, path=str(Path(sys.executable).parent))
    assert done.returncode != 0 and "bubblewrap cannot run a kernel here" in done.stderr, done.stderr[-2000:]
    assert "student" not in course.scores(CH01) or total(course.scores(CH01), "student") == 0
    folder = course.submit(CH01, "links", reference)
    (folder / "values.json").symlink_to(class_key.path(tmp_path, CH01))
    done = course.autograde(CH01, "links")
    assert done.returncode != 0 and "holds a symbolic link (values.json)" in done.stderr, done.stderr[-2000:]
    assert "links" not in course.scores(CH01) or total(course.scores(CH01), "links") == 0


def test_errors_endless_loops_and_an_ignored_or_caught_interrupt_cost_only_their_own_points(ch01):
    course, _, gids, _, _ = ch01
    lost = set(gids[1:6])
    for gid, (score, top) in course.scores(CH01)["mixed"].items():
        assert score == (0 if gid in lost else top), (gid, score, top)


def test_deleted_test_cells_are_restored_and_graded_and_stderr_costs_nothing(ch01):
    course, *_ = ch01
    scores = course.scores(CH01)
    assert set(scores["right_noisy_deletes_tests"]) == set(keys_for(CH01))
    assert all(score == top for score, top in scores["right_noisy_deletes_tests"].values())
    graded = course.autograded(CH01, "deletes_tests")
    assert {build.grade_id(c) for c in graded.cells} >= set(keys_for(CH01))


def test_autograded_notebooks_keep_no_recorder_and_no_expected_value(ch01):
    course, *_ = ch01
    for student in ("zz_after_attacks", "mixed"):
        text = json.dumps([c for c in course.autograded(CH01, student).cells])
        assert MARKER not in text and "__book_grader_record" not in text and MIME not in text and "nonce" not in text


def test_feedback_names_what_is_wrong_and_leaks_no_answer(ch01):
    course, *_ = ch01
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run(
        [str(nbgrader), "generate_feedback", CH01, "--student", "zz_after_attacks", "--force"],
        cwd=course.root,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    html = (course.root / "feedback" / "zz_after_attacks" / CH01 / f"{CH01}.html").read_text()
    assert "Incorrect" in html and "is not within" in html
    assert "expected" not in html.lower() and "__book_grader_record" not in html and "nonce" not in html
    for gid, key in keys_for(CH01).items():
        if key.kind == "value":
            for want in key.answer(course.values[CH01].get(gid)).values():
                assert f"{want:.6g}" not in html and repr(want) not in html


@pytest.fixture(scope="module")
def sleepy(tmp_path_factory):
    """A submission that sleeps in every answer cell, under a 12 s notebook limit."""
    course = Course(tmp_path_factory.mktemp("sleepy"), [CH01], cell_timeout_s=4, notebook_timeout_s=12)
    reference = reference_answers(CH01)
    course.submit(CH01, "sleeps", {g: src + "\nimport time\ntime.sleep(59)" for g, src in reference.items()})
    start = time.perf_counter()
    done = course.autograde(CH01)
    return course, done, time.perf_counter() - start


def test_a_sleeping_submission_is_bounded_as_a_whole(sleepy):
    course, done, seconds = sleepy
    assert done.returncode == 0, done.stderr[-2000:]
    assert seconds < 12 + 30, f"one notebook took {seconds:.0f} s against a 12 s limit"
    scores = course.scores(CH01)["sleeps"]
    assert sum(s for s, _ in scores.values()) < sum(t for _, t in scores.values()), "cells past the limit are not run"
