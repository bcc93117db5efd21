"""Judge recorded values, function outputs and choices against the keys, in the grader's process.

A JAX answer is a program, judged in the grader's JAX worker (`programs.py`); everything else the
kernel records is a plain value (`recorder.plain`), judged here. Messages name what is wrong,
never an expected value. A value question of several names earns each name's share of its points
(`Verdict.share`); a choice, a function or a program is right or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from exercises.keys import Key

__all__ = ["Verdict", "verdict", "judge_record"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an answer earns: `share` of its points (0 to 1) and, below 1, what is wrong."""

    share: float
    message: str | None


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


def _judge_values(values: dict, wants: dict, rel_tol: float) -> Verdict:
    """The share of `wants`' names the recorded values match, and what is wrong (no expected value named)."""
    wrong = []
    for name, want in wants.items():
        got = values.get(name)
        if isinstance(got, dict) and "missing" in got:
            wrong.append(f"{name} is not defined")
        elif not _judge_numbers(got, want, rel_tol):
            wrong.append(f"{name} is not within {rel_tol:g} (relative)")
    return Verdict(1 - len(wrong) / len(wants), "; ".join(wrong) or None)


def _all_or_nothing(message: str | None) -> Verdict:
    return Verdict(0.0 if message else 1.0, message)


def verdict(key: Key, spec: dict, record: dict) -> Verdict:
    """What a value, choice or function record earns: each name of a value question its share of the
    points, under the model (the key's, or one of `also`) that the most names follow; a choice or a
    function all or nothing. The message names no expected value.

    Args:
        key: the question's key (not a JAX one).
        spec: what the kernel was asked (`probes` of a function) and the class's `params`.
        record: the kernel's record for this question.
    """
    if key.kind == "jax":
        raise ValueError(f"key.kind={key.kind!r}: JAX answers are programs; allowed: value, choice, function")
    if "failed" in record:
        return _all_or_nothing(f"recording the answer failed: {record['failed']}")
    if key.kind in ("value", "choice"):
        values = record.get("values", {})
        if key.kind == "choice":
            name = key.names[0]
            got = values.get(name)
            if not (isinstance(got, dict) and "str" in got):
                return _all_or_nothing(f"{name} is not a string")
            if got["str"] not in key.choices:
                return _all_or_nothing(f"{name} = {got['str']!r} is not one of {key.choices}")
            right = got["str"] == key.answer(spec.get("params"))
            return _all_or_nothing(None if right else f"{name} = {got['str']!r} is not the right choice")
        verdicts = [_judge_values(values, wants, key.rel_tol) for wants in key.answers(spec.get("params"))]
        return max(verdicts, key=lambda v: v.share)  # the first of the best: the key's own where it ties
    outputs = record.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != len(spec["probes"]):
        return _all_or_nothing(f"{key.names[0]} could not be called")
    messages = [_judge_outputs(key, spec["probes"], outputs, model) for model in (key.reference, *key.also)]
    return _all_or_nothing(None if None in messages else messages[0])


def judge_record(key: Key, spec: dict, record: dict) -> str | None:
    """None when a value, choice or function record is wholly right, else what is wrong (`verdict`)."""
    return verdict(key, spec, record).message


def _judge_outputs(key: Key, probes: list, outputs: list, model) -> str | None:
    """None when every output matches `model` (the reference or one of `key.also`) on its probe."""
    for args, got in zip(probes, outputs, strict=True):
        if isinstance(got, dict) and "raised" in got:
            return f"{key.names[0]}{tuple(args)} raised {got['raised']}"
        if not _judge_numbers(got, model(*args), key.rel_tol):
            return f"{key.names[0]}{tuple(args)} is not within {key.rel_tol:g} (relative)"
    return None
