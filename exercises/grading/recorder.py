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
run from its source text alone, on the kernel's own numpy, IPython, jax and `book_lib` (the export is
`book_lib.answer_check.export_program`, the one a student's `check` runs too).
"""

from __future__ import annotations

from typing import Any

MIME = "application/vnd.book-grader.record+json"


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
            from book_lib.answer_check import export_program

            fn, programs = space.get(names[0]), []
            if not callable(fn):
                raise TypeError(f"{names[0]} is not a function")
            for probe in spec["probes"]:
                try:
                    program = export_program(fn, probe, spec["recorder"], spec["n_devices"])
                    programs.append({"program": program})
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
