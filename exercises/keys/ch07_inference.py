"""Answer keys for the chapter 7 exercises (Transformer inference), computed with book_lib."""

from __future__ import annotations

import dataclasses
import random

from book_lib import hardware, inference, models, roofline, topology, transformer
from exercises.keys import JaxCheck, Key, text_chip

# What a class's variant may draw.
TPUS = hardware.chip_names(family="tpu", since="tpu-v4")

# The model of Part 7's worked problems ("based on LLaMA-2 13B"), input and output embeddings shared.
BOOK_CH7 = models.get_model("book-ch7")
MODEL_71 = {
    "layers": BOOK_CH7.n_layers,
    "d": BOOK_CH7.d_model,
    "f": BOOK_CH7.d_ff,
    "n": BOOK_CH7.n_heads,
    "k": BOOK_CH7.n_kv_heads,
    "h": BOOK_CH7.head_dim,
    "v": BOOK_CH7.vocab_size,
}


def _model(layers: int, d: int, f: int, n: int, k: int, h: int, v: int, e: int = 1, top_k: int = 1):
    return transformer.TransformerConfig(
        n_layers=layers,
        d_model=d,
        d_ff=f,
        n_heads=n,
        n_kv_heads=k,
        head_dim=h,
        vocab_size=v,
        tied_embeddings=True,
        n_experts=e,
        experts_per_token=top_k,
    )


