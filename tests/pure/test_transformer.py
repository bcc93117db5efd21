"""Tests for book_lib.transformer: exact checkpoint sizes, hand-computed tiny models, every ValueError."""

from __future__ import annotations

import dataclasses

import pytest

from book_lib import breakdowns, transformer
from book_lib.breakdowns import FlopsBreakdown, ParamBreakdown, TrainingMemory
from book_lib.models import MODELS, get_model, model_names
from book_lib.transformer import REMAT_POLICIES, TransformerConfig

# Parameter counts of the released safetensors (sum of every tensor's element count).
RELEASED = {
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "gemma-2-27b": 27_227_128_320,
    "qwen2.5-72b": 72_706_203_648,
}


def tiny(**kw) -> TransformerConfig:
    """L=2, D=8, F=16, N=4, K=2, H=2, V=10: small enough to count by hand."""
    return TransformerConfig(n_layers=2, d_model=8, d_ff=16, n_heads=4, n_kv_heads=2, head_dim=2, vocab_size=10, **kw)


# ----- parameters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_released_checkpoint_param_count_is_exact(name):
    model = get_model(name)
    assert model.param_count() == RELEASED[name], (name, model.param_count() - RELEASED[name])
    assert model.source.startswith("https://huggingface.co/")
    assert model.source.endswith("/blob/main/config.json")


# Mixture-of-experts checkpoints pinned to their publishers' totals and active counts instead (B parameters,
# as printed): DeepSeek-V3 technical report (arXiv:2412.19437), "671B total parameters with 37B activated";
# the Qwen3-235B-A22B model card, "235B in total and 22B activated"; Mixtral of Experts (arXiv:2401.04088),
# "47B parameters" of which "13B active" (Mistral's announcement: 46.7B and 12.9B).
PUBLISHED_MOE = {"deepseek-v3": (671, 37), "qwen3-235b-a22b": (235, 22), "mixtral-8x7b": (46.7, 12.9)}


def test_every_released_preset_is_pinned():
    released = {name for name, model in MODELS.items() if "huggingface.co" in model.source}
    assert released == set(RELEASED) | set(PUBLISHED_MOE)


@pytest.mark.parametrize("name", sorted(PUBLISHED_MOE))
def test_moe_presets_match_published_total_and_active_counts(name):
    model, (total, active) = get_model(name), PUBLISHED_MOE[name]
    digits = 1 if total < 100 else 0
    assert round(model.param_count() / 1e9, digits) == total
    # DeepSeek prints 37B for 37.55B: truncated, or 36.6B without the 0.93B input embedding a token only indexes
    assert abs(model.active_param_count() / 1e9 - active) < 10**-digits


def test_deepseek_v3_counted_by_hand():
    # config.json: 61 layers, D = 7168; the first 3 dense (F = 18432), the other 58 with 256 routed experts and
    # 1 shared of width 2048, top-8; MLA with q rank 1536, kv rank 512, 128 heads of 128 + 64 RoPE dims.
    model, D, V = get_model("deepseek-v3"), 7168, 129280
    attention = D * 1536 + 1536 * 128 * 192 + D * (512 + 64) + 512 * 128 * (128 + 128) + 128 * 128 * D
    expert = 3 * D * 2048
    norms = 61 * (2 * D + 1536 + 512) + D
    total = 61 * attention + 3 * 3 * D * 18432 + 58 * (257 * expert + D * 256) + 2 * V * D + norms
    assert model.param_count() == total
    assert model.param_count() - model.active_param_count() == 58 * 248 * expert
    assert model.kv_cache_bytes_per_token("bf16") == 61 * 576 * 2  # the latent and the RoPE key, not 2 K H
    # attention products: Q K^T over 128 + 64 dims, P V over 128, per head and key
    assert model.flops_breakdown(1, training=False).attention_flops == 2 * 61 * 128 * (192 + 128)


def test_latent_attention_fields_need_a_kv_rank():
    with pytest.raises(ValueError, match=r"kv_lora_rank=None: .*allowed"):
        tiny(rope_head_dim=4)
    with pytest.raises(ValueError, match=r"first_dense_layers=3: more than n_layers=2"):
        tiny(n_experts=4, experts_per_token=2, first_dense_layers=3)


