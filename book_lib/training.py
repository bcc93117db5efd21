"""Training cost model: when each parallelism scheme stays compute-bound, step time, memory, a planner.

A training step of a Transformer on N = pods * stages * X * Y chips, with X the data axes (pure data
parallelism or FSDP), Y the model axes (tensor parallelism), `stages` pipeline stages and `pods`
replicas joined by the data-centre network (DCN). The text's model (Part 5) treats every layer as
two matrices W_in[D, F] and W_out[F, D] and asks when communication hides under the matmuls:

    DP, FSDP:       compute-bound when B / X > C / (n_axes W)                  (per chip, tokens)
    tensor:         compute-bound when Y < n_axes F W / C
    FSDP + tensor:  compute-bound when B / N > 4 alpha^2 / (M_X M_Y F),   alpha = C / W
    optimal FSDP:   X_opt = sqrt(B M_X N / (F M_Y))
    DCN across pods: compute-bound when B_pod > C_pod / W_dcn,pod

C is the chip's bf16 peak, W the ICI bandwidth of one ring axis in both directions (`topology`),
M_X and M_Y the physical axes given to FSDP and to tensor parallelism. `step_time` goes further: the
real layer (attention and a gated MLP, every weight), each collective timed by `collectives` on the
mesh's physical rings, forward and backward, and the pipeline bubble (stages - 1) / microbatches.

Mesh axes are named by their role: `"pod"` (data parallelism over DCN), `"stage"` (pipeline), and
any name starting with `"data"` (data parallel or FSDP) or `"model"` (tensor parallel). Each ICI axis
of the mesh counts as one ring axis of bandwidth W, so a mesh has at most as many ICI axes as the
torus has sides. On a full 16x20x28 TPU v5p pod, `{"data_x": 20, "data_y": 112, "model": 4}` cuts
4 chips of tensor parallelism out of the 28 side and joins the 7 left over to the 16 side: two FSDP
axes and one tensor axis, the text's M_X = 2 and M_Y = 1. Axes inside a slice whose rings close (a
whole 3D pod, say) are rings, pieces cut out of a ring included (the optical switches close them,
as the text assumes); in other slices only an axis as long as a wrapped side is.

Book: Part 5 (How to Parallelize a Transformer for Training); Part 6 (Training LLaMA 3 on TPUs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from book_lib import checks, collectives, roofline, topology
from book_lib.hardware import Chip, price_usd_per_chip_hour
from book_lib.transformer import TransformerConfig, get_model

__all__ = [
    "STRATEGIES",
    "OPTIMIZERS",
    "CollectiveCost",
    "StepTime",
    "MemoryPerChip",
    "TrainingRun",
    "PlanEntry",
    "TrainingPlan",
    "ici_axis_bytes_per_s",
    "compute_bound_batch_per_chip",
    "max_tensor_parallelism",
    "dcn_compute_bound_batch",
    "optimal_fsdp_degree",
    "fsdp_degree_range",
    "fsdp_tp_comms_ratio",
    "pipeline_bubble_fraction",
    "LAYER_COST_FORMULAS",
    "LayerCost",
    "layer_costs",
    "zero_memory_per_chip",
    "step_time",
    "memory_per_chip",
    "plan_training",
    "training_days",
    "mfu",
]

STRATEGIES = ("dp", "fsdp", "tp", "fsdp+tp")
# Optimizer state per parameter, in numbers of optimizer_dtype values (Adam: two moments).
OPTIMIZERS = {"adam": 2, "momentum": 1, "sgd": 0}
_DTYPE_BYTES = {
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "fp32": 4,
    "float32": 4,
    "f32": 4,
    "fp8": 1,
    "int8": 1,
}
_SECONDS_PER_DAY = 86_400.0


# ----- the text's bounds -----------------------------------------------------------------------------


def ici_axis_bytes_per_s(chip: Chip | str) -> float:
    """W: ICI bandwidth one chip uses along ONE ring axis, both directions (bytes/s).

    W = 2 * ici_bytes_per_s on a TPU ring, ici_links * ici_bytes_per_s through an NVSwitch: the
    largest per-axis figure of the chip's full pod (`topology.Slice.axis_bytes_per_s`). TPU v5p:
    2 * 9e10 = 1.8e11. Book: Part 5, "Data Parallelism" (W_ici, bidirectional).
    """
    return max(topology.pod(checks.chip(chip)).axis_bytes_per_s)


def compute_bound_batch_per_chip(
    strategy: str,
    chip: Chip | str,
    *,
    n_axes: int = 1,
    d_ff: int | None = None,
    fsdp_axes: int = 2,
    tp_axes: int = 1,
) -> float:
    """Tokens per chip above which a layer's collectives hide under its matmuls over ICI (tokens).

    "dp", "fsdp":  B / X > C / (n_axes W)            (TPU v5p: 2550 on one axis, 850 on three)
    "fsdp+tp":     B / N > 4 alpha^2 / (M_X M_Y F),  alpha = C / W, M_X = fsdp_axes, M_Y = tp_axes
                   (two FSDP axes and one tensor axis by default: 2 alpha^2 / F)
    C = bf16 peak (`Chip.peak_ops_per_s`), W = `ici_axis_bytes_per_s`, F = d_ff.
    Book: Part 5, "Data Parallelism", "Fully-Sharded Data Parallelism" and "Mixed FSDP and Tensor
    Parallelism" (and its Appendix C).

    Raises:
        ValueError: unknown strategy or chip; "tp" (its bound is on Y: `max_tensor_parallelism`);
            d_ff missing for "fsdp+tp"; n_axes given with "fsdp+tp" (use fsdp_axes and tp_axes).
    """
    strategy = checks.one_of("strategy", strategy, ("dp", "fsdp", "fsdp+tp"))
    chip = checks.chip(chip)
    alpha = roofline.critical_intensity(chip, bytes_per_s=ici_axis_bytes_per_s(chip))
    if strategy != "fsdp+tp":
        return alpha / checks.count("n_axes", n_axes)
    if n_axes != 1:
        raise ValueError(f"n_axes={n_axes!r}: not used by 'fsdp+tp'; allowed: 1 (give fsdp_axes and tp_axes)")
    if d_ff is None:
        raise ValueError("d_ff=None: 'fsdp+tp' needs the MLP width; allowed: an int >= 1")
    m_x, m_y = checks.count("fsdp_axes", fsdp_axes), checks.count("tp_axes", tp_axes)
    return 4 * alpha**2 / (m_x * m_y * checks.count("d_ff", d_ff))


def max_tensor_parallelism(chip: Chip | str, d_ff: int, *, n_axes: int = 1) -> int:
    """Largest tensor-parallel degree Y that keeps the MLP compute-bound over ICI (count).

    Compute-bound while Y < n_axes F / alpha, alpha = C / W (`compute_bound_batch_per_chip("dp")`):
    the largest integer strictly below that. TPU v5p, F = 28,672: 11 on one axis.
    Book: Part 5, "Tensor Parallelism" (Y < n_axes F / 2550).

    Raises:
        ValueError: unknown chip, or d_ff or n_axes not a count.
    """
    bound = checks.count("n_axes", n_axes) * checks.count("d_ff", d_ff) / compute_bound_batch_per_chip("dp", chip)
    return max(1, math.ceil(bound) - 1)


def dcn_compute_bound_batch(chip: Chip | str, chips_per_pod: int) -> float:
    """Tokens per pod above which data parallelism across pods over DCN stays compute-bound (tokens).

    B_pod > C_pod / W_pod = chips_per_pod * C / (hosts * dcn_bytes_per_s), hosts = ceil(chips_per_pod /
    chips_per_host): the pure-DP rule with a whole pod as one replica. TPU v5p, 8960 chips: 73,440.
    Book: Part 5, "Scaling Between Pods".

    Raises:
        ValueError: unknown chip, or chips_per_pod not a count.
    """
    chip = checks.chip(chip)
    n = checks.count("chips_per_pod", chips_per_pod)
    hosts = math.ceil(n / chip.chips_per_host)
    return n * chip.peak_ops_per_s("bf16") / (hosts * chip.dcn_bytes_per_s)


def optimal_fsdp_degree(batch_tokens: float, d_ff: int, n_chips: int, *, fsdp_axes: int = 2, tp_axes: int = 1) -> float:
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
    batch_tokens: float, d_ff: int, n_chips: int, chip: Chip | str, *, fsdp_axes: int = 2, tp_axes: int = 1
) -> tuple[float, float] | None:
    """FSDP degrees X for which mixed FSDP + tensor parallelism is compute-bound: (low, high), or None.

    Roots of F X^2 / (N M_X) - X B F / (N alpha) + B / M_Y = 0 (communication equals math):
        X = M_X (B / (2 alpha)) +- M_X sqrt(B^2 F^2 - 4 alpha^2 F B N / (M_X M_Y)) / (2 alpha F)
    None when the discriminant is negative (B / N below `compute_bound_batch_per_chip("fsdp+tp")`).
    With M_X = 2, M_Y = 1 the larger root is the text's X = B / alpha + sqrt(B^2 F^2 - 2 alpha^2 F B N) / (alpha F).
    Book: Part 6, "How to shard LLaMA 3-70B for training"; Part 5, Appendix C.

    Raises:
        ValueError: as `optimal_fsdp_degree`, or an unknown chip.
    """
    optimal_fsdp_degree(batch_tokens, d_ff, n_chips, fsdp_axes=fsdp_axes, tp_axes=tp_axes)  # validates
    alpha = compute_bound_batch_per_chip("dp", chip)
    b, f, n, m_x, m_y = float(batch_tokens), float(d_ff), float(n_chips), float(fsdp_axes), float(tp_axes)
    disc = b * b * f * f - 4 * alpha**2 * f * b * n / (m_x * m_y)
    if disc < 0:
        return None
    middle, half = m_x * b / (2 * alpha), m_x * math.sqrt(disc) / (2 * alpha * f)
    return (middle - half, middle + half)


def fsdp_tp_comms_ratio(
    fsdp_degree: float,
    batch_tokens: float,
    d_ff: int,
    n_chips: int,
    chip: Chip | str,
    *,
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
    optimal_fsdp_degree(batch_tokens, d_ff, n_chips, fsdp_axes=fsdp_axes, tp_axes=tp_axes)  # validates
    alpha = compute_bound_batch_per_chip("dp", chip)
    b, f, n = float(batch_tokens), float(d_ff), float(n_chips)
    comms = f * x / (n * fsdp_axes) + b / (x * tp_axes)
    return comms / (b * f / (n * alpha))


def pipeline_bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle time a GPipe-style pipeline adds, as a fraction of the useful time (ratio).

    bubble = (stages - 1) / microbatches: M microbatches take M + S - 1 slots instead of M.
    Book: Part 5, "Pipelining" (the bubble; microbatching shrinks it).

    Raises:
        ValueError: stages or microbatches not a count.
    """
    return (checks.count("stages", stages) - 1) / checks.count("microbatches", microbatches)


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
    strategy: str,
    *,
    batch_tokens: float,
    d_model: int,
    d_ff: int,
    x: int = 1,
    y: int = 1,
    bytes_per_value: float = 2,
) -> LayerCost:
    """The text's per-layer compute and communication of In[B, D] . W_in[D, F] . W_out[F, D] (per chip).

    FLOPs: 4BDF / (XY) forward, 8BDF / (XY) backward. Bytes, with p = bytes_per_value
    (`LAYER_COST_FORMULAS` writes them for p = 2):
        DP:      0 forward; AllReduce_X of both weights backward, 2 * 2 p D F
        FSDP:    AllGather_X of both weights (2 p D F) forward; both again plus their ReduceScatter back
        TP:      AllGather_Y In and ReduceScatter_Y Out, 2 p B D, in each pass (In kept for the backward)
        FSDP+TP: TP's traffic / X plus FSDP's / Y
    Compute-bound in a pass while its FLOPs per byte (`LayerCost.intensity`) exceed C / W.
    Book: Part 5, "Key Takeaways" (the table of compute and comms per layer) and Appendix B.

    Raises:
        ValueError: unknown strategy; a size that is not a count; y > 1 with "dp" or "fsdp", x > 1 with "tp".
    """
    strategy = checks.one_of("strategy", strategy, STRATEGIES)
    b, p = checks.positive("batch_tokens", batch_tokens), checks.positive("bytes_per_value", bytes_per_value)
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


