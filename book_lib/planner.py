"""The training planner: every sensible `parallelism.Layout` of a step, ranked by step time.

Tried on n_chips chips (one slice, or whole pods joined over DCN by data parallelism): pure DP,
FSDP, tensor parallelism, FSDP + TP with every power-of-two tensor degree, each with 1, 2, 4 or 8
pipeline stages (4 microbatches per stage). On a cluster of GPU nodes, tensor parallelism stays in
the NVLink node and pipeline stages (up to 64), data parallelism and FSDP span the nodes over the
scale-out network, as Megatron-style runs do (`_node_layouts`). Only layouts whose tensor degree and stages
`parallelism.place` cuts out of one side of the slice each are kept, so every layout is a real mesh.
Each is timed by `training.step_time` and sized by `training.memory_per_chip`; the one nearest the
text's X_opt = sqrt(B M_X N / (F M_Y)) (`bounds.optimal_fsdp_degree`) is flagged.

Book: Part 5 ("Scaling Between Pods", "Key Takeaways"); Part 6, "How to shard LLaMA 3-70B".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from book_lib import bounds, checks, topology
from book_lib.hardware import Chip, get_chip
from book_lib.models import get_model
from book_lib.parallelism import Layout, place
from book_lib.training import MemoryPerChip, StepTime, memory_per_chip, step_time
from book_lib.transformer import TransformerConfig

__all__ = ["PlanEntry", "TrainingPlan", "plan_training", "evaluate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEntry:
    """One scheme the planner tried, with its step time, memory and why it ranks where it does.

    `mfu_expected` is the MFU at `expected_s` (the roofline plus every term it leaves out,
    `training.StepTime.terms`): the MFU to plan with; `mfu_bound`, at `roofline_s`, is what no run beats.

    Attributes:
        rank: 1 for the best (count).
        scheme: its layout's label (`parallelism.Layout.label`: "FSDP+TP", "FSDP+PP", "DP", ...).
        step: the `StepTime` of its layout.
        memory: the `MemoryPerChip` of its layout.
        near_text_fsdp_degree: its FSDP degree is the real one closest to `optimal_fsdp_degree`
            among the FSDP + tensor layouts without pipeline tried.
        reason: why it wins, or why it loses to the best.
    """

    rank: int
    scheme: str
    step: StepTime
    memory: MemoryPerChip
    near_text_fsdp_degree: bool
    reason: str

    @property
    def layout(self) -> Layout:
        """The entry's `parallelism.Layout`."""
        return self.step.layout

    @property
    def fits(self) -> bool:
        """Whether its weights, optimizer state and activations fit in HBM."""
        return bool(self.memory.fits)

    @property
    def roofline_s(self) -> float:
        """`StepTime.roofline_s`: the bound (s)."""
        return self.step.roofline_s

    @property
    def expected_s(self) -> float:
        """`StepTime.expected_s`: the bound plus each named term it leaves out (s)."""
        return self.step.expected_s

    @property
    def mfu_bound(self) -> float:
        """`StepTime.mfu_bound` (ratio)."""
        return self.step.mfu_bound

    @property
    def mfu_expected(self) -> float:
        """`StepTime.mfu_expected` (ratio)."""
        return self.step.mfu_expected


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
        entries: the layouts, ranked by expected step time (those that do not fit last).
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


def _layouts(cfg: TransformerConfig, chip: Chip, pods: int, in_pod: int) -> list[Layout]:
    """Every power-of-two tensor degree and stage count, with the rest given to DP or FSDP, that the
    slice's sides can hold (`Placement.cut`) and the model's heads, width and layers divide."""
    found = []
    y = 1
    while y <= cfg.n_heads and y <= in_pod:
        for stages in (1, 2, 4, 8):
            x, rest = divmod(in_pod, y * stages)
            if rest or cfg.d_ff % y or cfg.n_heads % y or cfg.n_layers % stages:
                continue
            m = 4 * stages if stages > 1 else 1
            common = {"tensor": y, "pipeline": stages, "microbatches": m}
            options = [Layout(data=pods, fsdp=x, **common)]
            if y == 1 and stages == 1 and x > 1:
                options.insert(0, Layout(data=pods * x, **common))
            found += [lay for lay in options if _cut(chip, lay)]
        y *= 2
    return found