def test_tiny_dense_param_breakdown_by_hand():
    # q 8*4*2=64, k 8*2*2=32, v 32, o 64 -> 192 per layer; gated MLP 3*8*16=384; norms 2*8=16.
    # embedding 10*8=80, output 80, final norm 8.  Total 2*(192+384+16) + 80 + 80 + 8 = 1352.
    want = ParamBreakdown(embedding=80, attention=384, mlp=768, router=0, norms=40, output=80)
    assert tiny().param_breakdown() == want
    assert tiny().param_count() == 1352
    assert tiny().active_param_count() == 1352
    assert tiny().qkvo_weights_per_layer == 192


def test_tiny_moe_with_bias_tied_plain_mlp_by_hand():
    # 4 experts of 2 matrices 8x16 = 256 each; router 8*4 = 32 per layer; q/k/v biases (4+2+2)*2 = 16 per layer.
    model = tiny(n_experts=4, experts_per_token=2, gated_mlp=False, qkv_bias=True, tied_embeddings=True)
    assert model.param_breakdown() == ParamBreakdown(
        embedding=80, attention=2 * (192 + 16), mlp=2 * 4 * 256, router=2 * 32, norms=40, output=0
    )
    # all: 80 + 416 + 2048 + 64 + 40 = 2648; active keeps 2 experts: 2648 - 2*2*256 = 1624.
    assert model.param_count() == 2648
    assert model.active_param_count() == 1624
    assert model.param_breakdown(active=True).router == 64  # every token runs the whole gate


def test_norm_count_changes_params():
    # 4 norms per layer instead of 2: 2 layers * 2 extra * D=8 = 32 more.
    assert tiny(norms_per_layer=4).param_count() == 1352 + 32
    assert tiny(norms_per_layer=0).param_count() == 1352 - 32


def test_llama3_70b_breakdown_matches_book_table_terms():
    parts = get_model("llama-3-70b").param_breakdown()
    assert parts.mlp == 80 * 3 * 8192 * 28672 == 56_371_445_760
    assert parts.attention == 80 * (2 * 8192 * 64 * 128 + 2 * 8192 * 8 * 128) == 12_079_595_520
    assert parts.embedding == parts.output == 128256 * 8192
    assert parts.norms == 80 * 2 * 8192 + 8192
    assert sum(parts.as_dict().values()) == parts.total == 70_553_706_496
    assert list(parts.as_dict()) == ["embedding", "attention", "mlp", "router", "norms", "output"]


def test_mixtral_active_params():
    # 2 of 8 experts: 46,702,792,704 - 32 layers * 6 experts * 3 * 4096 * 14336 = 12,879,925,248.
    # The router (32 * 4096 * 8 = 1,048,576) stays whole: each token scores all 8 experts.
    model = get_model("mixtral-8x7b")
    assert model.active_param_count() == 12_879_925_248
    assert model.param_count() - model.active_param_count() == 32 * 6 * 3 * 4096 * 14336


def test_book_problem_presets():
    # Part 4 Q1: 64*(3*4096*16384 + 4*4096*4096 + 4096) + 2*4096*32000 + 4096 (final norm) = 17,442,279,424;
    # attention is 64*4*4096^2 of it, a quarter of the per-layer weights.
    q1 = get_model("book-ch4-q1")
    assert q1.param_count() == 17_442_279_424
    parts = q1.param_breakdown()
    assert parts.attention / (parts.attention + parts.mlp) == 0.25
    # Part 7 Q1 (tied): 64*4096*(3*16384 + 2*256*(32+8)) + 4096*32128 = 18,385,207,296, plus norms 64*2*4096 + 4096.
    ch7 = get_model("book-ch7")
    assert ch7.param_count() == 18_385_207_296 + 64 * 2 * 4096 + 4096


# ----- FLOPs -----------------------------------------------------------------------------------------


