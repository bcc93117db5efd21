"""book_lib.collective_matmul: the ring versions equal the blocking ones and jnp, with only permutes in the HLO."""

import jax
import numpy as np
import pytest

from book_lib import collective_matmul as cm
from book_lib import devices, hlo

pytestmark = pytest.mark.usefixtures("eight_devices")


def _inputs():
    a = jax.random.normal(jax.random.key(0), (64, 256))
    w = jax.random.normal(jax.random.key(1), (256, 128))
    return a, w


def _close(out, ref):
    ref = np.asarray(ref)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize(
    ("ring", "blocking", "blocking_op"),
    [
        (cm.allgather_matmul, cm.allgather_matmul_blocking, "all-gather"),
        (cm.matmul_reducescatter, cm.matmul_reducescatter_blocking, "reduce-scatter"),
    ],
)
@pytest.mark.slow
def test_ring_equals_blocking_and_jnp_with_permutes_only(ring, blocking, blocking_op):
    a, w = _inputs()
    n = devices.n_devices()
    with jax.default_matmul_precision("highest"):
        out, ref = ring(a, w), blocking(a, w)
        _close(out, a @ w)
        _close(ref, a @ w)
        with pytest.raises(AssertionError):  # a matmul missing one chunk is caught
            _close(out, a[:, : 256 - 256 // n] @ w[: 256 - 256 // n])
    with jax.default_matmul_precision("highest"):
        counts = hlo.collective_counts(jax.jit(ring).lower(a, w).compile())
        blocking_counts = hlo.collective_counts(jax.jit(blocking).lower(a, w).compile())
    assert counts["collective-permute"] == n - 1, counts
    assert counts[blocking_op] == 0 and counts["all-reduce"] == 0 and counts["all-gather"] == 0, counts
    assert blocking_counts[blocking_op] == 1, blocking_counts


def test_the_text_two_axis_mesh_with_batch_sharding():
    a, w = _inputs()
    mesh = devices.make_mesh(devices.mesh_shape(2), ("X", "Y"))
    with jax.default_matmul_precision("highest"):
        out = cm.allgather_matmul(a, w, mesh=mesh, batch_axis="X")
        _close(out, a @ w)
    assert out.sharding.spec == jax.P("X", "Y")


BAD = [
    (lambda a, w: cm.allgather_matmul(a, w, mesh=devices.make_mesh((2,), ("X",)), axis_name="Y"), r"^axis_name='Y'"),
    (lambda a, w: cm.allgather_matmul(a, w[:100]), r"^w.shape=\(100, 128\): rows differ"),
    (lambda a, w: cm.matmul_reducescatter(a[:, :250], w[:250]), r"^a.shape\[1\]=250: does not split"),
    (lambda a, w: cm.allgather_matmul(a.astype("int32"), w), r"^a.shape=\(64, 256\): not a float"),
    (lambda a, w: cm.allgather_matmul_blocking(a, w, batch_axis="Y"), r"^batch_axis='Y'"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_raises_a_value_error_naming_the_argument(call, start):
    with pytest.raises(ValueError, match=start):
        call(*_inputs())
