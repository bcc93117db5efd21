"""A class run as a class is run: a roster, a handout per student, one more assignment and one more
student added later, a regrade (issue 39).

One course of chapters 1 and 7 for three students (`make course ... ROSTER=`), built once: each gets
a notebook of their own numbers, whose questions agree with each other; adding chapter 3 and a fourth
student later changes nothing anyone already holds; each submission is graded against its own
student's numbers, a notebook that holds someone else's (a classmate's, the class's, the book's) is
named in the feedback and the summary, and grading it again gives the same scores.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from exercises import build, class_key, grade, handout, roster, variants
from exercises.grading import holder, pipeline
from tests.course.course_kit import Course, reference_answers

CH01, CH03, CH07 = "ch01_rooflines", "ch03_sharding", "ch07_inference"
SEED = 20261129
STUDENTS = ("ada", "bea", "cy")
ROSTER = (
    "id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.org\nbea,Bea,Rivers,\ncy,Cy,Young,cy@example.org\n"
)


def _statements(nb) -> dict[str, str]:
    return {
        build.grade_id(c).removesuffix("_statement"): c.source
        for c in nb.cells
        if (build.grade_id(c) or "").endswith("_statement")
    }


def _read(path: Path):
    return nbformat.read(path, as_version=4)


def _setup(nb) -> str:
    return next(c.source for c in nb.cells if build.grade_id(c) == "setup")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    folder = tmp_path_factory.mktemp("roster")
    (folder / "students.csv").write_text(ROSTER)
    return Course(folder / "class", [CH01, CH07], seed=SEED, roster=folder / "students.csv", cell_timeout_s=20)


def test_make_course_passes_the_roster_on():
    said = subprocess.run(
        [
            "make",
            "-n",
            "--no-print-directory",  # a make inside `make test` names its directories otherwise
            "course",
            "DIR=/tmp/c",
            "SEED=3",
            "ROSTER=students.csv",
            "ASSIGNMENTS=ch01_rooflines ch07_inference",
        ],
        capture_output=True,
        text=True,
        cwd=build.ROOT,
        check=True,
    ).stdout
    command = " ".join(said.splitlines()[-1].split())
    assert command.endswith('--course "/tmp/c" --seed 3 --roster "students.csv" ch01_rooflines ch07_inference'), said


def test_each_student_gets_a_handout_of_numbers_of_their_own(course):
    for assignment in (CH01, CH07):
        key = class_key.read(course.root, assignment)
        assert key.seed == SEED and set(key.students) == set(STUDENTS) and key.commit == class_key.built_from()[0]
        handouts = {s: _read(handout.path(course.root, s, assignment)) for s in STUDENTS}
        shown = {s: json.dumps(_statements(nb), sort_keys=True) for s, nb in handouts.items()}
        assert len(set(shown.values())) == len(STUDENTS), f"{assignment}: two students share every statement"
        public = _statements(_read(build.COURSE / "release" / assignment / f"{assignment}.ipynb"))
        for student, nb in handouts.items():
            mine = key.students[student]
            assert all(_statements(nb)[gid] != public[gid] for gid in mine), f"{student} holds the text's numbers"
            assert "BEGIN SOLUTION" not in json.dumps(nb) and "NotImplementedError" in json.dumps(nb)
            assert f'.git@{key.commit}"' in _setup(nb), "the handout installs the book_lib it was built with"
    assert '.git@main"' in _setup(_read(build.COURSE / "release" / CH01 / f"{CH01}.ipynb")), "the public one, main's"
    assert len(class_key.secret(course.root)) == 64 and (course.root / "key" / "secret").stat().st_mode & 0o077 == 0
    with open(course.root / roster.FILE) as f:
        assert f.read() == ROSTER


def test_a_handouts_questions_agree_with_its_own_q1(course):
    """Chapter 7's Q2, Q3, Q5 and Q6 say "the model of Q1" (Q6: "the mixture of experts of Q5"): each prints it."""
    for student in STUDENTS:
        shown = _statements(_read(handout.path(course.root, student, CH07)))
        q1 = shown["ch07_q1_params_kv"]
        sizes = [re.search(rf"\${name} = ([^$]+)\$", q1)[0] for name in ("L", "D", "F", "N", "K", "H", "V")]
        for gid in ("ch07_q2_max_batch", "ch07_q3_weight_load", "ch07_q5_moe", "ch07_q6_expert_sharding"):
            assert all(size in shown[gid] for size in sizes), (student, gid, sizes)
        experts = re.search(r"\$E = \d+\$", shown["ch07_q5_moe"])[0]
        assert experts in shown["ch07_q6_expert_sharding"], (student, experts)