def _draw_model(r: random.Random) -> dict:
    d = r.choice((2048, 3072, 4096, 5120, 6144))
    h = r.choice((128, 256))
    n = r.choice((d // h, 2 * d // h))
    return {
        "layers": r.choice((32, 40, 48, 64)),
        "d": d,
        "f": r.choice((3, 4)) * d,
        "n": n,
        "k": r.choice([k for k in (1, 2, 4, 8) if n % k == 0]),
        "h": h,
        "v": r.choice((32000, 32128, 50304, 128256)),
    }


def _critical_batches(tpu: str) -> dict[str, float]:
    # A [B, D] x [D, F] matmul with B << D, F does 2 B D F operations on D F weights of w bytes each:
    # intensity 2 B / w, compute-bound once it passes the chip's ops per HBM byte.
    return {
        "critical_batch_bf16": roofline.critical_intensity(tpu, "bf16") * 2 / 2,
        "critical_batch_int8_weights": roofline.critical_intensity(tpu, "bf16") * 1 / 2,
        "critical_batch_int8": roofline.critical_intensity(tpu, "int8") * 1 / 2,
    }


def _pop_quiz(params_b: int, kv_kb: int, context: int, tpu: str, chips: int, small: int, big: int) -> dict:
    def step(batch: int) -> float:
        return inference.decode_step_time_from_sizes(
            param_count=params_b * 1e9,
            kv_bytes_per_token=kv_kb * 1e3,
            chip=tpu,
            n_chips=chips,
            batch=batch,
            context_len=context,
            param_dtype="int8",
        ).t_lower

    return {"step_time_small_s": step(small), "step_time_big_s": step(big)}


def _draw_pop_quiz(r: random.Random) -> dict:
    return {
        "params_b": r.choice((8, 13, 30, 70)),
        "kv_kb": r.choice((50, 100, 160, 320)),
        "context": r.choice((2048, 4096, 8192, 16384)),
        "tpu": r.choice(TPUS),
        "chips": r.choice((8, 16, 32)),
        "small": r.choice((1, 2, 4, 8)),
        "big": r.choice((256, 512, 1024)),
    }


def _kv_13b(layers: int, k: int, h: int, seq: int) -> dict[str, float]:
    model = dataclasses.replace(models.get_model("llama-2-13b"), n_layers=layers, n_kv_heads=k, head_dim=h)
    return {"kv_cache_bytes_13b": model.kv_cache_bytes_per_token("bf16") * seq}


def _draw_kv_13b(r: random.Random) -> dict:
    return {
        "layers": r.choice((32, 40, 48, 80)),
        "k": r.choice((1, 8, 20, 40)),
        "h": 128,
        "seq": r.choice((4096, 8192, 32768)),
    }


# Dense models with untied embeddings, as a statement names them, and their book_lib presets (Q0d).
DENSE_MODELS = {"LLaMA 2 13B": "llama-2-13b", "LLaMA 2 7B": "llama-2-7b", "LLaMA 3 8B": "llama-3-8b"}


def _sizes(name: str) -> dict:
    m = models.get_model(DENSE_MODELS[name])
    return {
        "layers": m.n_layers,
        "d": m.d_model,
        "f": m.d_ff,
        "n": m.n_heads,
        "k": m.n_kv_heads,
        "h": m.head_dim,
        "v": m.vocab_size,
    }


def _serving_table(model: str, chips: int, context: int, text_hbm: bool = False, **sizes) -> dict[str, float]:
    """The serving table's row; with `text_hbm`, on the text's 16 GB v5e (`_v5e`)."""
    config = models.get_model(DENSE_MODELS[model])
    assert sizes == _sizes(model), "the statement prints the preset's sizes"
    v5e = _v5e(text_hbm)
    largest = inference.max_batch(config, v5e, chips, context_len=context)

    def step(batch: int) -> inference.DecodeStep:
        return inference.decode_step_time_from_sizes(
            param_count=config.param_count(),
            kv_bytes_per_token=config.kv_cache_bytes_per_token("bf16"),
            chip=v5e,
            n_chips=chips,
            batch=batch,
            context_len=context,
        )

    return {
        "max_batch_13b": largest,
        "step_time_batch1_13b_s": step(1).t_lower,
        "tokens_per_s_at_max_13b": step(largest).tokens_per_s,
    }


def _draw_serving_table(r: random.Random) -> dict:
    model = r.choice(sorted(DENSE_MODELS))
    return {"model": model, **_sizes(model), "chips": r.choice((4, 8, 16)), "context": r.choice((2048, 4096, 8192))}


def _serves_one(v: dict) -> bool:
    """The slice holds the weights and at least one sequence's cache."""
    return inference.max_batch(DENSE_MODELS[v["model"]], "tpu-v5e", v["chips"], context_len=v["context"]) > 0


def _params_and_kv(**m) -> dict[str, float]:
    model = _model(**m)
    return {"params_71": model.param_count(), "kv_bytes_per_token_71": model.kv_cache_bytes_per_token("int8")}


def _text_params_71(**m) -> dict[str, float]:
    """The printed count, without the RMSNorm vectors: L D (3F + 2H(N + K)) + D V."""
    layers, d, f, n, k, h, v = (m[x] for x in ("layers", "d", "f", "n", "k", "h", "v"))
    return {
        "params_71": layers * d * (3 * f + 2 * h * (n + k)) + d * v,
        "kv_bytes_per_token_71": _model(**m).kv_cache_bytes_per_token("int8"),
    }


def _v5e(text_hbm: bool) -> hardware.Chip:
    """The v5e of Part 7's problems: its 16 GiB, or the text's 16 GB of 1e9 bytes (`text_chip`)."""
    return text_chip("tpu-v5e") if text_hbm else hardware.get_chip("tpu-v5e")


def _max_batches(context: int, text_hbm: bool = False, **m) -> dict[str, float]:
    model = _model(**m)
    mqa = dataclasses.replace(model, n_kv_heads=1)
    kw = {"param_dtype": "int8", "kv_dtype": "int8"}
    return {
        "max_batch_gqa": inference.max_batch(model, _v5e(text_hbm), 16, context_len=context, **kw),
        "max_batch_mqa": inference.max_batch(mqa, _v5e(text_hbm), 16, context_len=context, **kw),
    }


def _draw_max_batches(r: random.Random) -> dict:
    return {**_draw_model(r), "context": r.choice((2048, 4096, 8192))}


def _weight_load(**m) -> dict[str, float]:
    int8 = {"param_dtype": "int8", "kv_dtype": "int8"}
    step = inference.decode_step_time(_model(**m), "tpu-v5e", 16, batch=1, context_len=1, **int8)
    return {"weight_load_s": step.t_weights}


def _moe(e: int, top_k: int, ridge: float | None = None, **m) -> dict[str, float]:
    model = _model(**m, e=e, top_k=top_k)
    chip = hardware.get_chip("tpu-v5e")
    flops, hbm = (chip.bf16_flops_per_s, chip.hbm_bytes_per_s) if ridge is None else (ridge, 1.0)
    return {
        "moe_params": model.param_count(),
        # bf16 weights and FLOPs: each expert sees k B / E tokens
        "moe_critical_batch": transformer.moe_critical_batch(e, top_k, flops, hbm, param_dtype="bf16"),
        "moe_kv_bytes_per_token": model.kv_cache_bytes_per_token("int8"),
        "moe_flops_per_token": 2 * model.active_param_count(),
    }


def _draw_moe(r: random.Random) -> dict:
    return {**_draw_model(r), "e": r.choice((8, 16, 32, 64)), "top_k": r.choice((1, 2, 4))}


def _expert_sharding(e: int, top_k: int, text_hbm: bool = False, **m) -> dict[str, float]:
    model = _model(**m, e=e, top_k=top_k)
    weights = model.param_count()  # int8: one byte each
    slice_ = topology.Slice(chip=_v5e(text_hbm), shape=(8, 16))
    chip = slice_.chip
    return {
        "expert_load_s": weights / (slice_.n_chips * chip.hbm_bytes_per_s),
        "free_hbm_per_chip_bytes": chip.hbm_bytes - weights / slice_.n_chips,
        "smallest_slice_chips": inference.min_chips(
            model, chip, batch=1, context_len=1, param_dtype="int8", kv_dtype="int8"
        ),
    }


def _two_d_threshold(f: int, d: int) -> float:
    # 1D model parallelism moves 4 B D / 3 per W_ici; 2D weight-stationary at its best split
    # (X = sqrt(N D / 2F)) moves 4 B sqrt(2 F D / N): 2D wins once N > 18 F / D.
    return (4 / 3) ** -2 * 32 * f / d


def _decode_inputs(sizes: tuple[int, int, int, int], n: int, seed: int):
    """q, k_new, v_new: f32[B, H]; k_cache, v_cache: f32[B, S, H]; the position (a static int)."""
    import numpy as np

    B, S, H, pos = sizes
    rng = np.random.default_rng(seed)
    q, k_new, v_new = (rng.standard_normal((B, H)).astype(np.float32) for _ in range(3))
    k_cache, v_cache = (rng.standard_normal((B, S, H)).astype(np.float32) for _ in range(2))
    return (q, k_cache, v_cache, k_new, v_new), (pos,)


def _decode_reference(arrays, n: int, pos: int):
    """The new token's attention over cache slots 0..pos, slot pos holding its own key and value."""
    import numpy as np

    q, k_cache, v_cache, k_new, v_new = (a.astype(np.float64) for a in arrays)
    keys = np.concatenate([k_cache[:, :pos], k_new[:, None]], axis=1)
    values = np.concatenate([v_cache[:, :pos], v_new[:, None]], axis=1)
    scores = np.einsum("bh,bsh->bs", q, keys) / np.sqrt(q.shape[1])
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    return np.einsum("bs,bsh->bh", p / p.sum(axis=1, keepdims=True), values)


MODEL_PARAMS = dict(MODEL_71)
assert _model(**MODEL_PARAMS) == dataclasses.replace(BOOK_CH7, name="", source=""), (
    "the text's model is book_lib's preset"
)

KEYS = {
    "ch07_q0a_critical_batch": Key(
        names=("critical_batch_bf16", "critical_batch_int8_weights", "critical_batch_int8"),
        kind="value",
        rel_tol=0.02,
        expected=_critical_batches,
        params={"tpu": "tpu-v5e"},
        draw=lambda r: {"tpu": r.choice(TPUS)},
    ),
    "ch07_q0b_pop_quiz": Key(
        names=("step_time_small_s", "step_time_big_s"),
        kind="value",
        rel_tol=0.04,
        expected=_pop_quiz,
        params={"params_b": 30, "kv_kb": 100, "context": 8192, "tpu": "tpu-v5e", "chips": 16, "small": 4, "big": 256},
        draw=_draw_pop_quiz,
    ),
    "ch07_q0c_kv_13b": Key(
        names=("kv_cache_bytes_13b",),
        kind="value",
        expected=_kv_13b,
        params={"layers": 40, "k": 40, "h": 128, "seq": 8192},
        draw=_draw_kv_13b,
    ),
    "ch07_q0d_serving_13b": Key(
        names=("max_batch_13b", "step_time_batch1_13b_s", "tokens_per_s_at_max_13b"),
        kind="value",
        rel_tol=0.02,
        expected=_serving_table,
        also=(lambda **v: _serving_table(**v, text_hbm=True),),
        params={"model": "LLaMA 2 13B", **_sizes("LLaMA 2 13B"), "chips": 8, "context": 8192},
        draw=_draw_serving_table,
        accept=_serves_one,
    ),
    "ch07_q1_params_kv": Key(
        names=("params_71", "kv_bytes_per_token_71"),
        kind="value",
        expected=_params_and_kv,
        also=(_text_params_71,),
        params=MODEL_PARAMS,
        draw=_draw_model,
    ),
    "ch07_q2_max_batch": Key(
        names=("max_batch_gqa", "max_batch_mqa"),
        kind="value",
        expected=_max_batches,
        also=(lambda **v: _max_batches(**v, text_hbm=True),),
        params={**MODEL_PARAMS, "context": 8192},
        draw=_draw_max_batches,
        accept=lambda v: _max_batches(**v)["max_batch_gqa"] > 0,
    ),
    "ch07_q3_weight_load": Key(
        names=("weight_load_s",),
        kind="value",
        expected=_weight_load,
        params=MODEL_PARAMS,
        draw=_draw_model,
    ),
    "ch07_q5_moe": Key(
        names=("moe_params", "moe_critical_batch", "moe_kv_bytes_per_token", "moe_flops_per_token"),
        kind="value",
        expected=_moe,
        also=(lambda **v: _moe(**v, ridge=240),),  # the text's v5e ridge, 240 FLOPs per byte
        params={**MODEL_PARAMS, "e": 16, "top_k": 2},
        draw=_draw_moe,
    ),
    "ch07_q6_expert_sharding": Key(
        names=("expert_load_s", "free_hbm_per_chip_bytes", "smallest_slice_chips"),
        kind="value",
        expected=_expert_sharding,
        also=(lambda **v: _expert_sharding(**v, text_hbm=True),),
        params={**MODEL_PARAMS, "e": 16, "top_k": 2},
        draw=_draw_moe,
        accept=lambda v: _expert_sharding(**v)["free_hbm_per_chip_bytes"] > 0,
    ),
    "ch07_q7_two_d_sharding": Key(
        names=("chips_for_2d_to_win",),
        kind="function",
        reference=_two_d_threshold,
        cases=((16384, 4096), (28672, 8192), (3, 1), (8, 1)),
    ),
    "ch07_q8_speculative": Key(
        names=("tokens_per_target_step",),
        kind="function",
        reference=lambda rate, k: inference.speculative_tokens_per_step(acceptance_rate=rate, draft_len=k),
        cases=((0.8, 4), (0.5, 1), (0.9, 8), (0.0, 3), (1.0, 5)),
    ),
    "ch07_q9_cached_attention": Key(
        names=("cached_decode_attention",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((8, 64, 16, 10), (16, 32, 8, 31), (8, 128, 32, 0)),
            inputs=_decode_inputs,
            in_specs=(("X", None), ("X", None, None), ("X", None, None), ("X", None), ("X", None)),
            reference=_decode_reference,
            atol=1e-4,
            block=lambda sizes, n: (sizes[0] // n, sizes[2]),
            collectives={"all-reduce": (0, 0), "all-gather": (0, 0), "reduce-scatter": (0, 0), "all-to-all": (0, 0)},
            # the caches hold B S H values each: a grown (concatenated) cache or a [B, S, S] score
            # array is larger than that
            max_elements=lambda sizes: sizes[0] * sizes[1] * sizes[2] + 1,
            needs_primitives=("dynamic_update_slice",),
        ),
    ),
}


# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py).
PLAUSIBLE = {
    "ch07_q9_cached_attention": """
def cached_decode_attention(q, k_cache, v_cache, k_new, v_new, pos):
    keys = jnp.concatenate([k_cache[:, :pos], k_new[:, None], k_cache[:, pos:]], axis=1)  # a cache one longer
    values = jnp.concatenate([v_cache[:, :pos], v_new[:, None], v_cache[:, pos:]], axis=1)
    scores = jnp.einsum("bh,bsh->bs", q, keys) / math.sqrt(q.shape[1])
    scores = jnp.where(jnp.arange(keys.shape[1]) <= pos, scores, -jnp.inf)
    return jnp.einsum("bs,bsh->bh", jax.nn.softmax(scores, axis=-1), values)
""",
}

# The text's printed answers, each accepted (tests/course/test_exercises.py); UNPRINTED says why the rest are not.
PRINTED = {
    "ch07_q0a_critical_batch": {
        "critical_batch_bf16": 240,
        "critical_batch_int8_weights": 120,
        "critical_batch_int8": 240,
    },
    "ch07_q0b_pop_quiz": {"step_time_small_s": 2.5e-3, "step_time_big_s": 21e-3},
    "ch07_q0c_kv_13b": {"kv_cache_bytes_13b": 6.7e9},
    # the text's table: batch 16 is the last that fits; 4.98 ms at batch 1; 787.99 tokens/s at batch 16
    "ch07_q0d_serving_13b": {"max_batch_13b": 16, "step_time_batch1_13b_s": 4.98e-3, "tokens_per_s_at_max_13b": 787.99},
}
UNPRINTED = {
    "ch07_q1_params_kv": "the text prints the parameter count (18.4e9, accepted) but not the KV bytes per token",
    # 110 and 885 (listed here before) are the key's own answers with 16 GB chips, not numbers the text prints
    "ch07_q2_max_batch": "the text prints no answer to its problem 7.2",
    "ch07_q3_weight_load": "the text prints no answer to its problem 7.3",
    "ch07_q5_moe": "the text prints no answer to its problem 7.5",
    "ch07_q6_expert_sharding": "the text prints no answer to its problem 7.6",
    "ch07_q7_two_d_sharding": (
        "a function question: graded on its inputs; the text's one printed case, 81 chips for F = 4D, is a slip "
        "for its own 128 (3/4)^2 = 72, which the exercise notes"
    ),
    "ch07_q8_speculative": "a function question: graded on its inputs, the text prints no table of outputs",
    "ch07_q9_cached_attention": "a JAX program, judged by running it",
}
