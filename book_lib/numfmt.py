"""The book's one rule for writing a number: in prose, tables, printed lines and figure labels.

- A quantity with a unit takes an SI prefix, the exponent a multiple of 3 (engineering notation):
  `fmt(9.89e14, "FLOPs/s")` is "989 TFLOPs/s", `fmt(1.5e9, "Hz")` is "1.5 GHz",
  `fmt(3.27e-4, "s")` is "327 µs", but `fmt(3600.0, "s")` is "3 600 s" (no kiloseconds).
- A bare number below a billion is written in full when it is whole, its thousands split by a thin
  space that never breaks a line (U+202F): `fmt(234881024)` is "234 881 024".
- Any other bare number keeps `digits` significant figures, but never loses a whole digit
  (`fmt(1888.4)` is "1 888"); outside [0.001, 1e9) it is a mantissa times a power of ten that is a
  multiple of 3: `fmt(1.154e13)` is "11.5 × 10¹²".

Python's own "1.154e+13" and "234,881,024" never reach a reader.
"""

from __future__ import annotations

import math
import numbers

from book_lib import checks

__all__ = ["THIN", "grouped", "fmt"]

THIN = "\u202f"
_PREFIXES = {-15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_FULL_BELOW = 1e9
# Units read in whole numbers above 1, never in kilo-: 3,600 s, not 3.6 ks; 45 %, not 0.45 k%.
_NO_MULTIPLES = ("s", "%", "x", "×", "h", "days", "years")


def grouped(whole: int) -> str:
    """An integer with its thousands split by a thin no-break space: 234881024 -> "234 881 024"."""
    return f"{whole:,}".replace(",", THIN)


def _significant(value: float, digits: int) -> str:
    """`value` to `digits` significant figures, no exponent and no trailing zeros: 10.40 -> "10.4"."""
    if value == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(value)))
    if decimals < 0:
        value, decimals = round(value, decimals), 0  # 989 to 2 figures is 990
    text = f"{value:.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    whole, _, fraction = text.lstrip("-").partition(".")
    sign = "-" if text.startswith("-") else ""
    return sign + grouped(int(whole)) + ("." + fraction if fraction else "")


def _engineering(value: float, digits: int) -> tuple[str, int]:
    """(mantissa in [1, 1000) to `digits` figures, exponent a multiple of 3) with value = m x 10^e."""
    exponent = 3 * math.floor(math.log10(abs(value)) / 3)
    mantissa = value / 10.0**exponent
    if abs(float(_significant(mantissa, digits).replace(THIN, ""))) >= 1000:
        exponent, mantissa = exponent + 3, mantissa / 1000
    return _significant(mantissa, digits), exponent


def fmt(value: float, unit: str = "", *, digits: int = 3) -> str:
    """`value` written by the book's rule (module docstring), with `unit` after it when given.

    With a unit: m x 10^(3k) -> "m <prefix><unit>", k between -5 (f) and 6 (E); beyond, "m × 10^e unit".
    Seconds and the other units of `_NO_MULTIPLES` take no prefix above 1 (3 600 s), a ratio none at all.
    Without: a whole number below 1e9 in full with thin-space thousands, so is one rounded to units
    from 10^(digits - 1) up; otherwise `digits` significant figures, with "× 10^e" (e a multiple of 3)
    outside [0.001, 1e9).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"value={value!r}: allowed: a finite real number")
    checks.count("digits", digits)
    if value == 0:
        return f"0 {unit}" if unit else "0"
    if unit in _NO_MULTIPLES and abs(value) >= 1 or unit in ("%", "x", "×"):
        return f"{fmt(value, digits=digits)} {unit}"
    if unit:
        mantissa, exponent = _engineering(value, digits)
        if exponent in _PREFIXES:
            return f"{mantissa} {_PREFIXES[exponent]}{unit}"
        return f"{mantissa} × 10{str(exponent).translate(_SUPERSCRIPT)} {unit}"
    if float(value).is_integer() and abs(value) < _FULL_BELOW:
        return grouped(int(value))
    if 10 ** (digits - 1) <= abs(value) < _FULL_BELOW:
        return grouped(round(value))  # whole digits are never rounded away: 1888.4 days is 1 888
    if 1e-3 <= abs(value) < _FULL_BELOW:
        return _significant(value, digits)
    mantissa, exponent = _engineering(value, digits)
    return f"{mantissa} × 10{str(exponent).translate(_SUPERSCRIPT)}"
