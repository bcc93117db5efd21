"""In-kernel cheats on the later assignments, and forged JAX evidence, graded through `nbgrader autograde`.

The value, choice and function assignments of chapters 7 to 12 in one class, graded in one run: the
cheats that fooled an older grader (rebound book_lib helpers, later cells blanked, a string equal to
anything; shadowed builtins and deleted test cells on chapter 9) on answers that are all wrong, so
any point is a point stolen. Chapter
10's blocking programs (right values, wrong structure) under each forgery of the old recorder's
evidence: 0 on every question.
"""

import importlib

from exercises.keys import keys_for, manual_for
from tests.course.attacks import (
    ANY_STRING,
    BLANKS_LATER_CELLS,
    FORGES_RECORD,
    FORGES_TEXT,
    REBINDS_HELPERS,
    SHADOW_BUILTINS,
    delete_test_cells,
    total,
    with_attack,
    wrong_answers,
)
from tests.course.course_kit import Course, reference_answers

SEED = 7


# The value and choice assignments of chapters 7 to 12: each in-kernel cheat, on answers that are all wrong.
CHEATS = ("ch07_inference", "ch08_serving_llama3", "ch09_profiling", "ch12_gpus")
# Shadowed builtins stall the kernel until the cell's limit, and deleted test cells are put back, on every
# assignment alike (`test_hostile.py` on chapter 1): each tried once more here, on the chapter with every kind.
ONCE_MORE_ON = "ch09_profiling"


def _cheats(keys: dict, values: dict, wrong: dict, assignment: str) -> dict[str, dict[str, str]]:
    """Each cheat of the kernel on an assignment's wrong answers: student -> answers."""
    students = {
        "rebinds_helpers": with_attack(wrong, REBINDS_HELPERS, assignment),
        "blanks_later_cells": with_attack(wrong, BLANKS_LATER_CELLS, assignment),
    }
    if assignment == ONCE_MORE_ON:
        students["shadows_builtins"] = with_attack(wrong, SHADOW_BUILTINS, assignment)
    choices = [g for g, k in keys.items() if k.kind == "choice"]
    if choices:
        g = choices[0]
        wrong_choice = next(c for c in keys[g].choices if c != keys[g].answer(values.get(g)))
        students["any_string"] = {
            **with_attack(wrong, ANY_STRING, assignment),
            g + "_answer": f"{keys[g].names[0]} = _Anything({wrong_choice!r})",
        }
    return students


def test_cheats_in_the_kernel_gain_nothing_on_later_assignments(tmp_path):
    # 6 s a cell: a kernel with shadowed builtins stalls until the limit (it costs time, not points)
    course = Course(tmp_path, list(CHEATS), cell_timeout_s=6, seed=SEED)
    students = {}
    for assignment in CHEATS:
        values = course.values[assignment]
        keys, wrong = keys_for(assignment), wrong_answers(assignment, values)
        students[assignment] = _cheats(keys, values, wrong, assignment)
        for student, answers in students[assignment].items():
            course.submit(assignment, student, answers)
        if assignment == ONCE_MORE_ON:
            students[assignment]["deletes_tests"] = wrong
            course.submit(assignment, "deletes_tests", wrong, edit=delete_test_cells)
    done = course.autograde("*")
    assert done.returncode == 0, done.stderr[-3000:]
    for assignment in CHEATS:
        scores = course.scores(assignment)
        assert set(scores) == set(students[assignment]), assignment
        for student in scores:
            questions = set(keys_for(assignment)) | set(manual_for(assignment))
            assert set(scores[student]) == questions, (assignment, student, scores[student])
            assert total(scores, student) == 0, (assignment, student, scores[student])


CH10 = "ch10_jax"


def test_forged_jax_evidence_gains_no_point(tmp_path):
    """Chapter 10's blocking programs (right values, wrong structure) under each forgery: 0 on every question."""
    course = Course(tmp_path, [CH10])
    blocking = {g + "_answer": src for g, src in importlib.import_module(f"exercises.keys.{CH10}").PLAUSIBLE.items()}
    reference = reference_answers(CH10)
    answers = {g: reference[g] + "\n" + blocking[g] if g in blocking else reference[g] for g in reference}
    course.submit(CH10, "forges_text", with_attack(answers, FORGES_TEXT, CH10))
    course.submit(CH10, "forges_record", with_attack(answers, FORGES_RECORD, CH10))
    done = course.autograde(CH10)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = course.scores(CH10)
    assert set(scores) == {"forges_text", "forges_record"}
    for student in scores:
        assert set(scores[student]) == set(keys_for(CH10)) == {g.removesuffix("_answer") for g in blocking}
        assert total(scores, student) == 0, (student, scores[student])