def test_tiny_flops_by_hand():
    model = tiny()
    # forward weights used per token: 2*192 (qkvo) + 2*384 (MLP) + 80 (output) = 1232 -> 2464 FLOPs; x3 = 7392.
    assert model.flops_per_token(0, training=False) == 2464
    assert model.flops_per_token(0) == 7392
    # attention: 2 products * 2 FLOPs * L=2 * S=5 * N=4 * H=2 = 320 forward, 960 training, 480 causal training.
    assert model.flops_per_token(5, training=False) == 2464 + 320
    assert model.flops_per_token(5) == 7392 + 960
    assert model.flops_per_token(5, causal=True) == 7392 + 480
    want = FlopsBreakdown(
        qkvo_flops=768.0, mlp_flops=1536.0, router_flops=0.0, output_flops=160.0, attention_flops=320.0
    )
    assert model.flops_breakdown(5, training=False) == want
    assert want.layer_matmul_flops == 2304 and want.matmul_flops == 2464 and want.total_flops == 2784


def test_moe_flops_count_active_experts_and_router():
    model = tiny(n_experts=4, experts_per_token=2, gated_mlp=False, tied_embeddings=True)
    parts = model.flops_breakdown(0, training=False)
    assert parts.mlp_flops == 2 * 2 * 2 * 256  # 2 FLOPs * 2 layers * 2 active experts * 256 weights
    assert parts.router_flops == 2 * 2 * 32
    assert parts.output_flops == 2 * 80  # the tied table still multiplies every token


def test_six_n_rule_for_dense_model():
    # Without attention, training FLOPs are 6 x the matmul weights: all params minus the lookup table and norms.
    model = get_model("llama-3-70b")
    parts = model.param_breakdown()
    assert model.flops_per_token(0) == 6 * (parts.total - parts.embedding - parts.norms)


# ----- the accounting tables (op_rows) -----------------------------------------------------------------


def test_op_rows_of_tiny_model_by_hand():
    # B T = 3 tokens, S = 5 keys, training: W_in1 is 6 * 3 * D F = 6 * 3 * 128 = 2304 FLOPs, D F = 128 weights.
    rows = {row.name: row for row in tiny().op_rows(5, batch_tokens=3)}
    assert (rows["W_in1 (gate)"].flops, rows["W_in1 (gate)"].params) == (2304, 128)
    assert rows["W_in1 (gate)"].flops_formula == "6BTDF" and rows["W_in1 (gate)"].params_formula == "DF"
    assert (rows["W_K"].flops, rows["W_K"].params, rows["W_K"].flops_formula) == (6 * 3 * 32, 32, "6BTDKH")
    assert rows["Q K^T"].flops == 6 * 3 * 5 * 4 * 2 and rows["Q K^T"].params == 0  # 6 B T S N H
    assert rows["softmax"].flops == 0 and rows["softmax"].flops_formula == "O(BTSN)"
    assert (rows["unembedding"].count, rows["unembedding"].flops) == (1, 6 * 3 * 80)
    assert rows["W_Q"].count == 2 and rows["2 norms"].params == 16 and rows["final norm"].count == 1


def test_op_rows_add_up_to_the_books_per_layer_sums():
    # MLP 18 B T D F; projections 12 B T D (N + K) H; attention 12 B T S N H; all times L, plus 6 B T D V.
    model, tokens, S = get_model("llama-3-70b"), 4096, 2048
    L, D, F, N, K, H, V = 80, 8192, 28672, 64, 8, 128, 128256
    rows = model.op_rows(S, batch_tokens=tokens)
    by_group = {g: sum(r.total_flops for r in rows if r.group == g) for g in breakdowns.OP_GROUPS}
    assert by_group["mlp"] == 18 * tokens * D * F * L
    assert by_group["qkvo"] == 12 * tokens * D * (N + K) * H * L
    assert by_group["dot_product"] == 12 * tokens * S * N * H * L
    assert by_group["output"] == 6 * tokens * D * V and by_group["norms"] == by_group["embedding"] == 0
    assert sum(r.total_params for r in rows if r.group == "mlp") == 3 * D * F * L
    assert sum(r.total_params for r in rows) == RELEASED["llama-3-70b"]


