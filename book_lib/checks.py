"""Argument checks shared by every public function of `book_lib`.

Each check returns the value it accepts (normalised: an int for a count, a canonical spelling for a
dtype) and raises one kind of error for one it refuses: a `ValueError` whose message starts with
`argument=value:`, says what is wrong, and ends with `allowed: ...` (with the closest names when an
unknown name is close to known ones).

    >>> count("n_devices", 0)
    Traceback (most recent call last):
    ValueError: n_devices=0: not a count; allowed: an int >= 1
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Iterable
from typing import TypeVar

__all__ = ["positive", "non_negative", "count", "one_of", "lookup", "dtype", "dtype_bytes", "DTYPES"]

T = TypeVar("T")

# The one dtype table of book_lib: canonical name -> (bytes per value, the spellings accepted for it,
# compared lowercased; HLO's element types among them). int4 packs two values in a byte; pred (a bool)
# is stored in one.
DTYPES: dict[str, tuple[float, tuple[str, ...]]] = {
    "fp64": (8, ("fp64", "float64", "f64")),
    "fp32": (4, ("fp32", "float32", "f32")),
    "bf16": (2, ("bf16", "bfloat16")),
    "fp16": (2, ("fp16", "float16", "f16", "half")),
    "fp8": (1, ("fp8", "float8", "f8e4m3fn", "f8e5m2", "e4m3", "e5m2")),
    "int64": (8, ("int64", "i64", "s64")),
    "int32": (4, ("int32", "i32", "s32")),
    "int16": (2, ("int16", "i16", "s16")),
    "int8": (1, ("int8", "i8", "s8")),
    "int4": (0.5, ("int4", "i4", "s4")),
    "uint64": (8, ("uint64", "u64")),
    "uint32": (4, ("uint32", "u32")),
    "uint16": (2, ("uint16", "u16")),
    "uint8": (1, ("uint8", "u8")),
    "pred": (1, ("pred", "bool")),
}


def _real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def positive(arg: str, value: float) -> float:
    """`value` when it is a finite real number > 0 (bools refused)."""
    if not _real(value) or value <= 0:
        raise ValueError(f"{arg}={value!r}: not a positive finite number; allowed: a number > 0")
    return value


def non_negative(arg: str, value: float) -> float:
    """`value` when it is a finite real number >= 0 (bools refused)."""
    if not _real(value) or value < 0:
        raise ValueError(f"{arg}={value!r}: not a non-negative finite number; allowed: a number >= 0")
    return value


def count(arg: str, value: int, *, minimum: int = 1) -> int:
    """`value` as an int when it is an integer (not a bool, not 1.5) >= `minimum`."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{arg}={value!r}: not a count; allowed: an int >= {minimum}")
    return int(value)


def _close(value: str, names: Iterable[str], key: Callable[[str], str] = str) -> str:
    names = list(names)
    keyed = {key(n): n for n in names}
    close = difflib.get_close_matches(key(value), list(keyed), n=3, cutoff=0.4)
    return f"closest: {', '.join(keyed[c] for c in close)}; " if close else ""


def one_of(arg: str, value: str, allowed: Iterable[str]) -> str:
    """`value` when it is one of the strings `allowed`."""
    allowed = tuple(allowed)
    if not isinstance(value, str) or value not in allowed:
        hint = _close(value, allowed) if isinstance(value, str) else ""
        raise ValueError(f"{arg}={value!r}: unknown; {hint}allowed: {', '.join(allowed)}")
    return value


def lookup(
    arg: str,
    value: str,
    table: dict[str, T],
    *,
    what: str,
    key: Callable[[str], str] = str,
    offered: Iterable[str] | None = None,
) -> T:
    """The entry of `table` whose name matches `value` once both pass through `key` (which may
    drop case or punctuation), or an error saying which `what` is unknown and the closest of the names
    `offered` (every name of `table` by default; others still match, unlisted)."""
    names = tuple(table if offered is None else offered)
    if not isinstance(value, str):
        raise ValueError(f"{arg}={value!r}: not a {what} name; allowed: {', '.join(names)}")
    by_key = {key(name): entry for name, entry in table.items()}
    found = by_key.get(key(value))
    if found is None:
        hint = _close(value, names, key)
        raise ValueError(f"{arg}={value!r}: unknown {what}; {hint}allowed: {', '.join(names)}")
    return found


def dtype(value: str, arg: str = "dtype", *, allowed: Iterable[str] | None = None) -> str:
    """The canonical name (`"bf16"`, `"int8"`) of a dtype spelled any common way ("BF16", "bfloat16"),
    one of the canonical names `allowed` when given (every dtype of `DTYPES` otherwise)."""
    names = tuple(DTYPES if allowed is None else allowed)
    spellings = {s: name for name in names for s in DTYPES[name][1]}
    if isinstance(value, str) and value.lower() in spellings:
        return spellings[value.lower()]
    hint = _close(value.lower(), spellings) if isinstance(value, str) else ""
    raise ValueError(f"{arg}={value!r}: unknown dtype; {hint}allowed: {', '.join(names)}")


def dtype_bytes(value: str, arg: str = "dtype", *, allowed: Iterable[str] | None = None) -> float:
    """Bytes per value of a dtype spelled any common way (`DTYPES`): bf16 2, int8 1, int4 0.5."""
    return DTYPES[dtype(value, arg, allowed=allowed)][0]
