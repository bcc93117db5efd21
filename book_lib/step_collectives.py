"""The collectives of one training step on a `parallelism.Placement`: what moves, how often, how long.

For each degree of a `Layout`, the collectives the text's algorithms issue, sized from the model, the
batch and the dtypes, and timed by `collectives` on the placement's physical axes, hierarchically over
ICI and then DCN where a degree spans domains: FSDP's weight gathers and gradient reductions, data
parallelism's gradient AllReduce, tensor parallelism's activation gathers and scatters, context
parallelism's key/value gathers, expert parallelism's token AllToAlls, pipeline sends and the gradient
AllReduce across pods. Each `CollectiveCost` carries its roofline time (the larger of bandwidth and
latency, as the text counts it), its bandwidth time and fixed cost per call apart, and whether it can
overlap compute; `training.step_time` sums them, and `overheads.expected_terms` reads the rest.

Book: Part 5 (How to Parallelize a Transformer for Training: each algorithm's communication); Part 3
(the collectives' times).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from book_lib import checks, collectives
from book_lib.parallelism import Layout, Placement, StepDtypes
from book_lib.transformer import TransformerConfig

__all__ = ["CollectiveCost", "StepShape", "stage_layers", "step_collectives", "step_shape"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCost:
    """One kind of collective in a training step: its size, how often, how long (s).

    total_s = calls * seconds_per_call; seconds_per_call from `collectives.collective_time`
    (a one-hop send for the pipeline's "permute").

    Attributes:
        name: the degree's scheme and what moves ("FSDP weight all-gather", "TP activation reduce-scatter").
        op: "all_gather", "reduce_scatter", "all_reduce" or "permute".
        phase: "forward" or "backward".
        axes: the degrees of the layout it runs over ("fsdp", "tensor", ...; "pod" over DCN).
        link: "ici" or "dcn".
        array_bytes: V of one call, as `collectives` defines it (bytes).
        calls: calls per step (count).
        seconds_per_call: the larger of its bandwidth and latency times (s): the roofline's.
        bandwidth_s: its bandwidth time alone, per call (s).
        latency_s: its fixed cost per call, `collectives.call_latency_s` (NCCL's model on GPUs) (s).
        overlaps: whether it can run under compute: False for the tensor-parallel and expert-parallel
            collectives, whose output the very next matmul needs.
        after_backward: whether the step issues it once its last backward pass is done and waits for it
            (a data-parallel gradient reduction where the software does not overlap it; then not `overlaps`).
    """

    name: str
    op: str
    phase: str
    axes: tuple[str, ...]
    link: str
    array_bytes: float
    calls: int
    seconds_per_call: float
    bandwidth_s: float
    latency_s: float
    overlaps: bool
    after_backward: bool = False

    @property
    def total_s(self) -> float:
        """calls * seconds_per_call (s)."""
        return self.calls * self.seconds_per_call

    @property
    def expected_s(self) -> float:
        """calls * (bandwidth_s + latency_s): every call pays both, one after another (s)."""
        return self.calls * (self.bandwidth_s + self.latency_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepShape:
    """What one training step is, worked out once (`step_shape`); the step's FLOPs, collectives and
    expected-time terms (`training.step_time`) all read it.

    Attributes:
        cfg: the model.
        placement: the layout on its chips (`parallelism.place`).
        dtypes: the step's dtypes.
        batch_tokens: tokens of the whole step, B (count).
        seq_len: tokens of one sequence (count).
        layers: layers of the busiest pipeline stage, ceil(L / S) (`stage_layers`) (count).
        virtual_stages: each chip's chunks of an interleaved pipeline, v (count).
        shard_tokens: tokens of one batch shard, B / (data fsdp context expert) (count).
        microbatch_tokens: tokens one chip's matmuls multiply at once, shard_tokens context / M (count).
        held_params: parameters of one copy of the weights an expert group holds
            (`TransformerConfig.params_held`) (count).
        model_flops: the model FLOPs of one chip, flops_per_token(seq_len, training, causal) B / N (FLOPs).
        overlap_grad_reduce: whether the data-parallel gradient reductions run under the backward pass, or
            after it, the step waiting (Megatron-LM before its --overlap-grad-reduce, DeepSpeed's pipeline).
    """

    cfg: TransformerConfig
    placement: Placement
    dtypes: StepDtypes
    batch_tokens: int
    seq_len: int
    layers: int
    virtual_stages: int
    shard_tokens: float
    microbatch_tokens: float
    held_params: float
    model_flops: float
    overlap_grad_reduce: bool = True

    @property
    def layout(self) -> Layout:
        """The placement's layout."""
        return self.placement.layout


def step_shape(
    cfg: TransformerConfig,
    pl: Placement,
    *,
    batch_tokens: int,
    seq_len: int,
    virtual_stages: int,
    dtypes: StepDtypes,
    overlap_grad_reduce: bool = True,
) -> StepShape:
    """The `StepShape` of `batch_tokens` tokens in sequences of `seq_len` on `pl` (checked by `training.step_time`).

    Raises:
        ValueError: virtual_stages not a count that divides the busiest stage's layers; overlap_grad_reduce
            not a bool.
    """
    if not isinstance(overlap_grad_reduce, bool):
        raise ValueError(f"overlap_grad_reduce={overlap_grad_reduce!r}: not a bool; allowed: True, False")
    layout, layers = pl.layout, stage_layers(cfg, pl.layout)
    v = checks.count("virtual_stages", virtual_stages)
    if v > 1 and layers % v:
        raise ValueError(
            f"virtual_stages={v!r}: does not divide the {layers} layers of a stage; allowed: a divisor of {layers}"
        )
    shard_tokens = batch_tokens / layout.batch_shards
    return StepShape(
        cfg=cfg, placement=pl, dtypes=dtypes, batch_tokens=int(batch_tokens), seq_len=int(seq_len), layers=layers,
        virtual_stages=v, shard_tokens=shard_tokens,
        microbatch_tokens=shard_tokens * layout.context / layout.microbatches,
        held_params=cfg.params_held(layout.expert),
        model_flops=cfg.flops_per_token(seq_len, training=True, causal=True) * batch_tokens / layout.n_chips,
        overlap_grad_reduce=overlap_grad_reduce,
    )  # fmt: skip


def stage_layers(cfg: TransformerConfig, layout: Layout) -> int:
    """Layers of the largest pipeline stage: ceil(L / stages) (Llama 3 405B's 126 layers on 16 stages: 8)."""
    return -(-cfg.n_layers // layout.pipeline)


def _call_s(op: str, v: float, pl: Placement, degree: str) -> tuple[float, float, float]:
    """One call of `op` on V bytes over a degree: (roofline time, bandwidth time, latency) (s). Over its ICI
    axes inside a domain, then over the domains it spans on DCN with V / (its chips in a domain),
    hierarchically. Data parallelism across domains is one gradient AllReduce per step ("pod")."""
    parts = []
    if degree == "pod":
        parts.append((collectives.collective_time(op, v, pl.dcn["data"], pl.chip, link="dcn"), pl.dcn["data"], "dcn"))
    else:
        sizes, spans = pl.axes[degree], _spans(pl, degree)
        inner = math.prod(sizes)
        # an AllToAll's V is the whole group's array: each chip holds V / (inner spans), sends 1 / (inner spans)
        # of it to each chip of its domain (an AllToAll of V / spans^2 there) and (spans - 1) / spans across
        v_ici, v_dcn = (v / spans**2, v / inner) if op == "all_to_all" else (v, v / inner)
        if sizes:
            time = collectives.collective_time(op, v_ici, sizes, pl.chip, wraparound=pl.rings[degree])
            parts.append((time, inner, "ici"))
        if spans > 1:
            parts.append((collectives.collective_time(op, v_dcn, spans, pl.chip, link="dcn"), spans, "dcn"))
    latency = sum(collectives.call_latency_s(op, n, pl.chip, link=link, hops=t.hops) for t, n, link in parts)
    return sum(t.total_s for t, _, _ in parts), sum(t.bandwidth_s for t, _, _ in parts), latency


def _link(pl: Placement, degree: str) -> str:
    """ "ici", "dcn" or "ici+dcn": where a degree's collectives run."""
    if degree == "pod":
        return "dcn"
    return "+".join(name for name, used in (("ici", pl.axes[degree]), ("dcn", _spans(pl, degree) > 1)) if used)


def _spans(pl: Placement, degree: str) -> int:
    """Domains a degree's per-layer collectives cross (data's cross once a step, as "pod")."""
    return 1 if degree == "data" else pl.dcn[degree]


def _cost(
    pl: Placement, what: str, op: str, phase: str, degree: str, v: float, calls: int, *, overlaps: bool = True
) -> CollectiveCost:
    """One collective over a degree's chips, named by the degree's scheme (`Layout.scheme`; "pod" is the data
    degree across pods) and `what` moves ("weight all-gather": "FSDP weight all-gather")."""
    seconds, bandwidth, latency = _call_s(op, v, pl, degree)
    name = f"{pl.layout.scheme('data' if degree == 'pod' else degree)} {what}"
    return CollectiveCost(
        name=name, op=op, phase=phase, axes=(degree,), link=_link(pl, degree), array_bytes=v, calls=calls,
        seconds_per_call=seconds, bandwidth_s=bandwidth, latency_s=latency, overlaps=overlaps,
    )  # fmt: skip


def _weight_collectives(pl: Placement, layer_bytes: float, layers: int) -> list[CollectiveCost]:
    """FSDP gathers and scatters per layer over the fsdp axes; the DP gradient AllReduce of each layer's
    fsdp shard over the data axes inside a pod, or under `Layout.zero` its ReduceScatter and the AllGather
    of the updated weights."""
    lay, out = pl.layout, []
    v = layer_bytes / lay.tensor  # one layer's weights on a chip's tensor shard, experts already cut by expert
    if pl.axes["fsdp"] or pl.dcn["fsdp"] > 1:
        out += [
            _cost(pl, "weight all-gather", "all_gather", "forward", "fsdp", v, layers),
            _cost(pl, "weight all-gather", "all_gather", "backward", "fsdp", v, layers),
            _cost(pl, "gradient reduce-scatter", "reduce_scatter", "backward", "fsdp", v, layers),
        ]
    if pl.axes["data"] and lay.zero:
        out += [
            _cost(pl, "gradient reduce-scatter", "reduce_scatter", "backward", "data", v / lay.fsdp, layers),
            _cost(pl, "weight all-gather", "all_gather", "forward", "data", v / lay.fsdp, layers),
        ]
    elif pl.axes["data"]:
        out.append(_cost(pl, "gradient all-reduce", "all_reduce", "backward", "data", v / lay.fsdp, layers))
    return out


def _activation_collectives(pl: Placement, micro_bytes: float, kv_bytes: float, layers: int) -> list[CollectiveCost]:
    """Tensor parallelism: gather [b, D] before each block and reduce-scatter after, both passes; context
    parallelism: gather each layer's keys and values over the context axes, scatter their gradients."""
    m, out = pl.layout.microbatches, []
    if pl.axes["tensor"]:
        for phase in ("forward", "backward"):
            for op, what in (("all_gather", "all-gather"), ("reduce_scatter", "reduce-scatter")):
                out.append(_cost(pl, f"activation {what}", op, phase, "tensor", micro_bytes, 2 * layers * m,
                                 overlaps=False))  # fmt: skip
    if pl.axes["context"] or pl.dcn["context"] > 1:
        out += [
            _cost(pl, "key/value all-gather", "all_gather", "forward", "context", kv_bytes, layers * m),
            _cost(pl, "key/value all-gather", "all_gather", "backward", "context", kv_bytes, layers * m),
            _cost(pl, "key/value reduce-scatter", "reduce_scatter", "backward", "context", kv_bytes, layers * m),
        ]
    return out


def _stage_and_pod_collectives(
    pl: Placement, send_bytes: float, stage_bytes: float, virtual_stages: int
) -> list[CollectiveCost]:
    """Pipeline sends between neighbouring stages, and the gradient AllReduce across pods over DCN."""
    out, lay = [], pl.layout
    if lay.pipeline > 1:
        # one hop, one link; over DCN when stages span domains (the slowest boundary paces the pipeline)
        link = "dcn" if pl.dcn["pipeline"] > 1 else "ici"
        rate = pl.chip.dcn_bytes_per_s_per_chip if link == "dcn" else pl.chip.ici_bytes_per_s
        seconds = send_bytes / rate + collectives.HOP_LATENCY_S
        latency = collectives.HOP_LATENCY_S if pl.chip.is_tpu and link == "ici" else collectives.NCCL_BASE_LATENCY_S
        for phase, what in (("forward", "activations"), ("backward", "gradients")):
            out.append(
                CollectiveCost(
                    name=f"{lay.scheme('pipeline')} {what} send",
                    op="permute",
                    phase=phase,
                    axes=("pipeline",),
                    link=link,
                    array_bytes=send_bytes,
                    calls=lay.microbatches * virtual_stages,
                    seconds_per_call=seconds,
                    bandwidth_s=send_bytes / rate,
                    latency_s=latency,
                    overlaps=True,
                )  # fmt: skip
            )
    if pl.dcn["data"] > 1:
        in_pod = lay.n_chips // (pl.dcn["data"] * lay.pipeline)  # each chip's gradient shard after the in-pod reduction
        shard = stage_bytes / in_pod
        if lay.zero:
            out += [
                _cost(pl, "gradient reduce-scatter over DCN", "reduce_scatter", "backward", "pod", shard, 1),
                _cost(pl, "weight all-gather over DCN", "all_gather", "forward", "pod", shard, 1),
            ]
        else:
            out.append(_cost(pl, "gradient all-reduce over DCN", "all_reduce", "backward", "pod", shard, 1))
    return out


def step_collectives(step: StepShape) -> tuple[CollectiveCost, ...]:
    """Every collective of a step (see `training.step_time`), sized from its batch and dtypes."""
    cfg, pl, layout, layers = step.cfg, step.placement, step.layout, step.layers
    pb = checks.dtype_bytes(step.dtypes.param_dtype)
    ab = checks.dtype_bytes(step.dtypes.activation_dtype)
    stage_bytes = cfg.param_count() * pb * layers / cfg.n_layers
    micro_bytes = step.shard_tokens / layout.microbatches * cfg.d_model * ab
    kv_bytes = step.microbatch_tokens * cfg.kv_values_per_token_layer * ab / layout.tensor
    shared_bytes = (cfg.param_count() - cfg.routed_expert_params) * pb / cfg.n_layers
    out = (
        *_weight_collectives(pl, step.held_params * pb / cfg.n_layers, layers),
        *_activation_collectives(pl, micro_bytes, kv_bytes, layers),
        *_expert_collectives(cfg, pl, micro_bytes, shared_bytes, layers),
        *_stage_and_pod_collectives(pl, micro_bytes / layout.tensor, stage_bytes, step.virtual_stages),
    )
    if step.overlap_grad_reduce:
        return out
    # the data degree's reductions (and, under ZeRO, the gathers of the updated weights) wait for the backward
    return tuple(
        dataclasses.replace(c, overlaps=False, after_backward=True) if c.axes[0] in ("data", "pod") else c for c in out
    )


def _expert_collectives(
    cfg: TransformerConfig, pl: Placement, micro_bytes: float, shared_bytes: float, layers: int
) -> list[CollectiveCost]:
    """Expert parallelism: per MoE layer and microbatch, an AllToAll sends each token's k copies to their
    experts and one brings them back, both passes (V = expert k b D bytes over the group); the weights
    outside the routed experts are replicas across the expert degree, their gradients all-reduced, one
    call for each of the stage's `layers`."""
    lay = pl.layout
    if lay.expert == 1:
        return []
    moe_layers = -(-cfg.moe_layers // lay.pipeline)
    v = lay.expert * cfg.experts_per_token * micro_bytes / lay.tensor
    calls = 2 * moe_layers * lay.microbatches
    out = [
        _cost(pl, "token dispatch and combine", "all_to_all", phase, "expert", v, calls, overlaps=False)
        for phase in ("forward", "backward")
    ]
    out.append(_cost(pl, "replicas' gradient all-reduce", "all_reduce", "backward", "expert",
                     shared_bytes / (lay.tensor * lay.fsdp), layers))  # fmt: skip
    return out