@pytest.mark.parametrize("name", ["llama-3-70b", "gemma-2-27b", "qwen2.5-72b", "book-ch4-q1"])
def test_op_rows_are_six_flops_per_matmul_weight_per_token_plus_attention(name):
    # 6 x (weights a matmul uses) x tokens + 12 B T S N H L; a tied model multiplies by its embedding table.
    model, tokens, S = get_model(name), 1000, 3000
    parts = model.param_breakdown()
    matmul_weights = parts.total - parts.norms - (0 if model.tied_embeddings else parts.embedding)
    matmul_weights -= (model.n_heads + 2 * model.n_kv_heads) * model.head_dim * model.n_layers if model.qkv_bias else 0
    attention = 12 * tokens * S * model.n_heads * model.head_dim * model.n_layers
    total = sum(row.total_flops for row in model.op_rows(S, batch_tokens=tokens))
    assert total == pytest.approx(6 * matmul_weights * tokens + attention, rel=1e-12)
    assert total == pytest.approx(tokens * model.flops_per_token(S), rel=1e-12)


def test_op_rows_forward_causal_moe_and_tied():
    moe = tiny(n_experts=4, experts_per_token=2, tied_embeddings=True)
    rows = {row.name: row for row in moe.op_rows(4, training=False, causal=True)}
    assert rows["W_out (down)"].flops_formula == "2kBTDF" and rows["W_out (down)"].params_formula == "EDF"
    assert (rows["W_out (down)"].params, rows["W_out (down)"].active_params) == (4 * 128, 2 * 128)
    assert rows["router"].flops == 2 * 8 * 4 and rows["P V"].flops_formula == "1BTSNH"
    assert rows["P V"].flops == 2 * 4 * 4 * 2 / 2  # 2 S N H, halved by the mask
    assert rows["unembedding"].params == 0 and rows["unembedding"].flops == 2 * 80 and rows["unembedding"].weight_matmul


def test_op_rows_refuse_negative_tokens():
    with pytest.raises(ValueError, match="batch_tokens=-1"):
        tiny().op_rows(0, batch_tokens=-1)


def test_saved_arrays_per_layer_counts_the_weight_matmuls():
    assert get_model("llama-3-70b").saved_arrays_per_layer("big_matmuls") == 7  # Q, K, V, O, in1, in2, out
    assert tiny(gated_mlp=False).saved_arrays_per_layer("big_matmuls") == 6
    assert get_model("mixtral-8x7b").saved_arrays_per_layer("big_matmuls") == 4 + 2 * 3  # k = 2 experts
    assert get_model("llama-3-70b").saved_arrays_per_layer("mlp_matmuls") == 3
    assert tiny().saved_arrays_per_layer("none") == 20 and tiny().saved_arrays_per_layer() == 1
    with pytest.raises(ValueError, match="remat='checkpoints'"):
        tiny().saved_arrays_per_layer("checkpoints")


def test_attention_crossover_matches_book_rules():
    q1 = get_model("book-ch4-q1")  # MHA, gated, F = 4D, D = 4096
    assert q1.attention_crossover_seq_len() == 8 * 4096
    assert q1.attention_crossover_seq_len(against="qkvo") == 2 * 4096
    assert q1.attention_crossover_seq_len(causal=True) == 16 * 4096
    assert q1.attention_flops_ratio(4096) == pytest.approx(1 / 8)
    model_level = q1.attention_crossover_seq_len(against="model")
    assert model_level == 8 * 4096 + 2 * 4096 * 32000 / (4 * 64 * 32 * 128)


# ----- memory ----------------------------------------------------------------------------------------


def test_kv_cache_llama3_70b():
    model = get_model("llama-3-70b")
    assert model.kv_cache_bytes_per_token() == 80 * 8 * 128 * 2 * 2 == 327_680
    assert model.kv_cache_bytes_per_token("int8") == 163_840  # int8
    assert get_model("book-ch4-q1").kv_cache_bytes_per_token("int8") == 2 * 64 * 4096  # 512 KiB


def test_saved_values_per_policy_by_hand():
    model = tiny()  # D=8, F=16, N H = 8, K H = 4, gated, k = 1
    assert model.saved_values_per_token_layer("none") == 20 * 8
    assert model.saved_values_per_token_layer("full") == 8
    assert model.saved_values_per_token_layer("mlp_matmuls") == 2 * 16 + 8
    assert model.saved_values_per_token_layer("big_matmuls") == 8 + 2 * 4 + 8 + (2 * 16 + 8)
    assert model.saved_values_per_token_layer("checkpoints", checkpoints_per_layer=4) == 32
    assert tiny(gated_mlp=False).saved_values_per_token_layer("mlp_matmuls") == 16 + 8
    assert set(REMAT_POLICIES) == {"none", "full", "mlp_matmuls", "big_matmuls", "checkpoints"}


