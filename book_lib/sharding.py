"""The plan and cost of a sharded matmul, in the book's notation (`notation`: A[I_X, J], C[I, K]{U_Y}).

`matmul_plan` multiplies two sharded operands over one contracting dimension and sorts the
case out (Book: Part 3, "Computation With Sharded Arrays"):

1. no contracting dimension is sharded: multiply the local blocks, no communication;
2. the contracting dimensions are sharded differently (one not at all, or over other axes):
   AllGather the axes they do not share (keeping the longest common leading axes);
3. both contracting dimensions are sharded over the same axes: multiply locally into partial
   sums {U_...}, then AllReduce them (or ReduceScatter onto an output dimension, or keep them);
4. a mesh axis shards a non-contracting dimension of both operands: AllGather it on the operand
   whose gathered block is smaller (the left one on a tie).

Several cases can apply to one product; the plan lists all of them.

Book: Part 3 (Sharded Matrices and How to Multiply Them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from book_lib import checks, collectives, topology
from book_lib.hardware import Chip, get_chip
from book_lib.notation import ShardedArray, check_mesh, parse, subscript
from book_lib.roofline import RooflineTime, matmul_cost, roofline_time

__all__ = ["PlanStep", "MatmulPlan", "matmul_plan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStep:
    """One step of a sharded matmul: a collective or the local matmul.

    Attributes:
        op: `"AllGather"`, `"Matmul"`, `"AllReduce"` or `"ReduceScatter"`.
        axes: mesh axes the collective runs over (empty for the matmul).
        text: the step in notation, e.g. `"AllGather_X B[J_X, K] -> B[J, K]"`.
        time_s: estimated time (s): `collectives` total for a collective, roofline lower bound
            (max of compute and HBM time) for the matmul.
    """

    op: str
    axes: tuple[str, ...]
    text: str
    time_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulPlan:
    """How to multiply two sharded operands, what it yields and what it costs.

    time_lower_s = max(matmul.t_lower, comms_s) (communication hidden under compute, the book's
    usual estimate); time_upper_s = matmul.t_upper + comms_s (nothing overlaps).

    Attributes:
        cases: the cases of Part 3 that apply (1 alone, or any of 2, 3, 4), sorted.
        steps: collectives and the local matmul, in the order they run.
        result: the sharding of the output, e.g. C[I_X, K_Y].
        matmul: roofline of the local matmul on one device.
        comms_s: sum of the collective times (s).
    """

    cases: tuple[int, ...]
    steps: tuple[PlanStep, ...]
    result: ShardedArray
    matmul: RooflineTime
    comms_s: float

    @property
    def time_lower_s(self) -> float:
        """Estimate (s) when communication overlaps the local matmul perfectly."""
        return max(self.matmul.t_lower, self.comms_s)

    @property
    def time_upper_s(self) -> float:
        """Estimate (s) when nothing overlaps."""
        return self.matmul.t_upper + self.comms_s


_REDUCE = ("all_reduce", "reduce_scatter", "none")


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _operands(
    lhs: ShardedArray | str,
    rhs: ShardedArray | str,
    contracting: str | tuple[str, str],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
) -> tuple[ShardedArray, ShardedArray, str, str, list[str]]:
    """Step 1: parse and check the operands; (lhs, rhs, lhs contracting dim, rhs one, output dims)."""
    lhs = parse(lhs) if isinstance(lhs, str) else lhs
    rhs = parse(rhs) if isinstance(rhs, str) else rhs
    for name, arr in (("lhs", lhs), ("rhs", rhs)):
        if not isinstance(arr, ShardedArray):
            raise ValueError(f"{name}={arr!r}: not an array; allowed: a ShardedArray or notation text")
        if arr.unreduced:
            raise ValueError(f"{name}={str(arr)!r}: holds partial sums; allowed: an operand with no {{U_...}}")
    if isinstance(contracting, str):
        c_lhs = c_rhs = contracting
    elif isinstance(contracting, tuple) and len(contracting) == 2 and all(isinstance(c, str) for c in contracting):
        c_lhs, c_rhs = contracting
    else:
        raise ValueError(f"contracting={contracting!r}: not a dimension name; allowed: a name or a (lhs, rhs) pair")
    for name, arr, dim in (("lhs", lhs, c_lhs), ("rhs", rhs, c_rhs)):
        if dim not in arr.dims:
            raise ValueError(
                f"contracting={contracting!r}: {dim!r} is not a dimension of {name} {arr}; "
                f"allowed: {', '.join(arr.dims)}"
            )
    lhs.local_shape(sizes, mesh)
    rhs.local_shape(sizes, mesh)
    if sizes[c_lhs] != sizes[c_rhs]:
        raise ValueError(
            f"contracting={contracting!r}: sizes disagree ({c_lhs}={sizes[c_lhs]}, {c_rhs}={sizes[c_rhs]}); "
            "allowed: equal lengths"
        )
    out_dims = [d for d in lhs.dims if d != c_lhs] + [d for d in rhs.dims if d != c_rhs]
    for d in out_dims:
        if out_dims.count(d) > 1:
            raise ValueError(
                f"rhs={str(rhs)!r}: non-contracting dimension {d!r} is also in lhs {lhs}; "
                "allowed: distinct names (batched matmuls are not modelled)"
            )
    return lhs, rhs, c_lhs, c_rhs, out_dims


def _ring_axes(
    wraparound: bool | Mapping[str, bool] | None, mesh: Mapping[str, int], chip: Chip
) -> dict[str, bool] | None:
    """Per mesh axis, whether it is a ring: None on NVSwitch GPUs (`collectives` finds the switch), else a dict.

    None (the default) asks `topology.ring_flags` about the whole mesh; a bool or a mapping is the
    abstract mode of the text's idealised examples.
    """
    if wraparound is None:
        if chip.ici_topology == "nvswitch":
            return None
        if math.prod(mesh.values()) > chip.chips_per_pod:
            raise ValueError(
                f"mesh={dict(mesh)!r}: {math.prod(mesh.values())} chips exceed one {chip.name} pod; "
                f"allowed: <= {chip.chips_per_pod} chips, or wraparound= for an idealised mesh"
            )
        return dict(zip(mesh, topology.ring_flags(chip, tuple(mesh.values())), strict=True))
    if isinstance(wraparound, bool):
        return dict.fromkeys(mesh, wraparound)
    if isinstance(wraparound, Mapping):
        missing = [a for a in mesh if not isinstance(wraparound.get(a), bool)]
        if missing:
            raise ValueError(
                f"wraparound={dict(wraparound)!r}: no bool for mesh axis {missing[0]!r}; allowed: one per axis"
            )
        return {a: wraparound[a] for a in mesh}
    raise ValueError(f"wraparound={wraparound!r}: not a bool or mapping; allowed: None, True, False or axis -> bool")


def _gathers(
    lhs: ShardedArray,
    rhs: ShardedArray,
    c_lhs: str,
    c_rhs: str,
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    bytes_per_element: float,
) -> tuple[dict, set[int], tuple[str, ...]]:
    """Step 2: which mesh axes each operand must gather, the cases of Part 3 met, and the shared axes.

    Case 2: the contracting dim is sharded differently in the two operands (gather the difference);
    case 3: sharded the same way (keep it, reduce the partial sums later); case 4: the operands'
    non-contracting dims share a mesh axis (gather it from the smaller operand).
    """
    cases: set[int] = set()
    a_lhs, a_rhs = lhs.axes_of(c_lhs), rhs.axes_of(c_rhs)
    shared = _common_prefix(a_lhs, a_rhs)
    gather = {"lhs": list(a_lhs[len(shared) :]), "rhs": list(a_rhs[len(shared) :])}
    if a_lhs != a_rhs:
        cases.add(2)
    if shared:
        cases.add(3)
    lhs_g, rhs_g = lhs.all_gather(*gather["lhs"]), rhs.all_gather(*gather["rhs"])
    nc_lhs = {a for d, ax in zip(lhs_g.dims, lhs_g.axes, strict=True) if d != c_lhs for a in ax}
    nc_rhs = [a for d, ax in zip(rhs_g.dims, rhs_g.axes, strict=True) if d != c_rhs for a in ax]
    clash = tuple(a for a in nc_rhs if a in nc_lhs)
    if clash:
        cases.add(4)
        lhs_bytes = lhs_g.all_gather(*clash).local_bytes(sizes, mesh, bytes_per_element)
        rhs_bytes = rhs_g.all_gather(*clash).local_bytes(sizes, mesh, bytes_per_element)
        gather["lhs" if lhs_bytes <= rhs_bytes else "rhs"].extend(clash)
    return gather, cases, shared


def _local_matmul(
    left: ShardedArray,
    right: ShardedArray,
    c_lhs: str,
    c_rhs: str,
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    chip: Chip,
    bytes_per_element: float,
) -> RooflineTime:
    """Step 3: the roofline of the local block product (2 M K N FLOPs; operands and output through HBM)."""
    shape_l, shape_r = left.local_shape(sizes, mesh), right.local_shape(sizes, mesh)
    m = math.prod(s for d, s in zip(left.dims, shape_l, strict=True) if d != c_lhs)
    n = math.prod(s for d, s in zip(right.dims, shape_r, strict=True) if d != c_rhs)
    k = shape_l[left.dims.index(c_lhs)]
    cost = matmul_cost(m, k, n, bytes_per_element, bytes_per_element, bytes_per_element)
    return roofline_time(cost.flops, cost.bytes, chip.bf16_flops_per_s, chip.hbm_bytes_per_s)


@dataclass(frozen=True, slots=True)
class _Network:
    """What a collective of a plan runs on: the chip's links, the mesh, which axes are rings."""

    chip: Chip
    mesh: Mapping[str, int]
    rings: dict[str, bool] | None
    hop_latency_s: float

    def time_s(self, op: str, array_bytes: float, axes: tuple[str, ...]) -> float:
        wraps = None if self.rings is None else tuple(self.rings[a] for a in axes)
        return collectives.collective_time(
            op, array_bytes, tuple(self.mesh[a] for a in axes), self.chip, wraparound=wraps,
            hop_latency_s=self.hop_latency_s,
        ).total_s  # fmt: skip


