"""The text's bounds of training parallelism: when each scheme stays compute-bound, per layer.

A training step on N chips with X the data axes (pure data parallelism or FSDP) and Y the model axes
(tensor parallelism); the text's model (Part 5) treats every layer as two matrices W_in[D, F] and
W_out[F, D] and asks when communication hides under the matmuls:

    DP, FSDP:       compute-bound when B / X > C / (n_axes W)
                    (per chip, tokens)
    tensor:         compute-bound when Y < n_axes F W / C
    FSDP + tensor:  compute-bound when B / N > 4 alpha^2 / (M_X M_Y F),
                    alpha = C / W
    optimal FSDP:   X_opt = sqrt(B M_X N / (F M_Y))
    DCN across pods: compute-bound when B_pod > C_pod / W_dcn,pod

C is the chip's bf16 peak, W the ICI bandwidth of one ring axis in both directions (`topology`),
M_X and M_Y the physical axes given to FSDP and to tensor parallelism. `training.step_time` goes
further, on a real `parallelism.Layout`. A pipeline's bubble is (stages - 1) / microbatches
(`pipeline_bubble_fraction`); `pipeline_schedule` lays its timeline out op by op, to show the
schedules that shrink it.

Book: Part 5 (How to Parallelize a Transformer for Training); Part 6 (Training LLaMA 3 on TPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from book_lib import checks, roofline, topology
from book_lib.hardware import Chip, get_chip
from book_lib.parallelism import SCHEMES

__all__ = [
    "STRATEGIES",
    "STRATEGY_DEGREES",
    "ici_axis_bytes_per_s",
    "compute_bound_batch_per_chip",
    "max_tensor_parallelism",
    "dcn_compute_bound_batch",
    "optimal_fsdp_degree",
    "fsdp_degree_range",
    "fsdp_tp_comms_ratio",
    "pipeline_bubble_fraction",
    "PIPELINE_OPS",
    "PipelineOp",
    "PipelineSchedule",
    "pipeline_schedule",
    "LAYER_COST_FORMULAS",
    "LayerCost",
    "layer_costs",
]

# The text's schemes whose bounds this module gives, each the `parallelism.Layout` degrees it shards over,
# spelled in `parallelism.SCHEMES`' words: ("dp", "fsdp", "tp", "fsdp+tp").
STRATEGY_DEGREES = (("data",), ("fsdp",), ("tensor",), ("fsdp", "tensor"))
STRATEGIES = tuple("+".join(SCHEMES[degree].lower() for degree in degrees) for degrees in STRATEGY_DEGREES)


# ----- the text's bounds -----------------------------------------------------------------------------


def ici_axis_bytes_per_s(chip: Chip | str) -> float:
    """W: ICI bandwidth one chip uses along ONE ring axis, both directions (bytes/s).

    W = 2 * ici_bytes_per_s on a TPU ring, ici_links * ici_bytes_per_s through an NVSwitch: the
    largest per-axis figure of the chip's full pod (`topology.Slice.axis_bytes_per_s`). TPU v5p:
    2 * 9e10 = 1.8e11. Book: Part 5, "Data Parallelism" (W_ici, bidirectional).
    """
    return max(topology.pod(get_chip(chip)).axis_bytes_per_s)


def compute_bound_batch_per_chip(
    chip: Chip | str,
    *,
    strategy: str,
    n_axes: int = 1,
    d_ff: int | None = None,
    fsdp_axes: int = 2,
    tp_axes: int = 1,
) -> float:
    """Tokens per chip above which a layer's collectives hide under its matmuls over ICI (tokens).

        "dp", "fsdp":  B / X > C / (n_axes W)
                       (TPU v5p: 2550 on one axis, 850 on three)
        "fsdp+tp":     B / N > 4 alpha^2 / (M_X M_Y F),
                       alpha = C / W, M_X = fsdp_axes, M_Y = tp_axes
                       (two FSDP axes and one tensor axis by default:
                       2 alpha^2 / F)

    C = bf16 peak (`Chip.peak_ops_per_s`), W = `ici_axis_bytes_per_s`, F = d_ff.
    Book: Part 5, "Data Parallelism", "Fully-Sharded Data Parallelism" and "Mixed FSDP and Tensor
    Parallelism" (and its Appendix C).

    Raises:
        ValueError: unknown strategy or chip; "tp" (its bound is on Y: `max_tensor_parallelism`);
            d_ff missing for "fsdp+tp"; n_axes given with "fsdp+tp" (use fsdp_axes and tp_axes).
    """
    strategy = checks.one_of("strategy", strategy, ("dp", "fsdp", "fsdp+tp"))
    chip = get_chip(chip)
    alpha = roofline.critical_intensity(chip, bytes_per_s=ici_axis_bytes_per_s(chip))
    if strategy != "fsdp+tp":
        return alpha / checks.count("n_axes", n_axes)
    if n_axes != 1:
        raise ValueError(f"n_axes={n_axes!r}: not used by 'fsdp+tp'; allowed: 1 (give fsdp_axes and tp_axes)")
    if d_ff is None:
        raise ValueError("d_ff=None: 'fsdp+tp' needs the MLP width; allowed: an int >= 1")
    m_x, m_y = checks.count("fsdp_axes", fsdp_axes), checks.count("tp_axes", tp_axes)
    return 4 * alpha**2 / (m_x * m_y * checks.count("d_ff", d_ff))


def max_tensor_parallelism(chip: Chip | str, *, d_ff: int, n_axes: int = 1) -> int:
    """Largest tensor-parallel degree Y that keeps the MLP compute-bound over ICI (count).

    Compute-bound while Y < n_axes F / alpha, alpha = C / W (`compute_bound_batch_per_chip(chip, strategy="dp")`):
    the largest integer strictly below that. TPU v5p, F = 28,672: 11 on one axis.
    Book: Part 5, "Tensor Parallelism" (Y < n_axes F / 2550).

    Raises:
        ValueError: unknown chip, or d_ff or n_axes not a count.
    """
    bound = (
        checks.count("n_axes", n_axes) * checks.count("d_ff", d_ff) / compute_bound_batch_per_chip(chip, strategy="dp")
    )
    return max(1, math.ceil(bound) - 1)


def dcn_compute_bound_batch(chip: Chip | str, *, chips_per_pod: int) -> float:
    """Tokens per pod above which data parallelism across pods over DCN stays compute-bound (tokens).

    B_pod > C_pod / W_pod = chips_per_pod * C / (hosts * dcn_bytes_per_s), hosts = ceil(chips_per_pod /
    chips_per_host): the pure-DP rule with a whole pod as one replica. TPU v5p, 8960 chips: 73,440.
    Book: Part 5, "Scaling Between Pods".

    Raises:
        ValueError: unknown chip, or chips_per_pod not a count.
    """
    chip = get_chip(chip)
    n = checks.count("chips_per_pod", chips_per_pod)
    hosts = math.ceil(n / chip.chips_per_host)
    return n * chip.peak_ops_per_s("bf16") / (hosts * chip.dcn_bytes_per_s)


def optimal_fsdp_degree(n_chips: int, *, batch_tokens: float, d_ff: int, fsdp_axes: int = 2, tp_axes: int = 1) -> float:
    """X_opt, the FSDP degree that minimises mixed FSDP + tensor communication (count, not rounded).

    X_opt = sqrt(B M_X N / (F M_Y)), Y = N / X_opt; from T_comms(X) = F X / (N M_X) + B / (X M_Y).
    Book: Part 5, "Mixed FSDP and Tensor Parallelism" (N = 64, B = 48,000, F = 32,768: about 14).

    Raises:
        ValueError: a non-positive batch or a size that is not a count.
    """
    checks.positive("batch_tokens", batch_tokens)
    m_x, m_y = checks.count("fsdp_axes", fsdp_axes), checks.count("tp_axes", tp_axes)
    return math.sqrt(batch_tokens * m_x * checks.count("n_chips", n_chips) / (checks.count("d_ff", d_ff) * m_y))


def fsdp_degree_range(
    chip: Chip | str, n_chips: int, *, batch_tokens: float, d_ff: int, fsdp_axes: int = 2, tp_axes: int = 1
) -> tuple[float, float] | None:
    """FSDP degrees X for which mixed FSDP + tensor parallelism is compute-bound: (low, high), or None.

    Roots of F X^2 / (N M_X) - X B F / (N alpha) + B / M_Y = 0 (communication equals math):
        X = M_X (B / (2 alpha))
            +- M_X sqrt(B^2 F^2 - 4 alpha^2 F B N / (M_X M_Y)) / (2 alpha F)
    None when the discriminant is negative (B / N below `compute_bound_batch_per_chip(chip, strategy="fsdp+tp")`).
    With M_X = 2, M_Y = 1 the larger root is the text's X = B / alpha + sqrt(B^2 F^2 - 2 alpha^2 F B N) / (alpha F).
    Book: Part 6, "How to shard LLaMA 3-70B for training"; Part 5, Appendix C.

    Raises:
        ValueError: as `optimal_fsdp_degree`, or an unknown chip.
    """
    optimal_fsdp_degree(n_chips, batch_tokens=batch_tokens, d_ff=d_ff, fsdp_axes=fsdp_axes, tp_axes=tp_axes)
    alpha = compute_bound_batch_per_chip(chip, strategy="dp")
    b, f, n, m_x, m_y = float(batch_tokens), float(d_ff), float(n_chips), float(fsdp_axes), float(tp_axes)
    disc = b * b * f * f - 4 * alpha**2 * f * b * n / (m_x * m_y)
    if disc < 0:
        return None
    middle, half = m_x * b / (2 * alpha), m_x * math.sqrt(disc) / (2 * alpha * f)
    return (middle - half, middle + half)


def fsdp_tp_comms_ratio(
    chip: Chip | str,
    n_chips: int,
    *,
    fsdp_degree: float,
    batch_tokens: float,
    d_ff: int,
    fsdp_axes: int = 2,
    tp_axes: int = 1,
) -> float:
    """T_comms / T_math of a layer under mixed FSDP + tensor parallelism, the text's model (ratio).

    ratio(X) = (F X / (N M_X) + B / (X M_Y)) / (B F / (N alpha)),  alpha = C / W, Y = N / X:
    the FSDP weight traffic grows with X, the tensor-parallel activation traffic shrinks with it.
    Compute-bound below 1; equal to 1 at the ends of `fsdp_degree_range`, smallest at `optimal_fsdp_degree`.
    Book: Part 5, "Mixed FSDP and Tensor Parallelism" (and its Appendix C); Part 6.

    Raises:
        ValueError: a non-positive degree or batch, a size that is not a count, or an unknown chip.
    """
    x = checks.positive("fsdp_degree", fsdp_degree)
    optimal_fsdp_degree(n_chips, batch_tokens=batch_tokens, d_ff=d_ff, fsdp_axes=fsdp_axes, tp_axes=tp_axes)
    alpha = compute_bound_batch_per_chip(chip, strategy="dp")
    b, f, n = float(batch_tokens), float(d_ff), float(n_chips)
    comms = f * x / (n * fsdp_axes) + b / (x * tp_axes)
    return comms / (b * f / (n * alpha))


def pipeline_bubble_fraction(*, stages: int, microbatches: int, virtual_stages: int = 1) -> float:
    """Idle time a pipeline adds, as a fraction of the useful time (ratio).

    bubble = (stages - 1) / (v microbatches): M microbatches take M + S - 1 slots instead of M (GPipe
    and one-forward-one-backward alike, v = 1); an interleaved schedule gives each device v chunks of
    layers, so a slot is v times shorter (Narayanan et al. 2021, "interleaved 1F1B").
    Book: Part 5, "Pipelining" (the bubble; microbatching shrinks it).

    Raises:
        ValueError: stages, microbatches or virtual_stages not a count.
    """
    v = checks.count("virtual_stages", virtual_stages)
    return (checks.count("stages", stages) - 1) / (v * checks.count("microbatches", microbatches))


# ----- a pipeline's timeline, op by op ---------------------------------------------------------------

PIPELINE_OPS = ("F", "B", "W")  # forward; input gradient (B); weight gradient (W)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineOp:
    """One op of a pipeline schedule, on one device, in time units of one stage's forward pass.

    Attributes:
        kind: "F" (forward), "B" (input gradient; W's work too when the backward is not split) or "W".
        microbatch: which microbatch (count from 0).
        stage: which stage of the model (count from 0).
        start: the time unit it starts in.
        units: how many time units it takes (2 for an unsplit B, else 1).
    """

    kind: str
    microbatch: int
    stage: int
    start: int
    units: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineSchedule:
    """One training step's pipeline timeline, from `pipeline_schedule`.

    Attributes:
        stages, microbatches, split_backward, both_ways: as `pipeline_schedule` was called.
        timeline: per device, its ops in the order they start.
        span_units: time units from the first op's start to the last op's end.
    """

    stages: int
    microbatches: int
    split_backward: bool
    both_ways: bool
    timeline: tuple[tuple[PipelineOp, ...], ...]
    span_units: int

    @property
    def busy_units(self) -> int:
        """Time units a device works: F, B and W of every microbatch, 3 M (all devices alike)."""
        return max(sum(op.units for op in ops) for ops in self.timeline)

    @property
    def bubble_fraction(self) -> float:
        """Idle time over useful time (ratio): span_units / busy_units - 1."""
        return self.span_units / self.busy_units - 1


def _input_of(kind: str, m: int, p: int, stages: int) -> tuple[str, int, int] | None:
    """The op whose output op (kind, microbatch m, stage p) reads, or None for the first forward."""
    if kind == "F":
        return ("F", m, p - 1) if p else None
    if kind == "B":
        return ("B", m, p + 1) if p + 1 < stages else ("F", m, p)
    return ("B", m, p)


def pipeline_schedule(
    *, stages: int, microbatches: int, split_backward: bool = True, both_ways: bool = False
) -> PipelineSchedule:
    """A training step's pipeline timeline by a greedy rule, one device per stage (time units).

    F, B and W of one stage take one unit each; with split_backward=False, B does W's work too,
    in two. At each unit a free device starts the first op it can, in the order B, F, W, lowest
    microbatch first, and keeps at most stages - p microbatches of stage p forwarded but not yet
    back (one-forward-one-backward's memory). With both_ways, the second half of the microbatches
    enters at the last device and meets the stages in reverse (DeepSeek-V3's DualPipe), so every
    device holds two stages. Unsplit, the bubble is (stages - 1) / microbatches, as
    `pipeline_bubble_fraction`; splitting lets W fill the drain; both ways fills the warm-up too.
    Book: Part 5, "Pipelining" (the bubble, and DeepSeek's schedule that fills it).

    Raises:
        ValueError: stages or microbatches not a count, or a flag that is not a bool.
    """
    s, n_micro = checks.count("stages", stages), checks.count("microbatches", microbatches)
    for arg, flag in (("split_backward", split_backward), ("both_ways", both_ways)):
        if not isinstance(flag, bool):
            raise ValueError(f"{arg}={flag!r}: not a bool; allowed: True or False")
    units = {"F": 1, "B": 1 if split_backward else 2, "W": 1}
    half = n_micro // 2 if both_ways else n_micro  # microbatches that enter at device 0
    kinds = PIPELINE_OPS if split_backward else PIPELINE_OPS[:2]
    todo = sorted(("BFW".index(k), m, k, p) for k in kinds for m in range(n_micro) for p in range(s))  # B, F, W
    end: dict[tuple[str, int, int] | None, int] = {None: 0}
    free, in_flight = [0] * s, dict.fromkeys(((d, first) for d in range(s) for first in (True, False)), 0)
    timeline: list[list[PipelineOp]] = [[] for _ in range(s)]
    t = 0
    while todo:
        for d in range(s):
            for op in todo if free[d] <= t else []:
                _, m, k, p = op
                first = m < half
                if (p if first else s - 1 - p) != d or end.get(_input_of(k, m, p, s), t + 1) > t:
                    continue
                if k == "F" and in_flight[d, first] >= s - p:
                    continue
                in_flight[d, first] += {"F": 1, "B": -1, "W": 0}[k]
                end[k, m, p] = free[d] = t + units[k]
                timeline[d].append(PipelineOp(kind=k, microbatch=m, stage=p, start=t, units=units[k]))
                todo.remove(op)
                break
        t += 1
    return PipelineSchedule(
        stages=s,
        microbatches=n_micro,
        split_backward=split_backward,
        both_ways=both_ways,
        timeline=tuple(tuple(ops) for ops in timeline),
        span_units=max(free),
    )


# ----- the text's per-layer table --------------------------------------------------------------------

# Collective bytes per chip of one layer (two matrices W_in[D, F], W_out[F, D], bf16 values), as
# (forward, backward) in the text's letters. FLOPs need no table: 4BDF / N forward and 8BDF / N
# backward, N the chips the layer is split over (X, Y or XY). Book: Part 5, "Key Takeaways".
LAYER_COST_FORMULAS = {
    "dp": ("0", "8DF"),
    "fsdp": ("4DF", "8DF"),
    "tp": ("4BD", "4BD"),
    "fsdp+tp": ("4BD/X + 4DF/Y", "4BD/X + 8DF/Y"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerCost:
    """FLOPs and communicated bytes of one two-matrix layer on one chip, per pass.

    Bytes are counted as the text counts them: an AllGather or a ReduceScatter of an array of V bytes
    moves V, an AllReduce 2V (it is one of each), so T_comms = bytes / W on one ring axis.

    Attributes:
        strategy: one of `STRATEGIES`.
        flops_forward, flops_backward: matmul FLOPs per chip (FLOPs).
        bytes_forward, bytes_backward: collective bytes per chip (bytes).
    """

    strategy: str
    flops_forward: float
    flops_backward: float
    bytes_forward: float
    bytes_backward: float

    def intensity(self, phase: str) -> float:
        """FLOPs per communicated byte of "forward" or "backward" (FLOPs/byte; inf with no traffic)."""
        flops, moved = {
            "forward": (self.flops_forward, self.bytes_forward),
            "backward": (self.flops_backward, self.bytes_backward),
        }[checks.one_of("phase", phase, ("forward", "backward"))]
        return math.inf if moved == 0 else flops / moved


def layer_costs(
    *,
    strategy: str,
    batch_tokens: float,
    d_model: int,
    d_ff: int,
    x: int = 1,
    y: int = 1,
    dtype: str = "bf16",
) -> LayerCost:
    """The text's per-layer compute and communication of In[B, D] . W_in[D, F] . W_out[F, D] (per chip).

    FLOPs: 4BDF / (XY) forward, 8BDF / (XY) backward. Bytes, with p the bytes of a `dtype` value
    (`LAYER_COST_FORMULAS` writes them for bf16, p = 2):
        DP:      0 forward; AllReduce_X of both weights backward, 2 * 2 p D F
        FSDP:    AllGather_X of both weights (2 p D F) forward;
                 both again plus their ReduceScatter back
        TP:      AllGather_Y In and ReduceScatter_Y Out, 2 p B D, in each pass
                 (In kept for the backward)
        FSDP+TP: TP's traffic / X plus FSDP's / Y
    Compute-bound in a pass while its FLOPs per byte (`LayerCost.intensity`) exceed C / W.
    Book: Part 5, "Key Takeaways" (the table of compute and comms per layer) and Appendix B.

    Raises:
        ValueError: unknown strategy; a size that is not a count; y > 1 with "dp" or "fsdp", x > 1 with "tp".
    """
    strategy = checks.one_of("strategy", strategy, STRATEGIES)
    b, p = checks.positive("batch_tokens", batch_tokens), checks.dtype_bytes(dtype)
    d, f = checks.count("d_model", d_model), checks.count("d_ff", d_ff)
    x, y = checks.count("x", x), checks.count("y", y)
    if strategy in ("dp", "fsdp") and y > 1:
        raise ValueError(f"y={y!r}: {strategy!r} has no model axis; allowed: 1 (or strategy='fsdp+tp')")
    if strategy == "tp" and x > 1:
        raise ValueError(f"x={x!r}: 'tp' has no data axis; allowed: 1 (or strategy='fsdp+tp')")
    weights = 2 * p * d * f / y if strategy != "tp" else 0.0  # both matrices, one copy
    acts = 2 * p * b * d / x if strategy in ("tp", "fsdp+tp") else 0.0  # one gather and one scatter
    if strategy == "dp":
        forward, backward = 0.0, 2 * weights
    else:
        forward, backward = acts + weights, acts + 2 * weights
    n = x * y
    return LayerCost(
        strategy=strategy,
        flops_forward=4 * b * d * f / n,
        flops_backward=8 * b * d * f / n,
        bytes_forward=forward,
        bytes_backward=backward,
    )
