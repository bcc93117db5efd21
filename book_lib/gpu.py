"""GPU cost models: one SM's share of the chip, the tile its shared memory holds, AllReduce across nodes.

A GPU splits its peak over many streaming multiprocessors (SMs), each with a few tensor cores and its
own shared memory; eight GPUs of a node reach each other in one hop through NVSwitches, and nodes talk
over a slower scale-out network (`link="dcn"` in `book_lib.collectives`, each GPU's share of its node's
egress, `Chip.dcn_bytes_per_s_per_chip`). An AllReduce that spans nodes is done in three steps:

    ReduceScatter of V inside each node (NVLink)
        -> each GPU holds V / g, reduced over its node
    AllReduce of V / g across the n nodes (scale-out)
        -> each GPU's piece reduced over every node
    AllGather of V inside each node (NVLink)
        -> every GPU holds the whole reduced array

with g GPUs per node, so the slow network carries V / g per GPU instead of V.

Book: Part 2 (All About TPUs), Appendix A ("Let's talk about GPUs"); Part 5 (How to Parallelize a
Transformer for Training), "Data Parallelism" and "Pipelining".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from book_lib import checks, collectives
from book_lib.collectives import CollectiveTime
from book_lib.hardware import CHIPS, Chip, get_chip

__all__ = [
    "sm_ops_per_s",
    "tensor_core_ops_per_s",
    "shared_memory_tile_side",
    "tile_intensity",
    "HierarchicalAllReduce",
    "hierarchical_all_reduce",
    "dp_compute_bound_batch_per_gpu",
    "dp_step_bound",
    "pipeline_compute_bound_layers",
]


def _gpu(chip: Chip | str) -> Chip:
    """The GPU `chip` names; refuses a TPU."""
    chip = get_chip(chip)
    if chip.is_tpu:
        gpus = ", ".join(c.name for c in CHIPS.values() if not c.is_tpu)
        raise ValueError(f"chip={chip.name!r}: not a GPU; allowed: {gpus}")
    return chip


def _gpu_figure(chip: Chip | str, field: str) -> tuple[Chip, int]:
    """The GPU `chip` names and its per-SM figure `field`; refuses a TPU, or a GPU where it is None."""
    chip = _gpu(chip)
    value = getattr(chip, field)
    if value is None:
        gpus = ", ".join(c.name for c in CHIPS.values() if not c.is_tpu and getattr(c, field) is not None)
        raise ValueError(f"chip={chip.name!r}: no {field} recorded; allowed: {gpus}")
    return chip, int(value)


def sm_ops_per_s(chip: Chip | str, *, dtype: str = "bf16") -> float:
    """One streaming multiprocessor's share of the chip's dense matmul peak (FLOPs/s, OPs/s for int8).

    sm = peak_ops_per_s(dtype) / SMs. H100, bf16: 9.89e14 / 132 = 7.49e12.
    Book: Part 2, Appendix A (each SM "can be seen as analogous to a TensorCore").

    Raises:
        ValueError: a TPU, an unknown chip or a dtype without a peak.
    """
    chip = _gpu(chip)
    return chip.peak_ops_per_s(dtype) / chip.cores_per_chip


def tensor_core_ops_per_s(chip: Chip | str, *, dtype: str = "bf16") -> float:
    """One tensor core's share of the chip's dense matmul peak (FLOPs/s, OPs/s for int8).

    tensor core = sm_ops_per_s / tensor_cores_per_sm. H100, bf16: 7.49e12 / 4 = 1.87e12.
    Book: Part 2, Appendix A (tensor cores as the GPU's matrix units).

    Raises:
        ValueError: a TPU, a GPU with no tensor-core count recorded, or a dtype without a peak.
    """
    chip, tensor_cores = _gpu_figure(chip, "tensor_cores_per_sm")
    return sm_ops_per_s(chip, dtype=dtype) / tensor_cores


def shared_memory_tile_side(chip: Chip | str, *, dtype: str = "bf16", n_tiles: int = 2) -> int:
    """Side T of the largest square tiles, `n_tiles` of them, that fit one SM's shared memory (elements).

    n_tiles * T^2 * p <= shared_memory_bytes_per_sm, so T = floor(sqrt(smem / (n_tiles * p))), p the bytes of `dtype`.
    H100, two bf16 tiles: floor(sqrt(233,472 / 4)) = 241.
    Book: Part 2, Appendix A (shared memory, "similar to VMEM on a TPU").

    Raises:
        ValueError: a TPU, a GPU without a shared-memory size, or a width or count below 1.
    """
    _, smem_bytes = _gpu_figure(chip, "shared_memory_bytes_per_sm")
    per_tile = checks.count("n_tiles", n_tiles) * checks.dtype_bytes(dtype)
    return math.isqrt(int(smem_bytes // per_tile))


def tile_intensity(*, side: int, dtype: str = "bf16") -> float:
    """FLOPs per byte loaded when a block multiplies a [T, T] tile by a [T, T] tile (FLOPs/byte).

    flops = 2 T^3 (T^2 outputs, T multiply-adds each); bytes = 2 T^2 p, p the bytes of `dtype` (both
    tiles read once; the output accumulates in registers over many such steps), so intensity = T / p.
    Book: Part 1 (Rooflines), "Matrix multiplication" (the same count for one tile).

    Raises:
        ValueError: a side or width below 1.
    """
    t = checks.count("side", side)
    return 2.0 * t**3 / (2.0 * t**2 * checks.dtype_bytes(dtype))


@dataclass(frozen=True, slots=True, kw_only=True)
class HierarchicalAllReduce:
    """The three steps of an AllReduce over n nodes of g GPUs; times in seconds.

    total_s = reduce_scatter.total_s + all_reduce.total_s + all_gather.total_s (one after another).

    Attributes:
        reduce_scatter: inside each node over NVLink, of V.
        all_reduce: across the nodes over the scale-out network, of V / g.
        all_gather: inside each node over NVLink, of V.
    """

    reduce_scatter: CollectiveTime
    all_reduce: CollectiveTime
    all_gather: CollectiveTime

    @property
    def total_s(self) -> float:
        """Time of the three steps in turn (s)."""
        return self.reduce_scatter.total_s + self.all_reduce.total_s + self.all_gather.total_s

    @property
    def bandwidth_s(self) -> float:
        """The same sum with bandwidth times only (s): proportional to V."""
        return self.reduce_scatter.bandwidth_s + self.all_reduce.bandwidth_s + self.all_gather.bandwidth_s

    @property
    def scale_out_fraction(self) -> float:
        """Share of total_s spent on the scale-out network (ratio, 0 for one node)."""
        return self.all_reduce.total_s / self.total_s if self.total_s else 0.0


def hierarchical_all_reduce(
    chip: Chip | str, *, array_bytes: float, n_nodes: int, hop_latency_s: float = collectives.HOP_LATENCY_S
) -> HierarchicalAllReduce:
    """AllReduce of V bytes over every GPU of `n_nodes` NVSwitch nodes, in three steps (s).

    With g = chips_per_pod GPUs per node, W_node = ici_links * ici_bytes_per_s and W_out =
    dcn_bytes_per_s_per_chip (each GPU's share of its node's scale-out egress):
        ReduceScatter (g - 1) / g * V / W_node
        + AllReduce 2 (n - 1) / n * (V / g) / W_out
        + AllGather (g - 1) / g * V / W_node,
        each max-ed with its hops' latency (`collectives`).
    For large n the middle term tends to V / (4 W_out) when g = 8: the node's whole egress works on it.
    Book: Part 2, Appendix A (NVLink "cliques" and the slower network beyond them); Part 3, "Case 3".

    Args:
        array_bytes: V, the unreduced array on each GPU (bytes), > 0.
        n_nodes: nodes the AllReduce spans (count, >= 1).
        chip: an NVSwitch GPU (a `Chip` or a name).
        hop_latency_s: fixed cost of one hop on either network (s), >= 0.

    Raises:
        ValueError: a TPU or unknown chip, a non-positive size, or a node count below 1.
    """
    chip = _gpu(chip)
    v = checks.positive("array_bytes", array_bytes)
    n = checks.count("n_nodes", n_nodes)
    g, lat = chip.chips_per_pod, hop_latency_s
    return HierarchicalAllReduce(
        reduce_scatter=collectives.collective_time("reduce_scatter", v, g, chip, hop_latency_s=lat),
        all_reduce=collectives.collective_time("all_reduce", v / g, n, chip, link="dcn", hop_latency_s=lat),
        all_gather=collectives.collective_time("all_gather", v, g, chip, hop_latency_s=lat),
    )


def dp_compute_bound_batch_per_gpu(chip: Chip | str, *, n_nodes: int) -> float:
    """Tokens per GPU above which data parallelism over `n_nodes` nodes hides its AllReduce (tokens).

    Per layer (W_in[D, F] and W_out[F, D]), the backward pass does 8 B D F FLOPs on each GPU's B tokens and
    AllReduces 4 D F bytes of bf16 gradients. With tau = `hierarchical_all_reduce(...).bandwidth_s / V`
    (seconds per byte), compute-bound when 8 B D F / C > tau 4 D F, that is B > C tau / 2. Inside one
    node tau = 2 (g - 1) / (g W_node), the text's B > C / W up to (g - 1) / g; across many nodes
    the scale-out term dominates and B tends to C / (g W_out) plus the node's share.
    Book: Part 5, "Data Parallelism" (B / X > C / W) and "Scaling Between Pods".

    Raises:
        ValueError: a TPU or unknown chip, or a node count below 1.
    """
    chip = _gpu(chip)
    tau = hierarchical_all_reduce(chip, array_bytes=1.0, n_nodes=n_nodes).bandwidth_s
    return chip.peak_ops_per_s("bf16") * tau / 2


def dp_step_bound(chip: Chip | str, *, n_nodes: int, batch_per_gpu: float) -> str:
    """What takes longest in a data-parallel layer over `n_nodes` nodes: "compute", "nvlink" or "scale_out".

    Per layer and per D F (which cancel), with B tokens per GPU: the backward matmuls take 8 B / C; the
    gradient AllReduce of 4 D F bytes takes 4 tau_node on NVLink (its ReduceScatter and AllGather) and
    4 tau_out on the scale-out network, tau being each step's `hierarchical_all_reduce` bandwidth time
    per byte. The answer is the largest of the three (each overlaps the others at best).
    Book: Part 5, "Data Parallelism"; Part 2, Appendix A.

    Raises:
        ValueError: a TPU or unknown chip, a node count below 1 or a non-positive batch.
    """
    chip = _gpu(chip)
    b = checks.positive("batch_per_gpu", batch_per_gpu)
    steps = hierarchical_all_reduce(chip, array_bytes=1.0, n_nodes=n_nodes)
    times = {
        "compute": 8 * b / chip.peak_ops_per_s("bf16"),
        "nvlink": 4 * (steps.reduce_scatter.bandwidth_s + steps.all_gather.bandwidth_s),
        "scale_out": 4 * steps.all_reduce.bandwidth_s,
    }
    return max(times, key=times.__getitem__)


def pipeline_compute_bound_layers(chip: Chip | str, *, d_ff: int, bytes_per_s: float | None = None) -> float:
    """Layers per pipeline stage above which what a stage sends hides under its math (layers).

    One GPU per stage, L layers of W_in[D, F] and W_out[F, D] each. Per token a layer does 12 D F
    training FLOPs (4 D F forward, 8 D F backward); the stage sends bf16[D] of activations forward and
    bf16[D] of gradients backward, 4 D bytes out of the GPU. Compute-bound when 12 L D F / C > 4 D / W,
    that is L > C / (3 F W): D cancels. W defaults to the scale-out share `dcn_bytes_per_s_per_chip`
    (stages in different nodes). H100, F = 28,672: 9.89e14 / (3 * 28,672 * 5e10) = 0.23 layers.
    Book: Part 5, "Pipelining" (a low communication cost between stages).

    Raises:
        ValueError: a TPU or unknown chip, d_ff not a count, or a non-positive bandwidth.
    """
    chip = _gpu(chip)
    f = checks.count("d_ff", d_ff)
    w = chip.dcn_bytes_per_s_per_chip if bytes_per_s is None else checks.positive("bytes_per_s", bytes_per_s)
    return chip.peak_ops_per_s("bf16") / (3 * f * w)