def test_training_memory_book_activation_example():
    # Part 4: B*T = 4e6 tokens, L = 64, D = 8192, bf16: 2 * 20 * 4e6 * 8192 * 64 = 8.39e13 (about 84 TB) saving
    # everything; 4.19e12 with block remat.
    model = TransformerConfig(
        n_layers=64, d_model=8192, d_ff=32768, n_heads=64, n_kv_heads=64, head_dim=128, vocab_size=32000
    )
    assert model.training_memory(batch_tokens=4e6, remat="none").activations_bytes == 2 * 20 * 4e6 * 8192 * 64
    assert model.training_memory(batch_tokens=4e6).activations_bytes == 2 * 4e6 * 8192 * 64


def test_training_memory_llama3_70b_part6():
    # bf16 params (2 B), Adam fp32 (8 B), no gradients, 4 D-wide checkpoints per layer, 4e6 tokens.
    mem = get_model("llama-3-70b").training_memory(
        batch_tokens=4e6, grad_dtype=None, remat="checkpoints", checkpoints_per_layer=4
    )
    assert isinstance(mem, TrainingMemory)
    assert mem.params_bytes == 2 * 70_553_706_496
    assert mem.grads_bytes == 0
    assert mem.optimizer_bytes == 8 * 70_553_706_496
    assert mem.activations_bytes == 2 * 8192 * 4e6 * 4 * 80  # 2.1e13
    assert mem.total_bytes == pytest.approx(21.68e12, rel=1e-3)


def test_training_memory_llama2_13b_part5_q2():
    # 16e6 tokens, checkpoints after the three MLP matmuls: 2 B * 40 * 16e6 * (5120 + 2 * 13824) = 4.19e13.
    mem = get_model("llama-2-13b").training_memory(batch_tokens=16e6, remat="mlp_matmuls")
    assert mem.activations_bytes == 2 * 40 * 16e6 * (5120 + 2 * 13824)
    assert mem.grads_bytes == 2 * 13_015_864_320  # default bf16 gradients
    assert mem.total_bytes == 12 * 13_015_864_320 + 2 * 40 * 16e6 * 32768


# ----- presets ---------------------------------------------------------------------------------------


def test_get_model_ignores_case_spaces_dashes_dots():
    assert get_model("LLaMA 3 70B") is MODELS["llama-3-70b"]
    assert get_model("qwen_2_5_72B") is MODELS["qwen2.5-72b"]
    assert get_model("Llama-3.1-405B") is get_model("llama 3 405b")  # the book's spelling
    model = tiny()
    assert get_model(model) is model
    assert model_names()[0] == "llama-2-7b" and len(model_names(internal=True)) == len(MODELS)
    assert set(MODELS) - set(model_names()) == {"book-ch4-q1", "book-ch7"}


def test_models_is_read_only():
    with pytest.raises(TypeError):
        MODELS["x"] = tiny()  # type: ignore[index]


def test_config_is_frozen_and_replaceable():
    model = get_model("llama-3-8b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.n_layers = 1  # type: ignore[misc]
    assert dataclasses.replace(model, n_layers=16).param_count() < model.param_count()


# ----- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["n_layers", "d_model", "d_ff", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "n_experts"]
)
def test_non_positive_size_raises(field):
    args = {"n_layers": 2, "d_model": 8, "d_ff": 16, "n_heads": 4, "n_kv_heads": 2, "head_dim": 2, "vocab_size": 10}
    args[field] = 0
    with pytest.raises(ValueError, match=f"^{field}=0: not a count"):
        TransformerConfig(**args)


def test_non_integer_size_raises():
    with pytest.raises(ValueError, match="^d_model=8.0:"):
        TransformerConfig(n_layers=2, d_model=8.0, d_ff=16, n_heads=4, n_kv_heads=2, head_dim=2, vocab_size=10)


def test_kv_heads_must_divide_heads():
    with pytest.raises(ValueError, match="^n_kv_heads=3: does not divide n_heads=4"):
        TransformerConfig(n_layers=2, d_model=8, d_ff=16, n_heads=4, n_kv_heads=3, head_dim=2, vocab_size=10)