def _node_layouts(cfg: TransformerConfig, chip: Chip, nodes: int) -> list[Layout]:
    """GPU clusters: tensor parallelism inside the NVLink node, pipeline stages across nodes (4 microbatches
    per stage), and the rest data parallel, FSDP, or FSDP inside the node with data parallelism across
    (HSDP). Stages need not divide the layers (the largest stage paces the pipeline)."""
    found, per_node = [], chip.chips_per_pod
    for y in (t for t in (1, 2, 4, 8, 16, 32) if t <= per_node and not (cfg.n_heads % t or cfg.d_ff % t)):
        for stages in (s for s in (1, 2, 4, 8, 16, 32, 64) if nodes % s == 0 and s <= cfg.n_layers):
            rest = nodes * per_node // (y * stages)
            common = {"tensor": y, "pipeline": stages, "microbatches": 4 * stages if stages > 1 else 1}
            options = [Layout(data=rest, **common), Layout(fsdp=rest, **common)]
            if per_node // y > 1:
                options.append(Layout(data=rest * y // per_node, fsdp=per_node // y, **common))
            found += [lay for lay in options if _cut(chip, lay)]
    return found


def _cut(chip: Chip, layout: Layout) -> bool:
    """Whether `parallelism.place` cuts the tensor degree and the stages out of one side each."""
    try:
        placed = place(chip, layout)
    except ValueError:
        return False  # more ICI axes than the torus has sides
    return placed.cut and len(placed.axes["tensor"]) <= 1 and len(placed.axes["pipeline"]) <= 1


def _whole_sequences(chip: Chip, layout: Layout, sequences: int, seq_len: int) -> Layout | None:
    """`layout` when its batch shards hold whole sequences; else the same chips with the fewest integer
    context-parallel shards c (taken from FSDP, or from data parallelism without FSDP) that leave at most
    one batch shard per sequence, so cutting sequences is a costed degree, never a fraction. None when no
    such c divides the degree and the sequence and fits the hardware."""
    holders = layout.batch_shards // layout.context  # shards that hold different sequences
    if holders <= sequences:
        return layout
    donor = "fsdp" if layout.fsdp > 1 else "data"
    degree = getattr(layout, donor)
    for c in range(-(-holders // sequences), degree + 1):
        if degree % c == 0 and seq_len % c == 0:
            cut = replace(layout, **{donor: degree // c}, context=layout.context * c)
            return cut if _cut(chip, cut) else None
    return None


_ACCUMULATION = (2, 4, 8, 16, 32, 64, 128)  # microbatches tried when a layout's activations do not fit


def _accumulated(
    cfg: TransformerConfig, chip: Chip, layout: Layout, batch: int, seq_len: int, checkpoints: float
) -> tuple[StepTime, MemoryPerChip] | None:
    """The layout's step and memory; when it does not fit, the cheapest change that makes it: sharding the
    optimizer state, then the gradients too, over the data-parallel replicas (`Layout.zero` 1, 2), gradient
    accumulation over the fewest microbatches (`_ACCUMULATION`, without a pipeline), then recomputing the
    forward pass (`training.REMAT_FORWARD_PASSES["full"]`) with them. None when the batch does not split over it."""
    first = None
    zeros = (0, 1, 2) if layout.data > 1 else (0,)
    for remat in ("checkpoints", "full"):
        tries = [replace(layout, zero=z) for z in zeros]
        if layout.pipeline == 1:
            tries += [replace(layout, microbatches=m, zero=z) for m in _ACCUMULATION for z in zeros]
        for candidate in tries:
            try:
                step = step_time(cfg, chip, candidate, batch_tokens=batch, seq_len=seq_len, remat=remat)
            except ValueError:
                break  # the batch does not split into this many microbatches
            memory = memory_per_chip(
                cfg, chip, candidate, batch_tokens=batch, checkpoints_per_layer=checkpoints, remat=remat
            )
            first = first or (step, memory)
            if memory.fits:
                return step, memory
    return first


def _reason(entry_step: StepTime, memory: MemoryPerChip, best: StepTime | None) -> str:
    if memory.fits is False:
        return f"does not fit: {memory.total_bytes / 1e9:,.1f} GB per chip > {(memory.hbm_bytes or 0) / 1e9:,.1f} GB"
    notes = []
    layout = entry_step.layout
    if layout.pipeline == 1 and layout.microbatches > 1:
        notes.append(f"accumulates gradients over {layout.microbatches} microbatches to fit")
    if entry_step.remat == "full":
        notes.append("recomputes the forward pass to fit (+33% FLOPs)")
    if entry_step.layout.context > 1:
        notes.append(f"cuts each sequence {entry_step.layout.context}-way (context parallelism)")
    elif entry_step.context_parallel > 1:
        notes.append(f"holds {1 / entry_step.context_parallel:.2f} of a sequence per chip (the text's idealisation)")
    if entry_step.bound == "communication" and entry_step.largest_collective is not None:
        worst = entry_step.largest_collective
        notes.append(
            f"communication-bound: collectives {entry_step.t_comms:.3g} s > math {entry_step.roofline_math_s:.3g} s "
            f"(largest: {worst.name}, {worst.phase}, {worst.total_s:.3g} s)"
        )
    if entry_step.t_bubble > 0:
        notes.append(f"pipeline bubble +{entry_step.t_bubble / entry_step.t_math:.0%}")
    if best is None:
        return "; ".join(["fastest that fits", *notes])
    ratio = entry_step.expected_s / best.expected_s
    return "; ".join([*notes, f"{ratio:.2f}x the best expected step time"])


def plan_training(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    batch_tokens: int,
    seq_len: int,
    checkpoints_per_layer: float = 4,
    whole_sequences: bool = True,
) -> TrainingPlan:
    """Every sensible layout of a training step of `model` on `n_chips`, ranked by step time.

    The layouts of the module docstring, ranked by `StepTime.expected_s`, then `t_lower` (layouts that do
    not fit in HBM last), each with `training.memory_per_chip` (Adam, bf16 weights, fp32 state) and
    the MFU at the roofline. With fewer sequences than batch shards, each sequence is cut by an integer
    context-parallel degree taken from FSDP (`_whole_sequences`), whose key/value gathers are costed;
    `whole_sequences=False` keeps the text's idealisation instead, in which a chip may hold a fraction of
    a sequence (4M tokens on 8960 chips: 468 tokens each) at no cost. Book: Part 5 ("Scaling Between
    Pods", "Key Takeaways"); Part 6, "How to shard LLaMA 3-70B".

    Raises:
        ValueError: unknown model or chip; n_chips not a slice size nor whole pods; a batch that is
            not whole sequences or is smaller than one token per data shard of every layout;
            whole_sequences not a bool.
    """
    cfg, hw = get_model(model), get_chip(chip)
    if not isinstance(whole_sequences, bool):
        raise ValueError(f"whole_sequences={whole_sequences!r}: not a bool; allowed: True, False")
    pods, shape = _pod_split(hw, checks.count("n_chips", n_chips))
    b = checks.count("batch_tokens", batch_tokens)
    if b < checks.count("seq_len", seq_len) or b % seq_len:
        raise ValueError(
            f"batch_tokens={b!r}: not a whole number of sequences of {seq_len}; allowed: a multiple of {seq_len}"
        )
    tried = []
    gpu_cluster = hw.ici_topology == "nvswitch" and pods > 1
    for candidate in _node_layouts(cfg, hw, pods) if gpu_cluster else _layouts(cfg, hw, pods, n_chips // pods):
        layout = _whole_sequences(hw, candidate, b // seq_len, seq_len) if whole_sequences else candidate
        if layout is None:
            continue
        found = _accumulated(cfg, hw, layout, b, seq_len, checkpoints_per_layer)
        if found is not None:
            tried.append((found[0].layout.label, *found))
    if not tried:
        raise ValueError(f"batch_tokens={b!r}: splits over none of the layouts tried; allowed: a multiple of {n_chips}")
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
    """Sort the layouts, attach MFU and reasons, and flag the FSDP degree nearest the text's X_opt."""
    tried.sort(key=lambda t: (t[2].fits is False, t[1].expected_s, t[1].t_lower))
    x_opt = bounds.optimal_fsdp_degree(n_chips // pods, batch_tokens=b / pods, d_ff=cfg.d_ff)
    mixed = [s.layout.fsdp if _is_mixed(s.layout) else None for _, s, _ in tried]
    nearest = min((x for x in mixed if x), key=lambda x: abs(math.log(x / x_opt)), default=None)
    entries = []
    for rank, ((label, step, memory), x) in enumerate(zip(tried, mixed, strict=True), start=1):
        entries.append(
            PlanEntry(
                rank=rank,
                scheme=label,
                step=step,
                memory=memory,
                near_text_fsdp_degree=x is not None and x == nearest,
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


def _is_mixed(layout: Layout) -> bool:
    """FSDP and tensor parallelism without pipeline stages: the text's mixed scheme."""
    return layout.fsdp > 1 and layout.tensor > 1 and layout.pipeline == 1


def evaluate(
    model: TransformerConfig | str,
    chip: Chip | str,
    layout: Layout,
    *,
    batch_tokens: int,
    seq_len: int,
    checkpoints_per_layer: float = 4,
    remat: str = "checkpoints",
    optimizer: str = "adam",
    matmul_dtype: str = "bf16",
    virtual_stages: int = 1,
    overlap_grad_reduce: bool = True,
    best: PlanEntry | None = None,
) -> PlanEntry:
    """One layout you give, timed by `training.step_time` and sized by `training.memory_per_chip` as the
    planner's rows are, with the reason beside `best` (a `plan_training` entry) when given (rank 0:
    not ranked). Book: Part 5, "Key Takeaways"; Part 6, "How to shard LLaMA 3-70B".

    Raises:
        ValueError: what `step_time` or `memory_per_chip` refuse (an unknown model, chip, optimizer,
            policy or dtype; a layout the chip cannot hold; a batch the layout cannot split).
    """
    cfg = get_model(model)
    step = step_time(
        cfg, chip, layout, batch_tokens=batch_tokens, seq_len=seq_len, remat=remat, optimizer=optimizer,
        matmul_dtype=matmul_dtype, virtual_stages=virtual_stages, overlap_grad_reduce=overlap_grad_reduce,
    )  # fmt: skip
    memory = memory_per_chip(
        cfg, chip, layout, batch_tokens=batch_tokens, checkpoints_per_layer=checkpoints_per_layer, remat=remat,
        optimizer=optimizer,
    )  # fmt: skip
    return PlanEntry(
        rank=0,
        scheme=layout.label,
        step=step,
        memory=memory,
        near_text_fsdp_degree=False,
        reason=_reason(step, memory, None if best is None else best.step),
    )
