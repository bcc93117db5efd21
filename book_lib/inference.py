"""Inference cost model: prefill and decode step times, the batch that fits, the slice to rent.

A decode step of a dense model with batch B at context S on n chips (Part 7, equation 4):

    t_kv      = B S kv_bytes_per_token / (n W_hbm)
                  every sequence reads its own KV cache
    t_weights = P_read weight_bytes / (n W_hbm)
                  every step reads every weight once (an MoE:
                  only the experts its batch touches)
    t_math    = 2 B P_active / (n C)
                  the linears; attention's FLOPs are negligible
    t_ici     = per layer, an AllGather and a ReduceScatter of the [B, D]
                activations around the attention block and around the MLP
                (Megatron model parallelism over the slice)

The text's estimate is t_kv + max(t_weights, t_math): attention never becomes compute-bound, the
linears turn compute-bound above the critical batch. We add t_ici to the max (it overlaps with the
linears as well as it can), call that `t_lower`, and the sum of all four terms `t_upper` (nothing
overlaps).

Book: Part 7 (All About Transformer Inference), "Theoretical estimates for LLM latency and
throughput" and "Distributing Inference Over Multiple Accelerators"; Part 8 (Serving LLaMA 3-70B).
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass

from book_lib import checks, collectives, overheads, topology
from book_lib.efficiency import Calibration
from book_lib.hardware import PRICES_USD_PER_CHIP_HOUR, Chip, get_chip, price_usd_per_chip_hour, with_calibration
from book_lib.models import get_model
from book_lib.transformer import TransformerConfig

# The formats the text serves weights and KV caches in (Part 7, "Quantization"), and fp8, in which
# DeepSeek-V3 and Llama 3.1 405B ship their weights: the calculators' and CLI's choices. Every function
# here takes any dtype of `checks.DTYPES`.
SERVING_DTYPES = ("bf16", "fp8", "int8", "int4")

__all__ = [
    "SERVING_DTYPES",
    "DecodeStep",
    "decode_step_time",
    "decode_step_time_from_sizes",
    "PrefillStep",
    "prefill_step",
    "prefill_time",
    "memory_bytes",
    "max_batch",
    "min_chips",
    "latency_throughput",
    "cost_per_million_tokens",
    "memory_bound_model_parallelism",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeStep:
    """One decode step's estimate; times in seconds.

    Attributes:
        batch: sequences decoded together (count).
        n_chips: chips the model is sharded over (count).
        t_kv: reading every sequence's KV cache from HBM (s).
        t_weights: reading every weight from HBM (s).
        t_math: the linears' FLOPs at the chips' peak (s).
        t_ici: the model-parallel collectives over ICI (s); 0 on one chip.
        memory_bytes: weights plus KV caches, all chips together (bytes).
        hbm_bytes: HBM of all chips together (bytes).
        t_ici_bandwidth: the same collectives' bandwidth time alone, at the rate a ring collective achieves
            (`efficiency.Efficiency.ici`) (s).
        t_ici_latency: their fixed cost per call, `collectives.call_latency_s` (NCCL's model on GPUs,
            one AllReduce per block; hops x 1 us on TPU ICI) (s).
        t_kernels: every chip runs every layer's kernels, each at a fixed cost whatever its share of
            the work: `overheads.kernels_per_layer` x L x `efficiency.kernel_s` (s).
        hbm_efficiency, matmul_efficiency: the rates the chip achieves against its datasheet
            (`efficiency.Efficiency`), which `expected_s` divides by (ratios).
        stages: nodes the layers are split over, one after another (count; 1 within one node or slice).
        t_send: the activations sent from each node to the next, (stages - 1) B D a / W_dcn (s).
        t_send_bandwidth, t_send_latency: the same at the network's achieved rate
            (`efficiency.Efficiency.dcn`), and one call's fixed cost per send (s).
    """

    batch: int
    n_chips: int
    t_kv: float
    t_weights: float
    t_math: float
    t_ici: float
    memory_bytes: float
    hbm_bytes: float
    t_ici_bandwidth: float = 0.0
    t_ici_latency: float = 0.0
    t_kernels: float = 0.0
    hbm_efficiency: float = 1.0
    matmul_efficiency: float = 1.0
    stages: int = 1
    t_send: float = 0.0
    t_send_bandwidth: float = 0.0
    t_send_latency: float = 0.0

    @property
    def roofline_s(self) -> float:
        """The book's bound, `t_lower` (s): no decode step is faster."""
        return self.t_lower

    @property
    def expected_s(self) -> float:
        """The roofline plus what it leaves out (s): t_kv / e_hbm + max(t_weights / e_hbm, t_math / e_mm) +
        t_ici_bandwidth + t_ici_latency + t_kernels + t_send_bandwidth + t_send_latency. Bytes stream at the
        achieved HBM rate and FLOPs run at the achieved matmul rate; each layer's collectives wait for its
        matmuls and the next layer waits for them, so they do not overlap, and each call and kernel pays its
        fixed cost; a node waits for the previous node's activations."""
        streamed = max(self.t_weights / self.hbm_efficiency, self.t_math / self.matmul_efficiency)
        fixed = self.t_ici_bandwidth + self.t_ici_latency + self.t_kernels + self.t_send_bandwidth + self.t_send_latency
        return self.t_kv / self.hbm_efficiency + streamed + fixed

    @property
    def t_lower(self) -> float:
        """The text's step time, perfect overlap (s): t_kv + max(t_weights, t_math, t_ici), and the sends
        between nodes, which nothing overlaps: each node waits for the one before it."""
        return self.t_kv + max(self.t_weights, self.t_math, self.t_ici) + self.t_send

    @property
    def t_upper(self) -> float:
        """Step time with no overlap at all (s): t_kv + t_weights + t_math + t_ici + t_send."""
        return self.t_kv + self.t_weights + self.t_math + self.t_ici + self.t_send

    @property
    def bound(self) -> str:
        """The largest part of `t_lower`: `"kv"` (reading the KV caches), whichever of `"weights"` (HBM),
        `"math"` and `"ici"` sets the max, or `"sends"` (between nodes)."""
        overlapped = {"weights": self.t_weights, "math": self.t_math, "ici": self.t_ici}
        largest = max(overlapped, key=lambda k: overlapped[k])
        parts = {"kv": self.t_kv, largest: overlapped[largest], "sends": self.t_send}
        return max(parts, key=lambda k: parts[k])

    @property
    def fits(self) -> bool:
        """True when weights and KV caches fit in the chips' HBM."""
        return self.memory_bytes <= self.hbm_bytes

    @property
    def tokens_per_s(self) -> float:
        """Throughput at `t_lower` (tokens/s): batch / t_lower."""
        return self.batch / self.t_lower

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Throughput per chip at `t_lower` (tokens/s/chip)."""
        return self.tokens_per_s / self.n_chips


def _slice(chip: Chip, n_chips: int) -> topology.Slice:
    """The offered slice of exactly `n_chips` chips (ValueError listing the offered counts otherwise).

    One chip is always allowed (a single device needs no collectives), even where the smallest
    rentable slice is larger (v4, v5p: 2x2x1); the slice returned then is that smallest one.
    """
    checks.count("n_chips", n_chips)
    offered = sorted({1, *(math.prod(s) for s in topology.slice_shapes(chip))})
    if n_chips not in offered:
        raise ValueError(f"n_chips={n_chips!r}: no {chip.name} slice has that many chips; allowed: {offered}")
    return topology.smallest_slice(chip, n_chips)


def _stages(chip: Chip, n_chips: int) -> tuple[int, int]:
    """(chips per stage, stages): an offered slice of `n_chips` is one stage; on GPUs, more chips than a
    node are whole nodes, each holding a contiguous share of the layers, model-parallel inside (a
    pipeline across nodes, as serving engines run a model too big for one node).

    Raises:
        ValueError: a count no slice offers, or GPUs that are not whole nodes.
    """
    n = checks.count("n_chips", n_chips)
    node = max(math.prod(shape) for shape in topology.slice_shapes(chip))
    if chip.ici_topology != "nvswitch" or n <= node:
        _slice(chip, n)
        return n, 1
    if n % node:
        raise ValueError(
            f"n_chips={n_chips!r}: not whole {chip.name} nodes of {node}; allowed: up to {node}, or a multiple of it"
        )
    return node, n // node


def _sends(cfg: TransformerConfig, chip: Chip, stages: int, act_bytes: float) -> tuple[float, float, float]:
    """Activations passed between pipeline stages, (stages - 1) B D act_bytes per token of the batch
    over each node's network: (roofline per token, achieved per token, fixed cost per step) (s)."""
    if stages == 1:
        return 0.0, 0.0, 0.0
    per_token = (stages - 1) * cfg.d_model * act_bytes / chip.dcn_bytes_per_s
    latency = (stages - 1) * collectives.call_latency_s("all_gather", 2, chip, link="dcn")
    return per_token, per_token / chip.efficiency.dcn, latency


