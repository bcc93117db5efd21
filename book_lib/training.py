"""Training cost model on a `parallelism.Layout`: one step's time and memory, and the optimizer's state.

A training step of a Transformer on N = data * fsdp * tensor * pipeline * context * expert chips,
placed on the hardware by `parallelism.place` (pods over DCN, each degree on its own ICI axes, rings
from `topology.ring_flags`). `step_time` counts the real layer (attention and a gated MLP, every
weight), each collective of `step_collectives` timed on the placement's physical axes, forward and
backward, and the pipeline bubble (stages - 1) / microbatches; its `roofline_s` is the book's bound
and its `expected_s` adds the terms of `overheads`. The text's closed-form bounds are in `bounds`;
the planner that tries every sensible layout is `planner`; a whole run's days and cost are `runs`.

Book: Part 5 (How to Parallelize a Transformer for Training); Part 6 (Training LLaMA 3 on TPUs).
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass

from book_lib import bounds, checks, overheads
from book_lib.breakdowns import MemoryBytes
from book_lib.efficiency import Calibration
from book_lib.hardware import Chip, with_calibration
from book_lib.models import get_model
from book_lib.overheads import REMAT_FORWARD_PASSES
from book_lib.parallelism import Layout, Placement, StepDtypes, place
from book_lib.step_collectives import CollectiveCost, StepShape, stage_layers, step_collectives, step_shape
from book_lib.transformer import TransformerConfig

__all__ = [
    "OPTIMIZERS",
    "REMAT_FORWARD_PASSES",
    "StepTime",
    "MemoryPerChip",
    "optimizer_state_bytes_per_param",
    "optimizer_update_bytes_per_param",
    "zero_memory_per_chip",
    "zero_divisors",
    "step_time",
    "memory_per_chip",
]

# Optimizer state per parameter, in numbers of optimizer_dtype values (Adam: two moments).
OPTIMIZERS = {"adam": 2, "momentum": 1, "sgd": 0}


def optimizer_state_bytes_per_param(
    *, optimizer: str = "adam", optimizer_dtype: str = "fp32", master_dtype: str | None = None
) -> float:
    """Bytes of optimizer state one parameter keeps (bytes): K p_o + p_m.

    K = OPTIMIZERS[optimizer] moments of optimizer_dtype (p_o bytes each), plus a master copy of the
    weight in master_dtype (p_m; 0 when None). Adam in fp32: 8; with an fp32 master copy: 12, the
    ZeRO paper's K. Book: Part 5, Appendix A (optimizer state).

    Raises:
        ValueError: an unknown optimizer or dtype.
    """
    moments = OPTIMIZERS[checks.one_of("optimizer", optimizer, OPTIMIZERS)]
    master = 0.0 if master_dtype is None else checks.dtype_bytes(master_dtype, "master_dtype")
    return moments * checks.dtype_bytes(optimizer_dtype, "optimizer_dtype") + master


def optimizer_update_bytes_per_param(
    *,
    optimizer: str = "adam",
    param_dtype: str = "bf16",
    optimizer_dtype: str = "fp32",
    master_dtype: str | None = None,
) -> float:
    """HBM bytes one parameter's optimizer update moves (bytes): 3 p + 2 s.

    It reads the weight and its gradient (p bytes each, the gradient in param_dtype too) and writes the
    weight (p), and reads and writes its optimizer state (s = `optimizer_state_bytes_per_param`).
    Adam, bf16 weights, fp32 moments: 6 + 16 = 22 bytes.
    Book: Part 5, Appendix A (optimizer state); Part 1 (an elementwise update is memory-bound).

    Raises:
        ValueError: an unknown optimizer or dtype.
    """
    state = optimizer_state_bytes_per_param(
        optimizer=optimizer, optimizer_dtype=optimizer_dtype, master_dtype=master_dtype
    )
    return 3 * checks.dtype_bytes(param_dtype, "param_dtype") + 2 * state


def zero_memory_per_chip(
    *,
    param_count: float,
    n_data: int,
    stage: int,
    param_dtype: str = "bf16",
    grad_dtype: str | None = "bf16",
    optimizer: str = "adam",
    optimizer_dtype: str = "fp32",
    master_dtype: str | None = "fp32",
) -> MemoryPerChip:
    """Parameters, gradients and optimizer state on one of n_data data-parallel chips under ZeRO (bytes).

    Per parameter: p = bytes of param_dtype, g = of grad_dtype, K = OPTIMIZERS[optimizer] values of
    optimizer_dtype plus a master copy in master_dtype (None: no such copy). stage 0 (plain DP) keeps
    all three whole; ZeRO-1 divides the optimizer state by n_data, ZeRO-2 the gradients too, ZeRO-3
    (FSDP) the parameters too. The defaults are mixed-precision Adam as the ZeRO paper counts it
    (K = 12: fp32 master weights and two moments): 7.5B parameters on 64 chips need 120 GB, 31.4 GB,
    16.6 GB and 1.9 GB. Activations are left out (0), and no chip is set.
    Book: Part 5, Appendix A (the ZeRO figure); "Fully-Sharded Data Parallelism".

    Raises:
        ValueError: a negative size, n_data not a count, stage not 0 to 3, unknown optimizer or dtype.
    """
    params = checks.non_negative("param_count", param_count)
    divisors = zero_divisors(stage=stage, n_data=n_data)
    state = optimizer_state_bytes_per_param(
        optimizer=optimizer, optimizer_dtype=optimizer_dtype, master_dtype=master_dtype
    )
    sizes = [
        params * checks.dtype_bytes(param_dtype, "param_dtype"),
        params * (0.0 if grad_dtype is None else checks.dtype_bytes(grad_dtype, "grad_dtype")),
        params * state,
    ]
    p, g, o = (size / d for size, d in zip(sizes, divisors, strict=True))
    return MemoryPerChip(params_bytes=p, grads_bytes=g, optimizer_bytes=o, activations_bytes=0.0, hbm_bytes=None)


def _check_step(cfg: TransformerConfig, layout: Layout, batch_tokens: int, seq_len: int) -> None:
    """Whole sequences, at least one token per batch shard and microbatch, stages dividing the layers,
    tensor parallelism the MLP width and the heads, context the sequence. Tokens need not split evenly:
    like the text (8960 chips, 4M tokens: 468 per chip), a shard's tokens are a real number and
    sequences may be cut."""
    b, t = checks.count("batch_tokens", batch_tokens), checks.count("seq_len", seq_len)
    if b < t or b % t:
        raise ValueError(f"batch_tokens={b!r}: not a whole number of sequences of {t}; allowed: a multiple of {t}")
    shards = layout.batch_shards * layout.microbatches
    if b < shards:
        raise ValueError(
            f"batch_tokens={b!r}: fewer tokens than {layout.batch_shards} batch shards x {layout.microbatches} "
            f"microbatches; allowed: at least {shards}"
        )
    if layout.pipeline > cfg.n_layers:
        raise ValueError(
            f"layout.pipeline={layout.pipeline!r}: more stages than the {cfg.n_layers} layers; "
            f"allowed: 1 to {cfg.n_layers}"
        )
    if cfg.d_ff % layout.tensor or cfg.n_heads % layout.tensor:
        raise ValueError(
            f"layout.tensor={layout.tensor!r}: does not divide d_ff={cfg.d_ff} and n_heads={cfg.n_heads}; "
            f"allowed: a divisor of {math.gcd(cfg.d_ff, cfg.n_heads)}"
        )
    if t % layout.context:
        raise ValueError(f"layout.context={layout.context!r}: does not divide seq_len={t}; allowed: a divisor")
    if layout.expert > 1 and cfg.n_experts % layout.expert:
        raise ValueError(
            f"layout.expert={layout.expert!r}: does not divide the {cfg.n_experts} experts of "
            f"{cfg.name or 'the model'}; allowed: a divisor of {cfg.n_experts}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """A training step's roofline estimate on a mesh; times in seconds.

    t_math = flops_per_chip / C; t_bubble = t_math (stages - 1) / microbatches;
    t_comms = sum of every collective's total_s (the text sums FSDP and tensor traffic, no overlap);
    t_lower = max(t_math + t_bubble, t_comms) (perfect overlap); t_upper = t_math + t_bubble + t_comms.

    Attributes:
        placement: the `parallelism.Layout` of the step and where it runs (`parallelism.place`).
        n_chips: chips of the layout (count).
        batch_tokens: tokens per step (count).
        seq_len: tokens per sequence (count).
        tokens_per_chip: batch_tokens / (data fsdp context): the tokens one batch shard sees (count).
        context_parallel: shards per sequence: layout.context, or more where the batch holds fewer
            sequences than data shards, which then cut sequences (the text's 4M tokens on 8960 chips)
            (ratio >= 1).
        flops_per_chip: training FLOPs of the step on one chip, causal attention and any recomputed
            forward pass included (FLOPs).
        remat: the recomputation policy (`REMAT_FORWARD_PASSES`).
        t_math, t_bubble: see above (s).
        collectives: every collective of the step.
        model_flops_per_chip: the step's model FLOPs (`flops_per_token`, causal, no recomputation) over
            every chip evenly: what MFU counts (FLOPs).
        peak_flops_per_s: the chip's matmul peak in the step's matmul dtype (FLOPs/s).
        terms: the parts of `expected_s`, each named (`overheads.StepTerm`).
    """

    placement: Placement
    n_chips: int
    batch_tokens: int
    seq_len: int
    tokens_per_chip: float
    context_parallel: float
    flops_per_chip: float
    remat: str
    t_math: float
    t_bubble: float
    collectives: tuple[CollectiveCost, ...]
    model_flops_per_chip: float
    peak_flops_per_s: float
    terms: tuple[overheads.StepTerm, ...]

    @property
    def roofline_math_s(self) -> float:
        """The bound's math (s): model FLOPs per chip / C, no recomputation or uneven stage counted."""
        return self.model_flops_per_chip / self.peak_flops_per_s

    @property
    def roofline_s(self) -> float:
        """The bound the book teaches (s): max(roofline_math_s, t_comms). No real step is faster."""
        return max(self.roofline_math_s, self.t_comms)

    @property
    def expected_s(self) -> float:
        """The roofline plus every term it leaves out, none fitted (s): the sum of `terms`."""
        return sum(term.seconds for term in self.terms)

    @property
    def mfu_bound(self) -> float:
        """MFU at `roofline_s` (ratio): model FLOPs per chip / (roofline_s C); no run does better."""
        return self.model_flops_per_chip / (self.roofline_s * self.peak_flops_per_s)

    @property
    def mfu_expected(self) -> float:
        """MFU at `expected_s` (ratio): model FLOPs per chip / (expected_s C)."""
        return self.model_flops_per_chip / (self.expected_s * self.peak_flops_per_s)

    @property
    def layout(self) -> Layout:
        """The step's `parallelism.Layout`."""
        return self.placement.layout

    @property
    def mesh(self) -> dict[str, int]:
        """Where it runs, readably: `Placement.mesh` ("pod", "fsdp_0", "tensor", ... with sizes)."""
        return self.placement.mesh

    @property
    def t_comms(self) -> float:
        """Every collective, none overlapping another (s)."""
        return sum(c.total_s for c in self.collectives)

    def t_comms_phase(self, phase: str) -> float:
        """Collectives of the "forward" or the "backward" pass (s)."""
        checks.one_of("phase", phase, ("forward", "backward"))
        return sum(c.total_s for c in self.collectives if c.phase == phase)

    @property
    def t_lower(self) -> float:
        """Step time if communication overlaps the math perfectly (s): max(t_math + t_bubble, t_comms)."""
        return max(self.t_math + self.t_bubble, self.t_comms)

    @property
    def t_upper(self) -> float:
        """Step time with no overlap at all (s): t_math + t_bubble + t_comms."""
        return self.t_math + self.t_bubble + self.t_comms

    @property
    def bound(self) -> str:
        """What `roofline_s` is: "compute" when roofline_math_s >= t_comms, else "communication"."""
        return "compute" if self.roofline_math_s >= self.t_comms else "communication"

    @property
    def largest_collective(self) -> CollectiveCost | None:
        """The collective with the largest total_s, None when there is none."""
        return max(self.collectives, key=lambda c: c.total_s, default=None)


def _step_flops(step: StepShape, remat: str) -> float:
    """Training FLOPs of one chip of the busiest stage: the model FLOPs per chip, times ceil(L / S) S / L when
    the layers do not split evenly, times (3 + r) / 3 for r recomputed forward passes (`REMAT_FORWARD_PASSES`)."""
    flops = step.model_flops * step.layers * step.layout.pipeline / step.cfg.n_layers
    return flops * (3 + REMAT_FORWARD_PASSES[checks.one_of("remat", remat, REMAT_FORWARD_PASSES)]) / 3


def _in_flight(layout: Layout) -> float:
    """Share of a step's microbatches whose activations are held at once: min(M, stages) / M."""
    return min(layout.microbatches, layout.pipeline) / layout.microbatches


def _weight_shards(cfg: TransformerConfig, layout: Layout) -> float:
    """Copies of the weights one chip's share makes up (ratio): `Layout.weight_shards`, less where the
    largest pipeline stage holds more than L / S layers, and less under expert parallelism, which
    shards only the routed experts (the rest is whole on each of its chips)."""
    shards = layout.weight_shards * cfg.n_layers / (stage_layers(cfg, layout) * layout.pipeline)
    return shards * cfg.param_count() / (cfg.params_held(layout.expert) * layout.expert)


def zero_divisors(*, stage: int, n_data: int) -> tuple[int, int, int]:
    """What ZeRO `stage` divides by its `n_data` data-parallel chips: (parameters, gradients, optimizer state).

    Stage 1 divides the optimizer state, 2 the gradients too, 3 (FSDP) the parameters too; 0 nothing.
    Book: Part 5, Appendix A (the ZeRO figure).

    Raises:
        ValueError: stage not 0 to 3, n_data not a count.
    """
    if stage not in (0, 1, 2, 3) or isinstance(stage, bool):
        raise ValueError(f"stage={stage!r}: not a ZeRO stage; allowed: 0, 1, 2, 3")
    n = checks.count("n_data", n_data)
    return (n if stage >= 3 else 1, n if stage >= 2 else 1, n if stage >= 1 else 1)


def step_time(
    model: TransformerConfig | str,
    chip: Chip | str,
    layout: Layout,
    *,
    batch_tokens: int,
    seq_len: int,
    param_dtype: str = "bf16",
    activation_dtype: str = "bf16",
    remat: str = "checkpoints",
    virtual_stages: int = 1,
    optimizer: str = "adam",
    optimizer_dtype: str = "fp32",
    master_dtype: str | None = None,
    matmul_dtype: str = "bf16",
    attention_kernel: str = "flash",
    overlap_grad_reduce: bool = True,
    calibration: Calibration | str | pathlib.Path | None = None,
) -> StepTime:
    """One training step of `model` on `layout`: its roofline, every collective, and its expected time (s).

    t_math = flops_per_token(seq_len, training, causal) * B / (N C) at the `matmul_dtype` peak, times
    (3 + r) / 3 when `remat` (`REMAT_FORWARD_PASSES`) runs the forward r more times. Per layer, with V_w = one layer's
    weights on a chip, b = B / (data fsdp context expert M) tokens per microbatch and V_a = b D bytes:
    FSDP forward AllGather(V_w), backward AllGather and ReduceScatter; DP backward AllReduce(V_w / fsdp);
    TP per block and microbatch AllGather(V_a) and ReduceScatter(V_a), both passes; CP per microbatch
    AllGather of b's keys and values, both passes, their ReduceScatter backward; EP per MoE layer and
    microbatch two AllToAlls of the k copies of b tokens, both passes; pipeline sends of [b, D / tensor],
    v times with v `virtual_stages`; bubble (S - 1) / (v M); across pods one DCN AllReduce.
    `StepTime.roofline_s` is the book's bound; `expected_s` adds each `overheads.StepTerm` at the rates of
    `Chip.efficiency`, or of `calibration` (a `calibrate` profile or its path); `attention_kernel` (one of
    `overheads.ATTENTION_KERNELS`) says whether the attention scores stay on chip; `overlap_grad_reduce` False
    makes the data-parallel gradient reductions wait for the last backward pass, as Megatron-LM did before its
    --overlap-grad-reduce (2023) and DeepSpeed's pipeline engine does. Book: Part 5.

    Raises:
        ValueError: unknown model, chip or dtype; a layout the hardware cannot hold (`parallelism.place`);
            a batch of partial sequences or under one token per shard; a degree that does not divide what it cuts;
            overlap_grad_reduce not a bool.
    """
    cfg, pl = get_model(model), place(with_calibration(chip, calibration), layout)
    _check_step(cfg, layout, batch_tokens, seq_len)
    dtypes = StepDtypes(param_dtype=param_dtype, activation_dtype=activation_dtype, matmul_dtype=matmul_dtype,
                        optimizer_dtype=optimizer_dtype, master_dtype=master_dtype)  # fmt: skip
    step = step_shape(cfg, pl, batch_tokens=batch_tokens, seq_len=seq_len, virtual_stages=virtual_stages,
                      dtypes=dtypes, overlap_grad_reduce=overlap_grad_reduce)  # fmt: skip
    peak = pl.chip.peak_ops_per_s(dtypes.matmul_dtype)
    flops, comms = _step_flops(step, remat), step_collectives(step)
    work = _work(step, t_math=flops / peak, peak=peak, remat=remat, optimizer=optimizer,
                 attention_kernel=attention_kernel)  # fmt: skip
    return StepTime(
        placement=pl, n_chips=layout.n_chips, batch_tokens=step.batch_tokens, seq_len=step.seq_len,
        tokens_per_chip=step.shard_tokens,
        context_parallel=max(float(layout.context), layout.batch_shards * seq_len / batch_tokens),
        flops_per_chip=flops, remat=remat, t_math=work.t_math, t_bubble=work.t_math * work.bubble,
        collectives=comms, model_flops_per_chip=step.model_flops, peak_flops_per_s=peak,
        terms=overheads.expected_terms(cfg, pl.chip, layout, work, comms),
    )  # fmt: skip


def _work(
    step: StepShape, *, t_math: float, peak: float, remat: str, optimizer: str, attention_kernel: str
) -> overheads.StepWork:
    """The step's `overheads.StepWork`: its shape's tokens and layers, bubble, recomputation and the optimizer
    update's bytes, at the matmul dtype's `peak` (FLOP/s)."""
    cfg, layout, dtypes = step.cfg, step.layout, step.dtypes
    forward = cfg.flops_breakdown(step.seq_len, training=False, causal=True)
    return overheads.StepWork(
        model_s=step.model_flops / peak,
        t_math=t_math,
        bubble=bounds.pipeline_bubble_fraction(
            stages=layout.pipeline, microbatches=layout.microbatches, virtual_stages=step.virtual_stages
        ),
        remat=remat,
        tokens=step.shard_tokens,
        layers=step.layers,
        update_bytes=optimizer_update_bytes_per_param(
            optimizer=optimizer,
            param_dtype=dtypes.param_dtype,
            optimizer_dtype=dtypes.optimizer_dtype,
            master_dtype=dtypes.master_dtype,
        ),
        activation_dtype=dtypes.activation_dtype,
        weight_copies=_weight_shards(cfg, layout),
        update_shards=zero_divisors(stage=layout.zero, n_data=layout.data)[2],
        attention_share=forward.attention_flops / forward.total_flops,
        microbatches=layout.microbatches,
        param_bytes=checks.dtype_bytes(dtypes.param_dtype, "param_dtype"),
        microbatch_tokens=step.microbatch_tokens,
        attention_peak_ratio=peak / step.placement.chip.bf16_flops_per_s,
        attention_kernel=checks.one_of("attention_kernel", attention_kernel, overheads.ATTENTION_KERNELS),
        seq_len=step.seq_len,
        matmul_dtype=dtypes.matmul_dtype,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPerChip(MemoryBytes):
    """HBM one chip needs for a training step, by kind (bytes): a `breakdowns.MemoryBytes` and the chip's HBM.

    params, grads, optimizer = the whole model's / (fsdp tensor pipeline expert) (ZeRO-3 under FSDP);
    activations = batch_tokens L c D bytes / N (checkpoints split over every chip).

    Attributes:
        hbm_bytes: the chip's HBM (bytes), None where no chip is set (`zero_memory_per_chip`).
    """

    hbm_bytes: float | None

    @property
    def fits(self) -> bool | None:
        """total_bytes <= hbm_bytes; None where no chip is set."""
        return None if self.hbm_bytes is None else self.total_bytes <= self.hbm_bytes


def memory_per_chip(
    model: TransformerConfig | str,
    chip: Chip | str,
    layout: Layout,
    *,
    batch_tokens: float,
    optimizer: str = "adam",
    param_dtype: str = "bf16",
    optimizer_dtype: str = "fp32",
    checkpoints_per_layer: float = 4,
    activation_dtype: str = "bf16",
    remat: str = "checkpoints",
    master_dtype: str | None = None,
) -> MemoryPerChip:
    """Parameters, gradients, optimizer state and activation checkpoints on one chip (bytes).

    totals from `TransformerConfig.training_memory`: P params in param_dtype, gradients likewise,
    OPTIMIZERS[optimizer] values of optimizer_dtype per parameter plus a master copy of the weights in
    master_dtype when there is one (mixed precision keeps "fp32"; None by default, as the text counts),
    and batch_tokens L c D activation values, c = checkpoints_per_layer (`remat="full"` keeps 1,
    "none" the text's 20). Then divided: weights, gradients and optimizer state by
    `Layout.weight_shards` (fsdp tensor pipeline expert), the optimizer state also by `data` under
    `Layout.zero` >= 1 and the gradients under 2; activations by every chip, and kept for only
    min(M, stages) of the M microbatches at once (gradient accumulation without a pipeline keeps one;
    a one-forward-one-backward pipeline at most one per stage). LLaMA 3-70B, 4M tokens, c = 4:
    140 GB + 560 GB + 20.9 TB in all (the text counts no gradients).
    Book: Part 5, "Data Parallelism" (10 bytes per parameter) and Appendix A; Part 6, "Counting parameters".

    Raises:
        ValueError: unknown model, optimizer, dtype or chip; a layout the chip cannot hold
            (`parallelism.place`); a negative batch or checkpoint count.
    """
    cfg, pl = get_model(model), place(chip, layout)
    total = cfg.training_memory(
        batch_tokens=checks.non_negative("batch_tokens", batch_tokens),
        param_dtype=param_dtype,
        grad_dtype=param_dtype,
        optimizer_state_bytes_per_param=optimizer_state_bytes_per_param(
            optimizer=optimizer, optimizer_dtype=optimizer_dtype, master_dtype=master_dtype
        ),
        activation_dtype=activation_dtype,
        remat=checks.one_of("remat", remat, REMAT_FORWARD_PASSES),
        checkpoints_per_layer=checkpoints_per_layer if remat == "checkpoints" else None,
    )
    # the largest stage's share of the weights, when the layers do not split evenly over the stages
    shards, (_, by_grads, by_state) = _weight_shards(cfg, layout), zero_divisors(stage=layout.zero, n_data=layout.data)
    return MemoryPerChip(
        params_bytes=total.params_bytes / shards,
        grads_bytes=total.grads_bytes / shards / by_grads,
        optimizer_bytes=total.optimizer_bytes / shards / by_state,
        activations_bytes=total.activations_bytes / layout.n_chips * _in_flight(layout),
        hbm_bytes=pl.chip.hbm_bytes,
    )
