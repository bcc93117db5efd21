"""The course files: expected values current, release and solutions free of drift, release free of leaks."""

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from exercises import build
from exercises.keys import keys_for

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = build.assignments()


def _graded_tests(nb):
    return {build.grade_id(c): c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}


def _expected_literal(cell):
    line = build.EXPECTED_LINE.search(cell.source).group(0)
    return ast.literal_eval(line.split("=", 1)[1].strip())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_graded_cell_has_a_key_and_current_expected_values(assignment):
    keys = keys_for(assignment)
    tests = _graded_tests(nbformat.read(build.source_path(assignment), as_version=4))
    assert set(tests) == set(keys), "one key per graded test cell"
    for gid, cell in tests.items():
        literal = _expected_literal(cell)
        assert literal == ast.literal_eval(repr(keys[gid].expected())), f"{gid}: run `make exercises`"
        assert literal is not None


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_answer_cell_defines_its_key_names(assignment):
    keys = keys_for(assignment)
    nb = nbformat.read(build.source_path(assignment), as_version=4)
    answers = {build.grade_id(c): c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}
    for gid, key in keys.items():
        answer = answers[f"{gid}_answer"]
        for name in key.names:
            assert re.search(rf"^(def )?{name}\b", answer, re.MULTILINE), (gid, name)
        if key.kind == "choice":
            assert key.expected() in key.choices


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_points_are_stated_and_add_up(assignment):
    nb = nbformat.read(build.source_path(assignment), as_version=4)
    tests = _graded_tests(nb)
    total = sum(c.metadata["nbgrader"]["points"] for c in tests.values())
    assert f"**{total} points.**" in nb.cells[0].source
    for gid, cell in tests.items():
        statement = next(c for c in nb.cells if build.grade_id(c) == f"{gid}_statement")
        assert f"({cell.metadata['nbgrader']['points']} pt" in statement.source, gid


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_leaks_no_solution_hidden_test_or_answer(assignment):
    path = ROOT / "exercises" / "release" / assignment / f"{assignment}.ipynb"
    text = path.read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "expected ="):
        assert marker not in text, marker
    nb = nbformat.read(path, as_version=4)
    assert not any(build.is_solution_only(c) for c in nb.cells)
    source = nbformat.read(build.source_path(assignment), as_version=4)
    answers = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")]
    released = {build.grade_id(c): c.source for c in nb.cells}
    for cell in answers:
        body = build.MARKER.sub("", cell.source)
        solution_lines = cell.source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0].strip().splitlines()
        for line in solution_lines:
            if line.strip():
                assert line.strip() not in released[build.grade_id(cell)], line
        assert "raise NotImplementedError()" in released[build.grade_id(cell)], body[:40]
    # every answer value (and every non-integer value a function must return) stays out of the release
    numbers = json.dumps([c.source for c in nb.cells])
    for gid, key in keys_for(assignment).items():
        if key.kind in ("choice", "jax"):
            continue  # a choice's options are listed by design; a JAX answer is checked by behaviour
        value = key.expected()
        wants = list(value.values()) if isinstance(value, dict) else [w for _, w in value]
        for want in wants:
            for w in want if isinstance(want, tuple) else (want,):
                if key.kind == "function" and float(w).is_integer():
                    continue  # a byte count like B * F is no secret; the hidden tests pair it with its inputs
                for text_form in {repr(w), f"{w:.6g}", f"{w:.4g}"}:
                    if len(text_form.replace(".", "").replace("-", "")) >= 4:
                        assert text_form not in numbers, f"{gid}: {text_form} appears in the release"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_and_solutions_are_what_make_exercises_writes(assignment, tmp_path):
    src = nbformat.read(build.source_path(assignment), as_version=4)
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    import shutil

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
    nb = nbformat.read(build.source_path(assignment), as_version=4)
    statements = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for text, value in givens:
        assert text in statements, f"{text!r} is not printed in any statement"
        assert _parse_given(text) == pytest.approx(value, rel=5e-3), (text, value)
