"""Answer keys for the chapter 4 exercises (Transformer math), computed with book_lib."""

from __future__ import annotations

from book_lib import hardware, roofline, transformer
from exercises.keys import JaxCheck, Key

Q1 = transformer.get_model("book-ch4-q1")  # L = 64, D = 4096, F = 4D, V = 32,000, N H = D, MHA
# The text's examples: L = 64, D = K H = 8192, multi-head, gated MLP with F = 4D (the vocabulary plays no part).
EXAMPLE = transformer.TransformerConfig(64, 8192, 4 * 8192, 64, 64, 128, 32000, name="book-ch4-example")
GEMMA = transformer.get_model("gemma-2-27b")

# Problem 4.7 gives these figures for DeepSeek v3 and the H800 (not in book_lib.hardware: no table
# of ours lists the H800, and the problem states the rate it wants used).
H800_FP8_SPARSE_FLOPS_PER_S = 3.026e15
DEEPSEEK_GPU_HOURS = 2.79e6
DEEPSEEK_TOKENS = 14.8e12
DEEPSEEK_ACTIVE_PARAMS = 37e9

V5E_RIDGE = roofline.critical_intensity("tpu-v5e")

V5E = hardware.get_chip("tpu-v5e")
GIVENS = [("1.97 \\times 10^{14}", V5E.bf16_flops_per_s), ("8.1 \\times 10^{11}", V5E.hbm_bytes_per_s)]


def _sharded_flops(B: int, D: int, F: int, X: int, Y: int, Z: int) -> tuple[float, float]:
    one = roofline.matmul_cost(B, D, F).flops
    return (one * Z, one / (X * Y))


def _contraction_flops(I: int, J: int, K: int, L: int, M: int, N: int, O: int) -> float:  # noqa: E741
    return roofline.matmul_cost(K * L, I * J, M * N * O).flops


def _attention_intensity(T: int, S: int, G: int) -> float:
    # per KV head and batch row: FLOPs 4 T S G H, bytes 2 (T G H) for Q and O + 2 (S H) for K and V, bf16
    return 4 * T * S * G / (4 * (T * G + S))


def _attention_mlp_time_ratio(T: int) -> float:
    # one layer of the problem 4.1 model, one sequence of T tokens in prefill, bf16 on a v5e
    per_token, L = Q1.flops_breakdown(T, training=False), Q1.n_layers
    H = Q1.head_dim
    attention_bytes = 2 * (2 * T * Q1.n_heads * H + 2 * T * Q1.n_kv_heads * H)  # Q, O; K, V
    mlp_bytes = 2 * (Q1.param_breakdown().mlp / L + 2 * T * Q1.d_model)  # weights, input, output
    rates = (V5E.bf16_flops_per_s, V5E.hbm_bytes_per_s)
    attention = roofline.roofline_time(per_token.attention_flops / L * T, attention_bytes, *rates).t_lower
    mlp = roofline.roofline_time(per_token.mlp_flops / L * T, mlp_bytes, *rates).t_lower
    return attention / mlp


def _remat_extra_flops(B: int, T: int, N: int, H: int) -> float:
    # the forward attention products of one layer: a one-layer multi-head config with these heads
    heads = transformer.TransformerConfig(1, N * H, 1, N, N, H, 1)
    return heads.flops_breakdown(T, training=False).attention_flops * B * T


def _unembed_training_flops(B: int, T: int, D: int, V: int) -> float:
    return 3 * roofline.matmul_cost(B * T, D, V).flops


def _moe_batch(E: int, k: int, flops_per_s: float, bytes_per_s: float) -> float:
    # int8 weights (E D F bytes), bf16 compute (2 k B D F FLOPs): 2 k B / E > ridge
    return flops_per_s / bytes_per_s * E / (2 * k)


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


