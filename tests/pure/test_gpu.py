"""book_lib.gpu and the GPU fields of book_lib.hardware: hand-checkable values and one error per rule."""

import math
import subprocess
import sys

import pytest

from book_lib import bounds, collectives, gpu, hardware

H100 = hardware.get_chip("h100")


def test_new_gpu_fields_are_filled_for_gpus_and_none_for_tpus():
    for chip in hardware.CHIPS.values():
        fields = (chip.tensor_cores_per_sm, chip.register_bytes_per_sm, chip.l2_bytes)
        if chip.is_tpu:
            assert fields == (None, None, None), chip.name
        else:
            assert chip.register_bytes_per_sm == 65536 * 4, "64K 32-bit registers per SM on Ampere, Hopper, Blackwell"
    assert (H100.tensor_cores_per_sm, H100.l2_bytes) == (4, 50 * 2**20)
    assert hardware.get_chip("a100").l2_bytes == 40960 * 1024, "the A100's 40,960 KB of L2"
    assert hardware.get_chip("h200").l2_bytes == H100.l2_bytes, "same GH100 die"
    b200 = hardware.get_chip("b200")
    assert b200.tensor_cores_per_sm is None and b200.l2_bytes is None, "unpublished for the B200: left None"


def test_new_gpu_fields_refuse_non_positive_values():
    import dataclasses

    for field in ("tensor_cores_per_sm", "register_bytes_per_sm", "l2_bytes"):
        with pytest.raises(ValueError, match=rf"^{field}=0: not positive for chip 'h100'"):
            dataclasses.replace(H100, **{field: 0})


def test_one_sm_and_one_tensor_core():
    assert gpu.sm_ops_per_s("h100") == pytest.approx(9.89e14 / 132)
    assert gpu.sm_ops_per_s("h100", dtype="int8") == pytest.approx(1.979e15 / 132)
    assert gpu.tensor_core_ops_per_s("h100") == pytest.approx(9.89e14 / 132 / 4)  # 1.87e12
    assert gpu.tensor_core_ops_per_s("a100") == pytest.approx(3.12e14 / 108 / 4)
    # the 1024 CUDA cores per SM of the text's appendix would not change this: tensor cores do the matmuls
    assert gpu.sm_ops_per_s("h100") * H100.cores_per_chip == pytest.approx(H100.bf16_flops_per_s)