def test_more_routed_than_experts_raises():
    with pytest.raises(ValueError, match="^experts_per_token=3: more than n_experts=2"):
        tiny(n_experts=2, experts_per_token=3)


def test_zero_experts_per_token_raises():
    with pytest.raises(ValueError, match="^experts_per_token=0:"):
        tiny(experts_per_token=0)


def test_negative_norms_raises():
    with pytest.raises(ValueError, match="^norms_per_layer=-1:"):
        tiny(norms_per_layer=-1)


def test_non_bool_flag_raises():
    with pytest.raises(ValueError, match="^tied_embeddings=1: not a bool"):
        tiny(tied_embeddings=1)


def test_negative_seq_len_raises():
    with pytest.raises(ValueError, match="^seq_len=-1:"):
        tiny().flops_per_token(-1)


def test_non_bool_training_raises():
    with pytest.raises(ValueError, match="^training='yes':"):
        tiny().flops_per_token(0, training="yes")


def test_unknown_matmul_group_raises():
    with pytest.raises(ValueError, match="^against='mlp':.*layers, qkvo, model"):
        tiny().attention_crossover_seq_len(against="mlp")


def test_unknown_kv_dtype_raises():
    with pytest.raises(ValueError, match="^dtype='fp7': unknown dtype; closest: fp8"):
        tiny().kv_cache_bytes_per_token("fp7")


def test_unknown_remat_raises():
    with pytest.raises(ValueError, match="^remat='block': unknown; .*allowed: none, full"):
        tiny().training_memory(batch_tokens=1, remat="block")


def test_checkpoints_remat_needs_a_count():
    with pytest.raises(ValueError, match="^checkpoints_per_layer=None:"):
        tiny().training_memory(batch_tokens=1, remat="checkpoints")
    with pytest.raises(ValueError, match="^checkpoints_per_layer=4:"):
        tiny().training_memory(batch_tokens=1, remat="full", checkpoints_per_layer=4)


def test_negative_checkpoints_raises():
    with pytest.raises(ValueError, match="^checkpoints_per_layer=-1:"):
        tiny().training_memory(batch_tokens=1, remat="checkpoints", checkpoints_per_layer=-1)


@pytest.mark.parametrize("field", ["batch_tokens", "optimizer_state_bytes_per_param"])
def test_negative_memory_amount_raises(field):
    kwargs = {"batch_tokens": 1, field: -1}
    with pytest.raises(ValueError, match=f"^{field}=-1: not a non-negative"):
        tiny().training_memory(**kwargs)


@pytest.mark.parametrize("field", ["param_dtype", "grad_dtype", "activation_dtype"])
def test_unknown_memory_dtype_raises(field):
    with pytest.raises(ValueError, match=f"^{field}='fp7': unknown dtype; closest: fp8"):
        tiny().training_memory(batch_tokens=1, **{field: "fp7"})


def test_unknown_model_lists_close_matches():
    with pytest.raises(ValueError, match="^model='llama-3-75b': unknown model; closest: llama-3-70b"):
        get_model("llama-3-75b")


def test_non_string_model_name_raises():
    with pytest.raises(ValueError, match="^model=70: not a model name"):
        get_model(70)


def test_attention_cost_agrees_with_the_model_flops_and_the_book_intensity():
    one_layer = TransformerConfig(n_layers=1, d_model=1024, d_ff=8, n_heads=16, n_kv_heads=4, head_dim=64, vocab_size=8)
    T = S = 2048
    cost = transformer.attention_cost(T, S, n_heads=16, n_kv_heads=4, head_dim=64)
    per_token = one_layer.flops_breakdown(S, training=False).attention_flops
    assert cost.flops == pytest.approx(per_token * T), "two counts of the same products"
    # decode (one query per sequence, S >> G): intensity close to G = N / K; prefill at S = T: T G / (G + 1)
    assert transformer.attention_cost(1, 8192, n_heads=16, n_kv_heads=4, head_dim=64).intensity == pytest.approx(
        4, rel=2e-3
    )
    assert cost.intensity == pytest.approx(T * 4 / 5)


