"""`make exercises`: regenerate release/ and solutions/ from source/.

1. nbgrader's own API generates the student notebooks in `exercises/release/` (solutions replaced
   by stubs, outputs cleared); cells marked solution-only are then dropped.
2. The reference solutions are the source notebooks without the solution markers, executed, in
   `solutions/<assignment>.ipynb`.

Expected values live only in `exercises/keys/`, read by the grader's process (`exercises/grading/`);
no notebook holds one.

    python exercises/build.py [ASSIGNMENT ...]
    python exercises/build.py --course DIR [--seed N] [--roster CSV] [--reseed] [--db URL] [ASSIGNMENT ...]
                                                                                      (`make course`)

The second form makes a class's own nbgrader course folder, or adds assignments and students to one;
with a seed, the class gets its own numbers in every value question (`exercises/variants.py`), and with
a roster every student on it gets their own (`exercises/handout.py`), all kept in the course's key
(`exercises/class_key.py`).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
COURSE = ROOT / "exercises"
SOLUTIONS = ROOT / "solutions"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# nbgrader runs the `alembic` command of its own environment: make sure it is on PATH.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

# The header's advice to a student, and what a reader of the solutions gets instead.
STUDENT_INSTRUCTIONS = re.compile(
    r"(\*\*\d+ points?\.\*\*) Fill in each cell that says `YOUR CODE HERE`.*?where your class collects it\.\n+"
    r"Read (\[chapter \d+\]\([^)]*\)) first\..*?$",
    re.DOTALL | re.MULTILINE,
)
SOLUTION_GUIDE = (
    r"\1 Each question is worked in full: the statement, the reasoning (in the code's comments and in notes), "
    r"the code and the number it gives. A note titled *The printed answer* compares a result with the one the book "
    r"prints; an *Erratum* marks a printed answer that is wrong under the book's own model."
    "\n"
    r"The chapter behind them: \2."
)
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|$)", re.MULTILINE)


def assignments() -> list[str]:
    """Every assignment in `exercises/source/`, sorted."""
    return sorted(p.name for p in (COURSE / "source").iterdir() if p.is_dir())


def source_path(assignment: str) -> Path:
    return COURSE / "source" / assignment / f"{assignment}.ipynb"


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def is_solution_only(cell) -> bool:
    """Cells only the reference solution shows (explanations, errata)."""
    return bool(cell.get("metadata", {}).get("book", {}).get("solution_only"))


def solution_notebook(nb, assignment: str):
    """The reference solution: markers removed, titles and links pointed at it."""
    nb = nbformat.from_dict(nb)
    release = f"exercises/release/{assignment}/{assignment}.ipynb"
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = MARKER.sub("", cell.source).rstrip()
            cell.outputs, cell.execution_count = [], None
        elif cell.get("metadata", {}).get("nbgrader", {}).get("solution"):  # a written answer graded by hand
            cell.source = MARKER.sub("", cell.source).strip()
        else:
            cell.source = cell.source.replace(release, f"solutions/{assignment}.ipynb")
            cell.source = cell.source.replace("](../../../", "](../")
            cell.source = re.sub(r"^# (.*?) exercises:", r"# \1 solutions:", cell.source, count=1)
            cell.source = STUDENT_INSTRUCTIONS.sub(SOLUTION_GUIDE, cell.source)
        cell.metadata.pop("nbgrader", None)
        cell.metadata.pop("book", None)
    return nb


# What a statement says for each tolerance a key may use (`Key.rel_tol`, relative).
TOLERANCE_WORDS = {
    0: "exact",
    1e-2: "within 1 %",
    2e-2: "within 2 %",
    4e-2: "within 4 %",
    5e-2: "within 5 %",
    1e-3: "within 0.1 %",
    2e-3: "within 0.2 %",
    1e-4: "within 1e-4 relative",
    1e-6: "within 1e-6 relative",
}


def question_problems(nb, assignment: str) -> list[str]:
    """What is wrong with the questions of a rendered source `nb`; empty when nothing is.

    A question is its key in `exercises/keys/<assignment>.py` and four cells named after its grade_id,
    in order: `<id>_statement`, `<id>_answer` (the solution), `<id>_sanity` and `<id>`, the test cell,
    whose nbgrader `points` are the one place its points are written. The statement's heading gives
    them (`(<% pts %>)` in the source), it quotes every name the key lists and, for a value or
    function, says the key's tolerance in the words of `TOLERANCE_WORDS`; the answer defines each
    name; the header gives the total (`<% total_points %>`).
    """
    from exercises.keys import keys_for, manual_for
    from exercises.variants import TEMPLATE_NAMES, points, pts

    keys, by_hand, marks = keys_for(assignment), manual_for(assignment), points(nb)
    cells = {grade_id(c): c for c in nb.cells if grade_id(c)}
    problems = [
        f"{gid}: a test cell without a key in exercises/keys/{assignment}.py"
        for gid in marks
        if gid not in keys and gid not in by_hand
    ]
    for gid, rubric in by_hand.items():
        parts = [f"{gid}_statement", gid]
        if [g for g in cells if g in parts] != parts:
            problems.append(f"{gid}: cells {[g for g in cells if g in parts]}; allowed: {parts}, in this order")
            continue
        answer = cells[gid].metadata["nbgrader"]
        if cells[gid].cell_type != "markdown" or not (answer.get("solution") and answer.get("grade")):
            problems.append(f"{gid}: not a manually graded answer; allowed: a Markdown cell, solution and grade")
        if marks.get(gid) != rubric.points:
            problems.append(f"{gid}: {marks.get(gid)} points; allowed: its rubric's {rubric.points:g}")
        if rubric.markdown() not in cells[parts[0]].source:
            problems.append(f"{gid}: the statement does not show its rubric; allowed: '<% rubric %>'")
    for gid, key in keys.items():
        parts = [f"{gid}_statement", f"{gid}_answer", f"{gid}_sanity", gid]
        if [g for g in cells if g in parts] != parts:
            problems.append(f"{gid}: cells {[g for g in cells if g in parts]}; allowed: {parts}, in this order")
            continue
        statement, answer = cells[parts[0]].source, cells[parts[1]].source
        if not marks.get(gid):
            problems.append(f"{gid}: its test cell gives no points; allowed: nbgrader points > 0")
        elif f"({pts(marks[gid])})" not in statement.partition("\n")[0]:
            problems.append(f"{gid}: the heading does not give its {pts(marks[gid])}; allowed: '(<% pts %>)'")
        for name in key.names:
            if not re.search(rf"`[^`]*\b{name}\b", statement):
                problems.append(f"{gid}: the statement does not quote `{name}`")
            if not re.search(rf"^(def )?{name}\b", answer, re.MULTILINE):
                problems.append(f"{gid}: the answer does not define {name}")
        words = TOLERANCE_WORDS.get(key.rel_tol, f"(no words for {key.rel_tol:g}: add them to TOLERANCE_WORDS)")
        if key.kind in ("value", "function") and words not in statement:
            problems.append(f"{gid}: the statement does not say {words!r}, the key's tolerance")
        problems += [f"{gid}: params[{n!r}] hides the template's own {n}" for n in TEMPLATE_NAMES if n in key.params]
    if f"**{sum(marks.values()):g} points.**" not in nb.cells[0].source:
        problems.append(
            f"header: does not give the total, {sum(marks.values()):g}; allowed: '**<% total_points %> points.**'"
        )
    return problems


def check_questions(nb, assignment: str) -> None:
    """Raise `ValueError` listing every problem `question_problems` finds (`make exercises`, `make course`)."""
    problems = question_problems(nb, assignment)
    if problems:
        raise ValueError(f"{assignment}: " + "; ".join(problems))


def rendered_source(assignment: str, values: dict | None = None):
    """The source notebook with its templates filled: the text's numbers, or a class's `values`."""
    from exercises.variants import render

    return render(nbformat.read(source_path(assignment), as_version=4), assignment, values)


def reference_namespace(assignment: str) -> dict:
    """The source notebook's imports, block constants and reference answers run in one namespace, in
    this process (tests: the reference solutions judged or compiled); an answer that fails is left out."""
    space: dict = {}
    for cell in rendered_source(assignment).cells:
        gid = grade_id(cell) or ""
        if gid == "imports" or gid.endswith("_blocks") or cell.metadata.get("nbgrader", {}).get("solution"):
            try:
                exec(MARKER.sub("", cell.source), space)  # noqa: S102 (the instructor's own code)
            except Exception:  # noqa: BLE001 (an answer the caller does not need may want the kernel)
                pass
    return space


def generate_release(assignment: str, course_root: Path = COURSE, db: str | None = None) -> Path:
    """nbgrader's generate_assignment into `course_root/release/` (templates filled, solution-only cells dropped),
    recorded in the gradebook (`db`: a PostgreSQL URL, or None for SQLite in `course_root`)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from exercises.course import configure

    config = Config()
    configure(config, course_root, db=db)
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    result = api.generate_assignment(assignment, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result['log']}")
    return course_root / "release" / assignment / f"{assignment}.ipynb"


