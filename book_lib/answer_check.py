"""`check("Q9")`: a question's answer tried as the course's grader will take it, before it is handed in.

An exercise notebook's imports cell makes `check = Checker("ch07_inference")`; `check("Q9")` after an
answer says, one line each, what the grader would refuse in its form, and never an expected value:

- a value question: each name is defined and holds what the grader reads as a number (an int, a
  float, a NumPy or JAX scalar: `is_number`);
- a choice: the name holds one of the allowed strings;
- a function: it runs on the text's inputs and returns numbers, as many as the grader compares;
- a JAX question: the function exports for each shape the grader tries (`export_program`, the very
  export the grader asks the kernel for) and its program keeps the question's rules, judged by the
  grader's own code (`book_lib.program_rules`): the operations it must hold, no host callback, no
  array as large as the question forbids, a kernel's blocks, and once compiled for 8 devices, its
  collectives.

What a question asks is plain data, written from the course's keys by `make exercises`
(`book_lib.answer_rules`). The values themselves are judged only by the grader, outside the notebook.
`check` never raises: it prints and returns whether every line passed.
"""

from __future__ import annotations

import base64
import difflib
import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from book_lib.answer_rules import RULES

__all__ = ["MESH_AXIS", "is_number", "export_program", "problems", "Checker"]

MESH_AXIS = "X"  # the one axis of the mesh a sharded JAX answer is exported for