KEYS = {
    "ch04_q0a_remat_bytes": Key(
        names=("activations_none_bytes", "activations_block_bytes"),
        kind="value",
        rel_tol=1e-3,
        expected=lambda: {
            "activations_none_bytes": EXAMPLE.training_memory(batch_tokens=4e6, remat="none").activations_bytes,
            "activations_block_bytes": EXAMPLE.training_memory(batch_tokens=4e6, remat="block").activations_bytes,
        },
    ),
    "ch04_q0b_kv_example": Key(
        names=("kv_cache_8k_bytes",),
        kind="value",
        rel_tol=1e-3,
        expected=lambda: {"kv_cache_8k_bytes": EXAMPLE.kv_cache_bytes_per_token(bytes_per_value=1) * 8192},
    ),
    "ch04_q0c_crossover": Key(
        names=("crossover_rule_tokens", "crossover_gemma_tokens"),
        kind="value",
        expected=lambda: {
            "crossover_rule_tokens": EXAMPLE.attention_crossover_seq_len(),
            "crossover_gemma_tokens": GEMMA.attention_crossover_seq_len(),
        },
    ),
    "ch04_q0d_unembed_flops": Key(
        names=("unembed_training_flops",),
        kind="function",
        reference=_unembed_training_flops,
        cases=((8, 4096, 8192, 128256), (1, 1, 4096, 32000), (3, 100, 7, 11)),
    ),
    "ch04_q1a_params": Key(
        names=("params_q1",), kind="value", rel_tol=1e-3, expected=lambda: {"params_q1": Q1.param_count()}
    ),
    "ch04_q1b_attention_share": Key(
        names=("attention_share_q1",),
        kind="value",
        expected=lambda: {"attention_share_q1": Q1.param_breakdown().attention / Q1.param_count()},
    ),
    "ch04_q1c_kv_bytes": Key(
        names=("kv_bytes_per_token_q1",),
        kind="value",
        rel_tol=1e-3,
        expected=lambda: {"kv_bytes_per_token_q1": Q1.kv_cache_bytes_per_token(bytes_per_value=1)},
    ),
    "ch04_q2_sharded_flops": Key(
        names=("sharded_matmul_flops",),
        kind="function",
        reference=_sharded_flops,
        cases=((1024, 4096, 16384, 4, 8, 4), (512, 8192, 8192, 2, 2, 2), (64, 128, 256, 1, 8, 16)),
    ),
    "ch04_q3_contraction_flops": Key(
        names=("contraction_flops",),
        kind="function",
        reference=_contraction_flops,
        cases=((2, 3, 4, 5, 6, 7, 8), (16, 8, 4, 2, 1, 3, 5), (1,) * 7),
    ),
    "ch04_q4a_attention_intensity": Key(
        names=("attention_intensity",),
        kind="function",
        reference=_attention_intensity,
        cases=((1, 8192, 8), (4096, 4096, 1), (2048, 2048, 8), (1, 128, 1)),
    ),
    "ch04_q4b_prefill_length": Key(
        names=("prefill_tokens_compute_bound",),
        kind="value",
        expected=lambda: {"prefill_tokens_compute_bound": 2 * V5E_RIDGE},
    ),
    "ch04_q5_crossover": Key(
        names=("crossover_tokens_q5",),
        kind="value",
        expected=lambda: {"crossover_tokens_q5": Q1.attention_crossover_seq_len(against="qkvo")},
    ),
    "ch04_q4c_attention_time": Key(
        names=("attention_to_mlp_time_ratio",),
        kind="function",
        reference=_attention_mlp_time_ratio,
        cases=((128,), (1000,), (8192,), (65536,)),
    ),
    "ch04_q6a_remat_work": Key(
        names=("recomputed_work",),
        kind="choice",
        choices=("nothing", "attention", "mlp", "everything"),
        expected=lambda: "attention",
    ),
    "ch04_q6b_remat_flops": Key(
        names=("remat_extra_flops",),
        kind="function",
        reference=_remat_extra_flops,
        cases=((1, 4096, 32, 128), (8, 2048, 64, 128), (2, 100, 3, 7)),
    ),
    "ch04_q7_deepseek_mfu": Key(
        names=("deepseek_mfu",),
        kind="value",
        expected=lambda: {
            "deepseek_mfu": 6
            * DEEPSEEK_ACTIVE_PARAMS
            * DEEPSEEK_TOKENS
            / (DEEPSEEK_GPU_HOURS * 3600 * H800_FP8_SPARSE_FLOPS_PER_S / 2)
        },
    ),
    "ch04_q8a_moe_batch": Key(
        names=("moe_critical_batch_tokens",),
        kind="function",
        reference=_moe_batch,
        cases=((8, 2, 1.97e14, 8.1e11), (256, 8, 1.97e14, 8.1e11), (64, 4, 9.2e14, 1.6e12)),
    ),
    "ch04_q8b_moe_deepseek": Key(
        names=("moe_batch_deepseek_tokens",),
        kind="value",
        expected=lambda: {"moe_batch_deepseek_tokens": V5E_RIDGE * 256 / (2 * 8)},
    ),
    "ch04_q9_online_softmax": Key(
        names=("online_softmax_attention",),
        kind="jax",
        check=JaxCheck(
            recorder="traced",
            cases=((64, 512, 32, 64), (128, 256, 16, 32), (32, 1024, 24, 256)),  # H < T: only scores reach T * S
            inputs=_attention_inputs,
            reference=_attention_reference,
            atol=1e-4,
            max_elements=lambda sizes: sizes[0] * sizes[1],
        ),
    ),
}

# Answers a student might plausibly write that must still lose their points (tests/test_grading.py).
PLAUSIBLE = {
    "ch04_q9_online_softmax": """
def online_softmax_attention(q, k, v, block_size):
    scores = q @ k.T / math.sqrt(q.shape[1])  # right values, but the whole [T, S] matrix at once
    return jax.nn.softmax(scores, axis=-1) @ v
""",
}
