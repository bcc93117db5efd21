"""Every assignment graded through `nbgrader autograde`, the instructor's one command.

Each assignment is built as `make course` builds it, its reference solution executed on the class's
numbers, and graded as a class with its own numbers (a course seed), with three submissions:
the unmodified release scores 0 on every question; the class's reference solution scores full marks;
and a wrong answer to every question loses every point. The wrong answers are the hardest we have:
a value question answered with the text's own numbers (the public solution, which a class's numbers
must not accept), a question with a plausible wrong answer in its keys (`PLAUSIBLE`: a blocking
program for a collective one, say) answered with that, and every other question made wrong by hand.
The same submissions graded by `make grade` with two workers get the same grades (chapter 1).

The assignments are graded in two courses, each through one `nbgrader autograde` run (one process
for many gradings), so that pytest-xdist (`--dist loadscope`) gives each half its own worker.
Hostile submissions, and answers that raise or never end, are in `tests/course/test_hostile.py`.
"""

import importlib
import json

import nbformat
import pytest

from exercises import build, variants
from exercises.keys import keys_for, manual_for
from tests.course.course_kit import SANDBOX, Course, reference_answers, wrong_answer

SEED = 20261124
STUDENTS = ("blank", "reference", "wrong")


def plausible(assignment: str) -> dict[str, str]:
    """The keys' plausible wrong answers of an assignment: grade_id -> answer source."""
    return getattr(importlib.import_module(f"exercises.keys.{assignment}"), "PLAUSIBLE", {})


def wrong_answers(assignment: str, values: dict) -> dict[str, str]:
    """A wrong answer to every question of a class: the text's numbers for a value question, the keys'
    plausible wrong answer where there is one, else the reference made wrong (`course_kit.wrong_answer`)."""
    keys, reference, public = keys_for(assignment), reference_answers(assignment, values), reference_answers(assignment)
    answers = {}
    for gid, key in keys.items():
        if gid in plausible(assignment):
            answers[gid + "_answer"] = plausible(assignment)[gid]
        elif key.kind == "value":
            answers[gid + "_answer"] = public[gid + "_answer"]
        else:
            answers[gid + "_answer"] = wrong_answer(key, gid, reference[gid + "_answer"], values.get(gid))
    return answers


def pytest_generate_tests(metafunc):
    if "assignment" in metafunc.fixturenames and metafunc.cls is not None:
        metafunc.parametrize("assignment", metafunc.cls.assignments)


