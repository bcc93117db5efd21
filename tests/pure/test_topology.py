"""Tests for book_lib.topology: wraparound rule, rings of a mesh, hosts, hops and per-axis bandwidth."""

import math

import pytest

from book_lib import collectives, sharding, topology
from book_lib.hardware import get_chip
from book_lib.topology import Slice, parse_shape, pod

GiB = 2**30


@pytest.mark.parametrize(
    ("chip", "shape", "wraps"),
    [
        ("v5e", "16x16", (True, True)),
        ("v5e", "8x16", (False, True)),  # Part 2: an 8x16 wraps its long axis
        ("v5e", "4x4", (False, False)),  # Solution 2.5: no wraparound on a 4x4
        ("v6e", "16x4", (True, False)),
        ("v3", "16x16", (False, False)),  # v3 pods are 32x32
        ("v3", "32x32", (True, True)),
        ("v4", "4x4x4", (True, True, True)),  # Solution 3.2: full cube
        ("v4", "4x4x8", (True, True, True)),  # Part 2: multiples of a cube wrap
        ("v4", "2x2x4", (False, False, False)),  # Part 2 footnote: no cube, no wraps
        ("v4", "4x4x2", (False, False, False)),  # our rule; the bidi footnote would wrap two axes
        ("v4", "2x2x1", (False, False, False)),
        ("v5p", "16x20x28", (True, True, True)),
        ("h100", 8, (False,)),
    ],
)
def test_wraparound_rule(chip, shape, wraps):
    assert Slice.of(chip, shape).wraparound == wraps


def test_hop_count_without_wraparound_solution_2_5():
    # Solution 2.5: (0, 0) -> (3, 3) on a v5e 4x4 is six hops, so the first byte lands after ~6 us.
    assert Slice.of("v5e", "4x4").hop_count((0, 0), (3, 3)) == 6


def test_hop_count_uses_wraps():
    full = Slice.of("v5e", "16x16")
    assert full.hop_count((0, 0), (15, 15)) == 2
    assert full.hop_count((0, 0), (8, 8)) == 16
    assert Slice.of("v4", "4x4x4").hop_count((0, 0, 0), (3, 3, 3)) == 3
    assert Slice.of("v4", "2x2x4").hop_count((0, 0, 0), (1, 1, 3)) == 5
    assert Slice.of("v5e", "8x16").hop_count((0, 0), (7, 15)) == 8  # 7 along the line + 1 around


def test_hop_count_through_nvswitch():
    node = Slice.of("h100", 8)
    assert node.hop_count((0,), (7,)) == 1
    assert node.hop_count((3,), (3,)) == 0
    assert node.diameter_hops == 1


def test_diameter():
    assert Slice.of("v5e", "4x4").diameter_hops == 6
    assert Slice.of("v5e", "16x16").diameter_hops == 16
    assert Slice.of("v4", "4x4x4").diameter_hops == 6


def test_hosts_of_pods_solution_2_2():
    v5e, v5p = pod("v5e"), pod("v5p")
    assert v5e.n_chips == 256 and v5e.n_hosts == 32 and v5e.n_cores == 256
    assert v5p.n_chips == 8960 and v5p.n_hosts == 2240 and v5p.n_cores == 17920
    # printed 5.1e16 and 4e18 use 2e14 and 4.5e14 FLOPs/s per chip; the table says 1.97e14 and 4.59e14
    assert v5e.flops_per_s == pytest.approx(256 * 1.97e14)
    assert v5p.flops_per_s == pytest.approx(8960 * 4.59e14)
    # printed "4TB" and "860TB" count 16 GB and 96 GB as 1e9 bytes each; HBM sizes are in GiB
    assert v5e.hbm_bytes == pytest.approx(256 * 16 * GiB)
    assert v5p.hbm_bytes == pytest.approx(8960 * 96 * GiB)


def test_hosts_of_small_slices():
    assert Slice.of("v5e", "4x4").n_hosts == 2  # Solution 2.6: a 4x4 spans two hosts
    tiny = Slice.of("v5e", "2x2")
    assert tiny.n_hosts == 1 and tiny.chips_per_host == 4
    assert Slice.of("v4", "4x4x4").n_hosts == 16
    assert Slice.of("h100", 8).n_hosts == 1


def test_axis_bandwidth():
    w = get_chip("v5e").ici_bytes_per_s
    assert Slice.of("v5e", "8x16").axis_bytes_per_s == (w, 2 * w)
    assert Slice.of("v5e", "1x16").axis_bytes_per_s == (0.0, 2 * w)
    assert Slice.of("v4", "4x4x4").axis_bytes_per_s == (9e10, 9e10, 9e10)  # the v4 bidi column
    assert Slice.of("h100", 8).axis_bytes_per_s == (18 * 2.5e10,)


def test_pod_shapes_and_label():
    assert pod("v3").shape == (32, 32)
    assert pod("tpu-v5p").label == "tpu-v5p 16x20x28"
    assert pod(get_chip("7x")).wraparound == (True, True, True)
    assert math.prod(pod("h100").shape) == 8


def test_parse_shape():
    assert parse_shape("4x4") == (4, 4)
    assert parse_shape(" 2 x 2 x 1 ") == (2, 2, 1)
    assert parse_shape(8) == (8,)
    assert parse_shape([4, 8]) == (4, 8)


def test_axes_can_be_listed_in_any_order():
    assert Slice.of("v5p", "28x16x20").n_chips == 8960


def test_error_wrong_number_of_axes():
    with pytest.raises(ValueError, match=r"^shape=\(4, 4\): 2 axes"):
        Slice.of("v4", "4x4")


