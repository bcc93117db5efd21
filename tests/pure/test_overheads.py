"""book_lib.overheads and collectives.call_latency_s: the terms a roofline leaves out, counted by hand."""

from __future__ import annotations

import pytest

from book_lib import collectives, hardware, overheads
from book_lib.models import get_model
from book_lib.parallelism import Layout
from book_lib.transformer import TransformerConfig


def test_elementwise_bytes_of_a_tiny_layer_by_hand():
    tiny = TransformerConfig(n_layers=2, d_model=8, d_ff=16, n_heads=4, n_kv_heads=2, head_dim=2, vocab_size=10)
    # 2 norms x 2D + 2 residuals x 3D + RoPE 2 (N + K) H + gated activation 3F: 32 + 48 + 24 + 48 = 152 values
    assert overheads.elementwise_bytes_per_token(tiny, tensor=1) == 152 * 2
    assert overheads.elementwise_bytes_per_token(tiny, tensor=2, activation_dtype="fp32") == 152 * 4 / 2
    moe = TransformerConfig(
        n_layers=2, d_model=8, d_ff=16, n_heads=4, n_kv_heads=2, head_dim=2, vocab_size=10,
        n_experts=4, experts_per_token=2, moe_d_ff=4, n_shared_experts=1,
    )  # fmt: skip
    # three experts' activations of width 4 (2 routed + 1 shared), and 4 k D of routing copies
    assert overheads.elementwise_bytes_per_token(moe, tensor=1) == (32 + 48 + 24 + 3 * 12 + 4 * 2 * 8) * 2


def test_tile_padding_counts_only_dims_off_the_tile():
    v5p, v6e = hardware.get_chip("tpu-v5p"), hardware.get_chip("tpu-v6e")
    assert overheads.tile(v5p) == 128 and overheads.tile(v6e) == 256
    assert overheads.tile(hardware.get_chip("h100")) == overheads.GPU_MMA_TILE == 16
    llama70 = get_model("llama-3-70b")  # only the output layer pads: 32,064 columns a chip to 32,128
    assert overheads.tile_padding(llama70, v5p, tensor=4) == pytest.approx(
        8192 * 64 / (80 * (2 * 8192 * 2048 + 2 * 8192 * 256 + 3 * 8192 * 7168) + 8192 * 32064)
    )
    # a vocabulary of 128,256 over 8 chips: 16,032 columns, padded to 16,128 on a 128-wide MXU
    llama = get_model("llama-3-8b")
    pad = overheads.tile_padding(llama, v5p, tensor=8)
    extra = llama.d_model * (16128 - 16032)
    D, F, N, K, L = 4096, 14336 // 8, 32 * 128 // 8, 8 * 128 // 8, 32
    total = L * (D * N * 2 + D * 2 * K + 3 * D * F) + D * 128256 / 8
    assert pad == pytest.approx(extra / total)
    assert overheads.tile_padding(llama, hardware.get_chip("h100"), tensor=8) == 0


def test_call_latency_follows_nccl_on_gpus_and_hops_on_tpu_ici():
    # NCCL ring, low-latency protocol: 6.6 us + 2 (n - 1) x 0.6 us for an AllReduce over NVLink
    assert collectives.call_latency_s("all_reduce", 8, "h100") == pytest.approx(6.6e-6 + 14 * 0.6e-6)
    assert collectives.call_latency_s("all_gather", 8, "h100") == pytest.approx(6.6e-6 + 7 * 0.6e-6)
    assert collectives.call_latency_s("all_gather", 16, "h100", link="dcn") == pytest.approx(6.6e-6 + 15 * 2.7e-6)
    assert collectives.call_latency_s("all_reduce", 1, "h100") == 0
    assert collectives.call_latency_s("all_gather", 16, "tpu-v5e", hops=8) == pytest.approx(8e-6)
    with pytest.raises(ValueError, match=r"^hops=None: a TPU ICI call's latency needs its hops"):
        collectives.call_latency_s("all_gather", 16, "tpu-v5e")


def test_the_last_wave_of_gemm_tiles_costs_gpus_and_not_tpus():
    cfg = get_model("llama-3-8b")
    # on a TPU the MXU takes one matmul at a time: no waves
    assert overheads.wave_efficiency(cfg, hardware.get_chip("tpu-v5p"), tensor=1, tokens=4096) == 1
    # 132 SMs: a [4096, 4096] x [4096, 4096] GEMM is 16 x 32 = 512 tiles of 256 x 128, 3.9 waves in 4
    h100 = hardware.get_chip("h100")
    square = TransformerConfig(n_layers=1, d_model=4096, d_ff=4096, n_heads=32, n_kv_heads=32, head_dim=128,
                               vocab_size=4096, gated_mlp=False)  # fmt: skip
    assert overheads.wave_efficiency(square, h100, tensor=1, tokens=4096) == pytest.approx(512 / 132 / 4)
    assert overheads.wave_efficiency(cfg, h100, tensor=8, tokens=1024) < overheads.wave_efficiency(
        cfg, h100, tensor=1, tokens=1024
    )


