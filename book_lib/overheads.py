"""What a roofline leaves out of a training step: the bytes, shapes and rates behind `training.StepTime.expected_s`.

The roofline of a step is its matmul FLOPs at the chip's peak, or its collectives' bandwidth time if
longer. A real step runs its matmuls and attention at the rates a chip achieves, not its peak, streams
every elementwise operation and its loss over the vocabulary through HBM, launches kernels that each
cost a fixed time, updates the optimizer state, pads its matmuls to the matrix unit's tile, loses
compute to the collectives that overlap it, and waits on those that cannot hide, or that its software
does not overlap. This module counts bytes, padded rows and kernels from
the model's shapes, takes the rates from the chip's `efficiency.Efficiency` (each measured and cited),
and `expected_terms` turns them and the step's collectives into named terms of seconds (`StepTerm`).
No factor is fitted to a published run.

Book: Part 1 (Rooflines: the memory-bound elementwise ops); Part 2 (the MXU's 128 x 128 tiles);
Part 5 ("What else is there?", optimizer and elementwise costs left out).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from book_lib import checks
from book_lib.hardware import Chip
from book_lib.parallelism import Layout
from book_lib.step_collectives import CollectiveCost
from book_lib.transformer import TransformerConfig

__all__ = [
    "ATTENTION_KERNELS",
    "REMAT_FORWARD_PASSES",
    "TERMS",
    "achieved",
    "GPU_GEMM_TILE",
    "GPU_MMA_TILE",
    "wave_efficiency",
    "shape_efficiency",
    "score_bytes_per_token",
    "kernels_per_layer",
    "StepTerm",
    "StepWork",
    "elementwise_bytes_per_token",
    "loss_bytes_per_token",
    "expected_terms",
    "tile",
    "tile_padding",
]

# The k and n of the smallest tensor-core instruction a bf16 matmul is built from on NVIDIA GPUs
# (mma.sync m16n8k16 on Ampere, wgmma k16 on Hopper; PTX ISA, "Matrix shapes"): dims pad to 16.
GPU_MMA_TILE = 16
# The output tile one SM computes in cuBLAS's most efficient large-GEMM kernels: "256x128" (NVIDIA, Matrix
# Multiplication Background User's Guide, "Typical Tile Dimensions In cuBLAS And Performance" and "Wave
# Quantization": the tiles run in waves of one per SM, and a last partial wave leaves SMs idle).
# https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/index.html
GPU_GEMM_TILE = (256, 128)
# The attention kernels a step may run: a flash-attention kernel keeps the scores on chip; "materialized"
# writes them to HBM (the softmax, its dropout and their backward passes read and write them), as
# Megatron-LM and its forks did before FlashAttention (2022).
ATTENTION_KERNELS = ("flash", "materialized")
# The recomputation policies a training step takes (`transformer.REMAT_POLICIES`, which say what a layer
# keeps) and the forward passes each runs again (the training FLOPs grow by that many thirds).
# "checkpoints": c D-wide arrays per layer, the text's outputs of the big matmuls, nothing recomputed that
# costs matmul FLOPs; "full": only each block's input, the whole forward run again; "none": everything.
REMAT_FORWARD_PASSES = {"checkpoints": 0, "full": 1, "none": 0}


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
        remat: the recomputation policy, a key of `REMAT_FORWARD_PASSES`.
        tokens: the tokens of one batch shard (count).
        layers: the layers of the busiest stage (count).
        update_bytes: HBM bytes of one parameter's optimizer update (bytes).
        activation_dtype: the dtype of the activations.
        weight_copies: copies of the weights one chip's share makes up (`Layout.weight_shards`, adjusted
            for uneven stages and expert parallelism) (ratio).
        update_shards: replicas that split the optimizer update (`Layout.zero`: the data degree) (count).
        attention_share: dot-product attention's share of the forward FLOPs at the step's sequence
            length, causal (ratio).
        microbatches: the microbatches each chip runs through its layers (count).
        param_bytes: the bytes of one parameter as the matmuls read it (bytes).
        microbatch_tokens: the tokens one chip's matmuls multiply at once (count).
        attention_peak_ratio: the matmul dtype's peak over bf16's: attention runs in bf16 (ratio).
        attention_kernel: one of `ATTENTION_KERNELS`.
        seq_len: keys each query attends to (count).
        matmul_dtype: the dtype the weight matmuls multiply in.
    """

    model_s: float
    t_math: float
    bubble: float
    remat: str
    tokens: float
    layers: int
    update_bytes: float
    activation_dtype: str
    weight_copies: float
    update_shards: int
    attention_share: float
    microbatches: int
    param_bytes: float
    microbatch_tokens: float
    attention_peak_ratio: float
    attention_kernel: str
    seq_len: int
    matmul_dtype: str


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


