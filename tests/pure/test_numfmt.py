"""book_lib.numfmt writes every number by the house rule, and refuses what is not a number."""

import numpy as np
import pytest

from book_lib.numfmt import THIN, fmt, grouped


@pytest.mark.parametrize(
    ("args", "written"),
    [
        ((9.89e14, "FLOPs/s"), "989 TFLOPs/s"),
        ((1.5e9, "Hz"), "1.5 GHz"),
        ((8.1e11, "B/s"), "810 GB/s"),
        ((96e9, "B"), "96 GB"),
        ((3.27e-4, "s"), "327 µs"),
        ((0.0104, "s"), "10.4 ms"),
        ((-2.5e-3, "s"), "-2.5 ms"),
        ((999.96e9, "B"), "1 TB"),  # rounding up carries into the next prefix
        ((1e21, "B"), "1 × 10²¹ B"),  # beyond the last prefix
        ((3600.0, "s"), f"3{THIN}600 s"),  # no kiloseconds
        ((45.5, "%"), "45.5 %"),
        ((0, "B"), "0 B"),
        ((234881024,), f"234{THIN}881{THIN}024"),
        ((np.int64(8192),), f"8{THIN}192"),
        ((7.0,), "7"),
        ((0.5,), "0.5"),
        ((12.3456,), "12.3"),
        ((1888.4, "days"), f"1{THIN}888 days"),  # a whole digit is never rounded away
        ((1.154e13,), "11.5 × 10¹²"),
        ((1e-5,), "10 × 10⁻⁶"),
        ((np.float32(2.5e14), "FLOPs"), "250 TFLOPs"),
    ],
)
def test_the_house_rule(args, written):
    assert fmt(*args) == written


def test_digits_and_grouping():
    assert fmt(3.14159, digits=5) == "3.1416"
    assert fmt(9.89e14, "FLOPs/s", digits=2) == "990 TFLOPs/s"
    assert grouped(-1234567) == f"-1{THIN}234{THIN}567"
    assert "e+" not in fmt(1.23e30) and "," not in fmt(123456789)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True, "12", None])
def test_what_is_not_a_finite_number_is_refused(bad):
    with pytest.raises(ValueError, match="value=.*allowed: a finite real number"):
        fmt(bad)


def test_digits_must_be_a_count():
    with pytest.raises(ValueError, match="digits=0"):
        fmt(1.0, digits=0)
