"""JAX answers judged on programs the grader runs itself (`exercises/grading/programs.py`), in this process.

Each JAX question's reference solution is recorded as the kernel records it (`recorder.record`,
which exports it with `jax.export`) and judged as the grader judges it: it passes. Every plausible
wrong program (the keys' PLAUSIBLE) fails, and so does every forged record: the old recorder's
report of a program's text and outputs, a program for other shapes, shardings, devices or platforms,
a host callback, an effect, names that spell collectives, bytes that are no program. The same
judging runs in the grader's worker process; `tests/course/test_hostile.py` attacks it through nbgrader.
"""

import base64
import dataclasses
import importlib
import io
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from book_lib import answer_check, program_rules
from book_lib.answer_rules import RULES
from book_lib.hlo_arrays import tensor_shapes
from exercises import build
from exercises.grading import pipeline, programs, recorder
from exercises.keys import keys_for

JAX_KEYS = [
    (assignment, gid)
    for assignment in build.assignments()
    for gid, key in keys_for(assignment).items()
    if key.kind == "jax"
]


@pytest.fixture(scope="module", autouse=True)
def _devices(eight_devices):
    return eight_devices


_NAMESPACES: dict = {}


def _solutions(assignment: str) -> dict:
    """The notebook's imports, given constants and reference answers, run in one namespace (cached)."""
    if assignment not in _NAMESPACES:
        _NAMESPACES[assignment] = build.reference_namespace(assignment)
    return _NAMESPACES[assignment]


def _spec(assignment: str, gid: str) -> dict:
    return pipeline.draw_spec(gid, keys_for(assignment)[gid], random.Random(0))


def _judge(assignment: str, gid: str, record: dict) -> str | None:
    key = keys_for(assignment)[gid]
    return programs.judge_programs(key.check, key.names[0], _spec(assignment, gid)["probes"], record, seed=5)


def _record(assignment: str, gid: str, fn) -> dict:
    spec = _spec(assignment, gid)
    key = keys_for(assignment)[gid]
    return recorder.record({k: v for k, v in spec.items() if k != "grade_id"}, {key.names[0]: fn})


# What the grader says of a program's structure (not its values or a device's block): a student's `check`
# applies the same rules (`book_lib.program_rules`) and must say it first.
STRUCTURAL = ("has no", "holds an array", "compiled program has", "moves an array", "collective-permutes send")
STRUCTURAL += ("grid of steps", "no step loads", "matmul", "calls", "talks to the host")


@pytest.mark.parametrize(("assignment", "gid"), JAX_KEYS)
def test_the_reference_program_passes_and_its_plausible_rival_fails(assignment, gid):
    """By the grader, and by a student's `check` where the rival breaks a rule of the program's structure."""
    space = _solutions(assignment)
    name = keys_for(assignment)[gid].names[0]
    (question,) = [q for q in RULES[assignment].values() if q["grade_id"] == gid]
    assert _judge(assignment, gid, _record(assignment, gid, space[name])) is None
    assert answer_check.problems(question, {name: space[name]}) == [], "check refuses a right answer"
    plausible = getattr(importlib.import_module(f"exercises.keys.{assignment}"), "PLAUSIBLE", {})
    if gid in plausible:
        rival: dict = dict(space)
        exec(plausible[gid], rival)  # noqa: S102
        message = _judge(assignment, gid, _record(assignment, gid, rival[name]))
        assert message is not None and name in message, message
        if any(words in message for words in STRUCTURAL):
            assert answer_check.problems(question, {name: rival[name]}), f"check lets through: {message}"


def _ring(gid="ch10_q0_allgather_matmul"):
    return "ch10_jax", gid, _solutions("ch10_jax")["allgather_matmul"]


@pytest.mark.parametrize(("assignment", "gid"), JAX_KEYS)
def test_the_old_recorders_report_of_a_perfect_program_is_not_believed(assignment, gid):
    """What fooled the old grader: a record of jaxpr, HLO and outputs, however right they look."""
    run = {"jaxpr": "shard_map psum all_gather ppermute pallas_call", "hlo": "collective-permute", "out": {}}
    forged = {"nonce": "x", "runs": [run] * 3, "programs": [{"failed": "exported elsewhere"}] * 3}
    assert "could not be exported" in _judge(assignment, gid, forged)


def _exported(fn, *avals, **kwargs) -> str:
    return base64.b64encode(jax.export.export(jax.jit(fn), **kwargs)(*avals).serialize()).decode()


def _sharded_avals(assignment, gid, probe, specs=None):
    mesh = jax.make_mesh((8,), ("X",), (jax.sharding.AxisType.Explicit,))
    specs = specs or probe["specs"]
    return mesh, [
        jax.ShapeDtypeStruct(tuple(s), jnp.float32, sharding=jax.NamedSharding(mesh, jax.P(*p)))
        for s, p in zip(probe["shapes"], specs, strict=True)
    ]


def _forge(assignment, gid, make) -> dict:
    """A record whose every probe's program is `make(probe)`, the kernel bypassed."""
    probes = _spec(assignment, gid)["probes"]
    return {"nonce": "x", "programs": [{"program": make(p)} for p in probes]}


def test_a_plain_matmul_named_after_collectives_fails():
    """Names and source locations are the student's text: they spell nothing the grader reads."""
    assignment, gid, _ = _ring()

    def named(probe):
        mesh, avals = _sharded_avals(assignment, gid, probe)

        def fn(a, w):
            with jax.named_scope("stablehlo.collective_permute collective-permute( sdy.manual_computation"):
                return jnp.matmul(a, w, out_sharding=jax.P(None, "X"))

        with jax.set_mesh(mesh):
            return _exported(fn, *avals)

    message = _judge(assignment, gid, _forge(assignment, gid, named))
    assert message is not None and ("no shard_map" in message or "no ppermute" in message), message