def _gather_steps(
    operands: dict[str, ShardedArray],
    gather: dict[str, list[str]],
    sizes: Mapping[str, int],
    element: float,
    net: _Network,
) -> tuple[list[PlanStep], dict[str, ShardedArray]]:
    """Step 2b: one multi-axis AllGather per operand that needs one; the operands as they then are."""
    steps, ready = [], {}
    for side, arr in operands.items():
        axes = tuple(gather[side])
        ready[side] = arr.all_gather(*axes)
        if axes:
            v = ready[side].local_bytes(sizes, net.mesh, element)
            text = f"AllGather_{subscript(axes)} {arr} -> {ready[side]}"
            steps.append(PlanStep(op="AllGather", axes=axes, text=text, time_s=net.time_s("all_gather", v, axes)))
    return steps, ready


def _reduction(
    result: ShardedArray,
    shared: tuple[str, ...],
    reduce: str,
    dim: str,
    sizes: Mapping[str, int],
    element: float,
    net: _Network,
) -> tuple[ShardedArray, PlanStep]:
    """Step 4 (case 3): AllReduce the partial sums, or ReduceScatter them onto `dim`."""
    v = result.local_bytes(sizes, net.mesh, element)
    if reduce == "all_reduce":
        done, op, text = result.all_reduce(*shared), "AllReduce", f"AllReduce_{subscript(shared)}"
    else:
        done, op = result.reduce_scatter(*shared, dim=dim), "ReduceScatter"
        done.local_shape(sizes, net.mesh)
        text = f"ReduceScatter_{{{','.join(shared)},{dim}}}"
    step = PlanStep(op=op, axes=shared, text=f"{text} {result} -> {done}", time_s=net.time_s(reduce, v, shared))
    return done, step