def _files(root: Path, *patterns: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for pattern in patterns for p in sorted(root.glob(pattern))}


def test_adding_an_assignment_and_a_student_changes_nothing_anyone_holds(course, tmp_path):
    root = course.root
    held = ("key/*.json", "handout/*/*.ipynb", "release/*/*.ipynb", "source/*/*.ipynb")
    before = _files(root, *held)
    build.make_course(root, [CH03], seed=SEED, solutions=False, echo=lambda line: None)
    after = _files(root, *held)
    assert {name: after[name] for name in before} == before, "an assignment added later changed another's files"
    assert set(class_key.read(root, CH03).students) == set(STUDENTS)
    assert all(handout.path(root, s, CH03).exists() for s in STUDENTS)
    # one more student, and another's email given again: no one's numbers or notebooks move
    (tmp_path / "more.csv").write_text("id,first_name,last_name,email\nbea,Bea,Rivers,bea@example.org\ndan,Dan,,\n")
    build.make_course(root, [CH01, CH03, CH07], roster_file=tmp_path / "more.csv", solutions=False, echo=lambda _: None)
    again = _files(root, *held)
    assert {name: again[name] for name in after if not name.startswith("key/")} == {
        name: data for name, data in after.items() if not name.startswith("key/")
    }
    for assignment in (CH01, CH03, CH07):
        key = class_key.read(root, assignment)
        old = json.loads(after[f"key/{assignment}.json"])
        assert key.seed == SEED and key.values == old["class"]
        assert {s: key.students[s] for s in STUDENTS} == old["students"]
        assert key.students["dan"] == variants.draw(SEED, assignment, "dan")
        assert handout.path(root, "dan", assignment).exists()
    students = roster.read(root / roster.FILE)
    assert [s["id"] for s in students] == [*STUDENTS, "dan"] and students[1]["email"] == "bea@example.org"
    from nbgrader.api import Gradebook

    with Gradebook(course_db(root)) as gb:
        assert gb.find_student("ada").first_name == "Ada" and gb.find_student("dan").first_name == "Dan"


def test_another_seed_is_refused_unless_asked_for_and_the_old_key_is_kept(tmp_path):
    (tmp_path / "students.csv").write_text(ROSTER)
    root = tmp_path / "class"
    Course(root, [CH01], seed=SEED, roster=tmp_path / "students.csv")
    first = class_key.path(root, CH01).read_text()
    handouts = _files(root, "handout/*/*.ipynb")
    with (root / "nbgrader_config.py").open("a") as f:
        f.write("# the instructor's own line\n")
    config = (root / "nbgrader_config.py").read_text()
    said: list[str] = []
    build.make_course(root, [CH01], solutions=False, echo=said.append)  # no seed: the course's own
    assert class_key.path(root, CH01).read_text() == first and _files(root, "handout/*/*.ipynb") == handouts
    assert said == [f"seed: {SEED}, the course's own", "roster: 3 students (0 new)"], said
    assert (root / "nbgrader_config.py").read_text() == config, "the instructor's configuration is kept"
    with pytest.raises(ValueError, match=r"^db='postgresql://u@h/d': the course at .* keeps its gradebook at sqlite"):
        build.make_course(root, [CH01], db="postgresql://u@h/d", solutions=False, echo=lambda line: None)
    with pytest.raises(ValueError, match=rf"^seed={SEED + 1}: the course at .* was built with seed {SEED}; allowed"):
        build.make_course(root, [CH01], seed=SEED + 1, solutions=False, echo=lambda line: None)
    assert class_key.path(root, CH01).read_text() == first
    build.make_course(root, [CH01], seed=SEED + 1, reseed=True, solutions=False, echo=lambda line: None)
    assert class_key.read(root, CH01).seed == SEED + 1
    (kept,) = (root / "key" / "replaced").glob(f"{CH01}.*.json")
    assert kept.read_text() == first
    assert {p.name: p.read_bytes() for p in kept.parent.joinpath(kept.name.removesuffix(".json")).iterdir()} == {
        f"{Path(name).parent.name}.ipynb": data for name, data in handouts.items()
    }
    assert _files(root, "handout/*/*.ipynb").keys() == handouts.keys() != _files(root, "handout/*/*.ipynb")


