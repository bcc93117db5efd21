"""What runs in the student's kernel at grading time: record the answers, judge nothing.

`pipeline.RecordAnswers` appends this module's source to every graded test cell, run in a private
namespace (`injection`), then a call of `record_cell` with the question's spec. The kernel is the
student's: whatever this module reports is only ever taken as the student's answer, so it needs
no protection from their code (rebinding what it uses can only change or lose the record).

- value and choice questions: the values the answer's names hold;
- function questions: the function's results on inputs the grader drew for this run;
- JAX questions: the function itself, as a program. It is exported with `jax.export` for the
  shapes, dtypes and shardings the grader asks (no array goes into the kernel); the grader
  deserialises, compiles and runs that program in its own process on inputs it draws after the
  kernel has exited (`programs.py`). Nothing the kernel says about a program's text or its
  outputs is read.

This file imports nothing from `exercises` (the sandbox hides the course's code and keys): it must
run from its source text alone, on the kernel's own numpy, IPython and jax.
"""

from __future__ import annotations

import base64
from typing import Any

MIME = "application/vnd.book-grader.record+json"
MESH_AXIS = "X"  # the one axis of the mesh a sharded JAX answer is exported for


def plain(value: Any) -> Any:
    """A recorded value: a number, a string, a list of those, or what made it neither.

    `str.__str__` and `float` are applied to the value, so a subclass that compares equal to
    anything is recorded as the plain string or number it holds.
    """
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return {"str": str.__str__(value)}
    try:
        return {"num": float(value)}
    except Exception as err:  # noqa: BLE001 (anything a student's object raises is a wrong answer)
        return {"bad": type(value).__name__ + ": " + str(err)[:80]}


def export_program(fn, probe: dict, recorder: str, n_devices: int) -> str:
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

    def call(*arrays):
        return fn(*arrays, *statics)

    types = list(zip(probe["shapes"], probe["dtypes"], strict=True))
    with jax.default_matmul_precision("highest"):  # judged against float64 NumPy
        if recorder == "traced":
            avals = [jax.ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in types]
            exported = export.export(jax.jit(call), platforms=("cpu",))(*avals)
        else:
            import book_lib.devices

            devices = book_lib.devices.mesh_devices()[:n_devices]
            mesh = jax.make_mesh((len(devices),), (MESH_AXIS,), (jax.sharding.AxisType.Explicit,), devices=devices)
            with jax.set_mesh(mesh):
                avals = [
                    jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=jax.NamedSharding(mesh, jax.P(*spec)))
                    for (shape, dtype), spec in zip(types, probe["specs"], strict=True)
                ]
                exported = export.export(jax.jit(call), platforms=("cpu",))(*avals)
    return base64.b64encode(exported.serialize()).decode()


def record(spec: dict, space: dict) -> dict:
    """The record of one question: what the names of `space` (the kernel's globals) answer."""
    names = spec["names"]
    out: dict[str, Any] = {"nonce": spec["nonce"]}
    try:
        if spec["kind"] in ("value", "choice"):
            out["values"] = {n: plain(space[n]) if n in space else {"missing": n} for n in names}
        elif spec["kind"] == "function":
            fn, outputs = space.get(names[0]), []
            for args in spec["probes"]:
                try:
                    outputs.append(plain(fn(*args)))
                except Exception as err:  # noqa: BLE001 (a raising answer is recorded as such)
                    outputs.append({"raised": type(err).__name__})
            out["outputs"] = outputs
        else:
            fn, programs = space.get(names[0]), []
            if not callable(fn):
                raise TypeError(f"{names[0]} is not a function")
            for probe in spec["probes"]:
                try:
                    programs.append({"program": export_program(fn, probe, spec["recorder"], spec["n_devices"])})
                except Exception as err:  # noqa: BLE001 (a program that does not export scores 0)
                    programs.append({"failed": type(err).__name__ + ": " + str(err)[:300]})
            out["programs"] = programs
    except Exception as err:  # noqa: BLE001
        out["failed"] = type(err).__name__ + ": " + str(err)[:200]
    return out


def record_cell(spec: dict, space: dict) -> None:
    """Record one question and publish the record as the cell's output, under `MIME`."""
    from IPython.display import display

    display({MIME: record(spec, space)}, raw=True)


def injection(spec: dict) -> str:
    """The code appended to a test cell: this module run in a namespace of its own, then one record.

    Only `__book_grader` is bound in the kernel's globals (and deleted again), so no name a student
    defined is overwritten.
    """
    with open(__file__, encoding="utf-8") as f:
        source = f.read()
    return (
        '__book_grader = {"__name__": "book_grader_recorder"}\n'
        f"exec(compile({source!r}, 'book_grader_recorder', 'exec'), __book_grader)\n"
        f"__book_grader['record_cell']({spec!r}, globals())\n"
        "del __book_grader\n"
    )