def _sizes(param_dtype: str, kv_dtype: str) -> tuple[str, str]:
    """The canonical names of the weights' and the cache's dtypes (`checks.DTYPES`)."""
    return checks.dtype(param_dtype, "param_dtype"), checks.dtype(kv_dtype, "kv_dtype")


def _memory(model: TransformerConfig, batch: int, context_len: int, w: str, kv: str) -> float:
    """P p_w + B S kv_cache_bytes_per_token(kv) (bytes), p_w the bytes of a weight; arguments checked."""
    return model.param_count() * checks.dtype_bytes(w) + batch * context_len * model.kv_cache_bytes_per_token(kv)


def memory_bytes(
    model: TransformerConfig | str, *, batch: int, context_len: int, param_dtype: str = "bf16", kv_dtype: str = "bf16"
) -> float:
    """Weights plus KV caches of a batch (bytes): P weight_bytes + B S kv_bytes_per_token.

    Byte sizes of `param_dtype` and `kv_dtype` from `checks.DTYPES` (bf16 2, int8 1, int4 0.5).
    Activations are left out: without a backward pass they are a few [B, D] arrays.
    Book: Part 7, "What about memory?"; Part 8, "What's the LLaMA Serving Story?".
    """
    cfg = get_model(model)
    w, kv = _sizes(param_dtype, kv_dtype)
    batch = checks.count("batch", batch, minimum=0)
    return _memory(cfg, batch, checks.count("context_len", context_len), w, kv)