def test_a_roster_needs_a_seed_and_ids_that_name_folders(tmp_path):
    (tmp_path / "students.csv").write_text(ROSTER)
    with pytest.raises(ValueError, match=r"^roster: 3 students, but no seed"):
        build.make_course(tmp_path / "c", [CH01], roster_file=tmp_path / "students.csv", solutions=False)
    with pytest.raises(ValueError, match=r"line 3: id='\.\./x'; allowed: letters, digits"):
        roster.parse("id,email\nok,\n../x,\n")
    with pytest.raises(ValueError, match=r"line 3: id='a' is given twice"):
        roster.parse("id\na\na\n")
    with pytest.raises(ValueError, match=r"columns \['name'\]; allowed: a header with `id`"):
        roster.parse("name\nx\n")


def test_a_course_made_before_keys_keeps_its_numbers(tmp_path):
    """A course whose numbers were kept in `variant.json` (before keys per assignment): read from there."""
    drawn = variants.draw(3, CH01)
    (tmp_path / class_key.LEGACY_FILE).write_text(json.dumps({"seed": 3, "values": {CH01: drawn}}))
    key = class_key.read(tmp_path, CH01)
    assert (key.seed, key.values, key.commit) == (3, drawn, None)
    assert variants.load(tmp_path, CH01) == {**variants.load(None, CH01), **drawn}


def test_whose_numbers_a_notebook_shows_is_what_the_grader_renders(course):
    root = course.root
    ada = _read(handout.path(root, "ada", CH01))
    assert holder.whose(root, CH01, "ada", ada) is None
    assert holder.whose(root, CH01, "bea", ada) == "ada's"
    assert holder.whose(root, CH01, "ada", _read(build.COURSE / "release" / CH01 / f"{CH01}.ipynb")) == holder.PUBLIC
    release = _read(course.releases[CH01])
    assert holder.whose(root, CH01, "ada", release) == holder.CLASS
    assert holder.whose(root, CH01, "someone-else", release) is None, "off the roster: the class's numbers"
    edited = _read(handout.path(root, "ada", CH01))
    for cell in edited.cells:
        if (build.grade_id(cell) or "").endswith("_statement"):
            cell.source += " (my notes)"
    assert holder.whose(root, CH01, "ada", edited) == holder.CHANGED


def _record_specs(root: Path, student: str, nb) -> dict:
    resources = {
        "nbgrader": {"assignment": CH01, "notebook": CH01, "student": student, "db_url": course_db(root)},
        "metadata": {"path": str(root / "submitted" / student / CH01)},
    }
    nb, resources = pipeline.RecordAnswers().preprocess(nbformat.from_dict(json.loads(json.dumps(nb))), resources)
    return {
        gid: {k: spec[k] for k in ("probes", "input_seed") if k in spec}
        for gid, spec in resources["book_grading"]["specs"].items()
    }


def course_db(root: Path) -> str:
    return f"sqlite:///{root / 'gradebook.db'}"


def test_a_submissions_inputs_are_the_same_each_time_and_its_own(course):
    """Drawn from the class's secret, the student, the question and the submission's code: the same
    submission gets the same inputs, another student or another answer new ones, and none reach the kernel."""
    root = course.root
    nb = _read(handout.path(root, "ada", CH01))
    first = _record_specs(root, "ada", nb)
    assert any(spec.get("probes") for spec in first.values())
    assert _record_specs(root, "ada", nb) == first
    assert _record_specs(root, "bea", nb) != first
    changed = _read(handout.path(root, "ada", CH01))
    changed.cells[-1].source += "\n# a comment"
    assert _record_specs(root, "ada", changed) != first
    seed = pipeline.probe_seed(class_key.secret(root), "ada", CH01, "q", "digest")
    assert seed == pipeline.probe_seed(class_key.secret(root), "ada", CH01, "q", "digest")
    assert seed != pipeline.probe_seed("another class", "ada", CH01, "q", "digest")
    recorded = pipeline.RecordAnswers().preprocess(
        nbformat.from_dict(json.loads(json.dumps(nb))),
        {"nbgrader": {"assignment": CH01, "notebook": CH01, "student": "ada", "db_url": course_db(root)}},
    )[0]
    shown = "\n".join(c.source for c in recorded.cells)
    assert "input_seed" not in shown and class_key.secret(root) not in shown


def _import_in_a_locked_cell(nb) -> None:
    """What Colab lets a student do: add an import to the locked imports cell."""
    (cell,) = [c for c in nb.cells if build.grade_id(c) == "imports"]
    cell.source += "\nimport numpy as np"


HALF = "ch01_q0a_t_math_s"  # two names, t_math_gpu_s and t_math_tpu_s: one point each
FLAKY = """
_right_{gid} = {name}
def {name}(*args):
    if round(abs(sum(a for a in args if isinstance(a, (int, float))))) // 7 % 2:
        return _right_{gid}(*args) * 1.5 + 1
    return _right_{gid}(*args)
"""


