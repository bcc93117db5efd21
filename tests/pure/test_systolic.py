"""book_lib.systolic: the grid multiplies correctly, takes the stated cycles, rejects bad input."""

import numpy as np
import pytest

from book_lib import systolic


@pytest.mark.parametrize(("M", "K", "N"), [(1, 1, 1), (3, 4, 5), (8, 8, 8), (6, 2, 7)])
def test_product_matches_numpy(M, K, N):
    rng = np.random.default_rng(M * 100 + K * 10 + N)
    x, w = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    run = systolic.simulate(x, w)
    np.testing.assert_allclose(run.product, x @ w, rtol=1e-12, atol=1e-12)
    assert run.n_cycles == systolic.cycles(M, K, N) == M + K + N - 2


def test_every_element_works_once_per_row():
    run = systolic.simulate(np.ones((5, 3)), np.ones((3, 4)))
    assert run.active.sum() == 5 * 3 * 4, "one multiply-add per (row, element)"
    assert run.active[0].sum() == 1, "only the corner works on the first cycle"
    assert run.active[0, 0, 0] and run.active[-1, -1, -1], "the wave starts top-left and ends bottom-right"
    assert run.utilization == pytest.approx(60 / (10 * 12))


def test_cycles_by_hand():
    assert systolic.cycles(8, 128, 128) == 262
    assert systolic.cycles(1, 1, 1) == 1


def test_mismatched_inner_sizes_are_rejected():
    with pytest.raises(ValueError, match=r"w.shape=\(4, 2\)"):
        systolic.simulate(np.ones((2, 3)), np.ones((4, 2)))


def test_non_matrix_inputs_are_rejected():
    with pytest.raises(ValueError, match="both must be 2-D"):
        systolic.simulate(np.ones(3), np.ones((3, 2)))


def test_cycles_rejects_a_size_below_one():
    with pytest.raises(ValueError, match="M=0"):
        systolic.cycles(0, 2, 2)


def test_run_rejects_inconsistent_fields():
    with pytest.raises(ValueError, match="active.shape"):
        systolic.SystolicRun(product=np.zeros((2, 3)), active=np.zeros((4, 2, 5), dtype=bool))
    with pytest.raises(ValueError, match="product.shape"):
        systolic.SystolicRun(product=np.zeros(3), active=np.zeros((4, 2, 3), dtype=bool))


def test_implied_clock_of_a_v5e_is_about_one_and_a_half_ghz():
    # 1.97e14 FLOPs/s over 4 MXUs of 128 x 128 cells, 2 FLOPs per cell per cycle
    assert systolic.implied_clock_hz("tpu-v5e") == pytest.approx(1.97e14 / (2 * 128 * 128 * 4))
    assert 1.4e9 < systolic.implied_clock_hz("v5e") < 1.6e9


def test_implied_clock_needs_a_tpu():
    with pytest.raises(ValueError, match="chip='h100'"):
        systolic.implied_clock_hz("h100")


def test_padded_utilization_by_hand():
    assert systolic.padded_utilization(128, 128, 128) == 1.0
    assert systolic.padded_utilization(64, 64, 128) == 0.25
    assert systolic.padded_utilization(129, 128, 128) == pytest.approx(129 / 256)
    assert systolic.padded_utilization(128, 128, 256) == 0.25


def test_padded_utilization_rejects_a_size_below_one():
    with pytest.raises(ValueError, match="size=0"):
        systolic.padded_utilization(8, 8, 0)
