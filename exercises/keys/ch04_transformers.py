"""Answer keys for the chapter 4 exercises (Transformer math), computed with book_lib."""

from __future__ import annotations

import random

from book_lib import models, roofline, transformer
from exercises.keys import choice, function, pick, program, value
from exercises.keys.chips import TPUS, V5E, givens

Q1 = models.get_model("book-ch4-q1")  # L = 64, D = 4096, F = 4D, V = 32,000, N H = D, MHA

# Problem 4.7 gives this rate for the H800 (not in book_lib.hardware: no table of ours lists the H800,
# and the problem states the rate it wants used).
H800_FP8_SPARSE_FLOPS_PER_S = 3.026e15

# The rates Q4c (a function problem) prints, each with the book_lib value it must match; the value
# problems print their chip's rates from book_lib through the templates.
GIVENS = givens("tpu-v5e", bf16_flops_per_s="1.97 \\times 10^{14}", hbm_bytes_per_s="8.1 \\times 10^{11}")

# Dense models with a gated MLP, as a statement names them, and their book_lib presets (Q0c).
DENSE_MODELS = {
    "Gemma 2 27B": "gemma-2-27b",
    "Llama 2 7B": "llama-2-7b",
    "Llama 2 13B": "llama-2-13b",
    "Llama 2 70B": "llama-2-70b",
    "Llama 3 8B": "llama-3-8b",
    "Llama 3.1 405B": "llama-3.1-405b",
    "Mistral 7B": "mistral-7b",
    "Qwen2.5 72B": "qwen2.5-72b",
}
# Released MoE models: (name, experts E, experts per token k), as their model cards give them (Q8b).
MOE_MODELS = (
    ("DeepSeek v3", 256, 8),
    ("Mixtral 8x7B", 8, 2),
    ("Mixtral 8x22B", 8, 2),
    ("DBRX", 16, 4),
    ("Grok-1", 8, 2),
    ("Qwen3 30B-A3B", 128, 8),
    ("Qwen3 235B-A22B", 128, 8),
    ("gpt-oss-20b", 32, 4),
    ("gpt-oss-120b", 128, 4),
)
LAYERS, WIDTHS = (32, 40, 48, 80, 96, 126), (4096, 5120, 6144, 12288, 16384)  # what a class's model may be


def _mha(layers: int, d: int, f: int = 1, v: int = 1, h: int = 128, **kw) -> transformer.TransformerConfig:
    """A multi-head model with N H = D (N = D / h heads of h) and a gated MLP."""
    return transformer.TransformerConfig(
        n_layers=layers, d_model=d, d_ff=f, n_heads=d // h, n_kv_heads=d // h, head_dim=h, vocab_size=v, **kw
    )


def _remat_bytes(layers: int, d: int, tokens_m: int) -> tuple[float, float]:
    """Activations kept without remat and with the book's "block remat" (book_lib's "full")."""
    model = _mha(layers, d, 4 * d)
    return tuple(
        model.training_memory(batch_tokens=tokens_m * 1e6, remat=r).activations_bytes for r in ("none", "full")
    )


def _crossovers(d: int, model: str, model_d: int, model_f: int, model_n: int, model_k: int, model_h: int):
    """Where attention's FLOPs pass the rest's (tokens): by the rule (F = 4D, N H = D), then for the named model."""
    named = transformer.TransformerConfig(
        n_layers=1, d_model=model_d, d_ff=model_f, n_heads=model_n, n_kv_heads=model_k, head_dim=model_h, vocab_size=1
    )
    return (_mha(1, d, 4 * d).attention_crossover_seq_len(), named.attention_crossover_seq_len())


def _draw_crossovers(r: random.Random) -> dict:
    model = r.choice(sorted(DENSE_MODELS))
    m = models.get_model(DENSE_MODELS[model])
    return {
        "d": r.choice((2048, 4096, 5120, 6144, 12288, 16384)),
        "model": model,
        "model_d": m.d_model,
        "model_f": m.d_ff,
        "model_n": m.n_heads,
        "model_k": m.n_kv_heads,
        "model_h": m.head_dim,
    }


def _q1_model(layers: int, d: int, f: int, v: int, h: int) -> transformer.TransformerConfig:
    """Problem 4.1's form: MHA with N H = D, gated MLP, one norm per layer and a final one, untied output."""
    return _mha(layers, d, f, v, h, norms_per_layer=1)