def zero_memory_per_chip(
    param_count: float,
    n_data: int,
    *,
    stage: int,
    bytes_per_param: float = 2,
    bytes_per_grad: float = 2,
    optimizer_bytes_per_param: float = 12,
) -> MemoryPerChip:
    """Parameters, gradients and optimizer state on one of n_data data-parallel chips under ZeRO (bytes).

    stage 0 (plain DP) keeps all three whole; ZeRO-1 divides the optimizer state by n_data, ZeRO-2 the
    gradients too, ZeRO-3 (FSDP) the parameters too. The defaults are mixed-precision Adam as the ZeRO
    paper counts it (K = 12: fp32 master weights and two moments): 7.5B parameters on 64 chips need
    120 GB, 31.4 GB, 16.6 GB and 1.9 GB. Activations are left out (0), and no chip is set.
    Book: Part 5, Appendix A (the ZeRO figure); "Fully-Sharded Data Parallelism".

    Raises:
        ValueError: a negative size, n_data not a count, stage not 0 to 3.
    """
    params = checks.non_negative("param_count", param_count)
    n = checks.count("n_data", n_data)
    if stage not in (0, 1, 2, 3) or isinstance(stage, bool):
        raise ValueError(f"stage={stage!r}: not a ZeRO stage; allowed: 0, 1, 2, 3")
    sizes = [
        params * checks.non_negative("bytes_per_param", bytes_per_param),
        params * checks.non_negative("bytes_per_grad", bytes_per_grad),
        params * checks.non_negative("optimizer_bytes_per_param", optimizer_bytes_per_param),
    ]
    cut = {0: (), 1: (2,), 2: (1, 2), 3: (0, 1, 2)}[stage]
    p, g, o = (size / n if i in cut else size for i, size in enumerate(sizes))
    return MemoryPerChip(params_bytes=p, grads_bytes=g, optimizer_bytes=o, activations_bytes=0.0, hbm_bytes=None)


