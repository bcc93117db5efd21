"""`check("Q9")` (`book_lib.answer_check`): an answer tried as the grader reads it, with the grader's own rules."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from book_lib import answer_check, program_rules
from book_lib.answer_check import Checker, is_number
from book_lib.answer_rules import RULES

pytestmark = pytest.mark.usefixtures("eight_devices")  # no JAX value before the devices are set up


def test_a_number_is_what_the_grader_reads_as_one():
    for value in (3, 2.5, np.float32(1.5), np.int64(7), jnp.float32(4.0), jnp.array(2.0), np.float64(1)):
        assert is_number(value), repr(value)


def test_a_bool_a_string_a_list_or_a_nan_is_not():
    for value in (True, np.bool_(False), "3", None, [1.0], float("nan"), float("inf"), jnp.ones(2)):
        assert not is_number(value), repr(value)


def test_an_unknown_assignment_is_refused_with_the_close_names():
    with pytest.raises(ValueError, match=r"^assignment='ch07_inferance': unknown; allowed: ch07_inference"):
        Checker("ch07_inferance")


def _check(assignment: str, label: str, space: dict, capsys) -> tuple[bool, str]:
    ok = answer_check.Checker(assignment)
    exec("result = check(label)", {**space, "check": ok, "label": label}, space)  # the notebook's globals
    return space["result"], capsys.readouterr().out


def test_a_value_question_takes_numpy_and_jax_scalars_and_says_what_is_missing(capsys):
    space = {"critical_batch_bf16": np.float32(240), "critical_batch_int8_weights": jnp.float32(120)}
    ok, said = _check("ch07_inference", "Q0a", space, capsys)
    assert not ok and "critical_batch_int8 is not defined: run its answer cell" in said
    space["critical_batch_int8"] = 240
    assert _check("ch07_inference", "Q0a", space, capsys)[0]
    space["critical_batch_int8"] = "240"
    ok, said = _check("ch07_inference", "Q0a", space, capsys)
    assert not ok and "critical_batch_int8 = '240' is a str: the grader reads a number" in said


def test_a_choice_and_a_function_are_tried_on_their_form(capsys):
    ok, said = _check("ch01_rooflines", "Q0c", {"dot_product_bound": "memory"}, capsys)
    assert not ok and "is not one of ('compute', 'bandwidth')" in said
    assert _check("ch01_rooflines", "Q0c", {"dot_product_bound": "bandwidth"}, capsys)[0]
    ok, said = _check("ch07_inference", "Q7", {"chips_for_2d_to_win": lambda f, d: (f, d)}, capsys)
    assert not ok and "chips_for_2d_to_win(16384, 4096) returned (16384, 4096): the grader reads a number" in said
    ok, said = _check("ch07_inference", "Q7", {"chips_for_2d_to_win": lambda f, d: 1 / (d - 1)}, capsys)
    assert not ok and "chips_for_2d_to_win(3, 1) raised ZeroDivisionError" in said
    assert _check("ch07_inference", "Q7", {"chips_for_2d_to_win": lambda f, d: np.float32(18 * f / d)}, capsys)[0]
    assert "nothing to check here" in _check("ch07_inference", "Q4", {}, capsys)[1]
    ok, said = _check("ch07_inference", "Q99", {}, capsys)
    assert not ok and said.startswith("check('Q99'): no such question; allowed: Q0a, Q0b")


def _decode(update):
    def cached_decode_attention(q, k_cache, v_cache, k_new, v_new, pos):
        k_cache, v_cache = update(k_cache, k_new, pos), update(v_cache, v_new, pos)
        scores = jnp.einsum("bh,bsh->bs", q, k_cache) / math.sqrt(q.shape[-1])
        scores = jnp.where(jnp.arange(k_cache.shape[1]) <= pos, scores, -jnp.inf)
        return jnp.einsum("bs,bsh->bh", jax.nn.softmax(scores, axis=-1), v_cache)

    return cached_decode_attention


def test_a_jax_answer_is_held_to_the_graders_rules_before_hand_in(capsys):
    """Chapter 7's Q9 written with `.at[].set`: right values, but no dynamic_update_slice, which the grader
    asks for; `check` says so, as the grader would, and takes the answer with `dynamic_update_slice`."""
    at_set = _decode(lambda cache, new, pos: cache.at[:, pos].set(new))
    ok, said = _check("ch07_inference", "Q9", {"cached_decode_attention": at_set}, capsys)
    assert not ok and "cached_decode_attention: the program has no dynamic_update_slice" in said, said
    right = _decode(lambda cache, new, pos: jax.lax.dynamic_update_slice_in_dim(cache, new[:, None], pos, axis=1))
    ok, said = _check("ch07_inference", "Q9", {"cached_decode_attention": right}, capsys)
    assert ok, said


def test_a_collective_the_question_forbids_is_caught_on_the_compiled_program(capsys):
    """A psum where chapter 7's Q9 allows no collective: found only once the program is compiled for 8 devices."""
    allreduce = _decode(lambda cache, new, pos: jax.lax.dynamic_update_slice_in_dim(cache, new[:, None], pos, axis=1))

    def gathered(q, k_cache, v_cache, k_new, v_new, pos):
        whole = jax.sharding.reshard(q, jax.P())  # every device gathers the batch: an all-gather
        return allreduce(q, k_cache, v_cache, k_new, v_new, pos) + 0 * whole.sum()

    ok, said = _check("ch07_inference", "Q9", {"cached_decode_attention": gathered}, capsys)
    assert not ok and "the compiled program has" in said, said


def test_the_rules_are_plain_data_the_grader_builds_from_its_keys():
    from exercises.keys import keys_for

    question = RULES["ch07_inference"]["Q9"]
    key = keys_for("ch07_inference")[question["grade_id"]]
    for probe in question["probes"]:
        assert program_rules.Rules(**probe["rules"]) == key.check.rules(tuple(probe["sizes"]), question["n_devices"])


def test_the_release_notebooks_check_catches_an_at_set_answer_before_hand_in(capsys):
    """The cells a student runs: the release's imports cell, an answer written with `.at[].set`, `check("Q9")`."""
    from pathlib import Path

    import nbformat

    release = Path(__file__).resolve().parents[2] / "exercises" / "release" / "ch07_inference" / "ch07_inference.ipynb"
    cells = {
        c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nbformat.read(release, as_version=4).cells
    }
    space: dict = {}
    exec(cells["imports"], space)  # noqa: S102 (the notebook's own imports cell)
    exec(  # noqa: S102 (a student's answer cell)
        "def cached_decode_attention(q, k_cache, v_cache, k_new, v_new, pos):\n"
        "    k_cache = k_cache.at[:, pos].set(k_new)\n"
        "    v_cache = v_cache.at[:, pos].set(v_new)\n"
        "    scores = jnp.einsum('bh,bsh->bs', q, k_cache) / math.sqrt(q.shape[-1])\n"
        "    scores = jnp.where(jnp.arange(k_cache.shape[1]) <= pos, scores, -jnp.inf)\n"
        "    return jnp.einsum('bs,bsh->bh', jax.nn.softmax(scores, axis=-1), v_cache)\n"
        "handed_in = check('Q9')\n",
        space,
    )
    assert space["handed_in"] is False
    assert "Q9: cached_decode_attention: the program has no dynamic_update_slice" in capsys.readouterr().out
