"""What a roofline leaves out of a training step: the bytes and shapes behind `training.StepTime.expected_s`.

The roofline of a step is its matmul FLOPs at the chip's peak, or its collectives' bandwidth time if
longer. A real step also streams every elementwise operation through HBM, updates the optimizer
state, pads its matmuls to the matrix unit's tile, and waits on the collectives that cannot hide under
compute. This module counts the first three from the model's shapes and the chip's table, each as a
plain number; `training` turns them into named terms of seconds. No fitted factor: each count is a
number of bytes or of padded rows a program must move or compute.

Book: Part 1 (Rooflines: the memory-bound elementwise ops); Part 2 (the MXU's 128 x 128 tiles);
Part 5 ("What else is there?", optimizer and elementwise costs left out).
"""

from __future__ import annotations

import math

from book_lib import checks
from book_lib.hardware import Chip
from book_lib.transformer import TransformerConfig

__all__ = ["GPU_MMA_TILE", "elementwise_bytes_per_token", "optimizer_bytes_per_param", "tile", "tile_padding"]

# The k and n of the smallest tensor-core instruction a bf16 matmul is built from on NVIDIA GPUs
# (mma.sync m16n8k16 on Ampere, wgmma k16 on Hopper; PTX ISA, "Matrix shapes"): dims pad to 16.
GPU_MMA_TILE = 16


def elementwise_bytes_per_token(cfg: TransformerConfig, *, tensor: int, activation_dtype: str = "bf16") -> float:
    """HBM bytes one token's forward pass through ONE layer spends on elementwise work, per chip (bytes).

    Each op reads its inputs and writes its output once (no fusion across ops, none inside a matmul):
        norms        n_norm x (read D + write D)
        residuals    2 x (read 2 D + write D)
        RoPE         read + write of the rotated query and key dims: 2 (N + K) H, MLA: 2 (N + 1) R
        activation   k' x (read 2 F + write F) gated, (read F + write F) plain; k' = 1 dense, k + shared MoE
        routing      MoE only: k copies of D out to the experts and back, each read and written: 4 k D
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


def optimizer_bytes_per_param(
    *, moments: int, param_dtype: str = "bf16", optimizer_dtype: str = "fp32", master_dtype: str | None = None
) -> float:
    """HBM bytes one parameter's update moves (bytes): read the weight, its gradient, each moment and the
    master copy; write the weight, the moments and the master copy.

    = 3 p + 2 K p_o + 2 p_m (p of param_dtype, which the gradient shares; K moments of optimizer_dtype;
    p_m of master_dtype, 0 without one). Adam, bf16 weights, fp32 moments: 6 + 16 = 22 bytes.
    Book: Part 5, Appendix A (optimizer state); Part 1 (an elementwise update is memory-bound).

    Raises:
        ValueError: a negative moment count, an unknown dtype.
    """
    k = checks.count("moments", moments, minimum=0)
    p = checks.dtype_bytes(param_dtype, "param_dtype")
    master = 0.0 if master_dtype is None else checks.dtype_bytes(master_dtype, "master_dtype")
    return 3 * p + 2 * k * checks.dtype_bytes(optimizer_dtype, "optimizer_dtype") + 2 * master


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