def _ici_s(
    model: TransformerConfig, chip: Chip, batch: int, n_chips: int, act_bytes: float
) -> tuple[float, float, float]:
    """Model-parallel collectives of one step: (roofline time, bandwidth time, fixed costs) (s).

    L * 2 * (AllGather + ReduceScatter) of B D act_bytes; the fixed cost per block is one NCCL AllReduce
    on GPUs (the pair in one call) and the two calls' hops on TPU ICI."""
    if n_chips == 1 or batch == 0:
        return 0.0, 0.0, 0.0
    shape = _slice(chip, n_chips).shape
    v = batch * model.d_model * act_bytes
    gather = collectives.collective_time("all_gather", v, shape, chip)
    scatter = collectives.collective_time("reduce_scatter", v, shape, chip)
    if chip.is_tpu:
        fixed = sum(collectives.call_latency_s(t.op, n_chips, chip, hops=t.hops) for t in (gather, scatter))
    else:
        fixed = collectives.call_latency_s("all_reduce", n_chips, chip)
    blocks = model.n_layers * 2
    return (
        blocks * (gather.total_s + scatter.total_s),
        blocks * (gather.bandwidth_s + scatter.bandwidth_s),
        blocks * fixed,
    )


def decode_step_time(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    batch: int,
    context_len: int,
    param_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    matmul_dtype: str = "bf16",
    activation_dtype: str = "bf16",
    weight_group_size: int | None = None,
    calibration: Calibration | str | pathlib.Path | None = None,
) -> DecodeStep:
    """One generation step of `batch` sequences at `context_len` on `n_chips` chips (see the module docstring).

    t_kv = B S kv / (n W_hbm); t_weights = P_read w / (n W_hbm); t_math = 2 B P_active / (n C);
    P_read = `TransformerConfig.params_read_per_step(B)` (an MoE reads only the experts its batch touches);
    t_ici = L * 2 * (AllGather + ReduceScatter of B D act_bytes) over the slice. Over S GPU nodes, n is one
    node's chips (the nodes run in turn), plus t_send = (S - 1) B D act_bytes / W_dcn: more HBM, no faster step.

    Args:
        model: a `TransformerConfig` or a preset name.
        chip: a `Chip` or a name.
        n_chips: chips of an offered slice (`topology.slice_shapes`), sharded Megatron-style; on GPUs,
            whole nodes beyond one, the layers split over them in a pipeline (`DecodeStep.stages`).
        batch: sequences decoded together (count, >= 1).
        context_len: S, tokens already in each KV cache (count).
        param_dtype: the weights' format ("bf16", "int8", "int4", any of `checks.DTYPES`).
        kv_dtype: the format of cached keys and values.
        matmul_dtype: the dtype the MXU multiplies in ("bf16", or "int8" with int8 activations).
        activation_dtype: the activations the collectives move.
        weight_group_size: quantized weights with a bf16 scale and zero point per group of this many
            (gpt-fast's int4 "G=32"): 4 / g more bytes per weight read; None: per-channel scales, which
            add nothing worth counting.
        calibration: a profile of `python -m book_lib calibrate` (or its path) whose measured rates
            replace the chip's cited ones in `expected_s`; None keeps the cited ones.
    Book: Part 7, equation (4) and "Note on ICI bounds for generation".
    """
    cfg, hw = get_model(model), with_calibration(chip, calibration)
    eff = hw.efficiency
    per_stage, stages = _stages(hw, n_chips)
    batch, context_len = checks.count("batch", batch), checks.count("context_len", context_len)
    w, kv = _sizes(param_dtype, kv_dtype)
    hbm_bytes_per_s = per_stage * hw.hbm_bytes_per_s  # the stages run one after another
    weights, total = _memory(cfg, 0, context_len, w, kv), _memory(cfg, batch, context_len, w, kv)
    scales = 0.0 if weight_group_size is None else 4 / checks.count("weight_group_size", weight_group_size)
    # an MoE reads only the experts touched
    read = cfg.params_read_per_step(batch) * (checks.dtype_bytes(w) + scales)
    act = checks.dtype_bytes(activation_dtype, "activation_dtype")
    ici, sends = _ici_s(cfg, hw, batch, per_stage, act), _sends(cfg, hw, stages, act)
    return DecodeStep(
        batch=batch, n_chips=n_chips, t_kv=(total - weights) / hbm_bytes_per_s, t_weights=read / hbm_bytes_per_s,
        t_math=2 * batch * cfg.active_param_count() / (per_stage * hw.peak_ops_per_s(matmul_dtype)), t_ici=ici[0],
        memory_bytes=total + cfg.param_count() * scales, hbm_bytes=n_chips * hw.hbm_bytes,
        t_ici_bandwidth=ici[1] / eff.ici, t_ici_latency=ici[2],
        t_kernels=overheads.kernels_per_layer(cfg) * cfg.n_layers * eff.kernel_s,
        hbm_efficiency=eff.hbm, matmul_efficiency=eff.matmul_for(matmul_dtype), stages=stages,
        t_send=batch * sends[0], t_send_bandwidth=batch * sends[1], t_send_latency=sends[2],
    )  # fmt: skip


