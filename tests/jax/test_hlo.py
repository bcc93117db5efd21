"""book_lib.hlo: collectives, their sizes and directions, op lines and cost analysis read from compiled programs."""

import matplotlib

matplotlib.use("Agg")


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402
from jax import P  # noqa: E402

from book_lib import devices, hlo  # noqa: E402

pytestmark = pytest.mark.usefixtures("eight_devices")


def _compiled(fn, spec_in, spec_out, x):
    mesh = devices.make_mesh((8,), ("X",))
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, P("X"))
        return jax.jit(jax.shard_map(fn, in_specs=spec_in, out_specs=spec_out)).lower(xs).compile()


def test_collective_counts_see_each_collective_once():
    x = jnp.arange(64.0).reshape(64, 1)
    gathered = _compiled(lambda a: jax.lax.all_gather(a, "X", tiled=True, to="invarying"), P("X"), P(), x)
    assert hlo.collective_counts(gathered) == {**dict.fromkeys(hlo.COLLECTIVES, 0), "all-gather": 1}
    summed = _compiled(lambda a: jax.lax.psum(a, "X"), P("X"), P(), x)
    assert hlo.collective_counts(summed)["all-reduce"] == 1
    shifted = _compiled(lambda a: jax.lax.ppermute(a, "X", [(i, (i + 1) % 8) for i in range(8)]), P("X"), P("X"), x)
    assert hlo.collective_counts(shifted)["collective-permute"] == 1


def test_collective_counts_on_async_text():
    text = "\n".join(
        [
            "%ag-start = (f32[8], f32[64]) all-gather-start(f32[8] %p), dimensions={0}",
            "%ag-done = f32[64] all-gather-done((f32[8], f32[64]) %ag-start)",
            "%async_computation { %rs = f32[8] reduce-scatter(f32[64] %x), dimensions={0} }",
            "%rs-start = ((f32[64]), f32[8]) async-start(f32[64] %y), calls=%async_computation",
            "%fusion.all-reduce = f32[8] fusion(f32[8] %z), kind=kLoop",
        ]
    )
    counts = hlo.collective_counts(text)
    assert counts["all-gather"] == 1 and counts["reduce-scatter"] == 1 and counts["all-reduce"] == 0


def test_collective_elements_and_permute_traffic_read_sizes_and_directions():
    x = jnp.arange(64.0).reshape(64, 1)
    summed = _compiled(lambda a: jax.lax.psum(a, "X"), P("X"), P(), x)
    assert hlo.collective_elements(summed) == [("all-reduce", 8)], "one f32[8,1] block summed"
    both = _compiled(
        lambda a: (
            jax.lax.ppermute(a, "X", [(i, (i + 1) % 8) for i in range(8)])
            + jax.lax.ppermute(a, "X", [(i, (i - 1) % 8) for i in range(8)])
        ),
        P("X"),
        P("X"),
        x,
    )
    assert hlo.permute_traffic(both, 8) == {1: 8, 7: 8}, "one f32[8,1] block each way"
    assert [op for op, _ in hlo.collective_elements(both)] == ["collective-permute"] * 2
    assert hlo.permute_traffic(summed, 8) == {}
    text = "%cp = (f32[4,2]{1,0}, f32[4,2]{1,0}, u32[]) collective-permute-start(%a), source_target_pairs={{0,3},{3,0}}"
    assert hlo.collective_elements(text) == [("collective-permute", 8)]
    assert hlo.permute_traffic(text, 4) == {3: 8, 1: 8}
    with pytest.raises(ValueError, match="n_devices=0"):
        hlo.permute_traffic(text, 0)


def test_cost_normalises_cost_analysis():
    compiled = jax.jit(jnp.matmul).lower(jnp.ones((8, 16)), jnp.ones((16, 4))).compile()
    cost = hlo.cost(compiled)
    assert cost.flops == pytest.approx(2 * 8 * 16 * 4, rel=0.01) and cost.bytes_accessed > 0


def test_hlo_text_accepts_text_or_compiled():
    compiled = jax.jit(jnp.sin).lower(jnp.ones(4)).compile()
    assert hlo.hlo_text(compiled) == compiled.as_text() and hlo.hlo_text("abc") == "abc"


def test_op_lines_shows_each_collective_once_without_metadata():
    text = "\n".join(
        [
            "  %p = f32[8]{0} parameter(0)",
            "  %ag = f32[64]{0} all-gather-start(f32[8]{0} %p), dimensions={0},"
            ' metadata={op_name="jit(f)" source_file="x.py"}',
            "  %agd = f32[64]{0} all-gather-done(%ag)",
            "  %d = f32[64]{0} dot(f32[64]{0} %agd, f32[64]{0} %agd)",
        ]
    )
    shown = hlo.op_lines(text).splitlines()
    assert shown == ["%ag = f32[64]{0} all-gather-start(f32[8]{0} %p), dimensions={0}"]
    assert hlo.op_lines(text, ("dot",)) == "%d = f32[64]{0} dot(f32[64]{0} %agd, f32[64]{0} %agd)"
    assert hlo.op_lines(text, ("dot",), width=20) == "%d = f32[64]{0} d..."
    with pytest.raises(ValueError, match="ops=()"):
        hlo.op_lines(text, ())
    with pytest.raises(ValueError, match="width=5"):
        hlo.op_lines(text, width=5)


def test_the_collective_names_are_jaxs_own():
    from book_lib import collectives

    for names in collectives.NAMES.values():
        assert callable(getattr(jax.lax, names.lax)), names.lax
    assert hlo.COLLECTIVES == tuple(n.hlo for n in collectives.NAMES.values())