def matmul_plan(
    lhs: ShardedArray | str,
    rhs: ShardedArray | str,
    *,
    contracting: str | tuple[str, str],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    chip: Chip | str,
    bytes_per_element: float = 2,
    reduce: str = "all_reduce",
    scatter_dim: str | None = None,
    out_name: str = "C",
    wraparound: bool | Mapping[str, bool] | None = None,
    hop_latency_s: float = collectives.HOP_LATENCY_S,
) -> MatmulPlan:
    """Plan lhs ·_contracting rhs on a mesh: which case, which collectives, result sharding, time.

    AllGather what cases 2 and 4 need (one multi-axis AllGather per operand), multiply the local
    blocks (2 M K N FLOPs on bf16_flops_per_s and hbm_bytes_per_s), then in case 3 AllReduce or
    ReduceScatter the partial sums. Output dims: lhs's non-contracting ones, then rhs's. Collective
    times: `collectives.collective_time` over ICI, V the block a device holds after a gather or
    before a reduction. Book: Part 3 (Sharded Matrices), "Computation With Sharded Arrays".

    Args:
        lhs, rhs: operands (`ShardedArray` or notation text), not unreduced.
        contracting: the dimension summed over, or a (lhs dim, rhs dim) pair when the names differ.
        sizes, mesh: dimension -> length; mesh axis -> devices (counts).
        chip: a `Chip` or a name; bytes_per_element: element width (2 for bf16).
        reduce: case 3's `"all_reduce"`, `"reduce_scatter"` (onto `scatter_dim`, default the last
            output dim) or `"none"` (C stays unreduced); out_name: the output's name.
        wraparound: None for the physical rings of the mesh (`topology.ring_flags`); a bool, or
            one per mesh axis, for the text's idealised rings and lines.
        hop_latency_s: fixed cost of one ICI hop (s).

    Raises:
        ValueError: operands, sizes and mesh that do not fit (see `ShardedArray.local_shape`); an unknown
            `reduce` or `scatter_dim`; a `wraparound` without some axis; a mesh of more chips than a pod of `chip`.
    """
    chip = get_chip(chip)
    checks.positive("bytes_per_element", bytes_per_element)
    lhs, rhs, c_lhs, c_rhs, out_dims = _operands(lhs, rhs, contracting, sizes, check_mesh(mesh))
    checks.one_of("reduce", reduce, _REDUCE)
    if scatter_dim is not None:
        checks.one_of("scatter_dim", scatter_dim, out_dims)
    net = _Network(chip=chip, mesh=mesh, rings=_ring_axes(wraparound, mesh, chip), hop_latency_s=hop_latency_s)
    gather, cases, shared = _gathers(lhs, rhs, c_lhs, c_rhs, sizes, mesh, bytes_per_element)
    steps, ready = _gather_steps({"lhs": lhs, "rhs": rhs}, gather, sizes, bytes_per_element, net)
    left, right = ready["lhs"], ready["rhs"]
    out_axes = [ax for d, ax in zip(left.dims, left.axes, strict=True) if d != c_lhs]
    out_axes += [ax for d, ax in zip(right.dims, right.axes, strict=True) if d != c_rhs]
    result = ShardedArray(name=out_name, dims=tuple(out_dims), axes=tuple(out_axes), unreduced=shared)
    local = _local_matmul(left, right, c_lhs, c_rhs, sizes, mesh, chip, bytes_per_element)
    steps.append(PlanStep(op="Matmul", axes=(), text=f"{left} ·_{c_lhs} {right} -> {result}", time_s=local.t_lower))
    if shared and reduce != "none":
        result, step = _reduction(result, shared, reduce, scatter_dim or out_dims[-1], sizes, bytes_per_element, net)
        steps.append(step)
    comms_s = sum(step.time_s for step in steps if step.op != "Matmul")
    return MatmulPlan(
        cases=tuple(sorted(cases)) or (1,), steps=tuple(steps), result=result, matmul=local, comms_s=comms_s
    )
