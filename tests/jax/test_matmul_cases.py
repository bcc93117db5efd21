"""The four sharded-matmul cases of Part 3, compiled by XLA on an Auto mesh: the collective each
case predicts (and only that one) appears in the HLO, and the output sharding is the plan's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import P

from book_lib import devices, hlo, ring, sharding

SIZES = {"I": 256, "J": 1024, "K": 512}  # A is smaller than B, so case 4 gathers A
CASES = {
    1: ("A[I_X, J]", "B[J, K_Y]", {}),
    2: ("A[I, J_X]", "B[J, K]", {"all-gather": 1}),
    3: ("A[I, J_X]", "B[J_X, K]", {"all-reduce": 1}),
    4: ("A[I_X, J]", "B[J, K_X]", {"all-gather": 1}),
}


pytestmark = pytest.mark.usefixtures("eight_devices")


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_case_compiles_to_the_predicted_collective(case):
    lhs, rhs, want = CASES[case]
    shape = devices.mesh_shape(2)
    mesh_sizes = dict(zip(("X", "Y"), shape, strict=True))
    plan = sharding.matmul_plan(lhs, rhs, contracting="J", sizes=SIZES, mesh=mesh_sizes, chip="v5e")
    assert plan.cases == (case,)
    a = np.asarray(jax.random.normal(jax.random.key(0), (SIZES["I"], SIZES["J"])))
    b = np.asarray(jax.random.normal(jax.random.key(1), (SIZES["J"], SIZES["K"])))
    with jax.set_mesh(devices.make_mesh(shape, ("X", "Y"), axis_types="auto")):
        a_s = jax.device_put(a, ring.partition_spec(lhs))
        b_s = jax.device_put(b, ring.partition_spec(rhs))
        compiled = jax.jit(jnp.matmul).lower(a_s, b_s).compile()
        c = compiled(a_s, b_s)
    np.testing.assert_allclose(np.asarray(c), a @ b, rtol=2e-2, atol=2e-2)
    counts = hlo.collective_counts(compiled)
    if devices.n_devices() > 1:
        assert counts == {**dict.fromkeys(hlo.COLLECTIVES, 0), **want}, counts
    got_spec = tuple(compiled.output_shardings.spec) + (None,) * 2
    assert got_spec[:2] == tuple(ring.partition_spec(plan.result)), (got_spec, str(plan.result))


def test_reduce_scatter_instead_of_all_reduce():
    # Case 3 with the output left sharded over X along K, written with shard_map and psum_scatter.
    n = devices.n_devices()
    a = np.asarray(jax.random.normal(jax.random.key(2), (64, 32 * n)))
    b = np.asarray(jax.random.normal(jax.random.key(3), (32 * n, 16 * n)))

    def local(a_block, b_block):
        return jax.lax.psum_scatter(a_block @ b_block, "X", scatter_dimension=1, tiled=True)

    fn = jax.jit(jax.shard_map(local, in_specs=(P(None, "X"), P("X", None)), out_specs=P(None, "X")))
    with jax.set_mesh(devices.make_mesh((n,), ("X",))):
        a_s, b_s = jax.device_put(a, P(None, "X")), jax.device_put(b, P("X", None))
        counts = hlo.collective_counts(fn.lower(a_s, b_s).compile())
        c = fn(a_s, b_s)
    np.testing.assert_allclose(np.asarray(c), a @ b, rtol=2e-2, atol=2e-2)
    assert counts == {**dict.fromkeys(hlo.COLLECTIVES, 0), "reduce-scatter": 1}, counts
