"""The course files: a key per question, release and solutions free of drift, no answer anywhere a student reads."""

import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from exercises import build, variants
from exercises.keys import keys_for, manual_for

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = build.assignments()


def _graded_tests(nb):
    return {build.grade_id(c): c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_graded_cell_has_a_key_and_no_notebook_holds_an_answer(assignment):
    keys = keys_for(assignment)
    source = nbformat.read(build.source_path(assignment), as_version=4)
    tests = _graded_tests(source)
    assert set(tests) == set(keys) | set(manual_for(assignment)), "one key or rubric per graded cell"
    text = json.dumps([c.source for c in source.cells if not c.metadata.get("nbgrader", {}).get("solution")])
    for marker in ("BEGIN HIDDEN TESTS", "expected =", "book_grader"):
        assert marker not in text, f"{marker!r}: expected values live only in exercises/keys"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_reference_solution_matches_the_keys_on_every_input_grading_can_draw(assignment):
    """The source's solutions, run here, against the keys on the text's cases and all scaled ones."""
    namespace = _solution_namespace(assignment)
    for gid, key in keys_for(assignment).items():
        if key.kind == "function":
            fn = namespace[key.names[0]]
            for args in key.all_probes():
                got, want = fn(*args), key.reference(*args)
                for g, w in zip(_flat(got), _flat(want), strict=True):
                    assert abs(g - w) <= key.rel_tol * abs(w), (gid, args, got, want)
    _check_values(assignment, namespace, None)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
@pytest.mark.parametrize("seed", [1, 2, 3, 20261124])
def test_a_class_reference_solution_matches_the_class_keys(assignment, seed):
    """Rendered with a class's numbers, the solutions answer the class's keys, not the text's."""
    values = variants.draw(seed, assignment)
    _check_values(assignment, _solution_namespace(assignment, values), values)


def _check_values(assignment, namespace, values):
    for gid, key in keys_for(assignment).items():
        mine = None if values is None else values.get(gid, {})
        if key.kind == "value":
            for name, want in key.answer(mine).items():
                for g, w in zip(_flat(namespace[name]), _flat(want), strict=True):
                    assert abs(g - w) <= key.rel_tol * abs(w), (gid, name, namespace[name], want)
        elif key.kind == "choice":
            assert namespace[key.names[0]] == key.answer(mine) and key.answer(mine) in key.choices, gid


def _flat(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _solution_namespace(assignment, values=None):
    """Run the imports and every non-JAX answer cell of the source (with its solution) in one namespace."""
    source = build.rendered_source(assignment, values)
    keys = keys_for(assignment)
    jax_answers = {f"{g}_answer" for g, k in keys.items() if k.kind == "jax"}
    namespace: dict = {}
    for cell in source.cells:
        gid = build.grade_id(cell) or ""
        answer = cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution")
        if gid == "imports" or (answer and gid not in jax_answers):
            exec(build.MARKER.sub("", cell.source), namespace)  # noqa: S102 (the instructor's own code)
    return namespace


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_question_has_its_cells_names_and_points(assignment):
    """Four cells per key, in order; the answer defines the key's names; the statement quotes them and says
    the key's tolerance; headings give the test cells' points (`build.question_problems`)."""
    assert build.question_problems(build.rendered_source(assignment), assignment) == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_leaks_no_solution_hidden_test_or_answer(assignment):
    path = ROOT / "exercises" / "release" / assignment / f"{assignment}.ipynb"
    text = path.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "expected =", "book_grader"):
        assert marker not in text, marker
    nb = nbformat.read(path, as_version=4)
    assert not any(build.is_solution_only(c) for c in nb.cells)
    source = build.rendered_source(assignment)
    answers = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")]
    released = {build.grade_id(c): c.source for c in nb.cells}
    for cell in answers:
        body = build.MARKER.sub("", cell.source)
        solution_lines = cell.source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0].strip().splitlines()
        for line in solution_lines:
            if line.strip():
                assert line.strip() not in released[build.grade_id(cell)], line
        stub = "raise NotImplementedError()" if cell.cell_type == "code" else "YOUR ANSWER HERE"
        assert stub in released[build.grade_id(cell)], body[:40]
    # every answer value (and every non-integer value a function must return) stays out of the release
    numbers = json.dumps([c.source for c in nb.cells])
    for gid, key in keys_for(assignment).items():
        if key.kind == "value":
            wants = list(key.answer().values())
        elif key.kind == "function":
            wants = [w for args in key.cases for w in _flat(key.reference(*args)) if not float(w).is_integer()]
        else:
            continue  # a choice's options are listed by design; a JAX answer is checked by behaviour
        for want in wants:
            for text_form in {repr(want), f"{want:.6g}", f"{want:.4g}"}:
                if len(text_form.replace(".", "").replace("-", "")) >= 4:
                    assert text_form not in numbers, f"{gid}: {text_form} appears in the release"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_and_solutions_are_what_make_exercises_writes(assignment, tmp_path):
    src = build.rendered_source(assignment)
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    shutil.copytree(ROOT / "exercises" / "source" / assignment, course / "source" / assignment)
    made = nbformat.read(build.generate_release(assignment, course), as_version=4)
    committed = nbformat.read(ROOT / "exercises" / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    assert [(c.cell_type, c.source, c.metadata) for c in made.cells] == [
        (c.cell_type, c.source, c.metadata) for c in committed.cells
    ], "exercises/release is stale: run `make exercises`"
    solution = build.solution_notebook(src, assignment)
    executed = nbformat.read(ROOT / "solutions" / f"{assignment}.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in solution.cells] == [(c.cell_type, c.source) for c in executed.cells], (
        "solutions/ is stale: run `make exercises`"
    )


def _parse_given(text: str) -> float:
    sci = re.fullmatch(r"([\d.]+) \\times 10\^\{(\d+)\}", text)
    if sci:
        return float(sci.group(1)) * 10 ** int(sci.group(2))
    unit = re.fullmatch(r"([\d.,]+) (TB/s|GB/s|TFLOPs/s|GiB)", text)
    scale = {"TB/s": 1e12, "GB/s": 1e9, "TFLOPs/s": 1e12, "GiB": 2**30}
    return float(unit.group(1).replace(",", "")) * scale[unit.group(2)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_numbers_given_in_statements_match_book_lib(assignment):
    """A statement may print a given rate; keys' GIVENS ties each printed figure to its book_lib value."""
    import importlib

    givens = getattr(importlib.import_module(f"exercises.keys.{assignment}"), "GIVENS", [])
    nb = build.rendered_source(assignment)
    statements = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for text, value in givens:
        assert text in statements, f"{text!r} is not printed in any statement"
        assert _parse_given(text) == pytest.approx(value, rel=5e-3), (text, value)


def test_the_busy_fraction_key_agrees_with_the_cycle_by_cycle_simulation():
    import numpy as np

    from book_lib import systolic
    from exercises.keys.ch02_tpus import BUSY_CASES, _busy

    for M, K, N in BUSY_CASES:
        run = systolic.simulate(np.ones((M, K)), np.ones((K, N)))
        assert _busy(M, K, N) == pytest.approx(run.utilization, rel=1e-12), (M, K, N)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_carry_no_solution_marker_and_no_student_instruction(assignment):
    text = (ROOT / "solutions" / f"{assignment}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    for instruction in ("YOUR CODE HERE", "Fill in each cell", "NotImplementedError"):
        assert instruction not in text, instruction
    titled = re.sub(r"(\{\{?admonition\}\}? |\*)Erratum", "", text)
    assert "Erratum" not in titled, "every erratum is a titled admonition"


# A reason in UNPRINTED says why the text's answer is not graded; a question's kind is no such reason.
KIND_AS_REASON = re.compile(r"\ban? (value|function|choice) question\b|\ba JAX program\b", re.IGNORECASE)


def printed_problems(keys: dict, printed: dict, unprinted: dict, nothing_printed: str = "") -> list[str]:
    """What is wrong with a keys module's tables of the text's answers; empty when nothing is.

    Every value or choice question is in exactly one of PRINTED (the text's printed answer, which the
    grader must accept) and UNPRINTED (why the text gives none to accept). A function or JAX question
    is graded on inputs drawn at grading time: it is in no table unless a reason says something about
    the text (a slip, a formula it prints instead), and never in PRINTED.
    """
    problems = [] if printed or nothing_printed else ["PRINTED is empty: list the text's answers or NOTHING_PRINTED"]
    problems += [f"{gid}: no such question" for gid in sorted({*printed, *unprinted} - set(keys))]
    for gid, key in keys.items():
        tables = [name for name, table in (("PRINTED", printed), ("UNPRINTED", unprinted)) if gid in table]
        if key.kind in ("value", "choice") and len(tables) != 1:
            problems.append(f"{gid}: a {key.kind} question in {' and '.join(tables) or 'neither table'}")
        elif key.kind in ("function", "jax") and gid in printed:
            problems.append(f"{gid}: a {key.kind} question in PRINTED, which holds values and choices")
    for gid, reason in unprinted.items():
        if len(reason.split()) < 4 or KIND_AS_REASON.search(reason):
            problems.append(f"{gid}: the reason {reason!r} is no sentence about the text")
    return problems


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_texts_printed_answers_score_full_where_its_model_gives_them(assignment):
    """Each keys module lists the text's printed answers (`PRINTED`); the grader must accept every one."""
    import importlib

    from exercises.grading.judge import judge_record

    module = importlib.import_module(f"exercises.keys.{assignment}")
    printed, unprinted = getattr(module, "PRINTED", {}), getattr(module, "UNPRINTED", {})
    keys = keys_for(assignment)
    assert printed_problems(keys, printed, unprinted, getattr(module, "NOTHING_PRINTED", "")) == []
    for gid, answer in printed.items():
        values = {name: {"str": v} if isinstance(v, str) else {"num": float(v)} for name, v in answer.items()}
        assert judge_record(keys[gid], {"params": dict(keys[gid].params)}, {"values": values}) is None, (gid, answer)


@pytest.mark.parametrize(
    ("plant", "found"),
    [
        (lambda printed, unprinted: printed.pop("ch01_q0a_t_math_s"), "ch01_q0a_t_math_s: a value question in neither"),
        (
            lambda printed, unprinted: unprinted.update(ch01_q0c_dot_bound="the text prints it in words"),
            "ch01_q0c_dot_bound: a choice question in PRINTED and UNPRINTED",
        ),
        (
            lambda printed, unprinted: printed.update(ch01_q0b_dot_intensity={"dot_product_intensity": 0.5}),
            "ch01_q0b_dot_intensity: a function question in PRINTED",
        ),
        (
            lambda printed, unprinted: unprinted.update(ch01_q0b_dot_intensity="a function question: graded on inputs"),
            "ch01_q0b_dot_intensity: the reason",
        ),
        (
            lambda printed, unprinted: unprinted.update(ch01_q9_gone="the text prints no answer"),
            "ch01_q9_gone: no such",
        ),
        (lambda printed, unprinted: printed.clear(), "PRINTED is empty"),
    ],
)
def test_the_printed_tables_check_catches_a_planted_violation(plant, found):
    from exercises.keys import ch01_rooflines as module

    printed, unprinted = dict(module.PRINTED), dict(module.UNPRINTED)
    assert printed_problems(module.KEYS, printed, unprinted) == []
    plant(printed, unprinted)
    problems = printed_problems(module.KEYS, printed, unprinted)
    assert any(found in problem for problem in problems), problems


def test_the_texts_own_constants_give_its_answers_and_the_grader_takes_them():
    """Where the text computes with its own constants (16 GB of 1e9 bytes per v5e, a ridge of 240), the
    answer it gets is one the grader accepts (`Key.also`), next to the exact one."""
    keys = keys_for("ch07_inference")
    moe = [a["moe_critical_batch"] for a in keys["ch07_q5_moe"].answers()]
    assert 1920 in moe and any(round(b) != 1920 for b in moe)
    free = [a["free_hbm_per_chip_bytes"] for a in keys["ch07_q6_expert_sharding"].answers()]
    assert any(round(b / 1e9, 1) == 14.3 for b in free) and any(round(b / 1e9, 1) != 14.3 for b in free)
    fewest = keys_for("ch06_training_llama3")["ch06_q4b_fewest_chips"].answers()
    assert {a["fewest_chips"] for a in fewest} >= {226, 212}  # 96 GB of 1e9 bytes, and 96 GiB
    kv = keys_for("ch08_serving_llama3")["ch08_q0b_kv_cache"].answers()
    assert {a["kv_bytes_per_token_int8"] for a in kv} == {163_840, 160_000}  # its "160 kB", 160 KiB


def test_a_function_question_takes_the_texts_model_on_every_probe_but_not_a_mix():
    """ch03_q4a accepts the text's V / W rule (`Key.also`) as well as the ring's exact (X - 1) / X, but a
    function must follow one model on every probe: one that switches between them is wrong."""
    import random

    from exercises.grading.judge import judge_record

    key = keys_for("ch03_sharding")["ch03_q4a_strategy_times"]
    probes = key.probes(random.Random(0))
    text, exact = key.also[0], key.reference
    spec = {"probes": probes}

    def recorded(model, args):
        return [{"num": t} for t in model(*args)]

    for model in (exact, text):
        assert judge_record(key, spec, {"outputs": [recorded(model, a) for a in probes]}) is None
    mixed = [recorded(text if i % 2 else exact, a) for i, a in enumerate(probes)]
    assert judge_record(key, spec, {"outputs": mixed}) is not None
    assert any(abs(t / e - 1) > 0.05 for a in probes for t, e in zip(text(*a), exact(*a), strict=True))


def test_the_rules_students_check_by_are_the_keys_of_today():
    """`book_lib/answer_rules.py`, which `check("Q9")` reads in a student's notebook, is what the keys give."""
    assert build.ANSWER_RULES.read_text() == build.answer_rules_source(), "stale: run `make exercises`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_release_says_how_to_hand_in_and_links_what_works_in_colab_and_a_class_folder(assignment):
    """A release is opened in Colab or from a class's folder: a relative link to a chapter leads nowhere."""
    nb = nbformat.read(ROOT / "exercises" / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    header = nb.cells[0].source
    assert "Download .ipynb" in header and "change no other cell" in header and 'check("Q3")' in header
    relative = [link for cell in nb.cells for link in re.findall(r"\]\((?!https?://|#)([^)]+)\)", cell.source)]
    assert not relative, f"relative links: {relative}"
    imports = next(c.source for c in nb.cells if build.grade_id(c) == "imports")
    assert f'check = Checker("{assignment}")' in imports