# ----- meshes ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Layout:
    """A mesh split by role, with the ring flags of its ICI axes."""

    pods: int
    stages: int
    data: tuple[int, ...]
    model: tuple[int, ...]
    data_wrap: tuple[bool, ...]
    model_wrap: tuple[bool, ...]
    data_names: tuple[str, ...]
    model_names: tuple[str, ...]

    @property
    def x(self) -> int:
        return math.prod(self.data)

    @property
    def y(self) -> int:
        return math.prod(self.model)

    @property
    def n_chips(self) -> int:
        return self.pods * self.stages * self.x * self.y


def _role(name: object, mesh: Mapping[str, int]) -> str:
    if name in ("pod", "stage"):
        return str(name)
    if isinstance(name, str) and name.startswith(("data", "model")):
        return "data" if name.startswith("data") else "model"
    raise ValueError(
        f"mesh={dict(mesh)!r}: axis {name!r} has no known role; "
        "allowed: 'pod', 'stage', names starting with 'data' or 'model'"
    )


def _check_fits_pod(chip: Chip, mesh: Mapping[str, int], n_axes: int, n_ici: int) -> None:
    if n_ici > chip.chips_per_pod:
        raise ValueError(
            f"mesh={dict(mesh)!r}: {n_ici} chips on ICI, more than a {chip.name} pod; "
            f"allowed: at most {chip.chips_per_pod} (put more on a 'pod' axis)"
        )
    if chip.ici_topology != "nvswitch" and n_axes > len(chip.pod_shape):
        raise ValueError(
            f"mesh={dict(mesh)!r}: {n_axes} ICI axes, but a {chip.name} torus has {len(chip.pod_shape)}; "
            f"allowed: at most {len(chip.pod_shape)} axes of size > 1 besides 'pod' (merge the pieces of a side)"
        )


def _layout(chip: Chip | None, mesh: Mapping[str, int]) -> _Layout:
    """Split `mesh` by role and decide which ICI axes are rings (see the module docstring); without a
    chip, every axis is a ring and no pod limit applies (memory counts need only the roles)."""
    if not isinstance(mesh, Mapping) or not mesh:
        raise ValueError(f"mesh={mesh!r}: not a mapping of axis names to sizes; allowed: e.g. {{'data': 8}}")
    sizes = {name: checks.count(f"mesh[{name!r}]", size) for name, size in mesh.items()}
    roles = {name: _role(name, mesh) for name in sizes}
    ici = [name for name in sizes if roles[name] in ("data", "model", "stage") and sizes[name] > 1]
    n_ici = math.prod(sizes[name] for name in ici)
    data = [n for n in sizes if roles[n] == "data"]
    model = [n for n in sizes if roles[n] == "model"]
    ring_sides: set[int] = set()
    all_rings = True
    if chip is not None:
        _check_fits_pod(chip, mesh, len(ici), n_ici)
        enclosing = topology.smallest_slice(chip, n_ici)
        ring_sides = {side for side, wraps in zip(enclosing.shape, enclosing.wraparound, strict=True) if wraps}
        all_rings = all(enclosing.wraparound)

    def wraps(size: int) -> bool:
        return all_rings or size in ring_sides

    return _Layout(
        pods=sizes.get("pod", 1),
        stages=sizes.get("stage", 1),
        data=tuple(sizes[n] for n in data),
        model=tuple(sizes[n] for n in model),
        data_wrap=tuple(wraps(sizes[n]) for n in data),
        model_wrap=tuple(wraps(sizes[n]) for n in model),
        data_names=tuple(data),
        model_names=tuple(model),
    )