def is_number(value: Any) -> bool:
    """Whether the grader reads `value` as a number: anything `float()` takes to a finite value but a
    bool or a string (an int, a float, a NumPy or JAX scalar, a 0-d array)."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def export_program(fn: Callable[..., Any], probe: dict, recorder: str, n_devices: int) -> str:
    """`fn(*arrays, *statics)` exported with `jax.export` for the probe's input types; base64 text.

    Args:
        fn: the student's function.
        probe: `shapes` and `dtypes` of the array inputs, `statics` (trailing Python values) and,
            for a sharded program, `specs` (one partition spec per array, over the axis "X").
        recorder: "sharded" (the inputs placed over a mesh of `n_devices` devices) or "traced"
            (one device).
        n_devices: the grading mesh's size.
    """
    import jax
    from jax import export

    statics = tuple(probe["statics"])

    def call(*arrays: Any) -> Any:
        return fn(*arrays, *statics)

    types = list(zip(probe["shapes"], probe["dtypes"], strict=True))
    with jax.default_matmul_precision("highest"):  # judged against float64 NumPy
        if recorder == "traced":
            avals = [jax.ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in types]
            exported = export.export(jax.jit(call), platforms=("cpu",))(*avals)
        else:
            from book_lib import devices

            chosen = devices.mesh_devices()[:n_devices]
            mesh = jax.make_mesh((len(chosen),), (MESH_AXIS,), (jax.sharding.AxisType.Explicit,), devices=chosen)
            with jax.set_mesh(mesh):
                avals = [
                    jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=jax.NamedSharding(mesh, jax.P(*spec)))
                    for (shape, dtype), spec in zip(types, probe["specs"], strict=True)
                ]
                exported = export.export(jax.jit(call), platforms=("cpu",))(*avals)
    return base64.b64encode(exported.serialize()).decode()


def problems(question: dict, space: dict) -> list[str]:
    """What the grader would refuse in the answer to `question` (`RULES`' entry) held by `space` (the
    notebook's globals); empty when nothing."""
    kind, names = question["kind"], question["names"]
    missing = [name for name in names if name not in space]
    if missing:
        return [f"{name} is not defined: run its answer cell" for name in missing]
    if kind == "value":
        return [
            f"{name} = {space[name]!r} is a {type(space[name]).__name__}: the grader reads a number "
            "(an int, a float, a NumPy or JAX scalar)"
            for name in names
            if not is_number(space[name])
        ]
    if kind == "choice":
        got, allowed = space[names[0]], question["choices"]
        return [] if isinstance(got, str) and got in allowed else [f"{names[0]} = {got!r} is not one of {allowed}"]
    fn = space[names[0]]
    if not callable(fn):
        return [f"{names[0]} is a {type(fn).__name__}, not a function"]
    if kind == "function":
        return _function_problems(names[0], fn, question)
    return _program_problems(names[0], fn, question)


def _function_problems(name: str, fn: Callable[..., Any], question: dict) -> list[str]:
    found = []
    for args in question["cases"]:
        try:
            got = fn(*args)
        except Exception as err:  # noqa: BLE001 (the student's function: say what it raised)
            found.append(f"{name}{tuple(args)} raised {type(err).__name__}: {err}")
            continue
        parts = list(got) if isinstance(got, (tuple, list)) else [got]
        if len(parts) != question["arity"] or not all(is_number(p) for p in parts):
            want = "a number" if question["arity"] == 1 else f"a tuple of {question['arity']} numbers"
            found.append(f"{name}{tuple(args)} returned {got!r}: the grader reads {want}")
    return found


def _program_problems(name: str, fn: Callable[..., Any], question: dict) -> list[str]:
    import jax
    from jax import export

    from book_lib import devices, hlo, program_rules

    recorder, n_devices = question["recorder"], question["n_devices"]
    if recorder == "sharded" and devices.n_devices() < n_devices:
        return [f"{name}: the grader exports it for {n_devices} devices; this runtime has {devices.n_devices()}"]
    for probe in question["probes"]:
        try:
            exported = export.deserialize(bytearray(base64.b64decode(export_program(fn, probe, recorder, n_devices))))
        except Exception as err:  # noqa: BLE001 (a function that does not export scores 0)
            return [f"{name} could not be exported for the shapes {probe['shapes']}: {type(err).__name__}: {err}"]
        rules = program_rules.Rules(**probe["rules"])
        found = program_rules.program_problem(rules, name, program_rules.stablehlo_ops(exported.mlir_module()))
        if found is None and recorder == "sharded":
            chosen = devices.mesh_devices()[:n_devices]
            mesh = jax.make_mesh((n_devices,), (MESH_AXIS,), (jax.sharding.AxisType.Explicit,), devices=chosen)
            avals = [
                jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=jax.NamedSharding(mesh, jax.P(*spec)))
                for shape, dtype, spec in zip(probe["shapes"], probe["dtypes"], probe["specs"], strict=True)
            ]
            with jax.set_mesh(mesh):
                compiled = jax.jit(exported.call).lower(*avals).compile()
            found = program_rules.compiled_problem(rules, name, program_rules.blank(hlo.hlo_text(compiled)), n_devices)
        if found is not None:
            return [f"{found} (for the shapes {probe['shapes']})"]
    return []


class Checker:
    """`check(label)` for one assignment's questions (`RULES[assignment]`).

    Raises:
        ValueError: an assignment without rules (the close names listed).
    """

    def __init__(self, assignment: str) -> None:
        if assignment not in RULES:
            close = difflib.get_close_matches(assignment, RULES, n=3)
            raise ValueError(f"assignment={assignment!r}: unknown; allowed: {', '.join(close or sorted(RULES))}")
        self.assignment = assignment
        self.questions = RULES[assignment]

    def __call__(self, label: str) -> bool:
        """Print what the grader would refuse in the answer to question `label` ("Q9"), or that it takes it;
        whether it takes it. The answer is read from the notebook's globals (the caller's)."""
        question = self.questions.get(label)
        if question is None:
            print(f"check({label!r}): no such question; allowed: {', '.join(self.questions)}")
            return False
        if question["kind"] == "manual":
            print(f"{label} is graded by hand, against the rubric in its statement: nothing to check here")
            return True
        frame = inspect.currentframe()
        space = frame.f_back.f_globals if frame is not None and frame.f_back is not None else {}
        found = problems(question, space)
        for line in found:
            print(f"{label}: {line}")
        if not found:
            print(f"{label}: the grader can read and judge {', '.join(question['names'])}; its values are judged there")
        return not found
