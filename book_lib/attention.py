"""Attention and one Transformer layer in plain JAX: the demos behind chapter 4.

`naive_attention` builds the whole score matrix; `blockwise_attention` walks over blocks of keys
with an online softmax (a running max m, running denominator l and running output o), so it never
holds more than one [T, block] slice of scores. `transformer_layer` is one pre-norm decoder layer
(RMSNorm, grouped-query attention, gated MLP) whose compiled FLOPs chapter 4 compares with
`book_lib.transformer`; `stack_loss` chains such layers, each optionally under `jax.checkpoint`,
so that the cost of rematerialisation can be read off the compiled program.

Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?") and "Transformer Accounting".
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from book_lib import checks
from book_lib.transformer import TransformerConfig

__all__ = [
    "naive_attention",
    "blockwise_attention",
    "init_layer",
    "transformer_layer",
    "stack_loss",
]


def _check_qkv(q: jax.Array, k: jax.Array, v: jax.Array) -> None:
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
        raise ValueError(f"q.shape={q.shape!r}: q, k, v must be 2-D [length, head_dim]; allowed: 2-D arrays")
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"k.shape={k.shape!r}: head_dim differs from q.shape={q.shape!r}; allowed: equal last dims")
    if k.shape[0] != v.shape[0]:
        raise ValueError(f"v.shape={v.shape!r}: length differs from k.shape={k.shape!r}; allowed: equal first dims")


def naive_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool = False) -> jax.Array:
    """softmax(q k^T / sqrt(H)) v for one head, materialising the [T, S] scores.

    q: f32[T, H], k: f32[S, H], v: f32[S, H] -> f32[T, H]. With `causal`, query t sees keys s <= t + S - T.
    Book: Part 4 (Transformers), "Global FLOPs and Params Calculation" (dot-product attention).

    Raises:
        ValueError: shapes that do not fit together.
    """
    _check_qkv(q, k, v)
    scores = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        offset = k.shape[0] - q.shape[0]
        allowed = jnp.arange(k.shape[0])[None, :] <= jnp.arange(q.shape[0])[:, None] + offset
        scores = jnp.where(allowed, scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=-1) @ v


def blockwise_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, *, block_size: int, causal: bool = False
) -> jax.Array:
    """The same result as `naive_attention`, over blocks of `block_size` keys with an online softmax.

    For each key block j: s = q k_j^T / sqrt(H); m' = max(m, rowmax s); l' = l e^(m - m') + rowsum e^(s - m');
    o' = o e^(m - m') + e^(s - m') v_j; finally o / l. Peak score memory is T x block_size values.
    Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?").

    Raises:
        ValueError: shapes that do not fit, or a block size that does not divide the key length.
    """
    _check_qkv(q, k, v)
    length = k.shape[0]
    if checks.count("block_size", block_size) and length % block_size:
        raise ValueError(f"block_size={block_size!r}: does not divide the key length {length}; allowed: a divisor")
    T, H = q.shape
    offset = length - T
    k_blocks = k.reshape(length // block_size, block_size, H)
    v_blocks = v.reshape(length // block_size, block_size, v.shape[1])
    starts = jnp.arange(length // block_size) * block_size

    def step(
        carry: tuple[jax.Array, jax.Array, jax.Array], block: tuple[jax.Array, jax.Array, jax.Array]
    ) -> tuple[tuple[jax.Array, jax.Array, jax.Array], None]:
        m, denom, o = carry
        k_j, v_j, start = block
        s = q @ k_j.T / math.sqrt(H)
        if causal:
            keys = start + jnp.arange(block_size)[None, :]
            s = jnp.where(keys <= jnp.arange(T)[:, None] + offset, s, -jnp.inf)
        m_new = jnp.maximum(m, s.max(axis=1))
        safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)
        scale = jnp.exp(jnp.where(jnp.isfinite(m), m - safe, -jnp.inf))
        p = jnp.exp(s - safe[:, None])
        return (m_new, denom * scale + p.sum(axis=1), o * scale[:, None] + p @ v_j), None

    init = (jnp.full((T,), -jnp.inf, q.dtype), jnp.zeros((T,), q.dtype), jnp.zeros((T, v.shape[1]), q.dtype))
    (_, denom, o), _ = jax.lax.scan(step, init, (k_blocks, v_blocks, starts))
    return o / denom[:, None]


def init_layer(config: TransformerConfig, key: jax.Array) -> dict:
    """Random f32 weights of one layer of `config` (dense MLP only): a dict of named arrays.

    Shapes: wq f32[D, N H], wk and wv f32[D, K H], wo f32[N H, D], w_gate and w_up f32[D, F],
    w_down f32[F, D], norm_attn and norm_mlp f32[D]. Book: Part 4 (Transformers), "Transformer Accounting".

    Raises:
        ValueError: an MoE config (more than one expert).
    """
    if config.is_moe:
        raise ValueError(f"n_experts={config.n_experts!r}: the demo layer is dense; allowed: 1")
    D, F, N, K, H = config.d_model, config.d_ff, config.n_heads, config.n_kv_heads, config.head_dim
    shapes = {"wq": (D, N * H), "wk": (D, K * H), "wv": (D, K * H), "wo": (N * H, D), "w_up": (D, F), "w_down": (F, D)}
    if config.gated_mlp:
        shapes["w_gate"] = (D, F)
    keys = jax.random.split(key, len(shapes))
    params = {
        n: jax.random.normal(k, s, jnp.float32) / math.sqrt(s[0])
        for k, (n, s) in zip(keys, shapes.items(), strict=True)
    }
    params["norm_attn"] = jnp.ones((D,), jnp.float32)
    params["norm_mlp"] = jnp.ones((D,), jnp.float32)
    return params


def _rms_norm(x: jax.Array, weight: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * weight


def transformer_layer(params: dict, x: jax.Array, config: TransformerConfig) -> jax.Array:
    """One pre-norm decoder layer on x: f32[T, D] -> f32[T, D] (bidirectional attention).

    h = x + O(attention(RMSNorm(x))); out = h + W_down(silu(W_gate n) * W_up n), n = RMSNorm(h).
    Grouped-query attention: each of the K key/value heads serves N / K query heads.
    Book: Part 4 (Transformers), "Transformer Accounting".
    """
    T = x.shape[0]
    N, K, H = config.n_heads, config.n_kv_heads, config.head_dim
    n = _rms_norm(x, params["norm_attn"])
    q = (n @ params["wq"]).reshape(T, K, N // K, H)
    k = (n @ params["wk"]).reshape(T, K, H)
    v = (n @ params["wv"]).reshape(T, K, H)
    scores = jnp.einsum("tkgh,skh->kgts", q, k) / math.sqrt(H)
    mixed = jnp.einsum("kgts,skh->tkgh", jax.nn.softmax(scores, axis=-1), v).reshape(T, N * H)
    h = x + mixed @ params["wo"]
    n = _rms_norm(h, params["norm_mlp"])
    up = n @ params["w_up"]
    inner = jax.nn.silu(n @ params["w_gate"]) * up if config.gated_mlp else jax.nn.gelu(up)
    return h + inner @ params["w_down"]


def stack_loss(layer_params: list[dict], x: jax.Array, config: TransformerConfig, *, remat: bool = False) -> jax.Array:
    """mean(y ** 2) of y = the layers of `layer_params` applied to x: f32[T, D] -> f32[] (a scalar loss).

    With `remat`, each layer runs under `jax.checkpoint`: its backward pass recomputes the layer's
    forward from the saved input (the book's "block remat"), instead of reading saved intermediates.
    Book: Part 4 (Transformers), "Gradient checkpointing".

    Raises:
        ValueError: no layers.
    """
    if not layer_params:
        raise ValueError(f"layer_params={layer_params!r}: no layers; allowed: a non-empty list of init_layer dicts")

    def layer(params: dict, h: jax.Array) -> jax.Array:
        return transformer_layer(params, h, config)

    step = jax.checkpoint(layer) if remat else layer
    for params in layer_params:
        x = step(params, x)
    return jnp.mean(x * x)