def decode_step_time_from_sizes(
    chip: Chip | str,
    n_chips: int,
    *,
    param_count: float,
    kv_bytes_per_token: float,
    batch: int,
    context_len: int,
    param_dtype: str = "bf16",
    matmul_dtype: str = "bf16",
) -> DecodeStep:
    """Equation (4) from raw sizes, for a model known only by its counts (no collectives).

    t_kv = B S kv_per_token / (n W_hbm); t_weights = P w / (n W_hbm); t_math = 2 B P / (n C).
    For problems that give "a 30B model with 100 kB of KV per token" rather than a configuration;
    `t_ici` is 0 (the text's estimate leaves it out).

    Args:
        chip: a `Chip` or a name; n_chips: chips the model is spread over (count).
        param_count: P, weights (count, > 0), all active.
        kv_bytes_per_token: bytes one token adds to a sequence's KV cache (> 0).
        batch: sequences decoded together (count); context_len: S, tokens in each cache (count).
        param_dtype: the weights' format (`checks.DTYPES`); matmul_dtype: the dtype the MXU multiplies in.
    Book: Part 7, "Theoretical estimates for LLM latency and throughput" (the pop quiz).
    """
    hw = get_chip(chip)
    checks.positive("param_count", param_count)
    checks.positive("kv_bytes_per_token", kv_bytes_per_token)
    checks.count("n_chips", n_chips)
    checks.count("batch", batch)
    checks.count("context_len", context_len)
    weights = param_count * checks.dtype_bytes(param_dtype, "param_dtype")
    caches = batch * context_len * kv_bytes_per_token
    return DecodeStep(
        batch=batch,
        n_chips=n_chips,
        t_kv=caches / (n_chips * hw.hbm_bytes_per_s),
        t_weights=weights / (n_chips * hw.hbm_bytes_per_s),
        t_math=2 * batch * param_count / (n_chips * hw.peak_ops_per_s(matmul_dtype)),
        t_ici=0.0,
        memory_bytes=weights + caches,
        hbm_bytes=n_chips * hw.hbm_bytes,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillStep:
    """One prefill of `batch` prompts of `prompt_len` tokens on `n_chips` chips; times in seconds.

    Attributes:
        tokens: prompt tokens prefilled together, B T (count).
        n_chips: chips the model is sharded over, Megatron-style (count).
        t_matmul: the weight matmuls' FLOPs at peak (s).
        t_attention: the causal attention's FLOPs at peak (s).
        t_weights: reading every weight once from HBM at the datasheet rate (s).
        t_ici: the model-parallel collectives' roofline time, and the sends between GPU nodes (s); 0 on one chip.
        terms: the parts of `expected_s`, named (`overheads.StepTerm`).
    """

    tokens: int
    n_chips: int
    t_matmul: float
    t_attention: float
    t_weights: float
    t_ici: float
    terms: tuple[overheads.StepTerm, ...]

    @property
    def roofline_s(self) -> float:
        """The book's bound (s): max(FLOPs / C, weight bytes / W, t_ici); no prefill is faster."""
        return max(self.t_matmul + self.t_attention, self.t_weights, self.t_ici)

    @property
    def expected_s(self) -> float:
        """The sum of `terms` (s): what a prefill takes at the chip's achieved rates; time to first token."""
        return sum(term.seconds for term in self.terms)


def prefill_step(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    prompt_len: int,
    batch: int = 1,
    param_dtype: str = "bf16",
    activation_dtype: str = "bf16",
    calibration: Calibration | str | pathlib.Path | None = None,
) -> PrefillStep:
    """A prefill's roofline and expected time, the training step's efficiencies applied to one forward pass.

    With e = the chip's `efficiency.Efficiency` (or `calibration`'s), n chips, B T tokens, P p_w weight bytes:
        weight matmuls  max(F_mm / (n e.matmul C), P p_w / (n e.hbm W))
        attention       F_att / (n e.attention_forward C)   (causal)
        elementwise     `overheads.elementwise_bytes_per_token` x B T L
                        / (e.hbm W)   (each chip's share)
        kernels         `overheads.kernels_per_layer` x L x e.kernel_s
        collectives     L x 2 x (AllGather + ReduceScatter of B T D):
                        bandwidth time and fixed cost per call
    and over GPU nodes in a pipeline (n is one node's chips) the sends between them. `roofline_s` is the
    bound, max(F / (n C), P p_w / (n W), collectives); the expected time adds the collectives to the
    compute (a layer's matmul waits on its gather). Book: Part 7, "Prefill"; Part 8 (time to first token).

    Raises:
        ValueError: unknown model, chip or dtype; n_chips no slice offers; a prompt beyond the model's positions.
    """
    cfg, hw = get_model(model), with_calibration(chip, calibration)
    n, stages = _stages(hw, n_chips)  # n: the chips of one stage; GPU nodes in a pipeline run in turn
    prompt_len, batch = cfg.check_positions("prompt_len", prompt_len), checks.count("batch", batch)
    eff, tokens = hw.efficiency, batch * prompt_len
    flops = cfg.flops_breakdown(prompt_len, training=False, causal=True)
    peak, hbm = n * hw.bf16_flops_per_s, n * hw.hbm_bytes_per_s
    t_matmul, t_attention = tokens * flops.matmul_flops / peak, tokens * flops.attention_flops / peak
    t_weights = cfg.param_count() * checks.dtype_bytes(param_dtype, "param_dtype") / hbm
    act = checks.dtype_bytes(activation_dtype, "activation_dtype")
    t_ici, ici_bandwidth, ici_latency = _ici_s(cfg, hw, tokens, n, act)
    send, send_bandwidth, send_latency = _sends(cfg, hw, stages, act)
    elementwise = overheads.elementwise_bytes_per_token(cfg, tensor=n, activation_dtype=activation_dtype)
    matmul_s = max(t_matmul / eff.matmul, t_weights / eff.hbm)
    ici_bandwidth, kernels_s = ici_bandwidth / eff.ici, overheads.kernels_per_layer(cfg) * cfg.n_layers * eff.kernel_s
    sends = overheads.StepTerm(name="sends between nodes", seconds=tokens * send_bandwidth + send_latency,
                               how="(S - 1) B T D between pipelined nodes at the network's achieved rate")  # fmt: skip
    terms = (
        overheads.StepTerm(name="matmul FLOPs at peak", seconds=t_matmul, how="B T weight-matmul FLOPs / (n C)"),
        overheads.StepTerm(name="matmuls at the achieved rate", seconds=matmul_s - t_matmul,
                           how=f"at {eff.matmul:.0%} of peak, or the weight reads at the achieved HBM rate"),
        overheads.StepTerm(name="attention at the flash-attention rate", seconds=t_attention / eff.attention_forward,
                           how=f"causal attention FLOPs at {eff.attention_forward:.0%} of peak"),
        overheads.StepTerm(name="elementwise ops, norms, RoPE (HBM)",
                           seconds=elementwise * tokens * cfg.n_layers / (hw.hbm_bytes_per_s * eff.hbm),
                           how="overheads.elementwise_bytes_per_token x B T L / achieved HBM rate"),
        overheads.StepTerm(name="kernel fixed cost", seconds=kernels_s,
                           how="overheads.kernels_per_layer x L x efficiency.kernel_s"),
        overheads.StepTerm(name="tensor-parallel collectives", seconds=ici_bandwidth + ici_latency,
                           how="L x 2 x (AllGather + ReduceScatter of B T D): bandwidth and fixed cost per call"),
    ) + ((sends,) if stages > 1 else ())  # fmt: skip
    return PrefillStep(tokens=tokens, n_chips=n_chips, t_matmul=t_matmul, t_attention=t_attention,
                       t_weights=t_weights, t_ici=t_ici + tokens * send, terms=terms)  # fmt: skip


def prefill_time(
    model: TransformerConfig | str, chip: Chip | str, n_chips: int, *, prompt_len: int, batch: int = 1, mfu: float = 1.0
) -> float:
    """Time to prefill `batch` prompts of `prompt_len` tokens (s), compute-bound at `mfu` of peak.

    t = B T * flops_per_token(T, forward, causal) / (n C mfu)
    Prefill is compute-bound for any prompt longer than the critical batch, so only FLOPs count.
    Book: Part 7, "Linear operations: what bottlenecks us?" and "Prefill"; Part 8 (prefill time).
    """
    cfg, hw = get_model(model), get_chip(chip)
    per_stage, _ = _stages(hw, n_chips)  # GPU nodes in a pipeline run one after another
    checks.count("prompt_len", prompt_len)
    checks.count("batch", batch)
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu={mfu!r}: not a fraction of peak; allowed: 0 < mfu <= 1")
    flops = batch * prompt_len * cfg.flops_per_token(prompt_len, training=False, causal=True)
    return flops / (per_stage * hw.bf16_flops_per_s * mfu)


def max_batch(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    context_len: int,
    param_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> int:
    """Most sequences of `context_len` whose KV caches fit beside the weights (count; 0 if none).

    B_max = floor((n HBM - P weight_bytes) / (S kv_bytes_per_token))
    Book: Part 7, "Modeling throughput and latency for LLaMA 2-13B"; Part 8, "Thinking about throughput".
    """
    cfg, hw = get_model(model), get_chip(chip)
    _stages(hw, n_chips)
    context_len = checks.count("context_len", context_len)
    w, kv = _sizes(param_dtype, kv_dtype)
    weights = _memory(cfg, 0, context_len, w, kv)
    one = _memory(cfg, 1, context_len, w, kv) - weights
    return max(0, math.floor((n_chips * hw.hbm_bytes - weights) / one))


def min_chips(
    model: TransformerConfig | str,
    chip: Chip | str,
    *,
    batch: int,
    context_len: int,
    param_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> int:
    """Chips of the smallest offered slice whose HBM holds the weights and `batch` KV caches (count).

    n >= (P weight_bytes + B S kv_bytes_per_token) / HBM per chip, rounded up to `topology.slice_shapes`
    (`topology.smallest_slice(chip, n)` gives its shape); on GPUs, past one node, to whole nodes.
    Book: Part 8, "What's the LLaMA Serving Story?" (rounding to a slice shape).

    Raises:
        ValueError: bad arguments, or not even a whole pod holds it.
    """
    hw = get_chip(chip)
    need = memory_bytes(model, batch=batch, context_len=context_len, param_dtype=param_dtype, kv_dtype=kv_dtype)
    for shape in topology.slice_shapes(hw):
        if math.prod(shape) * hw.hbm_bytes >= need:
            return math.prod(shape)
    if hw.ici_topology == "nvswitch":
        node = math.prod(topology.slice_shapes(hw)[-1])
        return node * math.ceil(need / (node * hw.hbm_bytes))
    raise ValueError(
        f"batch={batch!r}: {need:.3g} bytes do not fit a whole {hw.name} pod; allowed: a smaller batch, "
        "context or dtype"
    )


def latency_throughput(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    context_len: int,
    batches: tuple[int, ...] | list[int],
    param_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    matmul_dtype: str = "bf16",
) -> tuple[DecodeStep, ...]:
    """`decode_step_time` at each batch of `batches`, for a plot of latency against throughput.

    Each point is (t_lower, tokens_per_s_per_chip) of one batch; see `DecodeStep`.
    Book: Part 7, "Theoretical estimates for LLM latency and throughput"; Part 8 (the Pareto plots).
    """
    if not isinstance(batches, (tuple, list)) or not batches:
        raise ValueError(f"batches={batches!r}: not a non-empty list; allowed: a list of batch sizes")
    cfg, hw = get_model(model), get_chip(chip)
    return tuple(
        decode_step_time(cfg, hw, n_chips, batch=b, context_len=context_len, param_dtype=param_dtype,
                         kv_dtype=kv_dtype, matmul_dtype=matmul_dtype)
        for b in batches
    )  # fmt: skip


def cost_per_million_tokens(
    chip: Chip | str, *, tokens_per_s_per_chip: float, usd_per_chip_hour: float | None = None
) -> float:
    """US dollars to generate a million tokens at `tokens_per_s_per_chip` (USD per 1e6 tokens).

    cost = price per chip-hour / (tokens/s/chip * 3600 s/h) * 1e6
    The price defaults to the text's on-demand figure (`hardware.PRICES_USD_PER_CHIP_HOUR`).
    Book: Part 8, "What's the LLaMA Serving Story?" (FLOPs per dollar).

    Raises:
        ValueError: a non-positive rate or price, or a chip the text quotes no price for and none given.
    """
    hw = get_chip(chip)
    checks.positive("tokens_per_s_per_chip", tokens_per_s_per_chip)
    if usd_per_chip_hour is None:
        usd_per_chip_hour = price_usd_per_chip_hour(hw)
        if usd_per_chip_hour is None:
            raise ValueError(
                f"chip={hw.name!r}: the text quotes no price; allowed: pass usd_per_chip_hour=, or one of "
                f"{', '.join(PRICES_USD_PER_CHIP_HOUR)}"
            )
    checks.positive("usd_per_chip_hour", usd_per_chip_hour)
    return usd_per_chip_hour / (tokens_per_s_per_chip * 3600) * 1e6


def memory_bound_model_parallelism(
    chip: Chip | str, *, d_ff: int, batch: int, param_dtype: str = "bf16", activation_dtype: str = "bf16"
) -> float:
    """Model-parallel degree Y at which a memory-bound decode matmul turns ICI-bound (chips).

    One [B, D] x [D, F] matmul sharded Y ways: T_ici = act_bytes B D / W_ici against
    T_hbm = weight_bytes D F / (Y W_hbm); ICI stays hidden while Y < weight_bytes F W_ici / (act_bytes B W_hbm),
    = F / (B beta) in bf16, beta = W_hbm / W_ici. W_ici: one ring axis, both directions.
    Book: Part 8, "Thinking about throughput" (Y = F / (8 B): 56 at B = 64 for LLaMA 3 70B).

    Args:
        chip: a `Chip` or a name; d_ff: F (count); batch: B, sequences per step (count).
        param_dtype: the weights' format (`checks.DTYPES`); activation_dtype: the activations moved over ICI.
    """
    hw = get_chip(chip)
    checks.count("d_ff", d_ff)
    checks.count("batch", batch)
    weight_bytes = checks.dtype_bytes(param_dtype, "param_dtype")
    act_bytes = checks.dtype_bytes(activation_dtype, "activation_dtype")
    w_ici = max(topology.pod(hw).axis_bytes_per_s)
    return weight_bytes * d_ff * w_ici / (act_bytes * batch * hw.hbm_bytes_per_s)
