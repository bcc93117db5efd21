"""Answer keys for the chapter 7 exercises (Transformer inference), computed with book_lib."""

from __future__ import annotations

import dataclasses
import random

from book_lib import hardware, inference, models, roofline, speculative, topology, transformer
from exercises.keys import function, manual, pick, preset_sizes, program, sized_model, value
from exercises.keys.chips import TPUS, text_chip

# The model of Part 7's worked problems ("based on LLaMA-2 13B"), input and output embeddings shared.
BOOK_CH7 = models.get_model("book-ch7")
MODEL_PARAMS = preset_sizes("book-ch7")
# Dense models with untied embeddings, as a statement names them, and their book_lib presets (Q0d).
DENSE_MODELS = {"LLaMA 2 13B": "llama-2-13b", "LLaMA 2 7B": "llama-2-7b", "LLaMA 3 8B": "llama-3-8b"}


def _model(e: int = 1, top_k: int = 1, **sizes) -> transformer.TransformerConfig:
    """The text's form of model: embeddings tied, `e` experts of which `top_k` per token."""
    return sized_model(**sizes, tied_embeddings=True, n_experts=e, experts_per_token=top_k)


assert _model(**MODEL_PARAMS) == dataclasses.replace(BOOK_CH7, name="", source=""), "the text's model is the preset"


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


def critical_batches(tpu: str) -> tuple[float, float, float]:
    """The text's B << D, F limit of the critical batch: w / 2 times the chip's operations per HBM byte.

    A [B, D] x [D, F] matmul does 2 B D F operations on D F weights of w bytes each: intensity 2 B / w,
    compute-bound once it passes the ridge. For bf16 weights, int8 weights with bf16 FLOPs, and int8 both.
    """
    return (
        roofline.critical_intensity(tpu, "bf16") * 2 / 2,
        roofline.critical_intensity(tpu, "bf16") * 1 / 2,
        roofline.critical_intensity(tpu, "int8") * 1 / 2,
    )


def _pop_quiz(params_b: int, kv_kb: int, context: int, tpu: str, chips: int, small: int, big: int):
    sizes = {"param_count": params_b * 1e9, "kv_bytes_per_token": kv_kb * 1e3, "chip": tpu, "n_chips": chips}
    return tuple(
        inference.decode_step_time_from_sizes(**sizes, batch=b, context_len=context, param_dtype="int8").t_lower
        for b in (small, big)
    )


def _kv_13b(layers: int, k: int, h: int, seq: int) -> float:
    """LLaMA 2 13B's bf16 KV cache of `seq` tokens, with `layers` layers of `k` KV heads of `h`."""
    model = sized_model(**{**preset_sizes("llama-2-13b"), "layers": layers, "k": k, "h": h})
    return model.kv_cache_bytes_per_token("bf16") * seq


def _serving_table(model: str, chips: int, context: int, chip: str | hardware.Chip = "tpu-v5e", **sizes):
    """The serving table's row: the largest batch, a step at batch 1, tokens/s at the largest batch."""
    config = models.get_model(DENSE_MODELS[model])
    assert sizes == preset_sizes(DENSE_MODELS[model]), "the statement prints the preset's sizes"
    largest = inference.max_batch(config, chip, chips, context_len=context)

    def step(batch: int) -> inference.DecodeStep:
        kv = config.kv_cache_bytes_per_token("bf16")
        return inference.decode_step_time_from_sizes(
            param_count=config.param_count(),
            kv_bytes_per_token=kv,
            chip=chip,
            n_chips=chips,
            batch=batch,
            context_len=context,
        )

    return (largest, step(1).t_lower, step(largest).tokens_per_s)


def _draw_serving_table(r: random.Random) -> dict:
    model = r.choice(sorted(DENSE_MODELS))
    sizes = preset_sizes(DENSE_MODELS[model])
    return {"model": model, **sizes, "chips": r.choice((4, 8, 16)), "context": r.choice((2048, 4096, 8192))}


def _max_batches(context: int, chip: str | hardware.Chip = "tpu-v5e", **m) -> tuple[int, int]:
    """The largest batches of 16 chips, the model as given (GQA) and with one KV head (MQA), all int8."""
    model, kw = _model(**m), {"param_dtype": "int8", "kv_dtype": "int8"}
    mqa = dataclasses.replace(model, n_kv_heads=1)
    return tuple(inference.max_batch(x, chip, 16, context_len=context, **kw) for x in (model, mqa))