# Megatron-LM's vocab-parallel cross-entropy, as the GPT model calls it: `output.float()` then
# megatron/core/tensor_parallel/cross_entropy.py (NVIDIA/Megatron-LM 8e6e7cd, the same passes in today's).
_LOSS = "https://github.com/NVIDIA/Megatron-LM/blob/8e6e7cd73500331b5d5f739e2597d403d0c2eb1e/megatron/core/tensor_parallel/cross_entropy.py"


def loss_bytes_per_token(cfg: TransformerConfig, *, tensor: int) -> float:
    """HBM bytes one token's cross-entropy loss costs one chip over its V / t logits, both passes (bytes).

    Counted op by op from Megatron-LM's vocab-parallel cross-entropy (`_LOSS`), bytes per logit read
    and written, the logits in bf16 (2 bytes), the fp32 copy the loss is computed on (4):
        cast to fp32          2 + 4
        max                   4
        subtract the max      4 + 4
        exp                   4 + 4
        sum                   4
        divide by the sum     4 + 4   (the softmax, kept for the backward)
        times the gradient    4 + 4   (backward)
        cast back to bf16     4 + 2   (backward)
    52 V / t, t = `tensor` (the vocabulary is cut over the tensor-parallel chips). LLaMA 3's 128,256
    logits: 6.67 MB a token on one chip. As in `elementwise_bytes_per_token` no op is fused: Megatron-Core's
    opt-in fused cross-entropy (cross_entropy_loss_fusion, which NeMo's Llama 3 configs turn on) and XLA
    on a TPU make fewer passes, so there this is an upper count.
    Book: Part 4 ("the unembedding"); Part 1 (memory-bound work).

    Raises:
        ValueError: tensor not a count.
    """
    return 52 * cfg.vocab_size / checks.count("tensor", tensor)


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
    shapes = _weight_matmuls(cfg, t)
    padded = sum(math.ceil(p / side) * side * math.ceil(q / side) * side * n for p, q, n in shapes)
    return padded / sum(p * q * n for p, q, n in shapes) - 1


def _weight_matmuls(cfg: TransformerConfig, tensor: int) -> list[tuple[float, float, int]]:
    """Each weight matrix [P, Q] of the model as one chip holds it (the wide dim cut `tensor` ways), with
    how many times a token passes through it: (P, Q, count)."""
    D, N, H, t = cfg.d_model, cfg.n_heads, cfg.head_dim, tensor
    k = cfg.experts_per_token + cfg.n_shared_experts if cfg.is_moe else 1
    shapes = [(D, N * H / t, cfg.n_layers), (N * H / t, D, cfg.n_layers), (D, cfg.vocab_size / t, 1)]
    shapes += [(D, 2 * cfg.n_kv_heads * H / t, cfg.n_layers)] if not cfg.kv_lora_rank else []
    shapes += [(D, cfg.expert_d_ff / t, 2 * k * cfg.n_layers), (cfg.expert_d_ff / t, D, k * cfg.n_layers)]
    return shapes


