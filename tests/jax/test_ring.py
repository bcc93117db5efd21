"""book_lib.ring: hand-written ring collectives against NumPy and jax.lax, their HLO, and link loads."""

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax import P  # noqa: E402

from book_lib import bench, collectives, devices, hlo, plots, ring  # noqa: E402

ROWS, COLS = 3, 5  # rows per block, columns


pytestmark = pytest.mark.usefixtures("eight_devices")


@pytest.fixture(scope="module")
def mesh():
    return devices.make_mesh((devices.n_devices(),), ("X",))


def _run(body, x, mesh):
    """jit(shard_map(body)) over axis X on x split by rows; returns (values, collective counts)."""
    fn = jax.jit(jax.shard_map(body, in_specs=P("X"), out_specs=P("X")))
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, P("X"))
        counts = hlo.collective_counts(fn.lower(xs).compile())
        return np.asarray(fn(xs)), counts


def _data(n_rows: int, seed: int = 0) -> np.ndarray:
    return np.asarray(jax.random.normal(jax.random.key(seed), (n_rows, COLS)))


def _only(counts: dict, **want: int) -> None:
    expected = {**dict.fromkeys(hlo.COLLECTIVES, 0), **{k.replace("_", "-"): v for k, v in want.items()}}
    assert counts == expected, counts


@pytest.mark.parametrize("bidirectional", [False, True])
def test_all_gather_matches_numpy_and_lax(mesh, bidirectional):
    n = devices.n_devices()
    x = _data(n * ROWS)
    # each device returns its whole gathered copy as one row of a stack, so every copy is checked
    mine, counts = _run(lambda b: ring.all_gather(b, "X", bidirectional=bidirectional)[None], x, mesh)
    np.testing.assert_array_equal(mine, np.broadcast_to(x, (n, *x.shape)))
    _only(counts, collective_permute=collectives.permute_steps("all_gather", n))
    theirs, counts = _run(lambda b: jax.lax.all_gather(b, "X", tiled=True)[None], x, mesh)
    np.testing.assert_array_equal(mine, theirs)
    _only(counts, all_gather=1)


def test_reduce_scatter_matches_numpy_and_lax(mesh):
    n = devices.n_devices()
    x = _data(n * n * ROWS, seed=1)  # device i holds rows [i n ROWS, (i + 1) n ROWS): its partial sums
    want = x.reshape(n, n * ROWS, COLS).sum(axis=0)
    mine, counts = _run(lambda b: ring.reduce_scatter(b, "X"), x, mesh)
    np.testing.assert_allclose(mine, want, rtol=1e-5, atol=1e-5)
    _only(counts, collective_permute=collectives.permute_steps("reduce_scatter", n))
    theirs, counts = _run(lambda b: jax.lax.psum_scatter(b, "X", tiled=True), x, mesh)
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
    _only(counts, reduce_scatter=1)


def test_all_reduce_matches_numpy_and_lax(mesh):
    n = devices.n_devices()
    x = _data(n * n * ROWS, seed=2)
    want = x.reshape(n, n * ROWS, COLS).sum(axis=0)
    mine, counts = _run(lambda b: ring.all_reduce(b, "X")[None], x, mesh)
    np.testing.assert_allclose(mine, np.broadcast_to(want, (n, *want.shape)), rtol=1e-5, atol=1e-5)
    _only(counts, collective_permute=collectives.permute_steps("all_reduce", n))
    theirs, counts = _run(lambda b: jax.lax.psum(b, "X")[None], x, mesh)
    np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
    _only(counts, all_reduce=1)


def test_all_to_all_matches_numpy_and_lax(mesh):
    n = devices.n_devices()
    x = _data(n * n * ROWS, seed=3)
    # block j of device i's rows lands on device j, in slot i: a transpose of the (i, j) blocks
    want = x.reshape(n, n, ROWS, COLS).transpose(1, 0, 2, 3).reshape(x.shape)
    mine, counts = _run(lambda b: ring.all_to_all(b, "X"), x, mesh)
    np.testing.assert_array_equal(mine, want)
    _only(counts, collective_permute=collectives.permute_steps("all_to_all", n))
    theirs, counts = _run(lambda b: jax.lax.all_to_all(b, "X", 0, 0, tiled=True), x, mesh)
    np.testing.assert_array_equal(mine, theirs)
    _only(counts, all_to_all=1)


def test_blocks_that_do_not_divide_raise(mesh):
    with pytest.raises(ValueError, match=r"^x.shape=\(1, 5\)"):
        _run(lambda b: ring.reduce_scatter(b, "X"), _data(devices.n_devices()), mesh)


