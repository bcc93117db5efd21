"""book_lib.decode: a KV-cached decode gives what recomputing the whole sequence gives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from book_lib import decode
from book_lib.transformer import TransformerConfig

pytestmark = pytest.mark.usefixtures("eight_devices")

CONFIG = TransformerConfig(n_layers=2, d_model=64, d_ff=128, n_heads=4, n_kv_heads=2, head_dim=16, vocab_size=97)
forward = jax.jit(decode.forward, static_argnums=2)
prefill = jax.jit(decode.prefill, static_argnums=3)
step = jax.jit(decode.decode_step, static_argnums=4)


@pytest.fixture(scope="module")
def params():
    return decode.init_model(CONFIG, jax.random.key(0))


@pytest.fixture(scope="module")
def prompt():
    return jax.random.randint(jax.random.key(1), (3, 7), 0, CONFIG.vocab_size)


@pytest.mark.slow
def test_cached_generation_equals_recomputation(params, prompt):
    with jax.default_matmul_precision("highest"):
        cached = decode.generate(params, prompt, 3, CONFIG)
        recomputed = decode.generate(params, prompt, 3, CONFIG, use_cache=False)
    assert cached.shape == (3, 3)
    np.testing.assert_array_equal(cached, recomputed)


@pytest.mark.slow
def test_each_decode_step_gives_the_full_forward_logits(params, prompt):
    with jax.default_matmul_precision("highest"):
        tokens = jnp.concatenate([prompt, decode.generate(params, prompt, 4, CONFIG)], axis=1)
        full = forward(params, tokens, CONFIG)
        logits, cache = prefill(params, prompt, decode.init_cache(CONFIG, 3, 11), CONFIG)
        np.testing.assert_allclose(logits, full[:, 6], rtol=1e-5, atol=1e-5)
        for pos in range(7, 11):
            logits, cache = step(params, cache, tokens[:, pos], jnp.int32(pos), CONFIG)
            np.testing.assert_allclose(logits, full[:, pos], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_the_cache_is_causal_a_later_token_changes_no_earlier_logit(params, prompt):
    with jax.default_matmul_precision("highest"):
        a = forward(params, prompt, CONFIG)
        b = forward(params, prompt.at[:, -1].set((prompt[:, -1] + 1) % CONFIG.vocab_size), CONFIG)
    np.testing.assert_allclose(a[:, :-1], b[:, :-1], rtol=1e-6, atol=1e-6)
    assert not np.allclose(a[:, -1], b[:, -1])


@pytest.mark.slow
def test_donated_cache_is_updated_in_place(params, prompt):
    donating = jax.jit(decode.decode_step, static_argnums=4, donate_argnums=1)
    _, cache = prefill(params, prompt, decode.init_cache(CONFIG, 3, 9), CONFIG)
    old = cache["k"]
    _, new = donating(params, cache, prompt[:, 0], jnp.int32(7), CONFIG)
    assert old.is_deleted()  # the step took the buffer over rather than copying it
    assert new["k"].shape == (CONFIG.n_layers, 3, 9, CONFIG.n_kv_heads, CONFIG.head_dim)
    assert bool(jnp.any(new["k"][:, :, 7] != 0)) and bool(jnp.all(new["k"][:, :, 8] == 0))


@pytest.mark.slow
def test_int8_weights_are_within_half_a_step_and_decode_alike(params, prompt):
    q = decode.quantize_int8(params)
    layer, qlayer = params["layers"][0], q["layers"][0]
    assert qlayer["wq"]["q"].dtype == jnp.int8
    error = jnp.abs(qlayer["wq"]["q"] * qlayer["wq"]["scale"] - layer["wq"])
    assert bool(jnp.all(error <= qlayer["wq"]["scale"] / 2 + 1e-7))
    with jax.default_matmul_precision("highest"):
        full = forward(params, prompt, CONFIG)
        quant = forward(q, prompt, CONFIG)
    assert float(jnp.max(jnp.abs(quant - full))) < 0.05 * float(jnp.max(jnp.abs(full)))


def test_cache_size_matches_the_cost_model():
    cache = decode.init_cache(CONFIG, 3, 10)
    nbytes = cache["k"].nbytes + cache["v"].nbytes
    assert nbytes == CONFIG.kv_cache_bytes_per_token("fp32") * 3 * 10


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: decode.init_cache(CONFIG, 0, 4), "batch=0"),
        (lambda: decode.init_cache(CONFIG, 2, -1), "max_len=-1"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_generate_refuses_a_zero_length(params, prompt):
    with pytest.raises(ValueError, match="n_new=0"):
        decode.generate(params, prompt, 0, CONFIG)