def wave_efficiency(cfg: TransformerConfig, chip: Chip, *, tensor: int, tokens: float) -> float:
    """The share of a GPU's SMs its weight matmuls keep busy, last partial wave of tiles counted (ratio <= 1).

    A GEMM of an [M, K] by a [K, N] matrix is cut into ceil(M / 256) ceil(N / 128) output tiles
    (`GPU_GEMM_TILE`), run in waves of one tile per SM; w = tiles / SMs waves take ceil(w) wave times.
    Averaged over every weight matmul of a training step, the forward (M = tokens, N = Q), and the
    backward's input gradient (N = P) and weight gradient (M = P, N = Q), weighted by FLOPs:
    efficiency = sum(F w / ceil(w)) / sum(F). 1 on TPUs, whose MXUs take one matmul at a time.
    Book: Part 12 (GPUs: SMs and tiles).

    Raises:
        ValueError: tensor or tokens not positive.
    """
    t, m = checks.count("tensor", tensor), checks.positive("tokens", tokens)
    if chip.is_tpu:
        return 1.0
    rows, cols = GPU_GEMM_TILE
    used = total = 0.0
    for p, q, n in _weight_matmuls(cfg, t):
        for a, b in ((m, q), (m, p), (p, q)):
            waves = math.ceil(a / rows) * math.ceil(b / cols) / chip.cores_per_chip
            used += n * p * q * waves / math.ceil(waves)
            total += n * p * q
    return used / total


def shape_efficiency(cfg: TransformerConfig, chip: Chip, *, tensor: int, tokens: float) -> float:
    """The rate a step's weight matmuls reach at their own shapes, over the best shape's (ratio <= 1).

    Each weight matrix [P, Q] as one chip holds it (`tensor` cuts the wide dim) meets M = `tokens` rows
    in three GEMMs, the forward and the backward's two, all with the dims {M, P, Q}, so one factor
    f = `efficiency.Efficiency.shape_factor` of (M, P, Q) from the chip's measured sweep. Weighted by FLOPs,
    the step's matmuls take sum(F / f) / sum(F) times as long: efficiency = sum(F) / sum(F / f).
    1 where the chip has no published sweep (every GEMM at the best shape's rate).
    Book: Part 1 (arithmetic intensity); Part 10 (block shapes).

    Raises:
        ValueError: tensor or tokens not positive.
    """
    t, m = checks.count("tensor", tensor), checks.positive("tokens", tokens)
    shapes = _weight_matmuls(cfg, t)
    flops = sum(p * q * n for p, q, n in shapes)
    return flops / sum(p * q * n / chip.efficiency.shape_factor(m, p, q) for p, q, n in shapes)


def score_bytes_per_token(cfg: TransformerConfig, *, tensor: int, seq_len: int, remat: str = "checkpoints") -> float:
    """HBM bytes the attention scores of one token cost one chip per layer when they are materialized (bytes).

    Each of the token's N / t heads (t = `tensor`) holds S scores: the forward pass writes QK^T, the
    softmax reads it and writes P, the value product reads P (5 bf16 accesses), once more per
    recomputed pass (r = `REMAT_FORWARD_PASSES[remat]`), and the backward pass reads P and writes and
    reads its gradients (10):
    (N / t) S 2 (5 (1 + r) + 10). Zero in a flash-attention kernel, which keeps them on chip.
    Book: Part 4 ("attention"); Part 1 (memory-bound elementwise work).
    """
    heads = cfg.n_heads / checks.count("tensor", tensor)
    passes = REMAT_FORWARD_PASSES[checks.one_of("remat", remat, REMAT_FORWARD_PASSES)]
    return heads * checks.count("seq_len", seq_len) * 2 * (5 * (1 + passes) + 10)


def achieved(collective: CollectiveCost, chip: Chip) -> CollectiveCost:
    """`collective` with its bandwidth time at the rate a ring collective achieves on `chip`'s links (s):
    bandwidth_s / `efficiency.Efficiency.ici` (or `.dcn` across hosts); its roofline time is unchanged."""
    rate = chip.efficiency.dcn if collective.link == "dcn" else chip.efficiency.ici
    return dataclasses.replace(collective, bandwidth_s=collective.bandwidth_s / rate)