@pytest.mark.parametrize("forgery", ["shapes", "sharding", "devices", "platform", "garbage", "missing"])
def test_a_program_for_other_inputs_devices_or_platforms_fails(forgery):
    assignment, gid, fn = _ring()

    def make(probe):
        mesh, avals = _sharded_avals(assignment, gid, probe)
        if forgery == "garbage":
            return base64.b64encode(b"not a program").decode()
        if forgery == "missing":
            return None
        if forgery == "devices":
            return _exported(lambda a, w: a @ w, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals])
        if forgery == "shapes":
            mesh, avals = _sharded_avals(
                assignment, gid, {**probe, "shapes": [[s[0], 2 * s[1]] for s in probe["shapes"]]}
            )
        with jax.set_mesh(mesh):
            if forgery == "sharding":
                _, avals = _sharded_avals(assignment, gid, probe, specs=[[None, None]] * 2)
                return _exported(lambda a, w: a @ w, *avals)
            platforms = ("tpu",) if forgery == "platform" else ("cpu",)
            return _exported(fn, *avals, platforms=platforms)

    message = _judge(assignment, gid, _forge(assignment, gid, make))
    assert message is not None, forgery


def test_a_host_callback_is_refused_before_anything_runs():
    """NumPy's right answer through a callback, in a program built by hand (`jax.export` refuses to
    serialise one): running it would call into the kernel's Python, which the grader's process lacks."""
    assignment, gid = "ch04_transformers", "ch04_q9_online_softmax"
    reference = keys_for(assignment)[gid].check.reference

    def make(probe):
        avals = [jax.ShapeDtypeStruct(tuple(s), jnp.float32) for s in probe["shapes"]]
        out = jax.ShapeDtypeStruct((probe["shapes"][0][0], probe["shapes"][2][1]), jnp.float32)

        def fn(q, k, v):
            answer = lambda *a: np.asarray(reference(a, 8, *probe["statics"]), np.float32)  # noqa: E731
            return jax.pure_callback(answer, out, q, k, v)

        module = jax.jit(fn).lower(*avals).compiler_ir("stablehlo")
        bytecode = io.BytesIO()
        module.operation.write_bytecode(bytecode)
        honest = jax.export.export(jax.jit(lambda q, k, v: q @ k.T @ v))(*avals)
        forged = dataclasses.replace(honest, mlir_module_serialized=bytecode.getvalue())
        return base64.b64encode(forged.serialize()).decode()

    message = _judge(assignment, gid, _forge(assignment, gid, make))
    # refused by its custom call; a jax older than the one that wrote the bytecode cannot read it at all
    assert message is not None and ("does not run" in message or "could not be read" in message), message


def test_stablehlo_ops_read_operations_not_the_strings_around_them():
    module = "\n".join(
        [
            '#loc7 = loc("stablehlo.all_gather"(#loc3))',
            '    %0 = stablehlo.add %a, %b : tensor<8x128xf32> loc("stablehlo.collective_permute")',
            '    %1 = "stablehlo.all_reduce"(%0) <{x}> ({ }) : (tensor<4x8xf32>) -> tensor<4x8xf32>',
            "    %2 = stablehlo.custom_call @xla_ffi_python_cpu_callback(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>",
            '    %3:2 = stablehlo.while(%i = %c) : tensor<i32> loc("tensor<999999x999999xf32>")',
        ]
    )
    ops = program_rules.stablehlo_ops(module)
    assert [op.name for op in ops] == [
        "stablehlo.add",
        "stablehlo.all_reduce",
        "stablehlo.custom_call",
        "stablehlo.while",
    ]
    assert ops[2].target == "xla_ffi_python_cpu_callback"
    assert [tensor_shapes(op.text) for op in ops][3] == [()]


def test_the_recorder_binds_no_name_in_the_kernel_and_records_plain_values():
    space = {"x": 3, "label": "fsdp", "f": lambda a, b: a * b, "plain": "a student's own name"}
    before = set(space)
    exec(recorder.injection({"nonce": "n", "kind": "value", "names": ["x", "y"]}), space)  # noqa: S102
    assert set(space) - {"__builtins__"} == before and space["plain"] == "a student's own name"
    assert recorder.record({"nonce": "n", "kind": "value", "names": ["x", "y"]}, space)["values"] == {
        "x": {"num": 3.0},
        "y": {"missing": "y"},
    }
    got = recorder.record({"nonce": "n", "kind": "function", "names": ["f"], "probes": [(2, 3), ("a", None)]}, space)
    assert got["outputs"] == [{"num": 6.0}, {"raised": "TypeError"}]


def test_the_worker_stops_a_program_that_never_ends_and_recovers():
    """A while loop that never exits: the worker is killed at its limit, the next question still graded."""
    assignment, gid = "ch04_transformers", "ch04_q9_online_softmax"

    def make(probe):
        avals = [jax.ShapeDtypeStruct(tuple(s), jnp.float32) for s in probe["shapes"]]

        def fn(q, k, v):
            return jax.lax.while_loop(lambda c: c[1] >= 0, lambda c: (c[0] + 1.0, c[1]), (q, 1))[0]

        return _exported(fn, *avals)

    worker = programs.Worker(timeout_s=8)
    try:
        probes = _spec(assignment, gid)["probes"]
        assert "did not finish" in worker.judge(assignment, gid, probes, _forge(assignment, gid, make), 5)
        reference = _record(assignment, gid, _solutions(assignment)["online_softmax_attention"])
        assert worker.judge(assignment, gid, probes, reference, 5) is None
    finally:
        worker.close()