def _moe(e: int, top_k: int, ridge: float | None = None, **m) -> tuple[float, float, float, float]:
    """Parameters, critical batch (bf16 weights and FLOPs; each expert sees k B / E tokens), KV bytes, FLOPs/token."""
    model = _model(**m, e=e, top_k=top_k)
    ridge = roofline.critical_intensity("tpu-v5e") if ridge is None else ridge
    return (
        model.param_count(),
        transformer.moe_critical_batch(e, top_k, ridge, 1.0, param_dtype="bf16"),
        model.kv_cache_bytes_per_token("int8"),
        2 * model.active_param_count(),
    )


def _expert_sharding(e: int, top_k: int, chip: str | hardware.Chip = "tpu-v5e", **m) -> tuple[float, float, int]:
    """int8 weights on an 8x16 slice: the time to load them, the HBM left per chip, the fewest chips that hold them."""
    model = _model(**m, e=e, top_k=top_k)
    weights = model.param_count()  # int8: one byte each
    slice_ = topology.Slice(chip=hardware.get_chip(chip), shape=(8, 16))
    spec = slice_.chip
    return (
        weights / (slice_.n_chips * spec.hbm_bytes_per_s),
        spec.hbm_bytes - weights / slice_.n_chips,
        inference.min_chips(model, spec, batch=1, context_len=1, param_dtype="int8", kv_dtype="int8"),
    )


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


# Problems 7.1 to 7.6 are about one model: Q1 draws it, Q2, Q3 and Q5 take it up, Q6 takes up Q5's experts.
MOE = {"params": {**MODEL_PARAMS, "e": 16, "top_k": 2}}
V5E_TEXT = text_chip("tpu-v5e")  # the text's 16 GB of 1e9 bytes per chip