def kernels_per_layer(cfg: TransformerConfig) -> int:
    """Kernels one forward pass of one layer launches on a GPU, where nothing fuses across ops (count).

        norms              n_norm
        residual adds      2
        RoPE               1
        projections        2: fused QKV and the output projection;
                           MLA: 5 (down, up and rope projections too)
        attention          1 (a flash-attention kernel)
        MLP                2 matmuls (the gated pair fused) + 1 activation
        MoE                + router, dispatch, combine: 3
    A backward pass launches about twice as many. LLaMA 3: 2 + 2 + 1 + 2 + 1 + 3 = 11.
    Book: Part 12 (GPUs: kernels and launches).
    """
    projections = 5 if cfg.kv_lora_rank else 2
    return cfg.norms_per_layer + 2 + 1 + projections + 1 + 3 + (3 if cfg.is_moe else 0)


@dataclass(frozen=True, slots=True)
class _Step:
    """What every term of a step reads: the model, chip, layout, `StepWork`, the collectives at their links'
    achieved rate, and the compute at the chip's achieved rates (`_compute_s`), built once per step."""

    cfg: TransformerConfig
    chip: Chip
    layout: Layout
    work: StepWork
    comms: tuple[CollectiveCost, ...]
    compute: dict[str, float]

    @property
    def r(self) -> int:
        """Forward passes run again (`REMAT_FORWARD_PASSES` of the step's policy)."""
        return REMAT_FORWARD_PASSES[self.work.remat]

    @property
    def hbm(self) -> float:
        """The chip's achieved HBM bandwidth (bytes/s)."""
        return self.chip.hbm_bytes_per_s * self.chip.efficiency.hbm

    @property
    def waved_s(self) -> float:
        """Weight matmuls with their last waves' idle SMs (s)."""
        return self.compute["matmuls"] / self.compute["waves"]

    @property
    def compute_s(self) -> float:
        """Weight matmuls at their shapes' rate, attention and its scores: what collectives can hide under (s)."""
        return self.waved_s / self.compute["shapes"] + self.compute["attention"] + self.compute["scores"]

    def hidden_s(self, phase: str) -> float:
        """The overlappable collectives of one pass ("forward" or "backward") (s)."""
        return sum(c.expected_s for c in self.comms if c.overlaps and c.phase == phase)

    def share(self, phase: str) -> float:
        """A pass's share of the compute: 1 / (3 + r) forward, (2 + r) / (3 + r) backward."""
        return (1 if phase == "forward" else 2 + self.r) / (3 + self.r)


# Each term of `expected_terms`, in order: its name, how it is computed ({rates} filled in per step), and
# the function that computes it from a `_Step`, written side by side by `_term`.
_TERMS: list[tuple[str, str, Callable[[_Step], float]]] = []


def _term(name: str, how: str) -> Callable[[Callable[[_Step], float]], Callable[[_Step], float]]:
    """Register the decorated function as the term `name`, computed as `how` says."""

    def register(seconds: Callable[[_Step], float]) -> Callable[[_Step], float]:
        _TERMS.append((name, how, seconds))
        return seconds

    return register


@_term("matmul FLOPs at peak", "model FLOPs per chip / C (the roofline's math)")
def _math_at_peak(s: _Step) -> float:
    return s.work.model_s


@_term("uneven pipeline stages", "the busiest stage's ceil(L / S) layers over L / S")
def _uneven_stages(s: _Step) -> float:
    return s.work.t_math * 3 / (3 + s.r) - s.work.model_s


@_term("recomputation", "forward passes run again: r / 3 of the step's FLOPs (remat)")
def _recomputation(s: _Step) -> float:
    return s.work.t_math * s.r / (3 + s.r)


@_term(
    "matmuls at the achieved rate",
    "max((1 - a) t_math / {matmul:.0%}, weight bytes (3 + r) M / achieved HBM rate) - (1 - a) t_math: "
    "a = attention's share of the FLOPs, M microbatches",
)
def _achieved_matmuls(s: _Step) -> float:
    return s.compute["matmuls"] - (1 - s.work.attention_share) * s.work.t_math


@_term("partial last waves of GEMM tiles", "matmuls / {waves:.0%} - matmuls: the SMs tiles keep busy (wave_efficiency)")
def _partial_waves(s: _Step) -> float:
    return s.waved_s - s.compute["matmuls"]


