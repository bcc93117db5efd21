"""book_lib.systolic: the grid multiplies correctly, takes the stated cycles, rejects bad shapes."""

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
    assert run.utilization == pytest.approx(60 / (10 * 12))


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="w.shape"):
        systolic.simulate(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="both must be 2-D"):
        systolic.simulate(np.ones(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="M=0"):
        systolic.cycles(0, 2, 2)
