"""book_lib.overheads and collectives.call_latency_s: the terms a roofline leaves out, counted by hand."""

from __future__ import annotations

import pytest

from book_lib import collectives, hardware, overheads
from book_lib.models import get_model
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