@_term(
    "matmuls at their own shapes' rate",
    "matmuls / {shapes:.0%} - matmuls, after the waves: the chip's measured sweep at each GEMM's shape "
    "(shape_efficiency)",
)
def _own_shapes(s: _Step) -> float:
    return s.waved_s / s.compute["shapes"] - s.waved_s


@_term(
    "attention at flash-attention rates",
    "a t_math ((1 + r) / {forward:.0%} + 2 / {backward:.0%}) / (3 + r) - a t_math, at the bf16 peak",
)
def _flash_attention(s: _Step) -> float:
    return s.compute["attention"] - s.work.attention_share * s.work.t_math


@_term(
    "attention scores through HBM",
    "materialized attention only: score_bytes_per_token x tokens x layers / achieved HBM rate",
)
def _scores(s: _Step) -> float:
    return s.compute["scores"]


@_term("matmul tile padding", "weight dims padded to the MXU or tensor-core tile (tile_padding)")
def _padding(s: _Step) -> float:
    return s.work.t_math * tile_padding(s.cfg, s.chip, tensor=s.layout.tensor)


@_term(
    "elementwise ops, norms, RoPE (HBM)", "(3 + r) x elementwise_bytes_per_token x tokens x layers / achieved HBM rate"
)
def _elementwise(s: _Step) -> float:
    per_token = elementwise_bytes_per_token(s.cfg, tensor=s.layout.tensor, activation_dtype=s.work.activation_dtype)
    return (3 + s.r) * per_token * s.work.tokens * s.work.layers / s.hbm


@_term("loss over the vocabulary (HBM)", "loss_bytes_per_token x tokens / achieved HBM rate, once a step")
def _loss(s: _Step) -> float:
    return loss_bytes_per_token(s.cfg, tensor=s.layout.tensor) * s.work.tokens / s.hbm


@_term("kernel fixed cost", "kernels_per_layer x (3 + r) x layers x microbatches x efficiency.kernel_s")
def _kernels(s: _Step) -> float:
    passes = kernels_per_layer(s.cfg) * (3 + s.r) * s.work.layers * s.work.microbatches
    return passes * s.chip.efficiency.kernel_s


@_term(
    "optimizer update (HBM)",
    "each chip's parameters / ZeRO shards x training.optimizer_update_bytes_per_param / achieved HBM rate",
)
def _optimizer_update(s: _Step) -> float:
    held = s.cfg.param_count() / (s.work.weight_copies * s.work.update_shards)
    return held * s.work.update_bytes / s.hbm


@_term(
    "tensor/expert-parallel collectives",
    "bandwidth time of the collectives the next matmul waits on, at the links' achieved rate",
)
def _blocking(s: _Step) -> float:
    return sum(c.calls * c.bandwidth_s for c in s.comms if not c.overlaps and not c.after_backward)


@_term(
    "collective latency",
    "per call of those, collectives.call_latency_s (NCCL's ring model on GPUs, hops x 1 us on ICI)",
)
def _latency(s: _Step) -> float:
    return sum(c.calls * c.latency_s for c in s.comms if not c.overlaps and not c.after_backward)


@_term(
    "compute slowed by overlapped collectives",
    "{slowdown:.1%} of the overlapped collectives' time, at most the compute they overlap",
)
def _slowdown(s: _Step) -> float:
    phases = ("forward", "backward")
    return sum(s.chip.efficiency.overlap_slowdown * min(s.hidden_s(p), s.compute_s * s.share(p)) for p in phases)


@_term(
    "communication beyond the compute it overlaps",
    "per pass, overlappable collectives minus that pass's compute, when more",
)
def _exposed(s: _Step) -> float:
    return sum(max(0.0, s.hidden_s(p) - s.compute_s * s.share(p)) for p in ("forward", "backward"))


@_term(
    "first gather and last reduction", "one call of each per-layer overlappable collective: nothing to hide it under"
)
def _edges(s: _Step) -> float:
    return sum(c.expected_s / c.calls for c in s.comms if c.overlaps and c.op != "permute" and c.calls > 1)


@_term(
    "gradient reduction after the backward pass",
    "the data-parallel reductions the step waits for after its last backward (overlap_grad_reduce=False)",
)
def _after_backward(s: _Step) -> float:
    return sum(c.expected_s for c in s.comms if c.after_backward)