class GradedCourse:
    """The grading checks of a course of several assignments; one `Test...` subclass per half."""

    assignments: tuple[str, ...]

    @pytest.fixture(scope="class")
    @classmethod
    def graded(cls, tmp_path_factory):
        """Every assignment's three submissions, graded by one `nbgrader autograde` run: assignment ->
        student -> grade_id -> (score, max score)."""
        course = cls.course = Course(tmp_path_factory.mktemp("class"), list(cls.assignments), seed=SEED, solutions=True)
        cls.solutions = {a: course.root / "solutions" / f"{a}.ipynb" for a in cls.assignments}
        cls.answers = {}
        for assignment in cls.assignments:
            values = course.values[assignment]
            cls.answers[assignment] = {
                "blank": {},
                "reference": reference_answers(assignment, values),
                "wrong": wrong_answers(assignment, values),
            }
            for student, answers in cls.answers[assignment].items():
                course.submit(assignment, student, answers)
        done = course.autograde("*")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return {assignment: course.scores(assignment) for assignment in cls.assignments}

    def test_the_class_solution_runs_on_the_class_numbers(self, graded, assignment):
        """`make course` executes each class's reference solution (an error there stops the build)."""
        solution = nbformat.read(self.solutions[assignment], as_version=4)
        assert not [o for c in solution.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert "<%" not in json.dumps([c.source for c in solution.cells])

    def test_every_submission_is_graded_on_every_question(self, graded, assignment):
        scores = graded[assignment]
        assert set(scores) == set(STUDENTS)
        questions = set(keys_for(assignment)) | set(manual_for(assignment))
        assert all(set(scores[student]) == questions for student in STUDENTS)

    def test_blank_release_scores_zero_everywhere(self, graded, assignment):
        blank = graded[assignment]["blank"]
        assert all(score == 0 for score, _ in blank.values()), blank

    def test_reference_solution_scores_full_marks(self, graded, assignment):
        """Every autograded question; one graded by hand waits for the instructor (next test)."""
        by_hand = manual_for(assignment)
        reference = {gid: pair for gid, pair in graded[assignment]["reference"].items() if gid not in by_hand}
        short = {gid: pair for gid, pair in reference.items() if pair[0] != pair[1] or pair[1] <= 0}
        assert not short, short

    def test_every_wrong_answer_loses_its_points(self, graded, assignment):
        wrong = graded[assignment]["wrong"]
        assert all(score == 0 for score, _ in wrong.values()), wrong

    def test_the_wrong_answers_include_the_public_solution_and_the_plausible_ones(self, assignment):
        """What the wrong submission tries: each value question's public answer, each plausible one."""
        keys, values = keys_for(assignment), variants.draw(SEED, assignment)
        answers = wrong_answers(assignment, values)
        public = reference_answers(assignment)
        for gid, key in keys.items():
            if gid in plausible(assignment):
                assert answers[gid + "_answer"] == plausible(assignment)[gid], gid
            elif key.kind == "value":
                assert answers[gid + "_answer"] == public[gid + "_answer"], gid


# Two halves of about equal grading time (chapter 3's 41 questions weigh most).
class TestGradingA(GradedCourse):
    assignments = (
        "ch01_rooflines",
        "ch03_sharding",
        "ch04_transformers",
        "ch06_training_llama3",
        "ch09_profiling",
        "ch12_gpus",
    )

    def test_two_workers_give_the_grades_of_nbgrader_autograde(self, graded, tmp_path):
        """`make grade JOBS=2` on chapter 1's submissions, in a new course folder: every score equal."""
        from exercises import grade

        if SANDBOX != "bwrap":
            pytest.skip("several workers need the sandbox (make test installs bubblewrap)")
        assignment = "ch01_rooflines"
        course = Course(tmp_path, [assignment], seed=SEED)
        for student, answers in self.answers[assignment].items():
            course.submit(assignment, student, answers)
        summary = grade.grade(tmp_path, assignment, jobs=2, echo=lambda line: None)
        assert summary["students"] == dict.fromkeys(STUDENTS, True), summary
        assert course.scores(assignment) == graded[assignment]


class TestGradingB(GradedCourse):
    assignments = ("ch02_tpus", "ch05_training", "ch07_inference", "ch08_serving_llama3", "ch10_jax")

    def test_a_question_graded_by_hand_waits_in_the_gradebook_for_formgrade(self, graded):
        """Problem 7.4: an answer written needs a manual grade; a blank one scores 0. The score formgrade saves
        (its `manual_score`, here through the same gradebook API) counts in the total."""
        from nbgrader.api import Gradebook

        from exercises.course import gradebook_url

        assignment, gid = "ch07_inference", "ch07_q4_sharding_design"
        with Gradebook(gradebook_url(self.course.root)) as gb:
            written = gb.find_grade(gid, assignment, assignment, "reference")
            assert written.needs_manual_grade and written.auto_score is None
            blank = gb.find_grade(gid, assignment, assignment, "blank")
            assert blank.score == 0 and not blank.needs_manual_grade
            before = gb.find_submission(assignment, "reference").score
            written.manual_score = 3.0
            gb.db.commit()
            assert gb.find_submission(assignment, "reference").score == before + 3.0


def test_the_two_halves_hold_every_assignment_once():
    halves = [*TestGradingA.assignments, *TestGradingB.assignments]
    assert sorted(halves) == sorted(build.assignments())