def test_materialized_attention_pays_its_scores_through_hbm_and_a_flash_kernel_does_not():
    cfg = get_model("llama-3-8b")
    # 32 heads x 8192 keys x 2 bytes x (5 forward + 10 backward accesses)
    assert overheads.score_bytes_per_token(cfg, tensor=1, seq_len=8192) == 32 * 8192 * 2 * 15
    assert overheads.score_bytes_per_token(cfg, tensor=8, seq_len=8192, remat="full") == 4 * 8192 * 2 * 20
    from book_lib import training
    from book_lib.parallelism import Layout

    kw = {"batch_tokens": 2**20, "seq_len": 8192}
    flash = training.step_time(cfg, "a100", Layout(data=128), **kw)
    stored = training.step_time(cfg, "a100", Layout(data=128), attention_kernel="materialized", **kw)
    scores = next(t for t in stored.terms if t.name == "attention scores through HBM").seconds
    assert scores > 0 and stored.expected_s == pytest.approx(flash.expected_s + scores, rel=0.01)
    with pytest.raises(ValueError, match=r"^attention_kernel='paged': unknown"):
        training.step_time(cfg, "a100", Layout(data=128), attention_kernel="paged", **kw)


def test_collectives_run_at_the_rate_a_ring_reaches_on_the_links():
    from book_lib import step_collectives

    cost = step_collectives.CollectiveCost(name="x", op="all_gather", phase="forward", axes=("tensor",), link="ici",
                                           array_bytes=1e9, calls=1, seconds_per_call=1.0, bandwidth_s=1.0,
                                           latency_s=0.0, overlaps=False)  # fmt: skip
    assert overheads.achieved(cost, hardware.get_chip("a100")).bandwidth_s == pytest.approx(300 / 234.89)
    assert overheads.achieved(cost, hardware.get_chip("tpu-v5p")).bandwidth_s == 1.0


def test_each_term_is_one_function_written_beside_its_name_and_formula():
    from book_lib import training
    from book_lib.overheads import _TERMS, TERMS

    names = [name for name, _, _ in _TERMS]
    assert len(set(names)) == len(names) == len(TERMS) and [name for name, _ in TERMS] == names
    assert len({id(seconds) for _, _, seconds in _TERMS}) == len(_TERMS), "no function computes two terms"
    assert all(how for _, how, _ in _TERMS)
    step = training.step_time("llama-3-8b", "h100", Layout(fsdp=8, tensor=8), batch_tokens=2**20, seq_len=8192)
    assert [t.name for t in step.terms] == names
    assert step.expected_s == pytest.approx(sum(t.seconds for t in step.terms))


def test_matmuls_at_their_shapes_cost_time_only_where_a_sweep_was_measured():
    from book_lib import training
    from book_lib.overheads import shape_efficiency
    from book_lib.parallelism import Layout

    get_chip = hardware.get_chip

    cfg = get_model("llama-3-8b")
    ironwood = get_chip("tpu-7x")
    # tensor 16 cuts each [4096, 14336] matrix to [4096, 896]: 3 m n k / (m k + k n + m n) near 2 000
    assert (
        shape_efficiency(cfg, ironwood, tensor=16, tokens=8192)
        < 0.5
        < shape_efficiency(cfg, ironwood, tensor=1, tokens=8192)
    )
    assert shape_efficiency(cfg, get_chip("a100"), tensor=16, tokens=8192) == 1.0

    def term(chip, layout):
        step = training.step_time(cfg, chip, layout, batch_tokens=2**20, seq_len=8192)
        return dict((t.name, t.seconds) for t in step.terms)["matmuls at their own shapes' rate"]

    assert term(ironwood, Layout(fsdp=16, tensor=16)) > term(ironwood, Layout(fsdp=256)) > 0
    assert term(get_chip("a100"), Layout(fsdp=32, tensor=8)) == 0
    assert term(get_chip("h100"), Layout(fsdp=32, tensor=8)) > 0  # OpenXLA's sm_90 table


def test_the_loss_over_the_vocabulary_costs_its_fp32_passes_once_a_step():
    from book_lib import training

    llama = get_model("llama-3-8b")
    # Megatron-LM's cross-entropy, op by op: 38 bytes a logit forward, 14 backward
    assert overheads.loss_bytes_per_token(llama, tensor=1) == 52 * 128_256 == pytest.approx(6.67e6, rel=1e-3)
    assert overheads.loss_bytes_per_token(llama, tensor=8) == pytest.approx(52 * 128_256 / 8)
    with pytest.raises(ValueError, match=r"^tensor=0: "):
        overheads.loss_bytes_per_token(llama, tensor=0)
    h100 = hardware.get_chip("h100")
    hbm = h100.hbm_bytes_per_s * h100.efficiency.hbm
    for layout in (Layout(data=8), Layout(data=2, tensor=4)):
        step = training.step_time(llama, h100, layout, batch_tokens=2**20, seq_len=8192)
        loss = next(t for t in step.terms if t.name == "loss over the vocabulary (HBM)")
        # once per token of the chip's batch shard: no recomputation or microbatch repeats it
        assert loss.seconds == pytest.approx(52 * 128_256 / layout.tensor * step.tokens_per_chip / hbm)
    # and it grows with the vocabulary: GPT-3's 50,257 entries cost a 2.5th of LLaMA 3's
    gpt = get_model("gpt-3-175b")
    assert overheads.loss_bytes_per_token(gpt, tensor=1) < overheads.loss_bytes_per_token(llama, tensor=1) / 2.5
