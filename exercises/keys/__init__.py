"""Answer keys: for every autograded question, what the answer cell defines and its expected value.

`make exercises` writes each key's value into its hidden test as a literal (`expected = ...`), so
grading never calls `book_lib` in the student's kernel; `tests/test_exercises.py` recomputes every
key and checks the literals are current.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Key", "keys_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Key:
    """One autograded question.

    Attributes:
        names: the names the answer cell must define.
        kind: `"value"` (numbers, expected is {name: number}), `"function"` (a callable, expected is
            [(args, result), ...]), `"choice"` (a string from `choices`) or `"jax"` (a callable of JAX
            arrays whose hidden test checks results against a NumPy reference and the compiled HLO;
            expected is whatever literal that test reads, such as collective counts).
        expected: computes the literal the hidden test compares with, from `book_lib`.
        choices: the allowed strings of a `"choice"` question.
    """

    names: tuple[str, ...]
    kind: str
    expected: Callable[[], object]
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("value", "function", "choice", "jax"):
            raise ValueError(f"kind={self.kind!r}: unknown; allowed: 'value', 'function', 'choice', 'jax'")
        if self.kind == "choice" and len(self.choices) < 2:
            raise ValueError(f"choices={self.choices!r}: a choice needs two or more; allowed: a tuple of str")


def keys_for(assignment: str) -> dict[str, Key]:
    """The keys of one assignment (`"ch01_rooflines"`), by grade_id."""
    return importlib.import_module(f"exercises.keys.{assignment}").KEYS
