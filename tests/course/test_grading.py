"""Every assignment graded through `nbgrader autograde`, the instructor's one command.

Each assignment is graded as a class with its own numbers (a course seed): the unmodified release
scores 0 on every question; the class's reference solution scores full marks; the public solution
(the text's numbers) loses every value question; every answer made wrong loses its points; answers
that look right but break a question's rules (listed in the keys as PLAUSIBLE) lose theirs. The
same submissions graded by `make grade` with two workers get the same grades (chapter 1). Hostile
submissions, and answers that raise or never end, are in `tests/course/test_hostile.py`.
"""

import importlib

import pytest

from exercises import build
from exercises.keys import keys_for
from tests.course.course_kit import SANDBOX, Course, reference_answers, wrong_answer

SEED = 20261124


class GradedAssignment:
    """The grading checks of one assignment; one `Test...` subclass per assignment (below), so that
    pytest-xdist (`--dist loadscope`) can give different assignments to different workers."""

    assignment: str

    @pytest.fixture(scope="class")
    @classmethod
    def graded(cls, tmp_path_factory):
        """Autograde the standard submissions of the assignment; returns (keys, scores, plausible)."""
        assignment = cls.assignment
        course = Course(tmp_path_factory.mktemp(assignment), [assignment], seed=SEED)
        keys, reference = keys_for(assignment), reference_answers(assignment, course.values[assignment])
        plausible = getattr(importlib.import_module(f"exercises.keys.{assignment}"), "PLAUSIBLE", {})
        students = {
            "blank": {},
            "reference": reference,
            "wrong": {
                g + "_answer": wrong_answer(keys[g], g, reference[g + "_answer"], course.values[assignment].get(g))
                for g in keys
            },
        }
        if any(key.kind == "value" for key in keys.values()):
            # the text's own numbers; an assignment of code only has none, and its public solution is the reference
            students["public"] = reference_answers(assignment)
        if plausible:
            students["plausible"] = {**reference, **{g + "_answer": src for g, src in plausible.items()}}
        for student, answers in students.items():
            course.submit(assignment, student, answers)
        done = course.autograde(assignment)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        cls.students, cls.scores = students, course.scores(assignment)
        return keys, cls.scores, set(plausible)

    def test_blank_release_scores_zero_everywhere(self, graded):
        keys, scores, _ = graded
        assert set(scores["blank"]) == set(keys)
        assert all(score == 0 for score, _ in scores["blank"].values()), scores["blank"]

    def test_reference_solution_scores_full_marks(self, graded):
        _, scores, _ = graded
        short = {gid: pair for gid, pair in scores["reference"].items() if pair[0] != pair[1] or pair[1] <= 0}
        assert not short, short

    def test_the_public_solution_answers_no_value_question_of_a_class(self, graded):
        """Value questions have the class's numbers; functions and JAX programs are judged on drawn inputs anyway."""
        keys, scores, _ = graded
        if "public" not in scores:
            pytest.skip("no value questions: the public solution is the reference, graded above")
        for gid, (score, top) in scores["public"].items():
            if keys[gid].kind == "value":
                assert score == 0, (gid, score)
            elif keys[gid].kind in ("function", "jax"):
                assert score == top, (gid, score, top)

    def test_every_wrong_answer_loses_its_points(self, graded):
        _, scores, _ = graded
        assert all(score == 0 for score, _ in scores["wrong"].values()), scores["wrong"]

    def test_plausible_wrong_answers_lose_only_their_points(self, graded):
        """Keys may list answers that look right but break the question's rules (a full score matrix...)."""
        _, scores, plausible = graded
        if not plausible:
            pytest.skip("this assignment lists no plausible wrong answers")
        for gid, (score, top) in scores["plausible"].items():
            assert score == (0 if gid in plausible else top), (gid, score, top)


class TestGrading_ch01_rooflines(GradedAssignment):
    assignment = "ch01_rooflines"

    def test_two_workers_give_the_grades_of_nbgrader_autograde(self, graded, tmp_path):
        """`make grade JOBS=2` on the same submissions, in a new course folder: every score equal."""
        from exercises import grade

        if SANDBOX != "bwrap":
            pytest.skip("several workers need the sandbox (make test installs bubblewrap)")
        course = Course(tmp_path, [self.assignment], seed=SEED)
        for student, answers in self.students.items():
            course.submit(self.assignment, student, answers)
        summary = grade.grade(tmp_path, self.assignment, jobs=2, echo=lambda line: None)
        assert summary["students"] == dict.fromkeys(self.students, True), summary
        assert course.scores(self.assignment) == self.scores


for _assignment in build.assignments():
    _name = f"TestGrading_{_assignment}"
    if _name not in globals():
        globals()[_name] = type(_name, (GradedAssignment,), {"assignment": _assignment})
