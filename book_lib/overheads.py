"""What a roofline leaves out of a training step: the bytes and shapes behind `training.StepTime.expected_s`.

The roofline of a step is its matmul FLOPs at the chip's peak, or its collectives' bandwidth time if
longer. A real step also streams every elementwise operation through HBM, updates the optimizer
state, pads its matmuls to the matrix unit's tile, and waits on the collectives that cannot hide under
compute. This module counts the first three from the model's shapes and the chip's table, each as a
plain number, and `expected_terms` turns them and the step's collectives into named terms of seconds
(`StepTerm`). No fitted factor: each count is a number of bytes, padded rows or calls a program must
move, compute or make.

Book: Part 1 (Rooflines: the memory-bound elementwise ops); Part 2 (the MXU's 128 x 128 tiles);
Part 5 ("What else is there?", optimizer and elementwise costs left out).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from book_lib import checks
from book_lib.hardware import Chip
from book_lib.parallelism import Layout
from book_lib.step_collectives import CollectiveCost
from book_lib.transformer import TransformerConfig

__all__ = [
    "GPU_MMA_TILE",
    "StepTerm",
    "StepWork",
    "elementwise_bytes_per_token",
    "expected_terms",
    "tile",
    "tile_padding",
]

# The k and n of the smallest tensor-core instruction a bf16 matmul is built from on NVIDIA GPUs
# (mma.sync m16n8k16 on Ampere, wgmma k16 on Hopper; PTX ISA, "Matrix shapes"): dims pad to 16.
GPU_MMA_TILE = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTerm:
    """One named part of a step's expected time (s).

    Attributes:
        name: what it is ("matmul FLOPs at peak", "pipeline bubble", ...).
        seconds: its time on the busiest chip (s).
        how: how it is computed, in a phrase with its formula.
    """

    name: str
    seconds: float
    how: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StepWork:
    """What `expected_terms` needs of a training step besides its model, chip, layout and collectives.

    Attributes:
        model_s: the model FLOPs per chip at peak (s).
        t_math: every FLOP of the busiest chip at peak, recomputation included (s).
        bubble: the pipeline bubble fraction (S - 1) / (v M) (ratio).
        remat: forward passes run again (count).
        tokens: the tokens of one batch shard (count).
        layers: the layers of the busiest stage (count).
        update_bytes: HBM bytes of one parameter's optimizer update (bytes).
        activation_dtype: the dtype of the activations.
        weight_copies: copies of the weights one chip's share makes up (`Layout.weight_shards`, adjusted
            for uneven stages and expert parallelism) (ratio).
    """

    model_s: float
    t_math: float
    bubble: float
    remat: int
    tokens: float
    layers: int
    update_bytes: float
    activation_dtype: str
    weight_copies: float


def elementwise_bytes_per_token(cfg: TransformerConfig, *, tensor: int, activation_dtype: str = "bf16") -> float:
    """HBM bytes one token's forward pass through ONE layer spends on elementwise work, per chip (bytes).

    Each op reads its inputs and writes its output once (no fusion across ops, none inside a matmul):
        norms        n_norm x (read D + write D)
        residuals    2 x (read 2 D + write D)
        RoPE         read + write of the rotated query and key dims:
                     2 (N + K) H, MLA: 2 (N + 1) R
        activation   k' x (read 2 F + write F) gated, (read F + write F) plain;
                     k' = 1 dense, k + shared MoE
        routing      MoE only: k copies of D out to the experts and back,
                     each read and written: 4 k D
    times p, the bytes of activation_dtype, divided by `tensor` (every width is sharded: D-wide arrays
    by sequence parallelism, F and the heads by tensor parallelism). The softmax and the attention
    scores stay on chip in a flash-attention kernel and cost no HBM bytes here. A backward pass moves
    about twice these bytes (it reads the output gradient and the saved input, writes the input
    gradient), so a training token moves about 3x (`training` counts it so).
    Book: Part 1 ("Rooflines"), elementwise ops are memory-bound; Part 4, "Other operations".

    Raises:
        ValueError: tensor not a count, an unknown dtype.
    """
    t, p = checks.count("tensor", tensor), checks.dtype_bytes(activation_dtype, "activation_dtype")
    D, k = cfg.d_model, (cfg.experts_per_token + cfg.n_shared_experts if cfg.is_moe else 1)
    rotated = (
        2 * (cfg.n_heads + 1) * cfg.rope_head_dim
        if cfg.kv_lora_rank
        else 2 * (cfg.n_heads + cfg.n_kv_heads) * cfg.head_dim
    )
    activation = k * (3 if cfg.gated_mlp else 2) * cfg.expert_d_ff
    routing = 4 * cfg.experts_per_token * D if cfg.is_moe else 0
    values = cfg.norms_per_layer * 2 * D + 2 * 3 * D + rotated + activation + routing
    return values * p / t


def tile(chip: Chip) -> int:
    """The side a matmul's dimensions are padded to on `chip` (count): the MXU's (128 or 256) on a TPU,
    `GPU_MMA_TILE` on a GPU. Book: Part 2, "The MXU"; Part 12 (GPUs), tensor cores."""
    return chip.mxu_size or GPU_MMA_TILE


def tile_padding(cfg: TransformerConfig, chip: Chip, *, tensor: int) -> float:
    """Extra matmul work from padding each weight matmul's two weight dims to the chip's `tile` (ratio >= 0).

    For every weight matrix [P, Q] of a layer (and the output layer), as one chip holds it under
    `tensor`-way tensor parallelism (the wide dim divided), the padded work is ceil(P / t) t ceil(Q / t) t;
    the result is sum(padded) / sum(P Q) - 1, weighted by how many tokens pass through each matrix
    (k of E experts). LLaMA 3 70B on a v5p at tensor 4: every layer's dims are multiples of 128, only the
    output layer's 32,064 columns a chip pad to 32,128 (3e-5 of the work); over 8 chips, 16,032 pad to 16,128.
    Book: Part 2 ("The MXU": 128 x 128 tiles); Part 10 (block shapes).

    Raises:
        ValueError: tensor not a count.
    """
    t, side = checks.count("tensor", tensor), tile(chip)
    D, N, H = cfg.d_model, cfg.n_heads, cfg.head_dim
    k = cfg.experts_per_token + cfg.n_shared_experts if cfg.is_moe else 1
    shapes = [(D, N * H / t, cfg.n_layers), (N * H / t, D, cfg.n_layers), (D, cfg.vocab_size / t, 1)]
    shapes += [(D, 2 * cfg.n_kv_heads * H / t, cfg.n_layers)] if not cfg.kv_lora_rank else []
    shapes += [(D, cfg.expert_d_ff / t, 2 * k * cfg.n_layers), (cfg.expert_d_ff / t, D, k * cfg.n_layers)]
    padded = sum(math.ceil(p / side) * side * math.ceil(q / side) * side * n for p, q, n in shapes)
    return padded / sum(p * q * n for p, q, n in shapes) - 1


def expected_terms(
    cfg: TransformerConfig, chip: Chip, layout: Layout, work: StepWork, comms: Sequence[CollectiveCost]
) -> tuple[StepTerm, ...]:
    """The named parts of a step's expected time (`training.StepTime.expected_s`), in seconds.

    The math at peak (the roofline's), then each thing the roofline leaves out, computed with no fitted
    factor: the busiest pipeline stage's extra layers; recomputed forward passes; matmul tile padding
    (`tile_padding`); elementwise bytes, (3 + r) `elementwise_bytes_per_token` x tokens x layers / HBM
    bandwidth; the optimizer update, each chip's parameters x `training.optimizer_update_bytes_per_param` / HBM
    bandwidth;
    the bandwidth time and the fixed cost per call of the collectives the next matmul waits on (tensor and
    expert parallelism); per pass, the overlappable collectives beyond that pass's math; one call of each
    per-layer overlappable collective (the first gather, the last reduction); (S - 1) pipeline sends each
    way; and the bubble, (S - 1) / (v M) of the stage's critical path.
    Book: Part 5 ("What else is there?"); Part 1 (memory-bound elementwise work).
    """
    lay, hbm = layout, chip.hbm_bytes_per_s
    even_s = work.model_s
    busiest_s = work.t_math * 3 / (3 + work.remat)
    elementwise = elementwise_bytes_per_token(cfg, tensor=lay.tensor, activation_dtype=work.activation_dtype)
    elementwise_s = (3 + work.remat) * elementwise * work.tokens * work.layers / hbm
    padding_s = work.t_math * tile_padding(cfg, chip, tensor=lay.tensor)
    update_s = cfg.param_count() / work.weight_copies * work.update_bytes / hbm
    blocking = [c for c in comms if not c.overlaps]
    blocking_s = sum(c.calls * c.bandwidth_s for c in blocking)
    latency_s = sum(c.calls * c.latency_s for c in blocking)
    edges_s = sum(c.expected_s / c.calls for c in comms if c.overlaps and c.op != "permute" and c.calls > 1)
    sends = [c for c in comms if c.op == "permute"]
    fill_s = sum((lay.pipeline - 1) * (c.bandwidth_s + c.latency_s) for c in sends)
    excess_s = 0.0
    for phase, share in (("forward", 1 / (3 + work.remat)), ("backward", (2 + work.remat) / (3 + work.remat))):
        hidden = sum(c.expected_s for c in comms if c.overlaps and c.phase == phase)
        excess_s += max(0.0, hidden - work.t_math * share)
    critical_s = work.t_math + elementwise_s + padding_s + blocking_s + latency_s
    return (
        StepTerm(name="matmul FLOPs at peak", seconds=even_s, how="model FLOPs per chip / C (the roofline's math)"),
        StepTerm(name="uneven pipeline stages", seconds=busiest_s - even_s,
                 how="the busiest stage's ceil(L / S) layers over L / S"),
        StepTerm(name="recomputation", seconds=work.t_math - busiest_s,
                 how="forward passes run again: r / 3 of the step's FLOPs (remat)"),
        StepTerm(name="matmul tile padding", seconds=padding_s,
                 how="weight dims padded to the MXU or tensor-core tile (overheads.tile_padding)"),
        StepTerm(name="elementwise ops, norms, RoPE (HBM)", seconds=elementwise_s,
                 how="(3 + r) x overheads.elementwise_bytes_per_token x tokens x layers / HBM bandwidth"),
        StepTerm(name="optimizer update (HBM)", seconds=update_s,
                 how="each chip's parameters x training.optimizer_update_bytes_per_param / HBM bandwidth"),
        StepTerm(name="tensor/expert-parallel collectives", seconds=blocking_s,
                 how="bandwidth time of the collectives the next matmul waits on"),
        StepTerm(name="collective latency", seconds=latency_s,
                 how="per call of those, collectives.call_latency_s (NCCL's ring model on GPUs, hops x 1 us on ICI)"),
        StepTerm(name="communication beyond the compute it overlaps", seconds=excess_s,
                 how="per pass, overlappable collectives minus that pass's math, when more"),
        StepTerm(name="first gather and last reduction", seconds=edges_s,
                 how="one call of each per-layer overlappable collective: nothing to hide it under"),
        StepTerm(name="pipeline fill and drain sends", seconds=fill_s,
                 how="(S - 1) sends each way before the first and after the last microbatch"),
        StepTerm(name="pipeline bubble", seconds=work.bubble * critical_s,
                 how="(S - 1) / (v M) x the stage's math, elementwise, padding and blocking collectives"),
    )  # fmt: skip