def execute(nb, cwd: Path, timeout_s: int = 600):
    """Execute `nb` in a fresh python3 kernel with `cwd` as its working directory."""
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


ANSWER_RULES = ROOT / "book_lib" / "answer_rules.py"
HEADING = re.compile(r"^## (Q\w+) \(")
ANSWER_RULES_HEADER = '''"""What each exercise question asks of an answer's form: what `book_lib.answer_check` checks.

Written by `make exercises` from `exercises/keys/` (`exercises/build.py`, `answer_rules`); do not edit.
Nothing here is an expected value: names, kinds, a choice's options, a function's text inputs and how
many numbers it returns, a JAX question's shapes and the rules of its program (`book_lib.program_rules`).
"""

from typing import Any

__all__ = ["RULES"]

RULES: dict[str, dict[str, dict[str, Any]]] = '''


def answer_rules() -> dict[str, dict[str, dict]]:
    """assignment -> question label ("Q9") -> what `book_lib.answer_check` checks of its answer."""
    import dataclasses
    import random

    from exercises.grading import pipeline, programs
    from exercises.keys import keys_for, manual_for

    rules: dict[str, dict[str, dict]] = {}
    for assignment in assignments():
        keys, by_hand = keys_for(assignment), manual_for(assignment)
        questions: dict[str, dict] = {}
        for cell in rendered_source(assignment).cells:
            gid, label = (grade_id(cell) or "").removesuffix("_statement"), HEADING.match(cell.source)
            if label is None or gid not in keys and gid not in by_hand:
                continue
            if gid in by_hand:
                questions[label[1]] = {"grade_id": gid, "kind": "manual", "names": ()}
                continue
            key = keys[gid]
            question = {"grade_id": gid, "kind": key.kind, "names": key.names}
            if key.kind == "choice":
                question["choices"] = key.choices
            elif key.kind == "function":
                first = key.reference(*key.cases[0])
                question |= {"cases": key.cases, "arity": len(first) if isinstance(first, (tuple, list)) else 1}
            elif key.kind == "jax":
                spec = pipeline.draw_spec(gid, key, random.Random(0))
                probes = [
                    {**probe, "rules": dataclasses.asdict(key.check.rules(tuple(probe["sizes"]), programs.N_DEVICES))}
                    for probe in spec["probes"]
                ]
                question |= {"recorder": spec["recorder"], "n_devices": spec["n_devices"], "probes": probes}
            questions[label[1]] = question
        rules[assignment] = questions
    return rules


