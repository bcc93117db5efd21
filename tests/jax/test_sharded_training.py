"""book_lib.sharded_training: the sharded step computes what the unsharded one does, trains, and
refuses what it cannot shard. (Its memory against the TPU compiler: chapter 13, tests/tpu.)"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from book_lib import sharded_training
from book_lib.parallelism import Layout
from book_lib.transformer import TransformerConfig

pytestmark = pytest.mark.usefixtures("eight_devices")

CONFIG = TransformerConfig(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=128)
BATCH, SEQ_LEN = 4, 16


def run(layout: Layout, steps: int) -> tuple[list[float], dict]:
    """`steps` steps of the same random start, tokens and data under `layout`: the losses, the weights."""
    fn, (weights, moments, tokens), jit = sharded_training.program(CONFIG, layout, batch=BATCH, seq_len=SEQ_LEN)
    leaves, tree = jax.tree.flatten(weights)
    keys = jax.random.split(jax.random.key(0), len(leaves))
    start = [jax.random.normal(k, s.shape, jnp.float32) * 0.1 for k, s in zip(keys, leaves, strict=True)]
    weights = jax.tree.unflatten(
        tree, [jax.device_put(w.astype(s.dtype), s.sharding) for w, s in zip(start, leaves, strict=True)]
    )
    moments = jax.tree.map(lambda s: jax.device_put(jnp.zeros(s.shape, s.dtype), s.sharding), moments)
    data = jax.random.randint(jax.random.key(1), tokens.shape, 0, CONFIG.vocab_size)
    step = jax.jit(fn, **jit)
    losses = []
    for _ in range(steps):
        weights, moments, loss = step(weights, moments, jax.device_put(data, tokens.sharding))
        losses.append(float(loss))
    return losses, jax.tree.map(np.asarray, weights)


def test_a_step_sharded_over_all_three_axes_is_the_unsharded_step():
    losses, weights = run(Layout(data=2, fsdp=2, tensor=2), steps=3)
    alone, alone_weights = run(Layout(), steps=3)
    np.testing.assert_allclose(losses, alone, rtol=2e-2)
    assert losses[-1] < losses[0], losses  # Adam on one repeated batch: the loss falls
    for got, want in zip(jax.tree.leaves(weights), jax.tree.leaves(alone_weights), strict=True):
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=2e-2)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: sharded_training.mesh_for(Layout(pipeline=2)), "layout.pipeline=2"),
        (lambda: sharded_training.mesh_for(Layout(fsdp=2, zero=1)), "layout.zero=1"),
        (lambda: sharded_training.mesh_for(Layout(fsdp=16)), "shape=(1, 16, 1)"),
        (lambda: sharded_training.program(CONFIG, Layout(fsdp=8), batch=4, seq_len=16), "batch=4"),
        (lambda: sharded_training.program(CONFIG, Layout(tensor=8), batch=4, seq_len=12), "seq_len=12"),
        (
            lambda: sharded_training.program(
                dataclasses.replace(CONFIG, n_experts=4, experts_per_token=2),
                Layout(),
                batch=4,
                seq_len=16,
            ),
            "n_experts=4",
        ),
        (lambda: sharded_training.against_compiler(CONFIG, "v9-8", Layout(), batch=4, seq_len=16), "target='v9-8'"),
    ],
)
def test_what_it_cannot_shard_is_refused_by_name(call, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        call()