def test_shared_memory_tile_and_its_intensity():
    assert gpu.shared_memory_tile_side("h100") == 241  # 241^2 * 4 = 232,324 <= 233,472 < 242^2 * 4
    assert gpu.shared_memory_tile_side("a100") == 204  # 167,936 / 4 = 41,984; 204^2 = 41,616
    assert gpu.shared_memory_tile_side("h100", dtype="int8") == 341
    assert gpu.shared_memory_tile_side("h100", n_tiles=3) == math.isqrt(233_472 // 6)
    assert gpu.tile_intensity(side=241) == 120.5
    assert gpu.tile_intensity(side=128, dtype="int8") == 128.0


def test_hierarchical_all_reduce_is_three_collectives():
    v = 2.0**30
    one = gpu.hierarchical_all_reduce("h100", array_bytes=v, n_nodes=1)
    assert one.all_reduce.total_s == 0 and one.scale_out_fraction == 0
    assert one.total_s == pytest.approx(collectives.all_reduce_time(v, 8, "h100")), "one node: a plain AllReduce"
    many = gpu.hierarchical_all_reduce("h100", array_bytes=v, n_nodes=16)
    node_s = 2 * 7 / 8 * v / (18 * 2.5e10)
    out_s = 2 * 15 / 16 * (v / 8) / H100.dcn_bytes_per_s_per_chip
    assert many.total_s == pytest.approx(node_s + out_s)
    assert many.scale_out_fraction == pytest.approx(out_s / (node_s + out_s))
    assert many.bandwidth_s == pytest.approx(many.total_s), "1 GiB is bandwidth-bound"


def test_data_parallel_batch_per_gpu():
    # one node: the text's C / W times (g - 1) / g
    assert gpu.dp_compute_bound_batch_per_gpu("h100", n_nodes=1) == pytest.approx(
        7 / 8 * bounds.compute_bound_batch_per_chip("h100", strategy="dp")
    )
    # many nodes: the scale-out term tends to the text's per-pod rule, per GPU, plus the node's share
    big = gpu.dp_compute_bound_batch_per_gpu("h100", n_nodes=10**6)
    per_pod = bounds.dcn_compute_bound_batch("h100", chips_per_pod=8) / 8
    assert big == pytest.approx(per_pod + 7 / 8 * bounds.compute_bound_batch_per_chip("h100", strategy="dp"), rel=1e-5)
    assert gpu.dp_compute_bound_batch_per_gpu("h100", n_nodes=16) > gpu.dp_compute_bound_batch_per_gpu(
        "h100", n_nodes=2
    )


def test_pipeline_stage_layers():
    assert gpu.pipeline_compute_bound_layers("h100", d_ff=28_672) == pytest.approx(
        9.89e14 / (3 * 28_672 * H100.dcn_bytes_per_s_per_chip)
    )
    assert gpu.pipeline_compute_bound_layers("h100", d_ff=28_672, bytes_per_s=4.5e11) == pytest.approx(
        9.89e14 / (3 * 28_672 * 4.5e11)
    )


BAD = [
    (lambda: gpu.pipeline_compute_bound_layers("h100", d_ff=0), r"^d_ff=0: not a count"),
    (lambda: gpu.pipeline_compute_bound_layers("h100", d_ff=8, bytes_per_s=0), r"^bytes_per_s=0: not a positive"),
    (lambda: gpu.sm_ops_per_s("tpu-v5e"), r"^chip='tpu-v5e': not a GPU; allowed: a100, h100"),
    (lambda: gpu.sm_ops_per_s("a100", dtype="fp8"), r"^dtype='fp8': a100 has no fp8 matmul peak"),
    (lambda: gpu.tensor_core_ops_per_s("b200"), r"^chip='b200': no tensor_cores_per_sm recorded; allowed: a100"),
    (lambda: gpu.shared_memory_tile_side("tpu-v4"), r"^chip='tpu-v4': not a GPU"),
    (lambda: gpu.shared_memory_tile_side("h100", dtype=2), r"^dtype=2: unknown dtype"),
    (lambda: gpu.shared_memory_tile_side("h100", n_tiles=1.5), r"^n_tiles=1.5: not a count"),
    (lambda: gpu.tile_intensity(side=0), r"^side=0: not a count"),
    (lambda: gpu.hierarchical_all_reduce("h100", array_bytes=0.0, n_nodes=2), r"^array_bytes=0.0: not a positive"),
    (lambda: gpu.hierarchical_all_reduce("h100", array_bytes=1e9, n_nodes=0), r"^n_nodes=0: not a count"),
    (lambda: gpu.hierarchical_all_reduce("tpu-v5p", array_bytes=1e9, n_nodes=2), r"^chip='tpu-v5p': not a GPU"),
    (lambda: gpu.dp_compute_bound_batch_per_gpu("h1000", n_nodes=2), r"^chip='h1000': unknown chip"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_gets_a_value_error_naming_the_argument(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_gpu_is_a_pure_module():
    code = "import sys; from book_lib import gpu; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def _judged(gid, answer):
    from exercises.grading.judge import judge_record
    from exercises.keys import keys_for

    key = keys_for("ch12_gpus")[gid]
    record = {"values": {name: {"num": float(v)} for name, v in answer.items()}}
    return judge_record(key, {"params": dict(key.params)}, record)


def test_the_ch12_keys_reject_the_plausible_wrong_models():
    """Value questions take no PLAUSIBLE submissions (those are judged with a class's numbers), so the
    slips a student is likely to make are judged here against the text's numbers instead."""
    from exercises.keys.ch12_gpus import KEYS

    right = {gid: key.answer() for gid, key in KEYS.items() if key.kind == "value"}
    assert all(_judged(gid, answer) is None for gid, answer in right.items())
    # Q1 with the text's "about 140" SMs
    q1 = right["ch12_q1_sm_flops"]
    assert _judged("ch12_q1_sm_flops", {k: v * 132 / 140 for k, v in q1.items()}) is not None
    # Q2 with 228 KB read as 228,000 bytes: T = 238
    side = math.isqrt(228_000 // 4)
    assert _judged("ch12_q2_smem_tile", {"tile_side": side, "tile_flops_per_byte": side / 2}) is not None
    # Q4 done flat: one ring over all 128 GPUs at the scale-out share
    flat = collectives.collective_time("all_reduce", 2.0**30, 128, H100, link="dcn").bandwidth_s
    q4 = {"hier_allreduce_s": flat, "scale_out_fraction": 1.0}
    assert _judged("ch12_q4_hierarchical", q4) is not None
    # Q5 with the one-node rule C / W, as if NVLink joined every GPU
    in_node = {"dp_batch_per_gpu_tokens": bounds.compute_bound_batch_per_chip(H100, strategy="dp")}
    assert _judged("ch12_q5_dp_batch", in_node) is not None
    # Q6 with one NVLink instead of all of them
    one_link = {"tp_min_d_ff": 8 * H100.bf16_flops_per_s / H100.ici_bytes_per_s}
    assert _judged("ch12_q6_tp_width", one_link) is not None
    # Q3: the text's rule of thumb is accepted for both times, but not mixed with a wrong cube bandwidth
    thumb = KEYS["ch12_q3_node_vs_cube"].also[0](**KEYS["ch12_q3_node_vs_cube"].params)
    assert _judged("ch12_q3_node_vs_cube", thumb) is None
    assert _judged("ch12_q3_node_vs_cube", {**thumb, "cube_allgather_s": thumb["cube_allgather_s"] * 3}) is not None