def answer_rules_source() -> str:
    """The text of `book_lib/answer_rules.py`: `answer_rules()` as a Python literal."""
    import pprint

    return ANSWER_RULES_HEADER + pprint.pformat(answer_rules(), width=118, sort_dicts=False) + "\n"


def build(assignment: str) -> None:
    nb = rendered_source(assignment)
    check_questions(nb, assignment)
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copytree(COURSE / "source" / assignment, course / "source" / assignment)
        made = generate_release(assignment, course)
        out = COURSE / "release" / assignment
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        shutil.copy(made, out / made.name)
    SOLUTIONS.mkdir(exist_ok=True)
    solution = execute(solution_notebook(nb, assignment), SOLUTIONS)
    nbformat.write(solution, SOLUTIONS / f"{assignment}.ipynb")
    print(f"{assignment}: release and solution written")


def make_course(
    dest: Path,
    assignments: list[str],
    *,
    seed: int | None = None,
    roster_file: Path | None = None,
    reseed: bool = False,
    due: str | None = None,
    solutions: bool = True,
    db: str | None = None,
    echo=print,
    **limits,
) -> None:
    """A class's nbgrader course folder at `dest`, ready for `nbgrader autograde`; run again, it adds to it.

    It holds the sources, an `nbgrader_config.py` (with `limits`: `configure`'s keywords), the class's
    key (`key/<assignment>.json`, `exercises/class_key.py`: the numbers each student was given, the seed
    and the commit; keep the folder from students), the release and gradebook from nbgrader's
    generate_assignment, with `solutions` the class's executed reference solutions in `dest/solutions/`
    and, with a roster, each student's own notebook in `dest/handout/<id>/` (`exercises/handout.py`).
    The gradebook is SQLite in `dest`, or the PostgreSQL database `db` names (an existing database;
    nbgrader makes its tables).

    An assignment the course already holds is kept as it is: its key, release and handouts are not
    made again; only students new to the roster get their numbers and handouts. So is the course's
    `nbgrader_config.py`, with its gradebook and limits (`db` may only name the same database). A course keeps its
    seed: without `seed` the one it was built with is used, and another `seed` is refused unless
    `reseed`, which draws the named assignments again and keeps their old keys and handouts in
    `key/replaced/`.

    Args:
        seed: the class's own numbers, drawn from it (None: the text's).
        roster_file: nbgrader's student list (`exercises/roster.py`): each student on it gets numbers
            of their own and a handout; it adds to the roster the course already has.
        due: the named assignments' due date (ISO 8601, `2026-12-01T23:59+01:00`; without a zone, UTC),
            in the gradebook, where nbgrader's late policy reads it (`limits["late"]`, a new course's).

    Raises:
        ValueError: a bad database URL or roster; a roster without a seed; a seed other than the
            course's without `reseed`.
    """
    from exercises import class_key, handout, roster, variants
    from exercises.course import gradebook_url, write_config

    dest = Path(dest).resolve()
    url = gradebook_url(dest, db)  # a bad URL is refused before anything is written
    due_utc = _due(due)
    configured = (dest / "nbgrader_config.py").exists()
    if configured:  # the instructor's configuration, gradebook and limits stay as they are
        from exercises.grade import _course_config

        config = _course_config(dest)
        kept_url = config.CourseDirectory.db_url
        if db is not None and url != kept_url:
            raise ValueError(f"db={db!r}: the course at {dest} keeps its gradebook at {kept_url}; allowed: that one")
        kept_late = config.LatePolicy.get("penalty", "none") if "LatePolicy" in config else "none"
        if limits.get("late", kept_late) != kept_late:
            raise ValueError(
                f"late={limits['late']!r}: the course's late policy is {kept_late!r}; allowed: that one, or change "
                f"`late=` in {dest / 'nbgrader_config.py'}"
            )
        url, db = kept_url, kept_url if kept_url.startswith("postgresql") else None
    given = roster.read(roster_file) if roster_file is not None else []
    kept = roster.read(dest / roster.FILE) if (dest / roster.FILE).exists() else []
    students, added = roster.merge(kept, given)
    held = sorted(p.name for p in (dest / "source").iterdir()) if (dest / "source").is_dir() else []
    keys = {a: class_key.read(dest, a) for a in held}
    seeds = {key.seed if key is not None else None for key in keys.values()}
    if seed is None and len(seeds) == 1:
        seed = seeds.pop()
        if seed is not None:
            echo(f"seed: {seed}, the course's own")
    elif seed is None and len(seeds) > 1 and set(assignments) - set(held):
        raise ValueError(
            f"seed=None: the course at {dest} holds keys of the seeds {sorted(seeds, key=str)}; "
            "allowed: the seed to draw its new assignments from"
        )
    elif seed is not None and seeds - {seed} and not reseed:
        raise ValueError(
            f"seed={seed}: the course at {dest} was built with seed {sorted(seeds, key=str)[0]}; allowed: that "
            "seed (or none), or reseed (`--reseed`) to draw the named assignments again, their old keys and "
            "handouts kept in key/replaced/"
        )
    if students and seed is None and any(keys.get(a) is None or keys[a].seed is None for a in assignments):
        raise ValueError(
            f"roster: {len(students)} students, but no seed: each student's numbers are drawn from the class's "
            "seed; allowed: a roster with SEED=..."
        )
    commit, dirty = class_key.built_from()
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o700)  # the gradebook and the class's key: the instructor's alone
    if not configured:
        write_config(dest, **({"db": db} if db is not None else {}), **limits)
    class_key.secret(dest)  # made once, here, and kept
    if students:
        roster.write(dest, students)
        echo(f"roster: {len(students)} students ({len(added)} new)")
    ids = [s["id"] for s in students]
    for assignment in assignments:
        key = keys.get(assignment)
        if assignment in held and key is None:  # made before keys were kept, with the text's numbers
            key = class_key.ClassKey(assignment=assignment, seed=None, commit=None, built=None)
        if key is not None and reseed and key.seed != seed:
            _set_aside(dest, assignment)
            key = None
        if key is None:
            if dirty:
                echo(f"warning: {assignment} installs book_lib at commit {commit}, without this checkout's changes")
            key = _new_assignment(dest, assignment, seed, commit, db, solutions=solutions, echo=echo)
        new = {s: variants.draw(key.seed, assignment, s) for s in ids if s not in key.students}
        if new:
            key = key.with_students(new)
            class_key.write(dest, key)
        written = handout.write(dest, assignment, ids, key.commit)
        if written:
            echo(f"{assignment}: {len(written)} handouts written under {dest / handout.HANDOUT_DIR}")
    if students:
        roster.add_to_gradebook(url, students)
    if due_utc is not None:
        from nbgrader.api import Gradebook

        with Gradebook(url) as gb:
            for assignment in assignments:
                gb.update_or_create_assignment(assignment, duedate=due_utc)
        echo(f"due: {due_utc:%Y-%m-%d %H:%M} UTC for {', '.join(assignments)}")


