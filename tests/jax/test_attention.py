"""book_lib.attention: blockwise equals naive attention; one layer's XLA FLOPs match book_lib.transformer.

Also the two plots chapter 4 adds to book_lib.plots (attention_share, memory_bars).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from book_lib import attention, hlo, model_plots, models, transformer

SMALL = transformer.TransformerConfig(
    n_layers=2, d_model=256, d_ff=768, n_heads=8, n_kv_heads=2, head_dim=32, vocab_size=1000
)


pytestmark = pytest.mark.usefixtures("eight_devices")


def _qkv(t=32, s=128, h=16):
    keys = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(keys[0], (t, h)), jax.random.normal(keys[1], (s, h)), jax.random.normal(keys[2], (s, h)))


def _numpy_attention(q, k, v, causal):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        s = np.where(
            np.arange(k.shape[0])[None] <= np.arange(q.shape[0])[:, None] + k.shape[0] - q.shape[0], s, -np.inf
        )
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [8, 32, 128])
def test_blockwise_matches_naive_and_numpy(causal, block_size):
    q, k, v = _qkv()
    want = _numpy_attention(q, k, v, causal)
    np.testing.assert_allclose(attention.naive_attention(q, k, v, causal=causal), want, rtol=1e-5, atol=1e-5)
    got = attention.blockwise_attention(q, k, v, block_size=block_size, causal=causal)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_bad_shapes_and_blocks_are_rejected():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="block_size=7"):
        attention.blockwise_attention(q, k, v, block_size=7)
    with pytest.raises(ValueError, match="k.shape"):
        attention.naive_attention(q, k[:, :8], v)
    with pytest.raises(ValueError, match="v.shape"):
        attention.naive_attention(q, k, v[:64])
    with pytest.raises(ValueError, match="q_len=0"):
        transformer.score_bytes(0, 8)
    with pytest.raises(ValueError, match="dtype='fp7': unknown dtype"):
        transformer.score_bytes(8, 8, dtype="fp7")
    with pytest.raises(ValueError, match="layer_params"):
        attention.stack_loss([], jnp.ones((8, SMALL.d_model)), SMALL)
    with pytest.raises(ValueError, match="^remat=True: unknown; allowed: none, full"):
        attention.stack_loss([attention.init_layer(SMALL, jax.random.key(0))], jnp.ones((8, 256)), SMALL, remat=True)


def test_score_bytes():
    assert transformer.score_bytes(1024, 4096) == 1024 * 4096 * 4
    assert transformer.score_bytes(1024, 4096, block_size=128, dtype="bf16") == 1024 * 128 * 2


def test_layer_flops_match_book_lib_within_two_percent():
    tokens = 128
    params = attention.init_layer(SMALL, jax.random.key(1))
    x = jax.random.normal(jax.random.key(2), (tokens, SMALL.d_model))
    compiled = jax.jit(attention.transformer_layer, static_argnums=2).lower(params, x, SMALL).compile()
    per_token = SMALL.flops_breakdown(tokens, training=False)
    predicted = tokens * (per_token.layer_matmul_flops + per_token.attention_flops) / SMALL.n_layers
    assert hlo.cost(compiled).flops == pytest.approx(predicted, rel=0.02)


@pytest.mark.slow
def test_layer_output_shape_and_moe_rejection():
    params = attention.init_layer(SMALL, jax.random.key(1))
    out = attention.transformer_layer(params, jnp.ones((8, SMALL.d_model)), SMALL)
    assert out.shape == (8, SMALL.d_model)
    with pytest.raises(ValueError, match="n_experts=8"):
        attention.init_layer(models.get_model("mixtral-8x7b"), jax.random.key(0))
    cache = (jnp.zeros((16, SMALL.n_kv_heads, SMALL.head_dim)),) * 2
    with pytest.raises(ValueError, match="^positions=None: a cache is written at positions"):
        attention.transformer_layer(params, jnp.ones((8, SMALL.d_model)), SMALL, cache=cache)


@pytest.mark.slow
def test_with_positions_a_query_sees_no_later_token():
    params = attention.init_layer(SMALL, jax.random.key(1))
    x = jax.random.normal(jax.random.key(2), (8, SMALL.d_model))
    later = x.at[5:].set(0.0)
    first, changed = (attention.transformer_layer(params, a, SMALL, positions=jnp.arange(8)) for a in (x, later))
    assert jnp.allclose(first[:5], changed[:5]) and not jnp.allclose(first[5:], changed[5:])


@pytest.mark.slow
def test_blockwise_gradient_matches_naive():
    q, k, v = _qkv()

    def loss(fn):
        return lambda q, k, v: jnp.sum(fn(q, k, v) ** 2)

    want = jax.grad(loss(attention.naive_attention), argnums=(0, 1, 2))(q, k, v)
    got = jax.grad(loss(lambda q, k, v: attention.blockwise_attention(q, k, v, block_size=32)), argnums=(0, 1, 2))(
        q, k, v
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_block_remat_recomputes_all_but_each_layers_last_matmul():
    tokens = 64
    layers = [attention.init_layer(SMALL, jax.random.key(i)) for i in range(2)]
    x = jax.random.normal(jax.random.key(2), (tokens, SMALL.d_model))

    def flops(fn):
        return hlo.cost(jax.jit(fn).lower(layers, x).compile()).flops

    forward = flops(lambda p, x: attention.stack_loss(p, x, SMALL))
    plain = flops(jax.value_and_grad(lambda p, x: attention.stack_loss(p, x, SMALL), argnums=(0, 1)))
    remat = flops(jax.value_and_grad(lambda p, x: attention.stack_loss(p, x, SMALL, remat="full"), argnums=(0, 1)))
    assert plain / forward == pytest.approx(3, rel=0.02), "backward = 2 x forward"
    per_token = SMALL.flops_breakdown(tokens, training=False)
    down = 2 * SMALL.d_model * SMALL.d_ff / (per_token.layer_matmul_flops + per_token.attention_flops) * SMALL.n_layers
    assert remat / forward == pytest.approx(4 - down, rel=0.005), (
        "one more forward, minus W_down (its output is unused)"
    )


def test_attention_share_and_memory_bars_plots():
    fig, ax = model_plots.attention_share([1e3, 1e4, 1e5], {"a": [0.1, 0.5, 0.9]}, quantity="time")
    assert ax.get_xlabel() == "context length S (tokens)"
    assert ax.get_ylabel() == "attention share of layer time (fraction)" and ax.get_ylim() == (0, 1)
    fig, ax = model_plots.memory_bars(["x", "y"], {"weights": [1e9, 2e9], "activations": [3e9, 0.0]})
    assert ax.get_xlabel() == "memory (bytes)"
    assert len(ax.patches) == 4, "two parts stacked on two bars"
    assert ax.patches[2].get_x() == pytest.approx(1e9), "the second part starts where the first ends"
