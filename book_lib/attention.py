"""Attention and one Transformer layer in plain JAX: the demos behind chapter 4.

`naive_attention` builds the whole score matrix; `blockwise_attention` walks over blocks of keys
with an online softmax (a running max m, running denominator l and running output o), so it never
holds more than one [T, block] slice of scores. `transformer_layer` is one pre-norm decoder layer
(RMSNorm, grouped-query attention, gated MLP), the one layer of every demo: chapter 4 compares its
compiled FLOPs with `book_lib.transformer`, and `decode` stacks it, with rotary positions and a KV
cache, into chapter 7's model; `stack_loss` chains such layers, each optionally under `jax.checkpoint`,
so that the cost of rematerialisation can be read off the compiled program.

Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?") and "Transformer Accounting".
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from book_lib import checks
from book_lib.transformer import TransformerConfig

__all__ = [
    "naive_attention",
    "blockwise_attention",
    "init_layer",
    "rms_norm",
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


def rms_norm(x: jax.Array, weight: jax.Array) -> jax.Array:
    """x / sqrt(mean(x^2) + 1e-6) * weight over the last axis (RMSNorm). Book: Part 4, "Transformer Accounting"."""
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * weight


def _dense(x: jax.Array, w: jax.Array | dict[str, jax.Array]) -> jax.Array:
    """x @ w, for a weight stored whole or as int8 with a scale per output column (`decode.quantize_int8`)."""
    if isinstance(w, dict):
        return (x @ w["q"].astype(x.dtype)) * w["scale"]
    return x @ w


def _rope(x: jax.Array, positions: jax.Array) -> jax.Array:
    """Rotary embedding of x[..., T, heads, H] at integer `positions` [T] (H even)."""
    half = x.shape[-1] // 2
    freq = 10000.0 ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angle = positions[..., None, None].astype(jnp.float32) * freq
    a, b = x[..., :half], x[..., half:]
    rotated = jnp.concatenate([a * jnp.cos(angle) - b * jnp.sin(angle), a * jnp.sin(angle) + b * jnp.cos(angle)], -1)
    return rotated.astype(x.dtype)


def _write(cache: jax.Array, new: jax.Array, start: jax.Array) -> jax.Array:
    """`cache` [..., S, K, H] with `new` [..., T, K, H] written in place at positions start .. start+T-1."""
    return jax.lax.dynamic_update_slice_in_dim(cache, new.astype(cache.dtype), start, axis=cache.ndim - 3)


def transformer_layer(
    params: dict,
    x: jax.Array,
    config: TransformerConfig,
    *,
    positions: jax.Array | None = None,
    cache: tuple[jax.Array, jax.Array] | None = None,
) -> Any:
    """One pre-norm decoder layer on x: f32[..., T, D] -> f32[..., T, D].

    h = x + O(attention(RMSNorm(x))); out = h + W_down(silu(W_gate n) * W_up n), n = RMSNorm(h).
    Grouped-query attention: each of the K key/value heads serves N / K query heads. Without
    `positions` the attention is bidirectional over x's own tokens, with no position embedding
    (chapter 4 counts its FLOPs); with positions int[T], queries and keys are rotated (RoPE) and a
    query sees only keys at positions up to its own. With `cache` = (k, v), each f32[..., S, K, H],
    this call's keys and values are written into it at `positions` and the queries attend over it:
    the result is then (out, (k, v)), the caches updated in place under `jax.jit` with donation
    (chapter 7's decode). A weight may be int8 with a scale per column (`decode.quantize_int8`).
    Book: Part 4 (Transformers), "Transformer Accounting"; Part 7, "The Basics of Transformer Inference".

    Raises:
        ValueError: a cache without positions.
    """
    *lead, T, _ = x.shape
    N, K, H = config.n_heads, config.n_kv_heads, config.head_dim
    n = rms_norm(x, params["norm_attn"])
    q = _dense(n, params["wq"]).reshape(*lead, T, N, H)
    k = _dense(n, params["wk"]).reshape(*lead, T, K, H)
    v = _dense(n, params["wv"]).reshape(*lead, T, K, H)
    if positions is not None:
        q, k, keys = _rope(q, positions), _rope(k, positions), positions
        if cache is not None:
            cache = (_write(cache[0], k, positions[0]), _write(cache[1], v, positions[0]))
            k, v, keys = cache[0].astype(q.dtype), cache[1].astype(q.dtype), jnp.arange(cache[0].shape[-3])
    elif cache is not None:
        raise ValueError("positions=None: a cache is written at positions; allowed: int[T] positions with a cache")
    scores = jnp.einsum("...tkgh,...skh->...kgts", q.reshape(*lead, T, K, N // K, H), k) / math.sqrt(H)
    if positions is not None:  # causal, and only the cache's written slots
        scores = jnp.where(keys[None, :] <= positions[:, None], scores, -jnp.inf)
    mixed = jnp.einsum("...kgts,...skh->...tkgh", jax.nn.softmax(scores, axis=-1), v).reshape(*lead, T, N * H)
    h = x + _dense(mixed, params["wo"])
    n = rms_norm(h, params["norm_mlp"])
    up = _dense(n, params["w_up"])
    inner = jax.nn.silu(_dense(n, params["w_gate"])) * up if config.gated_mlp else jax.nn.gelu(up)
    out = h + _dense(inner, params["w_down"])
    return out if cache is None else (out, cache)


def stack_loss(layer_params: list[dict], x: jax.Array, config: TransformerConfig, *, remat: str = "none") -> jax.Array:
    """mean(y ** 2) of y = the layers of `layer_params` applied to x: f32[T, D] -> f32[] (a scalar loss).

    remat="full" runs each layer under `jax.checkpoint`: its backward pass recomputes the layer's
    forward from the saved input (the book's "block remat", `transformer.REMAT_POLICIES`' "full"),
    instead of reading saved intermediates; "none" keeps them. Book: Part 4, "Gradient checkpointing".

    Raises:
        ValueError: no layers, or a policy other than "none" and "full".
    """
    if not layer_params:
        raise ValueError(f"layer_params={layer_params!r}: no layers; allowed: a non-empty list of init_layer dicts")
    checks.one_of("remat", remat, ("none", "full"))

    def layer(params: dict, h: jax.Array) -> jax.Array:
        return transformer_layer(params, h, config)

    step = jax.checkpoint(layer) if remat == "full" else layer
    for params in layer_params:
        x = step(params, x)
    return jnp.mean(x * x)