def _check_strategy(strategy: str, layout: _Layout) -> str:
    strategy = checks.one_of("strategy", strategy, STRATEGIES)
    if strategy in ("dp", "fsdp") and layout.y > 1:
        raise ValueError(f"strategy={strategy!r}: the mesh has model axes of {layout.y} chips; allowed: 'fsdp+tp'")
    if strategy == "tp" and layout.x > 1:
        raise ValueError(f"strategy='tp': the mesh has data axes of {layout.x} chips; allowed: 'fsdp+tp'")
    return strategy


def _dtype_bytes(arg: str, dtype: str) -> int:
    return _DTYPE_BYTES[checks.one_of(arg, dtype, _DTYPE_BYTES)]


def _check_batch(cfg: TransformerConfig, layout: _Layout, batch_tokens: int, seq_len: int, microbatches: int) -> None:
    """Whole sequences, at least one token per data shard and microbatch, stages and model axes dividing
    the layers and the heads. Tokens need not split evenly: like the text (8960 chips, 4M tokens: 468
    per chip), the model treats a shard's tokens as a real number and sequences may be cut (context
    parallelism)."""
    b, t = checks.count("batch_tokens", batch_tokens), checks.count("seq_len", seq_len)
    if b < t or b % t:
        raise ValueError(f"batch_tokens={b!r}: not a whole number of sequences of {t}; allowed: a multiple of {t}")
    shards = layout.x * layout.pods * microbatches
    if b < shards:
        raise ValueError(
            f"batch_tokens={b!r}: fewer tokens than {layout.x * layout.pods} data shards x {microbatches} "
            f"microbatches; allowed: at least {shards}"
        )
    if cfg.n_layers % layout.stages:
        raise ValueError(
            f"mesh['stage']={layout.stages!r}: does not divide the {cfg.n_layers} layers; allowed: a divisor"
        )
    if cfg.d_ff % layout.y or cfg.n_heads % layout.y:
        shown = layout.model[0] if len(layout.model) == 1 else layout.model
        names = "', '".join(layout.model_names)
        raise ValueError(
            f"mesh['{names}']={shown!r}: {layout.y} model-parallel chips do not divide "
            f"d_ff={cfg.d_ff} and n_heads={cfg.n_heads}; allowed: a divisor of {math.gcd(cfg.d_ff, cfg.n_heads)}"
        )


# ----- step time -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCost:
    """One kind of collective in a training step: its size, how often, how long (s).

    total_s = calls * seconds_per_call; seconds_per_call from `collectives.collective_time`
    (a one-hop send for the pipeline's "permute").

    Attributes:
        name: what moves ("FSDP weight all-gather", "TP activation reduce-scatter", ...).
        op: "all_gather", "reduce_scatter", "all_reduce" or "permute".
        phase: "forward" or "backward".
        axes: the mesh axes it runs over.
        link: "ici" or "dcn".
        array_bytes: V of one call, as `collectives` defines it (bytes).
        calls: calls per step (count).
        seconds_per_call: the larger of its bandwidth and latency times (s).
    """

    name: str
    op: str
    phase: str
    axes: tuple[str, ...]
    link: str
    array_bytes: float
    calls: int
    seconds_per_call: float

    @property
    def total_s(self) -> float:
        """calls * seconds_per_call (s)."""
        return self.calls * self.seconds_per_call


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTime:
    """A training step's roofline estimate on a mesh; times in seconds.

    t_math = flops_per_chip / C; t_bubble = t_math (stages - 1) / microbatches;
    t_comms = sum of every collective's total_s (the text sums FSDP and tensor traffic, no overlap);
    t_lower = max(t_math + t_bubble, t_comms) (perfect overlap); t_upper = t_math + t_bubble + t_comms.

    Attributes:
        strategy: one of `STRATEGIES`.
        mesh: axis name -> size.
        n_chips: product of the mesh sizes (count).
        batch_tokens: tokens per step (count).
        seq_len: tokens per sequence (count).
        tokens_per_chip: batch_tokens / (pods * data degree): the tokens one data shard sees (count).
        context_parallel: sequence shards per sequence, (pods * data degree) / sequences, 1 when each
            shard holds whole sequences (ratio >= 1).
        flops_per_chip: training FLOPs of the step on one chip, causal attention included (FLOPs).
        microbatches: pipeline microbatches (count).
        t_math, t_bubble: see above (s).
        collectives: every collective of the step.
    """

    strategy: str
    mesh: dict[str, int]
    n_chips: int
    batch_tokens: int
    seq_len: int
    tokens_per_chip: float
    context_parallel: float
    flops_per_chip: float
    microbatches: int
    t_math: float
    t_bubble: float
    collectives: tuple[CollectiveCost, ...]

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
        """ "compute" when t_math + t_bubble >= t_comms, else "communication"."""
        return "compute" if self.t_math + self.t_bubble >= self.t_comms else "communication"

    @property
    def largest_collective(self) -> CollectiveCost | None:
        """The collective with the largest total_s, None when there is none."""
        return max(self.collectives, key=lambda c: c.total_s, default=None)


def _call_s(op: str, v: float, sizes: tuple[int, ...], wraps: tuple[bool, ...], chip: Chip, link: str) -> float:
    if link == "dcn":
        return collectives.collective_time(op, v, sizes, chip, link="dcn").total_s
    return collectives.collective_time(op, v, sizes, chip, wraparound=wraps).total_s


def _weight_collectives(
    strategy: str, layout: _Layout, chip: Chip, layer_bytes: float, layers: int
) -> list[CollectiveCost]:
    """FSDP gathers and scatters, or DP's gradient AllReduce, per layer over the data axes."""
    if layout.x == 1 or strategy == "tp":
        return []
    v = layer_bytes / layout.y
    axes, sizes, wraps = layout.data_names, layout.data, layout.data_wrap

    def cost(name: str, op: str, phase: str) -> CollectiveCost:
        seconds = _call_s(op, v, sizes, wraps, chip, "ici")
        return CollectiveCost(
            name=name, op=op, phase=phase, axes=axes, link="ici", array_bytes=v, calls=layers, seconds_per_call=seconds
        )

    if strategy == "dp":
        return [cost("DP gradient all-reduce", "all_reduce", "backward")]
    return [
        cost("FSDP weight all-gather", "all_gather", "forward"),
        cost("FSDP weight all-gather", "all_gather", "backward"),
        cost("FSDP gradient reduce-scatter", "reduce_scatter", "backward"),
    ]