Q1_PARAMS = {"layers": Q1.n_layers, "d": Q1.d_model, "f": Q1.d_ff, "v": Q1.vocab_size, "h": Q1.head_dim}
assert _q1_model(**Q1_PARAMS).param_breakdown() == Q1.param_breakdown(), "the text's model is book_lib's preset"


def _draw_q1_model(r: random.Random) -> dict:
    d = r.choice((2048, 3072, 5120, 6144, 8192))
    return {
        "layers": r.choice((24, 32, 40, 48, 80, 96)),
        "d": d,
        "f": r.choice((3, 4, 6, 8)) * d,
        "v": r.choice((32000, 50304, 128256, 152064, 256000)),
        "h": r.choice((64, 128)),
    }


def _attention_share(of: str, **m) -> float:
    """Attention's share of the parameters (`of="all"`), or (the text's count for problem 4.1) of the layers'."""
    parts = _q1_model(**m).param_breakdown()
    return parts.attention / (_q1_model(**m).param_count() if of == "all" else parts.attention + parts.mlp)


def _q5_crossover(d: int, n: int, k: int) -> float:
    model = transformer.TransformerConfig(
        n_layers=1, d_model=d, d_ff=1, n_heads=n, n_kv_heads=k, head_dim=d // n, vocab_size=1
    )
    return model.attention_crossover_seq_len(against="qkvo")