def test_moe_critical_batch_is_where_an_expert_matmul_turns_compute_bound():
    from book_lib import roofline

    E, k, peak, hbm = 256, 8, 1.97e14, 8.1e11
    B = transformer.moe_critical_batch(E, k, peak, hbm)
    D, F = 7168, 2048
    tokens_per_expert = B * k / E
    flops = 2 * tokens_per_expert * D * F
    weight_bytes = D * F  # int8
    assert flops / weight_bytes == pytest.approx(roofline.critical_intensity("v5e"))
    assert B == pytest.approx(peak / hbm * E / (2 * k))


def test_presets_know_their_positions_and_check_them():
    llama = get_model("llama-3-70b")
    assert llama.max_positions == 8192 and get_model("llama-3.1-405b").max_positions == 131072
    assert llama.check_positions("seq_len", 8192) == 8192
    with pytest.raises(
        ValueError, match=r"^seq_len=8193: more tokens than llama-3-70b's 8,192 positions; allowed: 1 to 8192"
    ):
        llama.check_positions("seq_len", 8193)
    assert get_model("book-ch7").check_positions("seq_len", 10**9) == 10**9  # unknown: no limit


def test_a_decode_step_reads_only_the_experts_its_batch_touches():
    mixtral, dense = get_model("mixtral-8x7b"), get_model("mistral-7b")
    assert mixtral.experts_touched(1) == 2 and mixtral.experts_touched(8) == pytest.approx(8 * (1 - 0.75**8))
    assert mixtral.experts_touched(64) == pytest.approx(8, rel=1e-7)
    # At batch 1 a step reads the active weights; with every expert touched, all of them.
    assert mixtral.params_read_per_step(1) == pytest.approx(mixtral.active_param_count())
    assert mixtral.params_read_per_step(10**4) == pytest.approx(mixtral.param_count())
    assert dense.params_read_per_step(1) == dense.param_count() and dense.experts_touched(5) == 1


# config.json of each family, written from the checkpoints' model cards (their files), and the preset of it
HF_CONFIGS = {
    "mistral-7b": {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
                   "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                   "max_position_embeddings": 32768, "tie_word_embeddings": False},
    "mixtral-8x7b": {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                     "vocab_size": 32000, "max_position_embeddings": 32768, "num_local_experts": 8,
                     "num_experts_per_tok": 2, "tie_word_embeddings": False},
    "llama-3.1-405b": {"model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248,
                       "num_attention_heads": 128, "num_hidden_layers": 126, "num_key_value_heads": 8,
                       "vocab_size": 128256, "max_position_embeddings": 131072, "tie_word_embeddings": False},
    "qwen2.5-72b": {"model_type": "qwen2", "num_hidden_layers": 80, "hidden_size": 8192, "num_key_value_heads": 8,
                    "intermediate_size": 29568, "num_attention_heads": 64, "vocab_size": 152064,
                    "max_position_embeddings": 131072, "tie_word_embeddings": False},
    "qwen3-235b-a22b": {"model_type": "qwen3_moe", "hidden_size": 4096, "intermediate_size": 12288,
                        "moe_intermediate_size": 1536, "num_attention_heads": 64, "num_hidden_layers": 94,
                        "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
                        "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": False},
    "deepseek-v3": {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
                    "moe_intermediate_size": 2048, "num_attention_heads": 128, "num_hidden_layers": 61,
                    "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
                    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280,
                    "max_position_embeddings": 163840, "tie_word_embeddings": False},
}  # fmt: skip


@pytest.mark.parametrize("name", HF_CONFIGS)
def test_a_hugging_face_config_of_each_family_is_its_preset(name):
    from book_lib.models import from_hf_config

    preset = MODELS[name]
    read = from_hf_config(HF_CONFIGS[name], name=name)
    positions = read.max_positions if name == "qwen2.5-72b" else preset.max_positions  # the preset leaves it open
    assert read == dataclasses.replace(preset, source="", max_positions=positions)
    assert read.param_count() == preset.param_count()


def test_a_config_of_another_family_or_without_a_field_is_refused_by_name():
    from book_lib.models import from_hf_config

    with pytest.raises(ValueError, match=r"^model_type='gpt2': unknown; .*allowed: llama, mistral"):
        from_hf_config({"model_type": "gpt2"})
    broken = {k: v for k, v in HF_CONFIGS["mistral-7b"].items() if k != "vocab_size"}
    with pytest.raises(ValueError, match=r"^config\['vocab_size'\]: missing from a mistral config.json"):
        from_hf_config(broken)