KEYS = {
    "ch07_q0a_critical_batch": value(
        ("critical_batch_bf16", "critical_batch_int8_weights", "critical_batch_int8"),
        critical_batches,
        rel_tol=0.02,
        params={"tpu": "tpu-v5e"},
        draw=pick(tpu=TPUS),
    ),
    "ch07_q0b_pop_quiz": value(
        ("step_time_small_s", "step_time_big_s"),
        _pop_quiz,
        rel_tol=0.04,
        params={"params_b": 30, "kv_kb": 100, "context": 8192, "tpu": "tpu-v5e", "chips": 16, "small": 4, "big": 256},
        draw=pick(
            params_b=(8, 13, 30, 70),
            kv_kb=(50, 100, 160, 320),
            context=(2048, 4096, 8192, 16384),
            tpu=TPUS,
            chips=(8, 16, 32),
            small=(1, 2, 4, 8),
            big=(256, 512, 1024),
        ),
        # as the solution says: the large batch's matmuls outlast the weight read (int8 weights, bf16 FLOPs)
        accept=lambda v: v["big"] > roofline.critical_intensity(v["tpu"]) / 2,
    ),
    "ch07_q0c_kv_13b": value(
        "kv_cache_bytes_q0c",
        _kv_13b,
        params={"layers": 40, "k": 40, "h": 128, "seq": 8192},
        draw=pick(layers=(32, 40, 48, 80), k=(1, 8, 20, 40), seq=(4096, 8192, 32768)),
    ),
    "ch07_q0d_serving_13b": value(
        ("max_batch_q0d", "step_time_batch1_q0d_s", "tokens_per_s_at_max_q0d"),
        _serving_table,
        also=(lambda **v: _serving_table(**v, chip=V5E_TEXT),),
        rel_tol=0.02,
        params={"model": "LLaMA 2 13B", **preset_sizes("llama-2-13b"), "chips": 8, "context": 8192},
        draw=_draw_serving_table,
        # the slice holds the weights and at least one sequence's cache
        accept=lambda v: (
            inference.max_batch(DENSE_MODELS[v["model"]], "tpu-v5e", v["chips"], context_len=v["context"]) > 0
        ),
        follows="ch07_q0b_pop_quiz",  # its step time by Q0b's estimate, none of Q0b's numbers
        shares=(),
    ),
    "ch07_q1_params_kv": value(
        ("params_71", "kv_bytes_per_token_71"),
        lambda **m: (_model(**m).param_count(), _model(**m).kv_cache_bytes_per_token("int8")),
        # the printed count, without the RMSNorm vectors: L D (3F + 2H(N + K)) + D V
        also=(
            lambda layers, d, f, n, k, h, v: (
                layers * d * (3 * f + 2 * h * (n + k)) + d * v,
                _model(layers=layers, d=d, f=f, n=n, k=k, h=h, v=v).kv_cache_bytes_per_token("int8"),
            ),
        ),
        params=MODEL_PARAMS,
        draw=_draw_model,
    ),
    "ch07_q2_max_batch": value(
        ("max_batch_gqa", "max_batch_mqa"),
        _max_batches,
        also=(lambda **v: _max_batches(**v, chip=V5E_TEXT),),
        params={**MODEL_PARAMS, "context": 8192},
        draw=pick(context=(2048, 4096, 8192)),
        # the model has more than one KV head (else it is its own MQA) and its slice holds one sequence
        accept=lambda v: v["k"] > 1 and _max_batches(**v)[0] > 0,
        follows="ch07_q1_params_kv",
    ),
    "ch07_q3_weight_load": value(
        "weight_load_s",
        lambda **m: (
            inference.decode_step_time(
                _model(**m), "tpu-v5e", 16, batch=1, context_len=1, param_dtype="int8", kv_dtype="int8"
            ).t_weights
        ),
        params=MODEL_PARAMS,
        follows="ch07_q1_params_kv",
    ),
    "ch07_q5_moe": value(
        ("moe_params", "moe_critical_batch", "moe_kv_bytes_per_token", "moe_flops_per_token"),
        _moe,
        also=(lambda **v: _moe(**v, ridge=240),),  # the text's v5e ridge, 240 FLOPs per byte
        **MOE,
        draw=pick(e=(8, 16, 32, 64), top_k=(1, 2, 4)),
        follows="ch07_q1_params_kv",
    ),
    "ch07_q6_expert_sharding": value(
        ("expert_load_s", "free_hbm_per_chip_bytes", "smallest_slice_chips"),
        _expert_sharding,
        also=(lambda **v: _expert_sharding(**v, chip=V5E_TEXT),),
        accept=lambda v: _expert_sharding(**v)[1] > 0,
        **MOE,
        follows="ch07_q5_moe",
    ),
    "ch07_q7_two_d_sharding": function(
        "chips_for_2d_to_win",
        # 1D model parallelism moves 4 B D / 3 per W_ici; 2D weight-stationary at its best split
        # (X = sqrt(N D / 2F)) moves 4 B sqrt(2 F D / N): 2D wins once N > 18 F / D.
        lambda f, d: (4 / 3) ** -2 * 32 * f / d,
        ((16384, 4096), (28672, 8192), (3, 1), (8, 1)),
    ),
    "ch07_q8_speculative": function(
        "tokens_per_target_step",
        lambda rate, k: speculative.speculative_tokens_per_step(acceptance_rate=rate, draft_len=k),
        ((0.8, 4), (0.5, 1), (0.9, 8), (0.0, 3), (1.0, 5)),
    ),
    "ch07_q9_cached_attention": program(
        "cached_decode_attention",
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
}


# Problem 7.4 asks for a design, which more than one answer defends: graded by hand (formgrade), by this rubric.
MANUAL = {
    "ch07_q4_sharding_design": manual(
        (1, "the bound on tensor parallelism over ICI, computed for this model and batch (chapter 8's F / (B beta))"),
        (1, "a sharding of the weights over the 16 chips that respects that bound and fits in HBM"),
        (1, "a sharding of the KV caches (by key/value heads as far as K allows, then by batch)"),
        (1, "a step time from the weight and cache reads per chip, plus the collectives, within a factor of 2"),
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
    "ch07_q0c_kv_13b": {"kv_cache_bytes_q0c": 6.7e9},
    # the text's table: batch 16 is the last that fits; 4.98 ms at batch 1; 787.99 tokens/s at batch 16
    "ch07_q0d_serving_13b": {"max_batch_q0d": 16, "step_time_batch1_q0d_s": 4.98e-3, "tokens_per_s_at_max_q0d": 787.99},
}
UNPRINTED = {
    "ch07_q1_params_kv": "the text prints the parameter count (18.4e9, accepted) but not the KV bytes per token",
    # 110 and 885 (listed here before) are the key's own answers with 16 GB chips, not numbers the text prints
    "ch07_q2_max_batch": "the text prints no answer to its problem 7.2",
    "ch07_q3_weight_load": "the text prints no answer to its problem 7.3",
    "ch07_q5_moe": "the text prints no answer to its problem 7.5",
    "ch07_q6_expert_sharding": "the text prints no answer to its problem 7.6",
    "ch07_q7_two_d_sharding": "the text's one printed case, 81 chips for F = 4D, is a slip for its own "
    "128 (3/4)^2 = 72, which the exercise notes",
}