def _activation_collectives(layout: _Layout, chip: Chip, micro_bytes: float, calls: int) -> list[CollectiveCost]:
    """Tensor parallelism: gather [b, D] before each block and reduce-scatter after, both passes."""
    if layout.y == 1:
        return []
    out = []
    for phase in ("forward", "backward"):
        for op, what in (("all_gather", "all-gather"), ("reduce_scatter", "reduce-scatter")):
            seconds = _call_s(op, micro_bytes, layout.model, layout.model_wrap, chip, "ici")
            out.append(
                CollectiveCost(
                    name=f"TP activation {what}",
                    op=op,
                    phase=phase,
                    axes=layout.model_names,
                    link="ici",
                    array_bytes=micro_bytes,
                    calls=calls,
                    seconds_per_call=seconds,
                )  # fmt: skip
            )
    return out


def _stage_and_pod_collectives(
    layout: _Layout, chip: Chip, send_bytes: float, microbatches: int, stage_bytes: float
) -> list[CollectiveCost]:
    """Pipeline sends between neighbouring stages, and the gradient AllReduce across pods over DCN."""
    out = []
    if layout.stages > 1:
        seconds = send_bytes / chip.ici_bytes_per_s + collectives.HOP_LATENCY_S  # one hop, one link
        for phase, what in (("forward", "activations"), ("backward", "gradients")):
            out.append(
                CollectiveCost(
                    name=f"pipeline {what} send",
                    op="permute",
                    phase=phase,
                    axes=("stage",),
                    link="ici",
                    array_bytes=send_bytes,
                    calls=microbatches,
                    seconds_per_call=seconds,
                )  # fmt: skip
            )
    if layout.pods > 1:
        v = stage_bytes / (layout.x * layout.y)  # each chip's gradient shard after the in-pod reduction
        out.append(
            CollectiveCost(
                name="DCN gradient all-reduce",
                op="all_reduce",
                phase="backward",
                axes=("pod",),
                link="dcn",
                array_bytes=v,
                calls=1,
                seconds_per_call=_call_s("all_reduce", v, (layout.pods,), (), chip, "dcn"),
            )  # fmt: skip
        )
    return out


def step_time(
    model: TransformerConfig | str,
    chip: Chip | str,
    mesh: Mapping[str, int],
    batch_tokens: int,
    *,
    strategy: str,
    seq_len: int,
    microbatches: int = 1,
    param_dtype: str = "bf16",
    activation_dtype: str = "bf16",
) -> StepTime:
    """Roofline time of one training step of `model` on `mesh`, with every collective (s).

    t_math = flops_per_token(seq_len, training, causal) * B / (N C) (forward plus backward);
    per layer, with V_w = bytes of one layer's weights / Y and V_a = b D bytes, b = B / (pods X M):
        DP:   backward AllReduce_X(V_w)
        FSDP: forward AllGather_X(V_w); backward AllGather_X(V_w) and ReduceScatter_X(V_w)
        TP:   per block (attention, MLP) and microbatch, AllGather_Y(V_a) and ReduceScatter_Y(V_a), both passes
    pipeline: each microbatch sends [b, D / Y] one hop forward and back; bubble t_math (S - 1) / M;
    pods: one AllReduce over DCN of each chip's gradient shard (stage weights / (X Y)).
    Weights are gathered once per step (kept across microbatches); the embedding and output layers
    are spread over the layers. Book: Part 5 (the algorithms and the "Key Takeaways" table); Part 6.

    Raises:
        ValueError: unknown model, chip, strategy or dtype; a mesh with unknown roles, more than a pod or
            more axes than the torus on ICI, or contradicting the strategy; a batch of partial sequences or
            under one token per shard; stages not dividing the layers, model axes d_ff and n_heads.
    """
    cfg, chip = get_model(model, arg="model"), checks.chip(chip)
    layout = _layout(chip, mesh)
    strategy = _check_strategy(strategy, layout)
    m = checks.count("microbatches", microbatches)
    _check_batch(cfg, layout, batch_tokens, seq_len, m)
    pb, ab = _dtype_bytes("param_dtype", param_dtype), _dtype_bytes("activation_dtype", activation_dtype)
    layers = cfg.n_layers // layout.stages
    stage_bytes = cfg.param_count() * pb / layout.stages
    shard_tokens = batch_tokens / (layout.x * layout.pods)
    micro_bytes = shard_tokens / m * cfg.d_model * ab
    flops = cfg.flops_per_token(seq_len, training=True, causal=True) * batch_tokens / layout.n_chips
    t_math = flops / chip.peak_ops_per_s("bf16")
    parts = [
        *_weight_collectives(strategy, layout, chip, stage_bytes / layers, layers),
        *_activation_collectives(layout, chip, micro_bytes, 2 * layers * m),
        *_stage_and_pod_collectives(layout, chip, micro_bytes / layout.y, m, stage_bytes),
    ]
    return StepTime(
        strategy=strategy,
        mesh=dict(mesh),
        n_chips=layout.n_chips,
        batch_tokens=int(batch_tokens),
        seq_len=int(seq_len),
        tokens_per_chip=shard_tokens,
        context_parallel=max(1.0, layout.x * layout.pods * seq_len / batch_tokens),
        flops_per_chip=flops,
        microbatches=m,
        t_math=t_math,
        t_bubble=t_math * pipeline_bubble_fraction(layout.stages, m),
        collectives=tuple(parts),
    )


