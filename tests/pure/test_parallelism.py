"""book_lib.parallelism: a Layout names each degree; `place` maps it onto pods and ICI axes."""

from __future__ import annotations

import dataclasses

import pytest

from book_lib import topology
from book_lib.parallelism import DEGREES, Layout, place


def test_layout_counts_chips_and_labels_its_strategy():
    assert Layout().n_chips == 1 and Layout().label == "one chip"
    layout = Layout(data=2, fsdp=64, tensor=4, pipeline=2, microbatches=8)
    assert layout.n_chips == 2 * 64 * 4 * 2  # microbatches take no chips
    assert layout.label == "DP+FSDP+TP+PP"
    assert layout.weight_shards == 64 * 4 * 2 and layout.batch_shards == 2 * 64
    assert Layout(context=4, expert=2).label == "CP+EP"
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.fsdp = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        Layout(2, 4)  # type: ignore[misc]  # keyword-only


def test_the_texts_v5p_pod_mesh_comes_from_the_degrees_alone():
    # Part 6: 4-way tensor parallelism on the 16x20x28 pod; the 7 left of the 28 side joins the 16.
    placed = place("v5p", Layout(fsdp=2240, tensor=4))
    assert placed.pods == 1 and placed.cut
    assert placed.axes["tensor"] == (4,) and sorted(placed.axes["fsdp"]) == [20, 112]
    assert all(all(rings) for rings in placed.rings.values())  # a whole 3D pod: every axis a ring
    assert placed.mesh == {"fsdp_0": 20, "fsdp_1": 112, "tensor": 4}


def test_whole_pods_join_over_dcn_by_data_parallelism():
    placed = place("v5p", Layout(data=10, fsdp=2240, tensor=4))
    assert placed.pods == 10 and placed.axes["data"] == () and placed.mesh["pod"] == 10
    gpus = place("h100", Layout(data=8, tensor=8))  # 64 GPUs: eight NVLink nodes
    assert gpus.pods == 8 and gpus.axes["tensor"] == (8,) and gpus.rings["tensor"] == (False,)


def test_rings_follow_the_slice():
    # A v5e 4x4 slice has no wraparound; its 16 chips are two axes of 4, not one line of 16.
    small = place("v5e", Layout(fsdp=16))
    assert small.axes["fsdp"] == (4, 4) and small.rings["fsdp"] == (False, False)
    # The full 16x16 pod wraps both axes.
    pod = place("v5e", Layout(fsdp=16, tensor=16))
    assert pod.rings == {**{d: () for d in DEGREES}, "fsdp": (True,), "tensor": (True,)}
    assert topology.ring_flags("v5e", (16, 16)) == (True, True)


def test_a_layout_that_cuts_no_side_gets_one_axis_per_degree():
    placed = place("v5p", Layout(fsdp=3, tensor=2))  # 6 chips: no v5p slice
    assert not placed.cut and placed.axes["fsdp"] == (3,) and placed.axes["tensor"] == (2,)


@pytest.mark.parametrize(
    ("chip", "layout", "start"),
    [
        ("v5p", Layout(fsdp=9000), r"^layout=.*9000 chips, more than a tpu-v5p ICI domain"),
        ("v5p", Layout(tensor=17920), r"^layout=.*its 2 tpu-v5p ICI domains are not spanned by data, pipeline"),
        ("v5e", Layout(data=4, fsdp=4, tensor=16), r"^layout=.*3 ICI axes on a tpu-v5e torus of 2 sides"),
        ("v9", Layout(), r"^chip='v9': unknown chip"),
        ("v5p", {"fsdp": 8}, r"^layout=\{'fsdp': 8\}: not a Layout"),
    ],
)
def test_bad_layouts_are_refused_clearly(chip, layout, start):
    with pytest.raises(ValueError, match=start):
        place(chip, layout)


def test_gpu_nodes_take_tensor_inside_and_pipeline_data_fsdp_across():
    # Llama 3 405B's published layout on 16,384 H100s: TP 8 in the node, PP 16 and DP 128 across nodes.
    meta = place("h100", Layout(data=128, tensor=8, pipeline=16))
    assert meta.pods == 2048 and meta.dcn["data"] == 128 and meta.dcn["pipeline"] == 16
    assert meta.axes["tensor"] == (8,) and meta.mesh == {"data_dcn": 128, "pipeline_dcn": 16, "tensor": 8}
    # FSDP fills the node and spans the rest: 2 chips of it in each node, 512 nodes across.
    hsdp = place("h100", Layout(fsdp=1024, tensor=4, pipeline=4))
    assert hsdp.dcn["fsdp"] == 512 and hsdp.axes["fsdp"] == (2,) and hsdp.dcn["pipeline"] == 4