def _draw_q5(r: random.Random) -> dict:
    d = r.choice((2048, 3072, 5120, 6144, 8192, 12288, 16384))
    n = d // r.choice((64, 128))
    return {"d": d, "n": n, "k": r.choice((n, n, n // 4, 8, 1))}


def _mfu(run: str, active_b: int, tokens_t: float, gpu_hours_m: float) -> float:
    needed = 6 * active_b * 1e9 * tokens_t * 1e12
    return needed / (gpu_hours_m * 1e6 * 3600 * H800_FP8_SPARSE_FLOPS_PER_S / 2)


def _draw_mfu(r: random.Random) -> dict:
    """A hypothetical MoE training run on H800s whose utilisation lands between 12 % and 55 %.

    The solution writes `<tokens_t>e12` and `<gpu_hours_m>e6`: each float must print without an exponent
    (`variants.py` writes 10.0 as 1e1), so none is a round 10, 20, ...
    """
    return {
        "run": "A mixture-of-experts model",
        "active_b": r.choice((12, 17, 22, 30, 45, 52, 70)),
        "tokens_t": r.choice((6.0, 8.0, 12.0, 15.0, 18.0, 22.0, 36.0)),
        "gpu_hours_m": r.choice((0.5, 0.8, 1.2, 1.5, 2.0, 3.5, 5.0)),
    }


def _draw_moe(r: random.Random) -> dict:
    model, e, k = r.choice(MOE_MODELS)
    return {"model": model, "e": e, "k": k, "tpu": r.choice(TPUS)}


def _sharded_flops(B: int, D: int, F: int, X: int, Y: int, Z: int) -> tuple[float, float]:
    one = roofline.matmul_cost(B, D, F).flops
    return (one * Z, one / (X * Y))


def _attention_mlp_time_ratio(T: int) -> float:
    # one layer of the problem 4.1 model, one sequence of T tokens in prefill, bf16 on a v5e
    per_token, L = Q1.flops_breakdown(T, training=False), Q1.n_layers
    heads = {"n_heads": Q1.n_heads, "n_kv_heads": Q1.n_kv_heads, "head_dim": Q1.head_dim}
    attention_cost = transformer.attention_cost(T, T, **heads)
    mlp_bytes = 2 * (Q1.param_breakdown().mlp / L + 2 * T * Q1.d_model)  # weights, input, output
    rates = (V5E.bf16_flops_per_s, V5E.hbm_bytes_per_s)
    attention = roofline.roofline_time(attention_cost.flops, attention_cost.bytes, *rates).t_lower
    mlp = roofline.roofline_time(per_token.mlp_flops / L * T, mlp_bytes, *rates).t_lower
    return attention / mlp


def _moe_batch(E: int, k: int, flops_per_s: float, bytes_per_s: float) -> float:
    # int8 weights (E D F bytes), bf16 compute (2 k B D F FLOPs): 2 k B / E > ridge
    return transformer.moe_critical_batch(E, k, flops_per_s, bytes_per_s, param_dtype="int8")


def _attention_inputs(sizes: tuple[int, int, int, int], n: int, seed: int):
    """q: f32[T, H], k and v: f32[S, H], and the block size (a static argument)."""
    import numpy as np

    T, S, H, block = sizes
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((rows, H)).astype(np.float32) for rows in (T, S, S))
    return (q, k, v), (block,)


def _attention_reference(arrays, n: int, block: int):
    """softmax(q k^T / sqrt(H)) v in float64, the score matrix whole (the grader may form it)."""
    import numpy as np

    q, k, v = (a.astype(np.float64) for a in arrays)
    scores = q @ k.T / np.sqrt(q.shape[1])
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


Q1_NUMBERS = {"params": Q1_PARAMS, "draw": _draw_q1_model}

KEYS = {
    "ch04_q0a_remat_bytes": value(
        ("activations_none_bytes", "activations_block_bytes"),
        _remat_bytes,
        rel_tol=2e-3,  # the text's 84 and 4.2 TB for 83.89 and 4.194
        params={"layers": 64, "d": 8192, "tokens_m": 4},
        draw=pick(layers=LAYERS, d=WIDTHS, tokens_m=(1, 2, 8, 16)),
    ),
    "ch04_q0b_kv_example": value(
        "kv_cache_bytes",
        lambda layers, kh, seq: _mha(layers, kh).kv_cache_bytes_per_token("int8") * seq,
        rel_tol=1e-3,
        params={"layers": 64, "kh": 8192, "seq": 8192},
        draw=pick(layers=LAYERS, kh=WIDTHS, seq=(2048, 4096, 16384, 32768, 131072)),
    ),
    "ch04_q0c_crossover": value(
        ("crossover_rule_tokens", "crossover_model_tokens"),
        _crossovers,
        params={
            "d": 8192,
            "model": "Gemma 2 27B",
            "model_d": 4608,
            "model_f": 36864,
            "model_n": 32,
            "model_k": 16,
            "model_h": 128,
        },
        draw=_draw_crossovers,
    ),
    "ch04_q0d_unembed_flops": function(
        "unembed_training_flops",
        lambda B, T, D, V: 3 * roofline.matmul_cost(B * T, D, V).flops,
        ((8, 4096, 8192, 128256), (1, 1, 4096, 32000), (3, 100, 7, 11)),
    ),
    "ch04_q1a_params": value("params_q1", lambda **m: _q1_model(**m).param_count(), rel_tol=1e-3, **Q1_NUMBERS),
    # problem 4.1 is one model: Q1b and Q1c take up the one Q1a draws
    "ch04_q1b_attention_share": value(
        "attention_share_q1",
        lambda **m: _attention_share("all", **m),
        also=(lambda **m: _attention_share("layers", **m),),
        params=Q1_PARAMS,
        follows="ch04_q1a_params",
    ),
    "ch04_q1c_kv_bytes": value(
        "kv_bytes_per_token_q1",
        lambda layers, d, h: _mha(layers, d, h=h).kv_cache_bytes_per_token("int8"),
        rel_tol=1e-3,
        params={"layers": Q1.n_layers, "d": Q1.d_model, "h": Q1.head_dim},
        follows="ch04_q1a_params",
    ),
    "ch04_q2_sharded_flops": function(
        "sharded_matmul_flops",
        _sharded_flops,
        ((1024, 4096, 16384, 4, 8, 4), (512, 8192, 8192, 2, 2, 2), (64, 128, 256, 1, 8, 16)),
    ),
    "ch04_q3_contraction_flops": function(
        "contraction_flops",
        lambda I, J, K, L, M, N, O: roofline.matmul_cost(K * L, I * J, M * N * O).flops,  # noqa: E741
        ((2, 3, 4, 5, 6, 7, 8), (16, 8, 4, 2, 1, 3, 5), (1,) * 7),
    ),
    "ch04_q4a_attention_intensity": function(
        "attention_intensity",
        # per KV head and batch row: G query heads share one KV head (H cancels out of the ratio)
        lambda T, S, G: transformer.attention_cost(T, S, n_heads=G, n_kv_heads=1, head_dim=1).intensity,
        ((1, 8192, 8), (4096, 4096, 1), (2048, 2048, 8), (1, 128, 1)),
    ),
    "ch04_q4b_prefill_length": value(
        "prefill_tokens_compute_bound",
        # with S = T the intensity of Q4a is T G / (G + 1)
        lambda tpu, g: (g + 1) / g * roofline.critical_intensity(tpu),
        params={"tpu": "tpu-v5e", "g": 1},
        draw=pick(tpu=TPUS, g=(1, 1, 2, 4, 8)),
    ),
    "ch04_q5_crossover": value(
        "crossover_tokens_q5",
        _q5_crossover,
        params={"d": Q1.d_model, "n": Q1.n_heads, "k": Q1.n_kv_heads},
        draw=_draw_q5,
    ),
    "ch04_q4c_attention_time": function(
        "attention_to_mlp_time_ratio", _attention_mlp_time_ratio, ((128,), (1000,), (8192,), (65536,))
    ),
    "ch04_q6a_remat_work": choice("recomputed_work", "attention", ("nothing", "attention", "mlp", "everything")),
    "ch04_q6b_remat_flops": function(
        "remat_extra_flops",
        # the forward attention products of one layer, multi-head, for each of the B sequences
        lambda B, T, N, H: transformer.attention_cost(T, T, n_heads=N, n_kv_heads=N, head_dim=H).flops * B,
        ((1, 4096, 32, 128), (8, 2048, 64, 128), (2, 100, 3, 7)),
    ),
    "ch04_q7_deepseek_mfu": value(
        "training_mfu",
        _mfu,
        params={"run": "DeepSeek v3", "active_b": 37, "tokens_t": 14.8, "gpu_hours_m": 2.79},
        draw=_draw_mfu,
        accept=lambda v: 0.12 <= _mfu(**v) <= 0.55,
    ),
    "ch04_q8a_moe_batch": function(
        "moe_critical_batch_tokens",
        _moe_batch,
        ((8, 2, 1.97e14, 8.1e11), (256, 8, 1.97e14, 8.1e11), (64, 4, 9.2e14, 1.6e12)),
    ),
    "ch04_q8b_moe_deepseek": value(
        "moe_batch_tokens",
        lambda model, e, k, tpu: _moe_batch(e, k, roofline.critical_intensity(tpu), 1.0),  # the ridge, per byte
        rel_tol=0.02,
        params={"model": "DeepSeek v3", "e": 256, "k": 8, "tpu": "tpu-v5e"},
        draw=_draw_moe,
    ),
    "ch04_q9_online_softmax": program(
        "online_softmax_attention",
        recorder="traced",
        cases=((64, 512, 32, 64), (128, 256, 16, 32), (32, 1024, 24, 256)),  # H < T: only scores reach T * S
        inputs=_attention_inputs,
        reference=_attention_reference,
        atol=1e-4,
        max_elements=lambda sizes: sizes[0] * sizes[1],
    ),
}

# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py).
PLAUSIBLE = {
    "ch04_q9_online_softmax": """
def online_softmax_attention(q, k, v, block_size):
    scores = q @ k.T / math.sqrt(q.shape[1])  # right values, but the whole [T, S] matrix at once
    return jax.nn.softmax(scores, axis=-1) @ v
""",
}

# The text's printed answers: the grader accepts each (tests/course/test_exercises.py).
PRINTED = {
    "ch04_q0a_remat_bytes": {"activations_none_bytes": 84e12, "activations_block_bytes": 4.2e12},
    "ch04_q1b_attention_share": {"attention_share_q1": 0.25},
    "ch04_q6a_remat_work": {"recomputed_work": "attention"},  # the current text: the two attention products
    "ch04_q7_deepseek_mfu": {"training_mfu": 0.217},
    "ch04_q8b_moe_deepseek": {"moe_batch_tokens": 3840},
    "ch04_q0b_kv_example": {"kv_cache_bytes": 8 * 2**30},  # 2 * 8192 * 64 * 8192 = 8GiB
    "ch04_q1c_kv_bytes": {"kv_bytes_per_token_q1": 512 * 1024},  # 2 * 64 * 4096 = "512kB" (512 KiB)
    "ch04_q5_crossover": {"crossover_tokens_q5": 8192},  # T = 2D
}

# Why the text's answer to a question is not in PRINTED, where that says more than its kind.
UNPRINTED = {
    "ch04_q0c_crossover": "the text's 64K tokens for D = 8192 is the key's, but for Gemma it applies T = 8D (37k; "
    "32k in the February 2025 text), whose F = 4D, NH = D assumptions the model's given shapes break (69,120)",
    "ch04_q1a_params": "the text's 16B computes with D and F rounded to 4e3 and 16e3; its own formula with the "
    "given sizes gives 17.4e9, 8 % more",
    "ch04_q4b_prefill_length": "the text's S = 240 drops its own formula's G / (G + 1) factor, which for G = 1 "
    "gives 480 (486 at 8.1e11 bytes/s): a slip in the text",
    "ch04_q4c_attention_time": "the text asks for a plot and prints none",
}