# ----- memory ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPerChip:
    """HBM one chip needs for a training step, by kind (bytes).

    params, grads, optimizer = the whole model's / (Y S), times 1 / X more under FSDP (ZeRO-3);
    activations = batch_tokens L c D bytes / N (checkpoints split over every axis).

    Attributes:
        params_bytes, grads_bytes, optimizer_bytes, activations_bytes: per chip (bytes).
        hbm_bytes: the chip's HBM (bytes), None when no chip was given.
    """

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    hbm_bytes: float | None

    @property
    def total_bytes(self) -> float:
        """params + grads + optimizer + activations (bytes)."""
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def fits(self) -> bool | None:
        """total_bytes <= hbm_bytes; None without a chip."""
        return None if self.hbm_bytes is None else self.total_bytes <= self.hbm_bytes


def memory_per_chip(
    model: TransformerConfig | str,
    mesh: Mapping[str, int],
    batch_tokens: float,
    *,
    strategy: str,
    optimizer: str = "adam",
    param_dtype: str = "bf16",
    optimizer_dtype: str = "fp32",
    checkpoints_per_layer: float = 4,
    activation_dtype: str = "bf16",
    chip: Chip | str | None = None,
) -> MemoryPerChip:
    """Parameters, gradients, optimizer state and activation checkpoints on one chip (bytes).

    totals from `TransformerConfig.training_memory` (P params in param_dtype, gradients likewise,
    OPTIMIZERS[optimizer] values of optimizer_dtype per parameter, batch_tokens L c D activation values
    with c = checkpoints_per_layer), then divided: weights, gradients and optimizer state by Y S
    (and by X too for "fsdp" and "fsdp+tp"), activations by every chip of the mesh. LLaMA 3-70B, 4M
    tokens, c = 4: 140 GB + 560 GB + 20.9 TB in all (the text counts no gradients).
    Book: Part 5, "Data Parallelism" (10 bytes per parameter) and Appendix A; Part 6, "Counting parameters".

    Raises:
        ValueError: unknown model, strategy, optimizer, dtype or chip; a bad mesh (see `step_time`);
            a negative batch or checkpoint count.
    """
    cfg = get_model(model, arg="model")
    hw = None if chip is None else checks.chip(chip)
    layout = _layout(hw, mesh)
    strategy = _check_strategy(strategy, layout)
    moments = OPTIMIZERS[checks.one_of("optimizer", optimizer, OPTIMIZERS)]
    pb = _dtype_bytes("param_dtype", param_dtype)
    total = cfg.training_memory(
        batch_tokens=checks.non_negative("batch_tokens", batch_tokens),
        bytes_per_param=pb,
        bytes_per_grad=pb,
        optimizer_bytes_per_param=moments * _dtype_bytes("optimizer_dtype", optimizer_dtype),
        bytes_per_activation=_dtype_bytes("activation_dtype", activation_dtype),
        remat="custom",
        checkpoints_per_layer=checkpoints_per_layer,
    )
    shards = layout.y * layout.stages * (layout.x if strategy in ("fsdp", "fsdp+tp") else 1)
    return MemoryPerChip(
        params_bytes=total.params_bytes / shards,
        grads_bytes=total.grads_bytes / shards,
        optimizer_bytes=total.optimizer_bytes / shards,
        activations_bytes=total.activations_bytes / layout.n_chips,
        hbm_bytes=None if hw is None else hw.hbm_bytes,
    )


# ----- whole runs ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingRun:
    """A training run's length and cost at a given MFU.

    seconds = total_flops / (n_chips C mfu); days = seconds / 86,400; chip_hours = n_chips seconds / 3600;
    cost_usd = chip_hours * price (None where the text quotes no price for the chip).

    Attributes:
        model, chip: names.
        tokens: training tokens (count).
        n_chips: chips (count).
        mfu: model FLOPs utilisation assumed (ratio, 0 < mfu <= 1).
        flops_per_token: training FLOPs per token (FLOPs).
        total_flops: flops_per_token * tokens (FLOPs).
        seconds: wall-clock time (s).
        price_usd_per_chip_hour: `hardware.price_usd_per_chip_hour`, or None.
    """

    model: str
    chip: str
    tokens: float
    n_chips: int
    mfu: float
    flops_per_token: float
    total_flops: float
    seconds: float
    price_usd_per_chip_hour: float | None

    @property
    def days(self) -> float:
        """seconds / 86,400 (days)."""
        return self.seconds / _SECONDS_PER_DAY

    @property
    def chip_hours(self) -> float:
        """n_chips * seconds / 3600 (chip-hours)."""
        return self.n_chips * self.seconds / 3600

    @property
    def cost_usd(self) -> float | None:
        """chip_hours * price_usd_per_chip_hour (US dollars), None without a price."""
        price = self.price_usd_per_chip_hour
        return None if price is None else self.chip_hours * price


def training_days(
    model: TransformerConfig | str,
    tokens: float,
    chip: Chip | str,
    n_chips: int,
    *,
    mfu: float,
    seq_len: int | None = None,
) -> TrainingRun:
    """How long training `model` on `tokens` takes on `n_chips` chips at a given MFU (`.days`, `.seconds`).

    FLOPs = 6 P tokens (the text's rule, P = every parameter) when seq_len is None; otherwise
    flops_per_token(seq_len, training=True) * tokens, which adds attention's 12 L T N H per token
    (bidirectional, as the text counts it) and counts matmul weights only.
    seconds = FLOPs / (n_chips C mfu). LLaMA 3-70B, 15T tokens, 8960 v5p at 40 %: about 44 days.
    Book: Part 6, "Counting parameters and FLOPs"; Part 4, "General rule of thumb for Transformer FLOPs".

    Raises:
        ValueError: unknown model or chip; non-positive tokens; n_chips not a count; mfu outside (0, 1].
    """
    cfg, hw = get_model(model, arg="model"), checks.chip(chip)
    checks.positive("tokens", tokens)
    n = checks.count("n_chips", n_chips)
    if not checks.positive("mfu", mfu) <= 1:
        raise ValueError(f"mfu={mfu!r}: more than 1; allowed: 0 < mfu <= 1")
    if seq_len is None:
        per_token = 6.0 * cfg.param_count()
    else:
        per_token = cfg.flops_per_token(checks.count("seq_len", seq_len), training=True)
    total = per_token * tokens
    return TrainingRun(
        model=cfg.name or "custom",
        chip=hw.name,
        tokens=float(tokens),
        n_chips=n,
        mfu=float(mfu),
        flops_per_token=per_token,
        total_flops=total,
        seconds=total / (n * hw.peak_ops_per_s("bf16") * mfu),
        price_usd_per_chip_hour=price_usd_per_chip_hour(hw),
    )