@_term("pipeline fill and drain sends", "(S - 1) sends each way before the first and after the last microbatch")
def _fill_and_drain(s: _Step) -> float:
    return sum((s.layout.pipeline - 1) * (c.bandwidth_s + c.latency_s) for c in s.comms if c.op == "permute")


@_term(
    "pipeline bubble",
    "(S - 1) / (v M) x the stage's compute, elementwise, kernels, padding, blocking collectives",
)
def _bubble(s: _Step) -> float:
    critical = (_elementwise, _kernels, _padding, _blocking, _latency, _slowdown)
    return s.work.bubble * (s.compute_s + sum(term(s) for term in critical))


TERMS = tuple((name, how) for name, how, _ in _TERMS)


def _compute_s(cfg: TransformerConfig, chip: Chip, layout: Layout, work: StepWork) -> dict[str, float]:
    """The step's compute at the chip's achieved rates (s): "matmuls" (weight matmuls, or their weight reads
    if slower), "waves" (`wave_efficiency`), "shapes" (`shape_efficiency`), "attention" (flash-attention
    kernels at the bf16 peak's achieved fraction) and "scores" (HBM traffic of materialized attention
    scores); see `expected_terms`."""
    eff, hbm, a = chip.efficiency, chip.hbm_bytes_per_s * chip.efficiency.hbm, work.attention_share
    r = REMAT_FORWARD_PASSES[work.remat]
    weight_bytes = cfg.param_count() / work.weight_copies * work.param_bytes * (3 + r) * work.microbatches
    attention_at_peak = a * work.t_math * work.attention_peak_ratio
    scores_s = 0.0
    if checks.one_of("attention_kernel", work.attention_kernel, ATTENTION_KERNELS) == "materialized":
        scores = score_bytes_per_token(cfg, tensor=layout.tensor, seq_len=work.seq_len, remat=work.remat)
        scores_s = scores * work.tokens * work.layers / hbm
    return {
        "matmuls": max((1 - a) * work.t_math / eff.matmul_for(work.matmul_dtype), weight_bytes / hbm),
        "waves": wave_efficiency(cfg, chip, tensor=layout.tensor, tokens=work.microbatch_tokens),
        "shapes": shape_efficiency(cfg, chip, tensor=layout.tensor, tokens=work.microbatch_tokens),
        "attention": attention_at_peak * ((1 + r) / eff.attention_forward + 2 / eff.attention_backward) / (3 + r),
        "scores": scores_s,
    }


def expected_terms(
    cfg: TransformerConfig, chip: Chip, layout: Layout, work: StepWork, comms: Sequence[CollectiveCost]
) -> tuple[StepTerm, ...]:
    """The named parts of a step's expected time (`training.StepTime.expected_s`), in seconds.

    The math at peak (the roofline's), then each thing the roofline leaves out, with no factor fitted
    to a run: each term is one function above, registered with its name and its formula (`TERMS`). The
    rates are the chip's `efficiency.Efficiency` (achieved matmul, flash-attention, HBM and link rates,
    the fixed cost of a kernel, the slowdown of compute under overlapped collectives), the bytes and
    shapes this module counts (`elementwise_bytes_per_token`, `score_bytes_per_token`, `wave_efficiency`,
    `shape_efficiency`, `tile_padding`, `kernels_per_layer`), and the step's collectives at their links'
    achieved rate (`achieved`).
    Book: Part 5 ("What else is there?"); Part 1 (memory-bound elementwise work); Part 12 (GPUs).
    """
    step = _Step(cfg, chip, layout, work, tuple(achieved(c, chip) for c in comms), _compute_s(cfg, chip, layout, work))
    eff = chip.efficiency
    rates = {"matmul": eff.matmul_for(work.matmul_dtype), "waves": step.compute["waves"],
             "shapes": step.compute["shapes"], "forward": eff.attention_forward,
             "backward": eff.attention_backward, "slowdown": eff.overlap_slowdown}  # fmt: skip
    return tuple(StepTerm(name=name, seconds=seconds(step), how=how.format(**rates)) for name, how, seconds in _TERMS)
