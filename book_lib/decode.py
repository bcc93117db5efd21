"""A small decoder-only Transformer that generates with a preallocated KV cache: chapter 7's demo.

`forward` runs a batch of whole sequences with causal attention and no cache (the slow way: every
new token re-reads the whole prefix). `prefill` runs the prompt once and writes its keys and
values into a cache of `max_len` positions; `decode_step` feeds one token per sequence, attends
to the cache, and writes its own key and value in place. Under `jax.jit` with the cache donated,
XLA updates the cache buffers instead of copying them. `quantize_int8` stores every matrix as int8
with one float scale per output column, the weight-only quantisation of Part 8.

Layers: `attention.transformer_layer` with rotary position embeddings and the cache.
Book: Part 7 (All About Transformer Inference), "The Basics of Transformer Inference" (prefill,
generation, the KV cache); Part 8 (quantised weights).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from book_lib import checks
from book_lib.attention import init_layer, rms_norm, transformer_layer
from book_lib.transformer import TransformerConfig

__all__ = ["init_model", "forward", "init_cache", "prefill", "decode_step", "generate", "quantize_int8"]

Params = dict[str, Any]
_MATRICES = ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down")


def init_model(config: TransformerConfig, key: jax.Array) -> Params:
    """Random f32 weights: `embed` f32[V, D], `layers` (a list of `attention.init_layer` dicts),
    `norm` f32[D] and `unembed` f32[D, V]."""
    keys = jax.random.split(key, config.n_layers + 2)
    V, D = config.vocab_size, config.d_model
    return {
        "embed": jax.random.normal(keys[0], (V, D), jnp.float32),
        "layers": [init_layer(config, k) for k in keys[2:]],
        "norm": jnp.ones((D,), jnp.float32),
        "unembed": jax.random.normal(keys[1], (D, V), jnp.float32) / math.sqrt(D),
    }


def quantize_int8(params: Params) -> Params:
    """Each layer matrix as `{"q": int8[in, out], "scale": f32[out]}`, scale = max |w| over the column / 127.

    Reading int8 weights halves the bytes a decode step must load; the matmul dequantises
    (q * scale) on the fly. Book: Part 8, "Thinking about throughput" (int8 weights, bf16 FLOPs).
    """

    def one(w: jax.Array) -> dict[str, jax.Array]:
        scale = jnp.maximum(jnp.max(jnp.abs(w), axis=0), 1e-12) / 127.0
        return {"q": jnp.round(w / scale).astype(jnp.int8), "scale": scale}

    layers = [{n: one(w) if n in _MATRICES else w for n, w in layer.items()} for layer in params["layers"]]
    return {**params, "layers": layers}


def init_cache(config: TransformerConfig, batch: int, max_len: int, dtype: Any = jnp.float32) -> dict[str, jax.Array]:
    """Zeroed caches `k`, `v` of shape [L, B, max_len, K, H]: every position a sequence may reach.

    Its size is `TransformerConfig.kv_cache_bytes_per_token(dtype) * batch * max_len` bytes.
    """
    checks.count("batch", batch)
    checks.count("max_len", max_len)
    shape = (config.n_layers, batch, max_len, config.n_kv_heads, config.head_dim)
    return {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}


def _run(
    params: Params, tokens: jax.Array, cache: dict[str, jax.Array], start: jax.Array, config: TransformerConfig
) -> tuple[jax.Array, dict[str, jax.Array]]:
    x = params["embed"][tokens]
    positions = start + jnp.arange(tokens.shape[1])
    ks, vs = [], []
    for i, p in enumerate(params["layers"]):
        x, (k, v) = transformer_layer(p, x, config, positions=positions, cache=(cache["k"][i], cache["v"][i]))
        ks.append(k)
        vs.append(v)
    logits = rms_norm(x, params["norm"]) @ params["unembed"]
    return logits, {"k": jnp.stack(ks), "v": jnp.stack(vs)}


def forward(params: Params, tokens: jax.Array, config: TransformerConfig) -> jax.Array:
    """Logits f32[B, T, V] of every position of tokens int[B, T], causal, without a kept cache."""
    B, T = tokens.shape
    logits, _ = _run(params, tokens, init_cache(config, B, T), jnp.int32(0), config)
    return logits


def prefill(
    params: Params, tokens: jax.Array, cache: dict[str, jax.Array], config: TransformerConfig
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Run the prompt tokens int[B, T] once: logits of its last position f32[B, V], and the cache filled to T."""
    logits, cache = _run(params, tokens, cache, jnp.int32(0), config)
    return logits[:, -1], cache


def decode_step(
    params: Params, cache: dict[str, jax.Array], token: jax.Array, pos: jax.Array, config: TransformerConfig
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Feed token int[B] at position `pos`: logits f32[B, V] for the next one, and the cache with slot `pos` written.

    Jit it with `donate_argnums=1` (the cache) and `static_argnums=4`, so XLA writes the new key
    and value into the cache's own buffers.
    """
    logits, cache = _run(params, token[:, None], cache, pos, config)
    return logits[:, 0], cache


def generate(
    params: Params, prompt: jax.Array, n_new: int, config: TransformerConfig, *, use_cache: bool = True
) -> jax.Array:
    """Greedy continuation: int[B, n_new] tokens after `prompt` int[B, T].

    With `use_cache`, one prefill then one jitted `decode_step` per token; without, the whole
    sequence is re-run for every new token (the O(T^2) loop a KV cache avoids).
    """
    checks.count("n_new", n_new)
    B, T = prompt.shape
    out = []
    if not use_cache:
        run = jax.jit(forward, static_argnums=2)
        seq = prompt
        for _ in range(n_new):
            nxt = jnp.argmax(run(params, seq, config)[:, -1], axis=-1)
            out.append(nxt)
            seq = jnp.concatenate([seq, nxt[:, None]], axis=1)
        return jnp.stack(out, axis=1)
    cache = init_cache(config, B, T + n_new)
    logits, cache = jax.jit(prefill, static_argnums=3)(params, prompt, cache, config)
    step = jax.jit(decode_step, static_argnums=4, donate_argnums=1)
    for i in range(n_new):
        nxt = jnp.argmax(logits, axis=-1)
        out.append(nxt)
        if i + 1 < n_new:
            logits, cache = step(params, cache, nxt, jnp.int32(T + i), config)
    return jnp.stack(out, axis=1)
