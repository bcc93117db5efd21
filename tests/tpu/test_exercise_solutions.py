"""The reference solution of every JAX exercise compiled for the TPUs students open, on its first probe's
shapes and shardings (the text's numbers), as `check("Qn")` runs it on a student's device."""

import jax
import pytest

from book_lib import answer_check, hardware
from book_lib import tpu_aot as aot
from book_lib.answer_rules import RULES
from exercises import build

QUESTIONS = [
    (assignment, label, question)
    for assignment, questions in RULES.items()
    for label, question in questions.items()
    if question["kind"] == "jax"
]
CASES = [
    pytest.param(target, assignment, label, question, id=f"{target}-{assignment}-{label}")
    for target, t in aot.TARGETS.items()
    for assignment, label, question in QUESTIONS
    if question["recorder"] == "traced" or t.n_devices >= question["n_devices"]
]
_SPACES: dict = {}


def _reference(assignment: str, name: str):
    if assignment not in _SPACES:
        _SPACES[assignment] = build.reference_namespace(assignment)
    return _SPACES[assignment][name]


def test_there_are_jax_exercises_on_every_target():
    assert len(QUESTIONS) >= 10
    for target in aot.TARGETS:
        assert any(c.values[0] == target for c in CASES), target


@pytest.mark.parametrize(("target", "assignment", "label", "question"), CASES)
def test_the_reference_solution_compiles_for_the_tpu(target, assignment, label, question):
    fn = _reference(assignment, question["names"][0])
    probe = question["probes"][0]
    statics = tuple(probe["statics"])
    types = list(zip(probe["shapes"], probe["dtypes"], strict=True))
    with aot.compiling_for(target), jax.default_matmul_precision("highest"):
        if question["recorder"] == "traced":
            args = [aot.placed(shape, dtype) for shape, dtype in types]
            compiled = aot.compile(lambda *a: fn(*a, *statics), *args)
        else:
            mesh = jax.make_mesh(
                (question["n_devices"],),
                (answer_check.MESH_AXIS,),
                (jax.sharding.AxisType.Explicit,),
                devices=aot.target_devices(target)[: question["n_devices"]],
            )
            with jax.set_mesh(mesh):
                args = [
                    aot.placed(s, d, mesh, jax.P(*spec)) for (s, d), spec in zip(types, probe["specs"], strict=True)
                ]
                compiled = aot.compile(lambda *a: fn(*a, *statics), *args)
    memory = compiled.memory_analysis()
    used = memory.argument_size_in_bytes + memory.output_size_in_bytes + memory.temp_size_in_bytes
    assert used <= hardware.get_chip(aot.TARGETS[target].chip).per_device().hbm_bytes