def mfu(tokens_per_s: float, flops_per_token: float, n_chips: int, chip: Chip | str, *, dtype: str = "bf16") -> float:
    """Model FLOPs utilisation: useful FLOPs per second over the chips' peak (ratio).

    MFU = tokens_per_s * flops_per_token / (n_chips * peak_ops_per_s(dtype)).
    Book: Part 5, "Fully-Sharded Data Parallelism" (MFU); Part 6.

    Raises:
        ValueError: a non-positive rate, n_chips not a count, unknown chip or dtype.
    """
    rate = checks.positive("tokens_per_s", tokens_per_s) * checks.positive("flops_per_token", flops_per_token)
    return rate / (checks.count("n_chips", n_chips) * checks.chip(chip).peak_ops_per_s(dtype))


# ----- the planner -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEntry:
    """One scheme the planner tried, with its step time, memory and why it ranks where it does.

    mfu = useful FLOPs of the step / (t_lower N C): the MFU at the roofline (1 when compute-bound
    without a bubble).

    Attributes:
        rank: 1 for the best (count).
        scheme: a label ("FSDP+TP", "FSDP+PP", "DP", ...).
        step: the `StepTime` on its mesh.
        memory: the `MemoryPerChip` on its mesh.
        mfu: see above (ratio).
        near_text_fsdp_degree: its FSDP degree is the real one closest to `optimal_fsdp_degree`
            among the FSDP + tensor meshes tried.
        reason: why it wins, or why it loses to the best.
    """

    rank: int
    scheme: str
    step: StepTime
    memory: MemoryPerChip
    mfu: float
    near_text_fsdp_degree: bool
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingPlan:
    """Every scheme `plan_training` tried, best first.

    Attributes:
        model, chip: names.
        n_chips, batch_tokens, seq_len: as asked (counts).
        pods: pods joined over DCN (count).
        slice_shape: the ICI slice of one pod (chips per axis).
        text_fsdp_degree: X_opt = sqrt(B M_X N / (F M_Y)) with two FSDP axes and one tensor axis, N one
            pod's chips and B its share of the batch (count, not rounded).
        entries: the schemes, ranked by step time (those that do not fit last).
    """

    model: str
    chip: str
    n_chips: int
    batch_tokens: int
    seq_len: int
    pods: int
    slice_shape: tuple[int, ...]
    text_fsdp_degree: float
    entries: tuple[PlanEntry, ...]

    @property
    def best(self) -> PlanEntry:
        """The first entry."""
        return self.entries[0]


def _pod_split(chip: Chip, n_chips: int) -> tuple[int, tuple[int, ...]]:
    """(pods, the slice shape of one pod) for n_chips: one slice, or whole pods joined over DCN."""
    if n_chips > chip.chips_per_pod:
        if n_chips % chip.chips_per_pod:
            raise ValueError(
                f"n_chips={n_chips!r}: more than a {chip.name} pod and not whole pods; "
                f"allowed: up to {chip.chips_per_pod}, or a multiple of it"
            )
        return n_chips // chip.chips_per_pod, chip.pod_shape
    shapes = topology.slice_shapes(chip)
    for shape in shapes:
        if math.prod(shape) == n_chips:
            return 1, shape
    sizes = ", ".join(str(math.prod(s)) for s in shapes)
    raise ValueError(f"n_chips={n_chips!r}: not a {chip.name} slice; allowed: {sizes}, or whole pods")


def _split(shape: tuple[int, ...], y: int, stages: int) -> list[int] | None:
    """The data sides left once `y` (model) and `stages` chips are cut out of the slice's sides.

    Each degree takes a side equal to it, else one it divides; what is left of that side joins the
    smallest other side, so the mesh keeps as many ICI axes as the torus (the text's M_X + M_Y = 3).
    Returns the data sides, or None when a degree divides no side.
    """
    sides = sorted(shape, reverse=True)
    for degree in (y, stages):
        if degree == 1:
            continue
        fits = [i for i, side in enumerate(sides) if side % degree == 0]
        if not fits:
            return None
        i = next((j for j in fits if sides[j] == degree), fits[0])
        leftover = sides.pop(i) // degree
        if leftover > 1 and sides:
            sides[sides.index(min(sides))] *= leftover
        elif leftover > 1:
            sides.append(leftover)
    return [side for side in sides if side > 1]


def _meshes(cfg: TransformerConfig, shape: tuple[int, ...], pods: int) -> list[tuple[int, int, dict[str, int]]]:
    """(tensor degree, stages, mesh) for every power-of-two tensor degree and stage count that fits."""
    found = []
    y = 1
    while y <= cfg.n_heads and y <= math.prod(shape):
        for stages in (1, 2, 4, 8):
            split = _split(shape, y, stages)
            if split is None or cfg.d_ff % y or cfg.n_heads % y or cfg.n_layers % stages:
                continue
            mesh = {"pod": pods} if pods > 1 else {}
            mesh |= {f"data_{'xyzw'[i]}": side for i, side in enumerate(split)}
            mesh |= ({"model": y} if y > 1 else {}) | ({"stage": stages} if stages > 1 else {})
            found.append((y, stages, mesh or {"data": 1}))
        y *= 2
    return found