def test_permute_steps():
    assert collectives.permute_steps("all_gather", 8) == 7
    assert collectives.permute_steps("all_reduce", 8) == 14
    assert collectives.permute_steps("all_to_all", 1) == 0


def test_permute_steps_rejects_unknown_op():
    with pytest.raises(ValueError, match="^op='gather'"):
        collectives.permute_steps("gather", 8)


def test_permute_steps_rejects_bad_count():
    with pytest.raises(ValueError, match="^n_devices=0"):
        collectives.permute_steps("all_gather", 0)


def test_link_load_by_hand():
    # one-way ring of 4: every block crosses 3 of the 4 links, so each link carries 3 blocks of V / 4
    assert collectives.link_load_fraction("all_gather", 4) == pytest.approx(3 / 4)
    assert collectives.link_load_fraction("all_gather", 4, bidirectional=True) == pytest.approx(3 / 8)
    assert collectives.link_load_fraction("all_reduce", 4) == pytest.approx(3 / 2)
    # AllToAll, one way: pieces travel 1 + 2 + 3 hops, 6 pieces of V / 16 per link (worked problem 3.10)
    assert collectives.link_load_fraction("all_to_all", 4) == pytest.approx(6 / 16)
    # both ways: 1 hop each for the neighbours, half of the opposite piece each way round: 2 pieces
    assert collectives.link_load_fraction("all_to_all", 4, bidirectional=True) == pytest.approx(2 / 16)
    assert collectives.link_load_fraction("reduce_scatter", 1) == 0.0


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
def test_link_load_matches_collectives_closed_forms(n):
    v, w = 1e9, 4.5e10  # a v5e link, one way
    for op in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all"):
        ring_time = collectives.collective_time(op, v, n, "v5e", wraparound=True, hop_latency_s=0).bandwidth_s
        assert collectives.link_load_fraction(op, n, bidirectional=True) * v / w == pytest.approx(ring_time), op
    # one-way ring: AllToAll is half the AllGather, as worked problem 3.10 derives
    assert collectives.link_load_fraction("all_to_all", n) == pytest.approx(
        collectives.link_load_fraction("all_gather", n) / 2
    )
    assert collectives.link_load_fraction("all_to_all", n) == pytest.approx((n - 1) / (2 * n))


def test_link_load_rejects_unknown_op():
    with pytest.raises(ValueError, match="^op='psum'"):
        collectives.link_load_fraction("psum", 4)


def test_link_load_rejects_bad_count():
    with pytest.raises(ValueError, match="^n_devices=2.5"):
        collectives.link_load_fraction("all_gather", 2.5)


def test_partition_spec():
    assert ring.partition_spec("A[I_X, J_Y]") == P("X", "Y")
    assert ring.partition_spec("A[I_XY, J]") == P(("X", "Y"), None)
    assert ring.partition_spec("A[I, J]") == P(None, None)


def test_partition_spec_rejects_unreduced():
    with pytest.raises(ValueError, match=r"^array='C\[I, K\]\{U_X\}'"):
        ring.partition_spec("C[I, K]{U_X}")


def test_collective_time_plot_labels():
    sizes = [1e3, 1e6, 1e9]
    fig, ax = plots.collective_time_vs_size(sizes, {"AllGather": [1e-6, 2e-5, 2e-2]}, knees={"AllGather": 4e4})
    assert ax.get_xlabel() == "array size V (bytes)" and ax.get_ylabel() == "time (s)"
    assert len(ax.lines) == 2 and ax.get_xscale() == "log"
    matplotlib.pyplot.close(fig)


def test_time_collectives_times_each_of_the_four(mesh):
    n = devices.n_devices()
    timings = bench.time_collectives(4 * n * n * 2, mesh, n_runs=2)  # V: two f32 values per piece
    assert tuple(timings) == collectives.OPS
    for op, t in timings.items():
        assert 0 < t.min_s <= t.median_s <= t.max_s and t.n_runs == 2 and t.compile_s > 0, op


@pytest.mark.parametrize(
    ("kwargs", "start"),
    [
        ({"array_bytes": 4 * 8 * 8 + 4}, "array_bytes=260"),
        ({"array_bytes": 0}, "array_bytes=0"),
        ({"axis_name": "Y"}, "axis_name='Y'"),
        ({"n_runs": 0}, "n_runs=0"),
    ],
)
def test_time_collectives_rejects_bad_arguments(mesh, kwargs, start):
    args = {"array_bytes": 4 * 8 * 8, "axis_name": "X", "n_runs": 1, **kwargs}
    with pytest.raises(ValueError, match=f"^{re.escape(start)}"):
        bench.time_collectives(args.pop("array_bytes"), mesh, **args)