@pytest.fixture(scope="module")
def graded(course):
    """Chapter 1 handed in by ada (her own notebook, one of Q0a's two times wrong), bea (ada's notebook and
    answers, her functions right on some inputs only) and cy (the book's public edition), graded twice by
    `make grade`."""
    from exercises.keys import keys_for

    root, keys = course.root, keys_for(CH01)
    ada = reference_answers(CH01, variants.load(root, CH01, "ada"))
    flaky = {
        f"{gid}_answer": ada[f"{gid}_answer"] + FLAKY.format(gid=gid, name=key.names[0])
        for gid, key in keys.items()
        if key.kind == "function"
    }
    half_right = {HALF + "_answer": ada[HALF + "_answer"] + "\nt_math_tpu_s = t_math_tpu_s * 1.5 + 1"}
    course.submit(CH01, "ada", {**ada, **half_right}, notebook=handout.path(root, "ada", CH01))
    course.submit(CH01, "bea", {**ada, **flaky}, notebook=handout.path(root, "ada", CH01))
    course.submit(
        CH01,
        "cy",
        reference_answers(CH01),
        notebook=build.COURSE / "release" / CH01 / f"{CH01}.ipynb",
        edit=_import_in_a_locked_cell,
    )
    said: list[str] = []
    first = grade.grade(root, CH01, echo=said.append)
    scores = course.scores(CH01)
    second = grade.grade(root, CH01, echo=said.append)
    return first, scores, second, course.scores(CH01), said


def test_each_submission_is_graded_on_its_own_numbers_and_another_notebook_is_named(graded, course):
    first, scores, _, _, said = graded
    assert all(first["students"].values()), said
    assert all(score == top for gid, (score, top) in scores["ada"].items() if gid != HALF), scores["ada"]
    assert scores["ada"][HALF] == (1.0, 2.0), "one of two names right: half the points"
    ada = _read(course.root / "autograded" / "ada" / CH01 / f"{CH01}.ipynb")
    (cell,) = [c for c in ada.cells if build.grade_id(c) == HALF]
    said_to_ada = "".join(o.get("text", "") for o in cell.outputs)
    assert "Partly right (1 of 2 points): t_math_tpu_s is not within" in said_to_ada, cell.outputs
    named = holder.note("ada's")
    assert first["notes"] == {"bea": named, "cy": holder.note(holder.PUBLIC)}, said
    assert f"  {named}" in said and f"  {holder.note(holder.PUBLIC)}" in said, "the summary names them"
    feedback = _read(course.root / "autograded" / "bea" / CH01 / f"{CH01}.ipynb")
    assert feedback.cells[0].source == f"**{named[0].upper()}{named[1:]}.**"
    lost = [gid for gid, (score, top) in scores["bea"].items() if score < top]
    assert lost, "bea answered ada's numbers"
    errors = [o["evalue"] for c in feedback.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any(holder.note("ada's") in e for e in errors), errors
    assert not feedback.cells[1].source.startswith("**Put back"), "bea changed no code cell"
    cy = _read(course.root / "autograded" / "cy" / CH01 / f"{CH01}.ipynb")
    # the public edition's setup cell installs main's book_lib, the course's its own commit's
    assert cy.cells[1].source == pipeline.RESTORED.format(cells="`setup`, `imports`"), cy.cells[1].source
    (imports,) = [c for c in cy.cells if build.grade_id(c) == "imports"]
    assert "import numpy as np" not in imports.source


def test_grading_a_submission_again_gives_the_same_scores(graded):
    """bea's functions are right on some inputs only: new inputs at each grading would move her score."""
    first, scores, second, again, _ = graded
    assert second["notes"] == first["notes"]
    assert again == scores


def test_nbgrader_export_gives_the_rosters_names_and_emails(graded, course, tmp_path):
    import csv

    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    with Gradebook(course_db(course.root)) as gb:
        CsvExportPlugin(to=str(tmp_path / "grades.csv"), assignment=[CH01]).export(gb)
    rows = {row["student_id"]: row for row in csv.DictReader((tmp_path / "grades.csv").open())}
    assert (rows["ada"]["first_name"], rows["ada"]["last_name"], rows["ada"]["email"]) == (
        "Ada",
        "Lovelace",
        "ada@example.org",
    )
    assert float(rows["ada"]["score"]) == sum(score for score, _ in graded[1]["ada"].values())