def test_error_non_positive_size():
    with pytest.raises(ValueError, match=r"^shape=\(0, 4\)"):
        Slice.of("v5e", (0, 4))


def test_error_larger_than_pod():
    with pytest.raises(ValueError, match=r"^shape=\(32, 16\): larger than the tpu-v5e pod"):
        Slice.of("v5e", "32x16")


def test_error_bad_shape_text():
    with pytest.raises(ValueError, match=r"^shape='4by4'"):
        parse_shape("4by4")


def test_error_non_integer_size():
    with pytest.raises(ValueError, match=r"^shape=\(4\.0, 4\)"):
        parse_shape((4.0, 4))


def test_error_unknown_chip():
    with pytest.raises(ValueError, match=r"^chip='v9e': unknown chip"):
        Slice.of("v9e", "4x4")


def test_error_chip_not_a_chip():
    with pytest.raises(ValueError, match=r"^chip='v5e': not a Chip"):
        Slice(chip="v5e", shape=(4, 4))


def test_error_coordinate_outside_slice():
    with pytest.raises(ValueError, match=r"^b=\(4, 0\): not a chip of the tpu-v5e 4x4 slice"):
        Slice.of("v5e", "4x4").hop_count((0, 0), (4, 0))
    with pytest.raises(ValueError, match=r"^a=\(0,\)"):
        Slice.of("v5e", "4x4").hop_count((0,), (1, 1))


def test_grid_hops_wraps_only_the_axes_that_wrap():
    assert topology.grid_hops((4, 8), (False, True), (0, 0), (3, 7)) == 3 + 1
    assert topology.grid_hops((4, 8), (False, False), (0, 0), (3, 7)) == 3 + 7
    assert topology.grid_hops((16, 16), (True, True), (3, 12), (10, 1)) == 7 + 5
    slice_ = topology.Slice.of("v5e", "16x16")
    assert slice_.hop_count((3, 12), (10, 1)) == topology.grid_hops(slice_.shape, slice_.wraparound, (3, 12), (10, 1))
    with pytest.raises(ValueError, match=r"b=\(4, 0\)"):
        topology.grid_hops((4, 4), (True, True), (0, 0), (4, 0))
    with pytest.raises(ValueError, match=r"shape=\(4, 4\)"):
        topology.grid_hops((4, 4), (True,), (0, 0), (1, 1))


@pytest.mark.parametrize(
    ("chip", "sizes", "rings"),
    [
        ("v5e", (16,), (True,)),  # Part 2: an axis of the pod's side closes into a ring
        ("v5e", (4,), (False,)),  # a shorter one is a line
        ("v5e", (8, 16), (False, True)),
        ("v4", (4, 4, 4), (True, True, True)),  # a whole cube
        ("v4", (2, 2, 4), (False, False, False)),
        ("v5p", (20, 112, 4), (True, True, True)),  # a data axis of 7 x 16 in the full pod
        ("v5e", (4, 4, 4), (False, False, False)),  # three axes cut out of an 8x8: no side wraps
        ("h100", (8,), (False,)),  # a switch is no ring
        ("b200", (2, 4), (False, False)),
    ],
)
def test_ring_flags(chip, sizes, rings):
    assert topology.ring_flags(chip, sizes) == rings


def test_ring_flags_of_a_slice_is_its_wraparound():
    for chip in ("v2", "v3", "v4", "v5e", "v5p", "v6e", "7x", "h100"):
        for shape in topology.slice_shapes(chip):
            assert topology.ring_flags(chip, shape) == Slice.of(chip, shape).wraparound, (chip, shape)


MESHES = [("v5e", (16,)), ("v5e", (4,)), ("v5e", (8, 16)), ("v5e", (4, 4, 4)), ("v4", (4, 4, 4)),
          ("v4", (2, 2, 4)), ("v5p", (20, 112, 4)), ("v5p", (4, 8)), ("h100", (2, 4))]  # fmt: skip


@pytest.mark.parametrize(("chip", "sizes"), MESHES)
def test_collectives_and_sharding_take_their_rings_from_ring_flags(chip, sizes):
    """The one rule: the physical default of `collectives` and of `sharding.matmul_plan` is `ring_flags`."""
    flags = topology.ring_flags(chip, sizes)
    assert collectives.collective_time("all_gather", 1e9, sizes, chip).wraparound == flags
    mesh = dict(zip("XYZ", sizes, strict=False))
    axes = "".join(mesh)
    args = (f"A[I, J_{axes}]", f"B[J_{axes}, K]")
    shapes = {"I": 64, "J": 64 * math.prod(sizes), "K": 64}

    def comms_s(wraparound):
        return sharding.matmul_plan(
            *args, contracting="J", sizes=shapes, mesh=mesh, chip=chip, wraparound=wraparound
        ).comms_s

    assert comms_s(None) == comms_s(dict(zip(mesh, flags, strict=True)))
    if get_chip(chip).ici_topology != "nvswitch":  # the check has teeth: other rings give another time
        assert comms_s(None) != comms_s(dict(zip(mesh, (not f for f in flags), strict=True)))


def test_ring_flags_errors():
    with pytest.raises(ValueError, match=r"^axis_sizes=\(16, 32\): 512 chips exceed one tpu-v5e pod"):
        topology.ring_flags("v5e", (16, 32))
    with pytest.raises(ValueError, match=r"^axis_sizes\[1\]=0: not a count"):
        topology.ring_flags("v5e", (4, 0))
    with pytest.raises(ValueError, match=r"^chip='v9'"):
        topology.ring_flags("v9", (4,))
