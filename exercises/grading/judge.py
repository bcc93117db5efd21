"""Judge recorded values, function outputs and choices against the keys, in the grader's process.

A JAX answer is a program, judged in the grader's JAX worker (`programs.py`); everything else the
kernel records is a plain value (`recorder.plain`), judged here. Messages name what is wrong,
never an expected value.
"""

from __future__ import annotations

import math

from exercises.keys import Key

__all__ = ["judge_record"]


def _close(got: float, want: float, rel_tol: float) -> bool:
    return math.isfinite(got) and abs(got - want) <= rel_tol * abs(want) + 1e-300


def _numbers(recorded, want) -> bool:
    """A recorded plain value (from the kernel) against an expected number or tuple, exactly typed."""
    if isinstance(want, (tuple, list)):
        return (
            isinstance(recorded, list)
            and len(recorded) == len(want)
            and all(_numbers(r, w) for r, w in zip(recorded, want, strict=True))
        )
    return isinstance(recorded, dict) and set(recorded) == {"num"} and isinstance(recorded["num"], (int, float))


def _judge_numbers(recorded, want, rel_tol: float) -> bool:
    if not _numbers(recorded, want):
        return False
    if isinstance(want, (tuple, list)):
        return all(_judge_numbers(r, w, rel_tol) for r, w in zip(recorded, want, strict=True))
    return _close(float(recorded["num"]), float(want), rel_tol)


def _judge_values(values: dict, wants: dict, rel_tol: float) -> str | None:
    """None when every recorded name matches `wants`, else what is wrong (no expected value named)."""
    wrong = []
    for name, want in wants.items():
        got = values.get(name)
        if isinstance(got, dict) and "missing" in got:
            wrong.append(f"{name} is not defined")
        elif not _judge_numbers(got, want, rel_tol):
            wrong.append(f"{name} is not within {rel_tol:g} (relative)")
    return "; ".join(wrong) or None


def judge_record(key: Key, spec: dict, record: dict) -> str | None:
    """None when a value, choice or function record is right, else a message that names no expected value.

    Args:
        key: the question's key (not a JAX one).
        spec: what the kernel was asked (`probes` of a function) and the class's `params`.
        record: the kernel's record for this question.
    """
    if key.kind == "jax":
        raise ValueError(f"key.kind={key.kind!r}: JAX answers are programs; allowed: value, choice, function")
    if "failed" in record:
        return f"recording the answer failed: {record['failed']}"
    if key.kind in ("value", "choice"):
        values = record.get("values", {})
        if key.kind == "choice":
            name = key.names[0]
            got = values.get(name)
            if not (isinstance(got, dict) and "str" in got):
                return f"{name} is not a string"
            if got["str"] not in key.choices:
                return f"{name} = {got['str']!r} is not one of {key.choices}"
            return (
                None
                if got["str"] == key.answer(spec.get("params"))
                else f"{name} = {got['str']!r} is not the right choice"
            )
        verdicts = [_judge_values(values, wants, key.rel_tol) for wants in key.answers(spec.get("params"))]
        return None if None in verdicts else verdicts[0]
    outputs = record.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(spec["probes"]):
        return f"{key.names[0]} could not be called"
    verdicts = [_judge_outputs(key, spec["probes"], outputs, model) for model in (key.reference, *key.also)]
    return None if None in verdicts else verdicts[0]


def _judge_outputs(key: Key, probes: list, outputs: list, model) -> str | None:
    """None when every output matches `model` (the reference or one of `key.also`) on its probe."""
    for args, got in zip(probes, outputs, strict=True):
        if isinstance(got, dict) and "raised" in got:
            return f"{key.names[0]}{tuple(args)} raised {got['raised']}"
        if not _judge_numbers(got, model(*args), key.rel_tol):
            return f"{key.names[0]}{tuple(args)} is not within {key.rel_tol:g} (relative)"
    return None