def _due(due: str | None):
    """`due` (ISO 8601; without a zone, UTC) as the naive UTC datetime nbgrader keeps.

    Raises:
        ValueError: not a date and time.
    """
    import datetime

    if due is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(due)
    except ValueError as err:
        raise ValueError(f"due={due!r}: not a date and time; allowed: ISO 8601, 2026-12-01T23:59+01:00") from err
    return when.astimezone(datetime.UTC).replace(tzinfo=None) if when.tzinfo else when


def _new_assignment(
    dest: Path, assignment: str, seed: int | None, commit: str | None, db: str | None, *, solutions: bool, echo
):
    """Add `assignment` to the course at `dest`: its source, its key (the class's numbers from `seed`),
    its release and gradebook entry, and with `solutions` its executed reference solution. If any step
    fails, the source, key and release are removed again, so that the next run builds it anew."""
    import datetime

    from exercises import class_key, variants

    shutil.copytree(COURSE / "source" / assignment, dest / "source" / assignment, dirs_exist_ok=True)
    drawn = variants.draw(seed, assignment) if seed is not None else {}
    today = datetime.date.today().isoformat()
    key = class_key.ClassKey(assignment=assignment, seed=seed, commit=commit, built=today, values=drawn)
    try:
        class_key.write(dest, key)
        rendered = rendered_source(assignment, variants.load(dest, assignment))
        check_questions(rendered, assignment)
        generate_release(assignment, dest, db)
        if solutions:
            nb = solution_notebook(rendered, assignment)
            (dest / "solutions").mkdir(exist_ok=True)
            nbformat.write(execute(nb, dest / "solutions"), dest / "solutions" / f"{assignment}.ipynb")
    except BaseException:
        class_key.path(dest, assignment).unlink(missing_ok=True)
        for folder in (dest / "source" / assignment, dest / "release" / assignment):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    echo(f"{assignment}: release{' and solution' if solutions else ''} written under {dest}")
    return key


