"""Per-class variants (`exercises/variants.py`): a course seed gives every value question new numbers."""

import dataclasses
import json
import random
import re

import nbformat
import pytest

from book_lib import checks
from exercises import build, class_key, variants
from exercises.keys import MAX_REDRAWS, choice, function, keys_for, linked_groups, redraw, value

ASSIGNMENTS = build.assignments()
SEEDS = range(1, 13)


def _statements(nb) -> dict[str, str]:
    return {
        build.grade_id(c).removesuffix("_statement"): c.source
        for c in nb.cells
        if (build.grade_id(c) or "").endswith("_statement")
    }


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_value_question_has_numbers_a_class_can_change(assignment):
    bare = [gid for gid, key in keys_for(assignment).items() if key.kind == "value" and not key.params]
    assert not bare, f"value questions without parameters (the public solution would answer them): {bare}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_seed_moves_every_value_answer_beyond_its_tolerance(assignment):
    keys = keys_for(assignment)
    for seed in SEEDS:
        values = variants.draw(seed, assignment)
        assert values == variants.draw(seed, assignment), "a seed always draws the same class"
        assert json.loads(json.dumps(values)) == values, "values survive the class's key (JSON)"
        for gid, mine in values.items():
            key = keys[gid]
            assert set(mine) == set(key.params), gid
            if key.kind == "value":
                text, ours = key.answer(), key.answer(mine)
                for name in text:
                    for a, b in zip(_flat(text[name]), _flat(ours[name]), strict=True):
                        assert abs(a - b) > 2 * key.rel_tol * abs(a), (seed, gid, name, a, b)
    if any(key.params for key in keys.values()):  # code-only assignments draw their inputs at grading time
        assert len({json.dumps(variants.draw(s, assignment), sort_keys=True) for s in SEEDS}) > len(SEEDS) // 2


def _flat(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_student_draws_numbers_of_their_own_that_no_public_solution_answers(assignment):
    keys = keys_for(assignment)
    if not any(key.params for key in keys.values()):
        return
    drawn = {student: variants.draw(SEEDS[0], assignment, student) for student in (None, "ada", "bea", "cy")}
    assert len({json.dumps(v, sort_keys=True) for v in drawn.values()}) == len(drawn), "each their own numbers"
    for student, values in drawn.items():
        assert values == variants.draw(SEEDS[0], assignment, student), "a student always draws the same"
        for gid, mine in values.items():
            if keys[gid].kind == "value":
                text, ours = keys[gid].answer(), keys[gid].answer(mine)
                for name in text:
                    for a, b in zip(_flat(text[name]), _flat(ours[name]), strict=True):
                        assert abs(a - b) > 2 * keys[gid].rel_tol * abs(a), (student, gid, name, a, b)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_class_statement_prints_its_own_numbers(assignment):
    text = build.rendered_source(assignment)
    values = variants.draw(1, assignment)
    mine = build.rendered_source(assignment, values)
    for nb in (text, mine):
        assert "<%" not in json.dumps([c.source for c in nb.cells]), "every template is filled"
    text_statements, my_statements = _statements(text), _statements(mine)
    for gid in values:
        assert my_statements[gid] != text_statements[gid], f"{gid}: the class's statement shows the text's numbers"
    assert not any(c.metadata.get("book", {}).get("text_only") for c in mine.cells), (
        "notes on the text's numbers dropped"
    )


LABEL = re.compile(r"^## (Q\d+[a-z]?) ")
REFERENCE = re.compile(r"\b(Q\d+[a-z]?)\b")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_question_that_names_another_takes_up_its_draw(assignment):
    """A statement that names another question ("the model of Q1") is drawn with it (`Key.follows`), so a
    class's or a student's numbers never contradict it; a seed's draw shows the shared numbers in both."""
    keys = keys_for(assignment)
    groups = linked_groups(keys)
    root = {gid: first for first, group in groups.items() for gid in group}
    statements = _statements(nbformat.read(build.source_path(assignment), as_version=4))
    labels = {LABEL.match(text)[1]: gid for gid, text in statements.items() if LABEL.match(text)}
    unlinked = []
    for gid, text in statements.items():
        body = text.partition("\n")[2]
        for label in sorted(set(REFERENCE.findall(body))):
            other = labels.get(label)
            if gid in root and other in root and root[gid] != root[other]:
                unlinked.append(f"{gid} names {label} ({other})")
    assert not unlinked, f"statements naming a question they are not drawn with (Key.follows): {unlinked}"
    values = variants.draw(3, assignment, "a-student")
    for gid, key in keys.items():
        if key.follows is not None:
            shared = key.shared_names(keys[key.follows])
            assert {n: values[gid][n] for n in shared} == {n: values[key.follows][n] for n in shared}, gid


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_drawn_statement_cites_no_figure_of_the_texts(assignment):
    """Where a class's numbers stand, a tolerance is not explained by the text's rounded figures
    (`text_note`): those notes belong to the text's numbers alone."""
    values = variants.draw(5, assignment)
    keys = keys_for(assignment)
    mine = _statements(build.rendered_source(assignment, values))
    cited = [gid for gid in values if keys[gid].kind == "value" and "allows the text's" in mine[gid]]
    assert not cited, f"statements of drawn numbers that cite the text's figures: {cited}"


def test_the_default_render_is_the_committed_release():
    """The repository's release and solutions are the text's numbers (checked cell by cell in test_exercises)."""
    raw = nbformat.read(build.source_path(ASSIGNMENTS[0]), as_version=4)
    assert "<%" in json.dumps([c.source for c in raw.cells]), "the sources are templates"
    release = (build.COURSE / "release" / ASSIGNMENTS[0] / f"{ASSIGNMENTS[0]}.ipynb").read_text()
    assert "<%" not in release


def test_a_broken_template_names_its_cell():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("$<% sci(no_such_name) %>$", id="c1")])
    with pytest.raises(ValueError, match=r"no_such_name.*c1|c1.*no_such_name"):
        variants.render(nb, ASSIGNMENTS[0])


