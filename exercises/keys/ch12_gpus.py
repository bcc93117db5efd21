"""Answer keys for the chapter 12 exercises (GPUs), computed with book_lib."""

from __future__ import annotations

from book_lib import bounds, checks, collectives, gpu
from book_lib.hardware import get_chip
from exercises.keys import choice, pick, value
from exercises.keys.chips import TPUS_3D

# What a class's variant may draw: GPUs with the figures a question needs (the H200 has an H100's SMs,
# links and network, so it would repeat the text's numbers), and TPUs whose slices are built of cubes.
GPUS = ("a100", "h100", "b200")
GPUS_WITH_TENSOR_CORES = ("a100", "h100-pcie")  # the B200's per-SM counts are unpublished
CUBE = (2, 2, 2)  # Q3's TPU slice: 8 chips, as many as a node has GPUs


def _tile(gpu_name: str, dtype_bytes: int) -> tuple[float, float]:
    # the statement gives the element's size; any dtype of that size (checks.DTYPES) tiles alike
    dtype = next(name for name, (size, _) in checks.DTYPES.items() if size == dtype_bytes)
    side = gpu.shared_memory_tile_side(gpu_name, dtype=dtype)
    return (side, gpu.tile_intensity(side=side, dtype=dtype))


def _gathers(gpu_name: str, tpu: str, v_gib: int, *, rule_of_thumb: bool = False) -> tuple[float, float]:
    """AllGathers of V in a node of GPUs and in a 2x2x2 TPU slice (no wraparound): with each ring's
    (N - 1) / N, or by the text's rule of thumb, V over the bandwidth out of a chip."""
    v = v_gib * 2**30
    node = collectives.collective_time("all_gather", v, get_chip(gpu_name).chips_per_pod, gpu_name)
    cube = collectives.collective_time("all_gather", v, CUBE, tpu)
    return tuple(c.rule_of_thumb_s if rule_of_thumb else c.bandwidth_s for c in (node, cube))


def _hierarchical(gpu_name: str, v_gib: int, n_nodes: int) -> tuple[float, float]:
    steps = gpu.hierarchical_all_reduce(gpu_name, array_bytes=v_gib * 2**30, n_nodes=n_nodes)
    return (steps.bandwidth_s, steps.all_reduce.bandwidth_s / steps.bandwidth_s)


def _dp_batch_overlapped(gpu_name: str, n_nodes: int, *, rule_of_thumb: bool = False) -> float:
    """Part 12's model: the NVLink and scale-out steps overlap, so only the slower one counts.

    Its T_total = max(T_comms at node, T_comms in scale-out network): with the rule of thumb (no ring's
    (N - 1) / N), B > C / W_node egress, the 990e12 / 400e9 = 2475 tokens per H100 its "Data Parallelism"
    section prints; with each level's (D - 1) / D (its "more precise derivation"), about 2320 for 16 nodes.
    """
    steps = gpu.hierarchical_all_reduce(gpu_name, array_bytes=1.0, n_nodes=n_nodes)
    per = (lambda c: c.rule_of_thumb_s) if rule_of_thumb else (lambda c: c.bandwidth_s)
    tau = max(per(steps.reduce_scatter) + per(steps.all_gather), per(steps.all_reduce))
    return get_chip(gpu_name).bf16_flops_per_s * tau / 2