def _set_aside(dest: Path, assignment: str) -> None:
    """Move `assignment`'s key and handouts to `key/replaced/` before it is drawn again."""
    from exercises import class_key, handout

    kept = class_key.archive(dest, assignment)
    for file in sorted((dest / handout.HANDOUT_DIR).glob(f"*/{assignment}.ipynb")):
        kept.mkdir(exist_ok=True)
        file.rename(kept / f"{file.parent.name}.ipynb")


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every assignment")
    parser.add_argument("--course", type=Path, help="make a class's course folder here instead")
    parser.add_argument("--seed", type=int, help="with --course: the class's own numbers from this seed")
    parser.add_argument("--roster", type=Path, help="with --course: nbgrader's student CSV, each their own numbers")
    parser.add_argument("--reseed", action="store_true", help="with --course: draw the named assignments again")
    parser.add_argument("--due", help="with --course: the named assignments' due date (ISO 8601; no zone: UTC)")
    parser.add_argument("--late", help="with --course, a new one: late policy, none (default), zero or P%%/day")
    parser.add_argument("--db", help="with --course: the gradebook's PostgreSQL URL (default: SQLite in DIR)")
    args = parser.parse_args(argv)
    chosen = args.assignments or assignments()
    unknown = sorted(set(chosen) - set(assignments()))
    if unknown:
        parser.error(f"assignments={unknown}: unknown; allowed: {', '.join(assignments())}")
    if args.seed is not None and args.course is None:
        parser.error(f"--seed={args.seed} needs --course DIR (the repository's own release keeps the text's numbers)")
    if args.db is not None and args.course is None:
        parser.error(f"--db={args.db!r} needs --course DIR (the repository's own release keeps no gradebook)")
    if (args.roster is not None or args.reseed or args.due or args.late) and args.course is None:
        parser.error("--roster, --reseed, --due and --late need --course DIR (the repository's release has no class)")
    if args.course is not None:
        limits = {"late": args.late} if args.late is not None else {}
        try:
            make_course(
                args.course,
                chosen,
                seed=args.seed,
                roster_file=args.roster,
                reseed=args.reseed,
                due=args.due,
                db=args.db,
                **limits,
            )
        except ValueError as err:
            parser.error(str(err))
        return 0
    for assignment in chosen:
        build(assignment)
    ANSWER_RULES.write_text(answer_rules_source())
    print(f"{ANSWER_RULES.relative_to(ROOT)} written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