def _schemes(y: int, x: int, stages: int) -> list[tuple[str, str]]:
    """(strategy, label) pairs that make sense for a mesh with these degrees."""
    pp = "+PP" if stages > 1 else ""
    if y > 1:
        return [("fsdp+tp", f"FSDP+TP{pp}")] if x > 1 else [("tp", f"TP{pp}")]
    if x == 1:
        return [("fsdp", "PP")] if stages > 1 else [("dp", "one chip")]
    if stages > 1:
        return [("fsdp", f"FSDP{pp}")]
    return [("dp", "DP"), ("fsdp", "FSDP")]


def _reason(entry_step: StepTime, memory: MemoryPerChip, best: StepTime | None) -> str:
    if memory.fits is False:
        return f"does not fit: {memory.total_bytes / 1e9:,.1f} GB per chip > {(memory.hbm_bytes or 0) / 1e9:,.1f} GB"
    notes = []
    if entry_step.context_parallel > 1:
        notes.append(f"cuts sequences {entry_step.context_parallel:.3g}-way (context parallelism)")
    if entry_step.bound == "communication" and entry_step.largest_collective is not None:
        worst = entry_step.largest_collective
        notes.append(
            f"communication-bound: collectives {entry_step.t_comms:.3g} s > math {entry_step.t_math:.3g} s "
            f"(largest: {worst.name}, {worst.phase}, {worst.total_s:.3g} s)"
        )
    if entry_step.t_bubble > 0:
        notes.append(f"pipeline bubble +{entry_step.t_bubble / entry_step.t_math:.0%}")
    if best is None:
        return "; ".join(["fastest that fits", *notes])
    ratio = entry_step.t_lower / best.t_lower
    return "; ".join([*notes, f"{ratio:.2f}x the best step time"])


def plan_training(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    batch_tokens: int,
    *,
    seq_len: int,
    checkpoints_per_layer: float = 4,
) -> TrainingPlan:
    """Every sensible way to shard a training step of `model` on `n_chips`, ranked by step time.

    Tried: pure DP, FSDP, tensor parallelism, FSDP + TP with every power-of-two tensor degree (the
    one nearest X_opt = sqrt(B M_X N / (F M_Y)) flagged), each with 1, 2, 4 or 8 pipeline stages (4
    microbatches per stage), and DP over DCN across pods when n_chips is more than one pod. Each mesh is
    real: degrees are cut out of the slice's sides. Ranked by `StepTime.t_lower`, then `t_upper` (schemes
    that do not fit in HBM last), each with `memory_per_chip` (Adam, bf16 weights, fp32 state) and the MFU at
    the roofline. Book: Part 5 ("Scaling Between Pods", "Key Takeaways"); Part 6, "How to shard LLaMA 3-70B".

    Raises:
        ValueError: unknown model or chip; n_chips not a slice size nor whole pods; a batch that is
            not whole sequences or is smaller than one token per data shard of every scheme.
    """
    cfg, hw = get_model(model, arg="model"), checks.chip(chip)
    pods, shape = _pod_split(hw, checks.count("n_chips", n_chips))
    b = checks.count("batch_tokens", batch_tokens)
    if b < checks.count("seq_len", seq_len) or b % seq_len:
        raise ValueError(
            f"batch_tokens={b!r}: not a whole number of sequences of {seq_len}; allowed: a multiple of {seq_len}"
        )
    tried = []
    for y, stages, mesh in _meshes(cfg, shape, pods):
        x = math.prod(v for k, v in mesh.items() if k.startswith("data"))
        m = 4 * stages if stages > 1 else 1
        for strategy, label in _schemes(y, x, stages):
            try:
                step = step_time(cfg, hw, mesh, b, strategy=strategy, seq_len=seq_len, microbatches=m)
            except ValueError:
                continue  # the batch does not split over this mesh
            memory = memory_per_chip(
                cfg, mesh, b, strategy=strategy, checkpoints_per_layer=checkpoints_per_layer, chip=hw
            )
            tried.append((label, step, memory))
    if not tried:
        raise ValueError(f"batch_tokens={b!r}: splits over none of the meshes tried; allowed: a multiple of {n_chips}")
    return _rank(cfg, hw, n_chips, b, seq_len, pods, shape, tried)


def _rank(
    cfg: TransformerConfig,
    chip: Chip,
    n_chips: int,
    b: int,
    seq_len: int,
    pods: int,
    shape: tuple[int, ...],
    tried: list[tuple[str, StepTime, MemoryPerChip]],
) -> TrainingPlan:
    """Sort the schemes, attach MFU and reasons, and flag the FSDP degree nearest the text's X_opt."""
    tried.sort(key=lambda t: (t[2].fits is False, t[1].t_lower, t[1].t_upper))
    x_opt = optimal_fsdp_degree(b / pods, cfg.d_ff, n_chips // pods)
    mixed = [s.n_chips // (pods * s.mesh.get("model", 1) * s.mesh.get("stage", 1)) for _, s, _ in tried]
    mixed_x = [x for x, (label, _, _) in zip(mixed, tried, strict=True) if label == "FSDP+TP"]
    nearest = min(mixed_x, key=lambda x: abs(math.log(x / x_opt)), default=None)
    useful = cfg.flops_per_token(seq_len, training=True, causal=True) * b
    entries = []
    for rank, ((label, step, memory), x) in enumerate(zip(tried, mixed, strict=True), start=1):
        entries.append(
            PlanEntry(
                rank=rank,
                scheme=label,
                step=step,
                memory=memory,
                mfu=useful / (step.t_lower * n_chips * chip.peak_ops_per_s("bf16")),
                near_text_fsdp_degree=label == "FSDP+TP" and step.mesh.get("stage", 1) == 1 and x == nearest,
                reason=_reason(step, memory, None if rank == 1 else tried[0][1]),
            )
        )
    return TrainingPlan(
        model=cfg.name or "custom",
        chip=chip.name,
        n_chips=n_chips,
        batch_tokens=b,
        seq_len=seq_len,
        pods=pods,
        slice_shape=tuple(shape),
        text_fsdp_degree=x_opt,
        entries=tuple(entries),
    )