KEYS = {
    "ch12_q1_sm_flops": value(
        ("sm_flops_per_s", "tensor_core_flops_per_s"),
        lambda gpu_name: (gpu.sm_ops_per_s(gpu_name), gpu.tensor_core_ops_per_s(gpu_name)),
        params={"gpu_name": "h100"},
        draw=pick(gpu_name=GPUS_WITH_TENSOR_CORES),
    ),
    "ch12_q2_smem_tile": value(
        ("tile_side", "tile_flops_per_byte"),
        _tile,
        rel_tol=1e-6,
        params={"gpu_name": "h100", "dtype_bytes": 2},
        draw=pick(gpu_name=("a100", "h100"), dtype_bytes=(1, 2, 4)),
    ),
    "ch12_q3_node_vs_cube": value(
        ("node_allgather_s", "cube_allgather_s"),
        _gathers,
        also=(lambda **v: _gathers(**v, rule_of_thumb=True),),
        params={"gpu_name": "h100", "tpu": "tpu-v5p", "v_gib": 1},
        draw=pick(gpu_name=GPUS, tpu=TPUS_3D, v_gib=(2, 4, 8)),
    ),
    "ch12_q4_hierarchical": value(
        ("hier_allreduce_s", "scale_out_fraction"),
        _hierarchical,
        params={"gpu_name": "h100", "v_gib": 1, "n_nodes": 16},
        draw=pick(v_gib=(2, 4, 8), n_nodes=(2, 3, 4, 6)),
        follows="ch12_q3_node_vs_cube",  # Q3's GPU, now a cluster of its nodes
        shares=("gpu_name",),
    ),
    "ch12_q5_dp_batch": value(
        "dp_batch_per_gpu_tokens",
        lambda gpu_name, n_nodes: gpu.dp_compute_bound_batch_per_gpu(gpu_name, n_nodes=n_nodes),
        also=(lambda **v: _dp_batch_overlapped(**v, rule_of_thumb=True), _dp_batch_overlapped),
        params={"gpu_name": "h100", "n_nodes": 16},
        follows="ch12_q4_hierarchical",  # Q4's cluster and its three-step AllReduce
    ),
    "ch12_q6_tp_width": value(
        "tp_min_d_ff",
        lambda gpu_name, tp: tp * bounds.compute_bound_batch_per_chip(gpu_name, strategy="dp"),
        params={"gpu_name": "h100", "tp": 8},
        draw=pick(tp=(2, 4, 8)),
        follows="ch12_q5_dp_batch",  # a node of the same GPU
        shares=("gpu_name",),
    ),
    "ch12_q7_bound": choice(
        "bound",
        lambda gpu_name, n_nodes, batch_per_gpu: gpu.dp_step_bound(
            gpu_name, n_nodes=n_nodes, batch_per_gpu=batch_per_gpu
        ),
        ("compute", "nvlink", "scale_out"),
        params={"gpu_name": "h100", "n_nodes": 16, "batch_per_gpu": 8192},
        draw=pick(batch_per_gpu=(512, 2048, 32768, 131072)),
        follows="ch12_q5_dp_batch",  # Q5's cluster and model
    ),
}

# Part 12 ("How to Think About GPUs", added to the text in August 2025) prints these answers, for an H100, in
# its prose rather than its quizzes: Q1's 7.5e12 FLOPs/s per SM (990e12 / 132), which it divides by the 4
# tensor cores of an SM ("7.5e12 / 1.76e9 / 4 ~ 1024" FLOPs per cycle); Q5's per-GPU batch for data
# parallelism within an SU, 990e12 / 400e9 = 2475 tokens (`_dp_batch_overlapped`; its Quiz 5 writes 2,472);
# Q6's width from "Y < F / 2200" within a node, 8 x 2200 for 8-way tensor parallelism.
PRINTED: dict[str, dict[str, float]] = {
    "ch12_q1_sm_flops": {"sm_flops_per_s": 7.5e12, "tensor_core_flops_per_s": 7.5e12 / 4},
    "ch12_q5_dp_batch": {"dp_batch_per_gpu_tokens": 2475},
    "ch12_q6_tp_width": {"tp_min_d_ff": 8 * 2200},
}
UNPRINTED: dict[str, str] = {
    "ch12_q2_smem_tile": "the text prints no answer to this question: it sizes no shared-memory tile",
    "ch12_q3_node_vs_cube": (
        "the text prints no answer to this question: its node AllGathers (Quiz 2's 512 MB in 1.04 ms, Pop Quiz"
        " 1's 65 us) are of other sizes, and it times no TPU cube"
    ),
    "ch12_q4_hierarchical": (
        "the text prints no answer to this question: it times no three-step AllReduce across nodes, and its"
        " cross-node cost takes the slower level rather than a sum of the steps"
    ),
    "ch12_q7_bound": (
        "the text does not pose this question, though its rule of about 2,500 tokens per GPU gives the key's"
        " answer, compute, for 8,192"
    ),
}
