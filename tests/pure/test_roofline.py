"""book_lib.roofline: hand-checked values and every bad input."""

import math

import numpy as np
import pytest

from book_lib import roofline
from book_lib.hardware import CHIPS


def test_critical_intensity_v5e():
    assert roofline.critical_intensity("v5e") == pytest.approx(1.97e14 / 8.1e11)
    assert roofline.critical_intensity(CHIPS["tpu-v5e"], "int8") == pytest.approx(3.94e14 / 8.1e11)


def test_critical_intensity_rejects_unknown_dtype_and_chip():
    with pytest.raises(ValueError, match="dtype='fp4'"):
        roofline.critical_intensity("v5e", "fp4")
    with pytest.raises(ValueError, match="^chip='v9': unknown chip; closest: "):
        roofline.critical_intensity("v9")
    with pytest.raises(ValueError, match="^dtype='fp8'"):
        roofline.critical_intensity("v5e", "fp8")


def test_critical_intensity_takes_any_common_spelling_of_a_dtype():
    bf16 = roofline.critical_intensity("v5e")
    assert roofline.critical_intensity("v5e", "BF16") == roofline.critical_intensity("v5e", "bfloat16") == bf16
    assert roofline.critical_intensity("v5e", "INT8") == pytest.approx(2 * bf16)


def test_critical_intensity_of_another_link():
    # one v5e ICI link, one way: 1.97e14 / 4.5e10 = 4377.8 FLOPs/byte, 18 times the HBM ridge
    assert roofline.critical_intensity("v5e", bytes_per_s=4.5e10) == pytest.approx(4377.78, rel=1e-5)
    assert roofline.critical_intensity("v5e", "int8", bytes_per_s=8.1e11) == pytest.approx(486.42, rel=1e-4)
    assert roofline.critical_intensity("v5e", bytes_per_s=None) == roofline.critical_intensity("v5e")
    with pytest.raises(ValueError, match=r"^bytes_per_s=0"):
        roofline.critical_intensity("v5e", bytes_per_s=0)


def test_sizes_are_counts_and_costs_never_divide_by_zero():
    with pytest.raises(ValueError, match=r"^B=1.5: not a count"):
        roofline.matmul_cost(1.5, 2, 3)
    with pytest.raises(ValueError, match=r"^bytes_in=-1"):
        roofline.MatmulCost(flops=1.0, bytes_in=-1.0, bytes_out=0.0)
    assert roofline.MatmulCost(flops=1.0, bytes_in=0.0, bytes_out=0.0).intensity == math.inf
    assert roofline.OpCost(flops=1.0, bytes=0.0).intensity == math.inf


def test_roofline_time_bounds():
    t = roofline.roofline_time(flops=2e12, bytes_moved=1e9, flops_per_s=1e12, bytes_per_s=1e9)
    assert (t.t_math, t.t_comms, t.t_lower, t.t_upper) == (2.0, 1.0, 2.0, 3.0)
    assert t.intensity == 2000.0 and t.bound == "compute"
    t = roofline.roofline_time(1.0, 10.0, 1.0, 1.0)
    assert t.bound == "bandwidth" and t.t_lower == 10.0


def test_roofline_time_accepts_numpy_numbers_and_zero_bytes():
    t = roofline.roofline_time(np.int64(4), np.float32(0.0), 2, 1)
    assert t.t_math == 2.0 and t.intensity == math.inf


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(flops=-1, bytes_moved=1, flops_per_s=1, bytes_per_s=1), "flops=-1"),
        (dict(flops=1, bytes_moved=float("nan"), flops_per_s=1, bytes_per_s=1), "bytes_moved=nan"),
        (dict(flops=1, bytes_moved=1, flops_per_s=0, bytes_per_s=1), "flops_per_s=0"),
        (dict(flops=1, bytes_moved=1, flops_per_s=1, bytes_per_s=-5), "bytes_per_s=-5"),
        (dict(flops="1", bytes_moved=1, flops_per_s=1, bytes_per_s=1), "flops='1'"),
    ],
)
def test_roofline_time_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        roofline.roofline_time(**kwargs)


def test_matmul_cost_counts():
    c = roofline.matmul_cost(2, 3, 5)
    assert c.flops == 60 and c.bytes_in == 2 * (6 + 15) and c.bytes_out == 20 and c.bytes == 62
    c8 = roofline.matmul_cost(2, 3, 5, x_bytes=1, w_bytes=1, out_bytes=1)
    assert c8.bytes == 31 and c8.intensity == pytest.approx(60 / 31)


@pytest.mark.parametrize("bad", [dict(B=0, D=1, F=1), dict(B=1, D=-2, F=1), dict(B=1, D=1, F=1, w_bytes=0)])
def test_matmul_cost_rejects_non_positive(bad):
    name = next(k for k, v in bad.items() if not v > 0)
    with pytest.raises(ValueError, match=f"{name}="):
        roofline.matmul_cost(**bad)


def test_critical_batch_size_solves_the_balance():
    D, F, p, w = 8192, 32768, 1.97e14, 8.1e11
    B = roofline.critical_batch_size(D, F, p, w)
    below, above = roofline.matmul_cost(math.floor(B), D, F), roofline.matmul_cost(math.ceil(B), D, F)
    assert below.flops / p < below.bytes / w and above.flops / p > above.bytes / w
    assert B == pytest.approx(p / w, rel=0.05)
    assert roofline.critical_batch_size(8, 8, 1e15, 1.0) == math.inf


def test_dot_product_and_elementwise_costs():
    dot = roofline.dot_product_cost(3, 2)
    assert (dot.flops, dot.bytes) == (5, 14)
    add = roofline.elementwise_cost(10, n_inputs=2, bytes_per_value=4)
    assert (add.flops, add.bytes, add.intensity) == (10, 120, 10 / 120)
    with pytest.raises(ValueError, match="N=0"):
        roofline.dot_product_cost(0)
    with pytest.raises(ValueError, match="n_inputs=0"):
        roofline.elementwise_cost(4, n_inputs=0)


def test_attainable_throughput():
    assert roofline.attainable_flops_per_s(10, 1e3, 10) == 100
    assert roofline.attainable_flops_per_s(1e6, 1e3, 10) == 1e3
    with pytest.raises(ValueError, match="intensity=0"):
        roofline.attainable_flops_per_s(0, 1, 1)


def test_smallest_compute_bound_width_is_where_a_critical_batch_first_exists():
    peak, pcie = 9.2e14, 1.5e10
    d = roofline.smallest_compute_bound_width(peak, pcie)
    below, above = math.floor(d * 0.999), math.ceil(d * 1.001)
    assert roofline.critical_batch_size(below, 4 * below, peak, pcie) == math.inf
    assert roofline.critical_batch_size(above, 4 * above, peak, pcie) < math.inf


def test_batched_weights_stay_below_two_ops_per_byte():
    for B in (1, 64, 4096):
        cost = roofline.batched_weights_matmul_cost(B, 4096, 16384, 1, 1, 1)
        assert cost.flops == roofline.matmul_cost(B, 4096, 16384).flops
        assert cost.bytes == B * 4096 + B * 4096 * 16384 + B * 16384
        assert cost.intensity < 2
