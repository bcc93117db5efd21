"""book_lib.bench: timings of jitted code and measured peaks."""

import matplotlib

matplotlib.use("Agg")


import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

from book_lib import bench, devices  # noqa: E402

pytestmark = pytest.mark.usefixtures("eight_devices")


def test_time_jitted_returns_ordered_positive_times():
    t = bench.time_jitted(lambda x: x * 2, jnp.ones(1024), n_warmup=1, n_runs=3)
    assert 0 < t.min_s <= t.median_s <= t.max_s and t.n_runs == 3 and t.compile_s > 0
    with pytest.raises(ValueError, match="n_runs=0"):
        bench.time_jitted(lambda x: x, jnp.ones(2), n_runs=0)
    with pytest.raises(ValueError, match="n_warmup=-1"):
        bench.time_jitted(lambda x: x, jnp.ones(2), n_warmup=-1)


@pytest.mark.slow
def test_measure_peaks_and_sweeps_give_positive_rates():
    device = devices.single_device()
    peaks = bench.measure_peaks(device, jnp.float32, matmul_n=128, vector_n=2**14)
    assert peaks.flops_per_s > 0 and peaks.bytes_per_s > 0 and peaks.dtype == "float32"
    assert peaks.vector_bytes == 2 * 2**14 * 4
    assert bench.time_matmul(8, 64, 32, device, jnp.float32, n_runs=2).median_s > 0
    assert bench.time_add(1024, device, jnp.float32, n_runs=2).n_runs == 2