def test_values_that_do_not_fit_the_keys_are_refused(tmp_path):
    gid = next(g for g, k in keys_for(ASSIGNMENTS[0]).items() if k.params)
    (tmp_path / class_key.LEGACY_FILE).write_text(
        json.dumps({"seed": 1, "values": {ASSIGNMENTS[0]: {gid: {"nope": 1}}}})
    )
    with pytest.raises(ValueError, match="nope"):
        variants.load(tmp_path, ASSIGNMENTS[0])
    key = class_key.ClassKey(assignment=ASSIGNMENTS[0], seed=1, commit=None, built=None, students={"s": {gid: {}}})
    class_key.write(tmp_path, key)
    with pytest.raises(ValueError, match=rf"{gid} has parameters \[\]; allowed"):
        variants.load(tmp_path, ASSIGNMENTS[0], "s")


def test_the_constructors_refuse_what_their_kind_cannot_use():
    with pytest.raises(ValueError, match=r"^draw=None: params \['n'\] need a class's draw"):
        choice("x", lambda n: "a", ("a", "b"), params={"n": 1})
    with pytest.raises(ValueError, match=r"^params=None: x draws numbers"):
        choice("x", "a", ("a", "b"), accept=lambda v: True)
    with pytest.raises(ValueError, match=r"^params\['n'\]=\(1, 2\): allowed: an int, float or str"):
        value("x", lambda n: n, params={"n": (1, 2)}, draw=lambda r: {"n": (3, 4)})
    with pytest.raises(ValueError, match=r"^choices=\('a',\): x needs two or more"):
        choice("x", "a", ("a",))
    with pytest.raises(ValueError, match=r"^cases=\(\): f needs the text's inputs"):
        function("f", abs, ())
    with pytest.raises(ValueError, match=r"^draw=None: params \['n'\] need a class's draw"):  # or `follows`
        value("x", lambda n: n, params={"n": 1})
    pair = value(("x", "y"), lambda n: n, params={"n": 1}, draw=_draw_n)
    with pytest.raises(ValueError, match=r"^expected=<lambda> gave int for \('x', 'y'\); allowed: a tuple of 2$"):
        pair.answer()
    assert value(("x", "y"), lambda n: (n, 2 * n), params={"n": 1}, draw=_draw_n).answer({"n": 3}) == {"x": 3, "y": 6}


def _draw_n(r):
    return {"n": r.choice(range(1, 100))}


def test_a_key_redraws_until_its_condition_holds_as_a_loop_in_the_draw_would():
    key = value("x", lambda n: n, params={"n": 1}, draw=_draw_n, accept=lambda v: v["n"] % 7 == 0)
    rng = random.Random(5)
    while (looped := _draw_n(rng))["n"] % 7:  # the hand-written loop `accept` replaces: same random calls
        pass
    assert key.drawn(random.Random(5)) == looped
    with pytest.raises(ZeroDivisionError):  # only a ValueError refuses; any other error is a bug
        dataclasses.replace(key, accept=lambda v: 1 / 0).drawn(random.Random(5))
    with pytest.raises(ValueError, match=rf"^the draw of x: no draw in {MAX_REDRAWS} met its condition"):
        dataclasses.replace(key, accept=lambda v: False).drawn(random.Random(5))
    assert redraw(_draw_n, lambda v: checks.count("n", v["n"] - 50) > 0, random.Random(5))["n"] > 50


@pytest.mark.parametrize(
    ("value", "tex"),
    [
        (1e12, "10^{12}"),
        (9.89e14, "9.89 \\times 10^{14}"),
        (9e10, "9 \\times 10^{10}"),
        (240.0, "240"),
        (9.999e14, "10^{15}"),
    ],
)
def test_sci_prints_what_the_text_prints(value, tex):
    assert variants.sci(value) == tex


@pytest.mark.parametrize("value", [1e12, 2.5e-7, 0.1, 10.0, 3, 123456.0, "tpu-v5e", 4096])
def test_py_writes_a_literal_that_reads_back_the_same(value):
    text = variants.py(value)
    assert eval(text) == value and type(eval(text)) is type(value)  # noqa: S307


def test_a_solution_shows_the_texts_model_for_its_own_numbers():
    """`<% answers[1][...] %>` is the first `Key.also` answer for the numbers rendered, a class's too."""
    from book_lib.numfmt import fmt

    key = keys_for("ch07_inference")["ch07_q0d_serving_13b"]
    for values in (None, variants.draw(3, "ch07_inference")):
        nb = build.rendered_source("ch07_inference", values)
        mine = values["ch07_q0d_serving_13b"] if values else None
        text_model = key.answers(mine)[1]
        sentence = f"{text_model['max_batch_q0d']} sequences fit and the chips yield"
        shown = "\n".join(c.source for c in nb.cells)
        assert sentence in shown and f"{fmt(round(text_model['tokens_per_s_at_max_q0d']))} tokens/s" in shown
    assert key.answers()[1]["max_batch_q0d"] == 15, "the text's 16 GB of 1e9 bytes per chip: 15 sequences"
