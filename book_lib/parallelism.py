"""The parallelism of a training or serving step, named explicitly, and its placement on hardware.

A `Layout` gives each kind of parallelism its degree, as MaxText's config does: `data` (replicas
that all-reduce their gradients), `fsdp` (data parallelism with sharded weights, ZeRO-3), `tensor`
(Megatron-style model parallelism), `pipeline` (stages), `context` (sequence shards), `expert`
(experts spread over chips), and the `microbatches` a step's batch is cut into. The chips it needs:

    N = data * fsdp * tensor * pipeline * context * expert

`place(chip, layout)` maps those degrees onto the chip's hardware; the caller names no mesh axis.

* Pods (TPU) or nodes (GPU): when N is more than one ICI domain (`Chip.chips_per_pod`), the layout
  takes N / chips_per_pod whole domains joined by the data-centre (scale-out) network. The degrees
  that talk least span them, outermost first: data parallelism, then pipeline stages, then FSDP,
  then expert parallelism (DeepSeek-V3's 64-way EP spans 8 nodes), then context parallelism (Llama 3's
  16-way CP at 128K tokens) (`Placement.dcn`; each takes the largest share of the domains it divides).
  Tensor parallelism stays inside a domain.
* Inside one domain, the N_in chips are the offered slice of that size (`topology.slice_shapes`);
  the degrees that talk most take the fastest place first: tensor, then expert, context and
  pipeline are each cut out of one side of the torus (a side equal to the degree, else one it
  divides; what is left of that side joins the smallest other side, so the mesh keeps as many ICI
  axes as the torus; a degree larger than every side takes whole sides), then FSDP and in-domain
  data parallelism take the sides that remain. A
  layout whose degrees cannot be cut that way (or N_in no slice size) gives each degree one axis.
* Which of those axes close into rings: `topology.ring_flags`, the library's one rule.

On a full 16x20x28 TPU v5p pod, `Layout(fsdp=2240, tensor=4)` cuts 4 chips of tensor parallelism
out of the 28 side and joins the 7 left over to the 16 side: FSDP on two axes (20 and 112) and
tensor parallelism on one, the text's M_X = 2 and M_Y = 1.

Book: Part 5 (How to Parallelize a Transformer for Training); Part 6 ("How to shard LLaMA 3-70B").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from types import MappingProxyType

from book_lib import checks, topology
from book_lib.hardware import Chip, get_chip

__all__ = ["DEGREES", "SCHEMES", "Layout", "StepDtypes", "Placement", "place"]

# The degrees of a Layout, innermost (fastest links) first; "data" last, since it may cross pods.
DEGREES = ("tensor", "expert", "context", "pipeline", "fsdp", "data")
# Each degree's scheme as the text names it: the one vocabulary `Layout.label`, the planner's table and
# `bounds.STRATEGIES` ("dp", "fsdp+tp") are written in.
SCHEMES = MappingProxyType(
    {"data": "DP", "fsdp": "FSDP", "tensor": "TP", "pipeline": "PP", "context": "CP", "expert": "EP"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """How a step is parallelised: one degree per kind of parallelism (counts, default 1).

    n_chips = data * fsdp * tensor * pipeline * context * expert.

    Attributes:
        data: replicas of the whole model; their gradients are all-reduced.
        fsdp: data-parallel shards whose weights, gradients and optimizer state are sharded too.
        tensor: Megatron-style model parallelism of every matmul.
        pipeline: stages, consecutive groups of layers.
        context: shards of each sequence.
        expert: groups of chips holding different experts of a mixture-of-experts layer.
        microbatches: pieces a step's batch is cut into (pipeline fill, or accumulation).
        zero: what the data-parallel replicas shard among themselves besides the batch (ZeRO's stages,
            Megatron's distributed optimizer): 0 nothing, 1 the optimizer state, 2 the gradients too.
            Their gradient AllReduce becomes a ReduceScatter of the gradients and an AllGather of the
            updated weights (the same bytes on a ring), and each replica updates only its shard.
            ZeRO-3 is `fsdp`.
    """

    data: int = 1
    fsdp: int = 1
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    expert: int = 1
    microbatches: int = 1
    zero: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "zero":
                checks.count(f"layout.{f.name}", getattr(self, f.name))
        if self.zero not in (0, 1, 2) or isinstance(self.zero, bool):
            raise ValueError(
                f"layout.zero={self.zero!r}: not a ZeRO stage of the data degree; allowed: 0, 1, 2 "
                "(ZeRO-3 is layout.fsdp)"
            )

    @property
    def n_chips(self) -> int:
        """Chips the layout needs (count): the product of its degrees."""
        return math.prod(getattr(self, name) for name in DEGREES)

    @property
    def label(self) -> str:
        """The strategy it amounts to: "DP", "FSDP", "FSDP+TP", "FSDP+TP+PP", ... ("one chip")."""
        order = ("data", "fsdp", "tensor", "pipeline", "context", "expert")
        return "+".join(self.scheme(name) for name in order if getattr(self, name) > 1) or "one chip"

    def scheme(self, degree: str) -> str:
        """The scheme a degree runs, as the text names it (`SCHEMES`): "TP", "FSDP", ...; "DP (ZeRO-1)" for
        the data degree under `zero`.

        Raises:
            ValueError: degree not one of `DEGREES`.
        """
        name = SCHEMES[checks.one_of("degree", degree, DEGREES)]
        return f"{name} (ZeRO-{self.zero})" if degree == "data" and self.zero else name

    @property
    def weight_shards(self) -> int:
        """Chips one copy of the weights is spread over (count): fsdp * tensor * pipeline * expert."""
        return self.fsdp * self.tensor * self.pipeline * self.expert

    @property
    def batch_shards(self) -> int:
        """Pieces the batch's tokens are split into (count): data * fsdp * context * expert.

        Expert parallelism shards the batch too: outside the MoE layers its chips are data-parallel
        replicas, each with its own tokens (MaxText's "expert" axis, DeepSeek-V3's EP over DP ranks).
        """
        return self.data * self.fsdp * self.context * self.expert


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDtypes:
    """The dtypes of a training step, each a canonical name of `checks.DTYPES` ("bf16", "fp32").

    Attributes:
        param_dtype: the weights, and the gradients, which share it.
        activation_dtype: the activations the collectives move and the elementwise ops stream.
        matmul_dtype: the dtype the matrix units multiply in (its peak sets t_math).
        optimizer_dtype: each moment of the optimizer state.
        master_dtype: a master copy of the weights kept beside the moments, or None for none.
    """

    param_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    matmul_dtype: str = "bf16"
    optimizer_dtype: str = "fp32"
    master_dtype: str | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or f.name != "master_dtype":
                object.__setattr__(self, f.name, checks.dtype(value, f.name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """A `Layout` on a chip's hardware: the domains joined over DCN and each degree's ICI axes.

    Attributes:
        chip: the chip.
        layout: the layout placed.
        pods: ICI domains (TPU pods, GPU nodes) joined over the data-centre network (count).
        dcn: degree name -> how many domains it spans ("data", "pipeline", "fsdp"; 1 for the others);
            their product is `pods`.
        axes: degree name -> the sizes of the ICI axes it runs over inside one domain (empty for a
            degree of 1 there).
        rings: degree name -> per axis, whether it closes into a ring (`topology.ring_flags`).
        cut: True when the degrees were cut out of the slice's sides; False when each got one axis
            (a layout whose degrees do not divide the sides, or a chip count that is no slice).
    """

    chip: Chip
    layout: Layout
    pods: int
    dcn: dict[str, int]
    axes: dict[str, tuple[int, ...]]
    rings: dict[str, tuple[bool, ...]]
    cut: bool

    @property
    def mesh(self) -> dict[str, int]:
        """A readable mesh: "pod" and each degree's axes ("fsdp", or "fsdp_0", "fsdp_1"), with sizes."""
        out = {f"{name}_dcn": self.dcn[name] for name in reversed(DEGREES) if self.dcn[name] > 1}
        if self.dcn["data"] == self.pods > 1:
            out = {"pod": self.pods}
        for name in reversed(DEGREES):
            sizes = self.axes[name]
            out |= {name if len(sizes) == 1 else f"{name}_{i}": s for i, s in enumerate(sizes)}
        return out


def _whole_sides(sides: list[int], degree: int) -> tuple[int, ...] | None:
    """Whole sides, largest first, whose product is `degree` (removed from `sides`), or None."""
    taken, rest = [], degree
    for side in sorted(sides, reverse=True):
        if rest % side == 0:
            taken.append(side)
            rest //= side
    if rest != 1:
        return None
    for side in taken:
        sides.remove(side)
    return tuple(taken)


def _cut(sides: list[int], degree: int) -> tuple[int, ...] | None:
    """Cut `degree` chips out of one side (a side equal to it, else one it divides); the rest of that
    side joins the smallest other side. A degree larger than every side takes whole sides instead
    (tensor parallelism on all three axes of a cube). Returns the degree's axes, or None."""
    if degree == 1:
        return ()
    fits = [i for i, side in enumerate(sides) if side % degree == 0]
    if not fits:
        return _whole_sides(sides, degree)
    i = next((j for j in fits if sides[j] == degree), fits[0])
    leftover = sides.pop(i) // degree
    if leftover > 1 and sides:
        sides[sides.index(min(sides))] *= leftover
    elif leftover > 1:
        sides.append(leftover)
    return (degree,)


def _on_slice(shape: tuple[int, ...], degrees: dict[str, int]) -> dict[str, tuple[int, ...]] | None:
    """Each degree's axes cut out of a slice's sides (module docstring), or None when they do not cut."""
    sides = sorted((s for s in shape if s > 1), reverse=True)
    axes: dict[str, tuple[int, ...]] = {}
    for name in DEGREES[:4]:
        axis = _cut(sides, degrees[name])
        if axis is None:
            return None
        axes[name] = axis
    if degrees["fsdp"] > 1 and degrees["data"] > 1:
        axis = _cut(sides, degrees["fsdp"])
        if axis is None:
            return None
        axes["fsdp"], axes["data"] = axis, tuple(s for s in sides if s > 1)
    else:
        rest = tuple(s for s in sides if s > 1)
        axes["fsdp"], axes["data"] = (rest, ()) if degrees["fsdp"] > 1 else ((), rest)
    return axes


def _domain_shape(chip: Chip, n_chips: int) -> tuple[int, ...] | None:
    """The offered slice of exactly n_chips chips, or None."""
    return next((s for s in topology.slice_shapes(chip) if math.prod(s) == n_chips), None)


_CROSSING = ("data", "pipeline", "fsdp", "expert", "context")  # the degrees that may span ICI domains, outermost first


def _dcn(chip: Chip, layout: Layout) -> dict[str, int]:
    """How many ICI domains each degree spans: the domains split over data, pipeline, FSDP, expert and context
    in turn."""
    n, per_pod = layout.n_chips, chip.chips_per_pod
    if n > per_pod and n % per_pod:
        raise ValueError(
            f"layout={layout!r}: {n} chips, more than a {chip.name} ICI domain and not whole ones; "
            f"allowed: at most {per_pod} chips, or a multiple of {per_pod}"
        )
    rest, spans = max(1, n // per_pod), dict.fromkeys(DEGREES, 1)
    for name in _CROSSING:
        spans[name] = math.gcd(rest, getattr(layout, name))
        rest //= spans[name]
    if rest > 1:
        raise ValueError(
            f"layout={layout!r}: its {n // per_pod} {chip.name} ICI domains are not spanned by data, pipeline, "
            f"FSDP, expert and context degrees; allowed: their product a multiple of {n // per_pod}"
        )
    return spans


def place(chip: Chip | str, layout: Layout) -> Placement:
    """Map `layout` onto `chip`'s pods and ICI axes (see the module docstring for the rule).

    Raises:
        ValueError: unknown chip; not a Layout; more than one ICI domain but not whole domains, or
            domains that data, pipeline and FSDP degrees do not span; more ICI axes than the torus has sides.
    """
    chip = get_chip(chip)
    if not isinstance(layout, Layout):
        raise ValueError(f"layout={layout!r}: not a Layout; allowed: parallelism.Layout(fsdp=..., tensor=...)")
    dcn = _dcn(chip, layout)
    pods = math.prod(dcn.values())
    degrees = {name: getattr(layout, name) // dcn[name] for name in DEGREES}
    shape = _domain_shape(chip, layout.n_chips // pods)
    cut = None if shape is None else _on_slice(shape, degrees)
    axes = cut or {name: (d,) if d > 1 else () for name, d in degrees.items()}
    sizes = tuple(s for name in DEGREES for s in axes[name])
    if chip.ici_topology != "nvswitch" and len(sizes) > len(chip.pod_shape):
        raise ValueError(
            f"layout={layout!r}: {len(sizes)} ICI axes on a {chip.name} torus of {len(chip.pod_shape)} sides; "
            f"allowed: degrees whose product is a {chip.name} slice size, so they are cut out of its sides"
        )
    flags = iter(topology.ring_flags(chip, sizes) if sizes else ())
    rings = {name: tuple(next(flags) for _ in axes[name]) for name in DEGREES}
    return Placement(chip=chip, layout=layout, pods=pods, dcn=dcn, axes=axes, rings=rings, cut=cut is not None)
