"""Tests for book_lib.collectives, with the Part 3 worked numbers recomputed from the formulas."""

import pytest

from book_lib import collectives, topology
from book_lib.collectives import (
    CollectiveTime,
    all_gather_time,
    all_gather_time_multi,
    all_reduce_time,
    all_reduce_time_multi,
    all_to_all_time,
    collective_time,
    reduce_scatter_time,
    reduce_scatter_time_multi,
)
from book_lib.hardware import get_chip

W_V4 = 4.5e10  # one link, one direction
W_V5E = 4.5e10
CUBE = topology.Slice.of("v4", "4x4x4")  # the slice of the text's problems 3.2 and 3.3: every axis wraps


def test_all_gather_without_wraparound_pop_quiz_2():
    # AllGather_Y([E_Y, F]) on a v5e {X: 8, Y: 4}, E = 2048, F = 8192, bf16: no wrap on an axis of 4.
    v = 2048 * 8192 * 2
    t = all_gather_time(v, 4, "v5e", wraparound=False)
    assert t == pytest.approx(3 / 4 * v / W_V5E)  # 559 us; the book prints 560 us (3 hops of 8.4e6 bytes)
    assert t == pytest.approx(559.24e-6, rel=1e-4)


def test_all_gather_latency_bound_pop_quiz_2():
    # Same axis with E = F = 256: 3 hops of 1 us dominate the 2.2 us of bandwidth time.
    detail = collective_time("all_gather", 256 * 256 * 2, 4, "v5e", wraparound=False)
    assert detail.hops == 3 and detail.bound == "latency"
    assert detail.total_s == pytest.approx(3e-6)


def test_all_gather_one_axis_solution_3_2a():
    # AllGather_X([B_X, D_Y]) on v4 4x4x4, B = 1024, D = 4096: each device ends with B * D / 4 elements.
    v = 2 * 1024 * 4096 / 4
    t = all_gather_time(v, 4, "v4", wraparound=CUBE.wraparound[0])
    assert t == pytest.approx(3 / 4 * v / (2 * W_V4))  # 17.5 us
    assert t == pytest.approx(17.476e-6, rel=1e-4)  # printed: 23 us, i.e. v / 9e10 without the 3/4


def test_all_gather_two_axes_solution_3_2b():
    v = 2 * 1024 * 4096
    t = all_gather_time_multi(v, (4, 4), "v4", wraparound=CUBE.wraparound[:2])
    assert t == pytest.approx(15 / 16 * v / (2 * 2 * W_V4))  # 43.7 us
    assert t == pytest.approx(43.69e-6, rel=1e-3)  # printed: 46 us, i.e. v / (2 * 9e10) without 15/16
    detail = collective_time("all_gather", v, (4, 4), "v4", wraparound=CUBE.wraparound[:2])
    assert detail.latency_s == pytest.approx(4e-6)  # "latency bound of 4us"


def test_all_reduce_solution_3_2c():
    # AllReduce_Z([B_X, D_Y]{U_Z}): each device holds B * D / 16 partial sums.
    v = 2 * 1024 * 4096 / 16
    t = all_reduce_time(v, 4, "v4", wraparound=CUBE.wraparound[2])
    assert t == pytest.approx(2 * 3 / 4 * v / (2 * W_V4))  # 8.7 us
    assert t == pytest.approx(8.738e-6, rel=1e-3)  # printed: 11.6 us, i.e. 2 v / 9e10 without the 3/4


def test_latency_bound_all_gather_solution_3_3():
    # 128 bf16 values over an axis of 4 with a wraparound: two hops, about 2 us.
    detail = collective_time("all_gather", 256, 4, "v4", wraparound=True)
    assert detail.hops == 2
    assert detail.bandwidth_s == pytest.approx(3 / 4 * 256 / 9e10)
    assert all_gather_time(256, 4, "v4", wraparound=True) == pytest.approx(2e-6)


def test_full_gather_over_4x4_solution_2_6():
    # Gathering a 16e9-byte array over both axes of a v5e 4x4 (no wraps): about 16e9 / (2 * 4.5e10).
    t = all_gather_time_multi(16e9, (4, 4), "v5e", wraparound=False)
    assert t == pytest.approx(15 / 16 * 16e9 / (2 * W_V5E))  # 167 ms; the book's rough figure is 178 ms


def test_mixed_wraparound_axes_add_their_bandwidths():
    detail = collective_time("all_gather", 1e9, (8, 16), "v5e", wraparound=(False, True))
    assert detail.bytes_per_s == pytest.approx(W_V5E + 2 * W_V5E)
    assert detail.hops == 7 + 8
    assert detail.total_s == pytest.approx(127 / 128 * 1e9 / 1.35e11)


def test_rule_of_thumb_for_large_rings():
    # For large N the exact form approaches V / bidirectional bandwidth.
    v = 1e9
    assert all_gather_time(v, 16, "v5e") == pytest.approx(15 / 16 * v / 9e10)
    assert all_gather_time(v, 16, "v5e", wraparound=False) == pytest.approx(2 * all_gather_time(v, 16, "v5e"))


def test_reduce_scatter_equals_all_gather_and_all_reduce_doubles_it():
    v = 3e8
    ag = all_gather_time(v, 8, "v6e")
    assert reduce_scatter_time(v, 8, "v6e") == pytest.approx(ag)
    assert all_reduce_time(v, 8, "v6e") == pytest.approx(2 * ag)
    assert reduce_scatter_time_multi(v, (4, 4), "v5p") == pytest.approx(all_gather_time_multi(v, (4, 4), "v5p"))
    assert all_reduce_time_multi(v, (4, 4), "v5p") == pytest.approx(2 * all_gather_time_multi(v, (4, 4), "v5p"))


def test_all_to_all_on_a_ring():
    v = 1e9
    # even N: the busiest link carries N^2 / 8 pieces of V / N^2, i.e. V / 8 bytes
    assert all_to_all_time(v, 16, "v5e") == pytest.approx(v / (8 * W_V5E))
    assert all_to_all_time(v, 16, "v5e") / all_gather_time(v, 16, "v5e") == pytest.approx(4 / 15)  # ~1/4
    # odd N: (N^2 - 1) / 8 pieces
    assert all_to_all_time(v, 3, "v5e", wraparound=True) == pytest.approx(1 / 9 * v / W_V5E)


def test_all_to_all_on_a_line():
    v = 1e9
    # N = 4 without wraparound: 2 x 2 pieces of V / 16 cross the middle link
    assert all_to_all_time(v, 4, "v5e", wraparound=False) == pytest.approx(v / (4 * W_V5E))
    # N = 5: 2 x 3 pieces of V / 25
    assert all_to_all_time(v, 5, "v5e", wraparound=False) == pytest.approx(6 / 25 * v / W_V5E)


def test_dcn_shares_host_egress():
    v5p = get_chip("v5p")
    per_chip = v5p.dcn_bytes_per_s / v5p.chips_per_host  # 2.5e10 / 4
    assert all_gather_time(1e9, 2, v5p, link="dcn") == pytest.approx(0.5 * 1e9 / per_chip)  # 80 ms
    assert all_reduce_time(1e9, 2, v5p, link="dcn") == pytest.approx(0.16)
    # Part 2 rounds host egress to ~3.1e9 bytes/s per chip for an 8-chip host; v5e hosts have 8 chips
    assert collective_time("all_gather", 1e9, 2, "v5e", link="dcn").bytes_per_s == pytest.approx(3.125e9)


def test_pcie_within_a_host():
    assert all_gather_time(8e9, 8, "v5e", link="pcie") == pytest.approx(7 / 8 * 8e9 / 1.5e10)


def test_nvswitch_node():
    b = 18 * 2.5e10
    assert all_gather_time(1e9, 8, "h100") == pytest.approx(7 / 8 * 1e9 / b)
    assert all_to_all_time(1e9, 8, "h100") == pytest.approx(7 / 64 * 1e9 / b)
    assert collective_time("all_gather", 1.0, 8, "h100").hops == 1


def test_one_device_costs_nothing():
    assert all_gather_time(1e9, 1, "v5e") == 0.0
    assert all_reduce_time_multi(1e9, (1, 1), "v5e") == 0.0


def test_breakdown_fields():
    detail = collective_time("all_reduce", 9e10, 16, "v5e", hop_latency_s=2e-6)
    assert isinstance(detail, CollectiveTime)
    assert detail.hops == 16 and detail.latency_s == pytest.approx(32e-6)
    assert detail.bandwidth_s == pytest.approx(2 * 15 / 16)
    assert detail.total_s == detail.bandwidth_s and detail.bound == "bandwidth"


def test_error_non_positive_bytes():
    with pytest.raises(ValueError, match=r"^array_bytes=0"):
        all_gather_time(0, 4, "v5e")


def test_error_axis_size_below_one():
    with pytest.raises(ValueError, match=r"^axis_size=0"):
        all_reduce_time(1e6, 0, "v5e")


def test_the_default_is_the_physical_slice():
    """A v5e axis of 4 is a line (its pod's side is 16), so it takes twice a ring's time; one of 16 is a ring."""
    v = 1e9
    line = collective_time("all_gather", v, 4, "v5e")
    assert line.wraparound == (False,) and line.total_s == pytest.approx(all_gather_time(v, 4, "v5e", wraparound=False))
    assert line.total_s == pytest.approx(2 * all_gather_time(v, 4, "v5e", wraparound=True))
    assert collective_time("all_gather", v, 16, "v5e").wraparound == (True,)
    assert collective_time("all_gather", v, (4, 4, 4), "v4").wraparound == (True, True, True)  # whole cubes
    assert collective_time("all_gather", v, (2, 2, 4), "v4").wraparound == (False, False, False)
    assert collective_time("all_gather", v, (8, 16), "v5e").wraparound == (False, True)


def test_an_axis_longer_than_a_pod_is_refused():
    with pytest.raises(ValueError, match=r"^axis_size=1000000: 1000000 chips exceed one tpu-v5e pod"):
        all_gather_time(1e9, 10**6, "v5e")
    with pytest.raises(ValueError, match=r"^axis_size=1000000: 1000000 chips exceed one tpu-v5e pod"):
        all_gather_time(1e9, 10**6, "v5e", wraparound=True)
    with pytest.raises(ValueError, match=r"^axis_sizes=\(16, 32\): 512 chips exceed one tpu-v5e pod"):
        all_gather_time_multi(1e9, (16, 32), "v5e")


def test_axes_that_are_no_slice_of_their_own_take_the_enclosing_slice():
    """`topology.ring_flags`: more axes than the torus has sides, or an axis longer than a side."""
    assert collective_time("all_gather", 1e9, (4, 4, 4), "v5e").wraparound == (False, False, False)  # an 8x8
    assert collective_time("all_gather", 1e9, 64, "v5e").wraparound == (False,)
    assert collective_time("all_gather", 1e9, (20, 112, 4), "v5p").wraparound == (True, True, True)  # a v5p pod


def test_a_list_of_sizes_is_refused_not_read_as_two_axes():
    with pytest.raises(ValueError, match=r"^axis_size=\[4, 4\]"):
        collective_time("all_gather", 1e9, [4, 4], "v5e")
    with pytest.raises(ValueError, match=r"^axis_sizes=\[4, 4\]: not a tuple"):
        all_gather_time_multi(1e9, [4, 4], "v5e")
    with pytest.raises(ValueError, match=r"^axis_size=\(4, 4\)"):
        all_gather_time(1e9, (4, 4), "v5e")


def test_error_bad_axis_sizes():
    with pytest.raises(ValueError, match=r"^axis_sizes=\(4, 0\)"):
        all_gather_time_multi(1e6, (4, 0), "v5e")


def test_error_unknown_link():
    with pytest.raises(ValueError, match=r"^link='nvlink'"):
        all_gather_time(1e6, 4, "v5e", link="nvlink")


def test_error_unknown_op():
    with pytest.raises(ValueError, match=r"^op='broadcast'"):
        collective_time("broadcast", 1e6, 4, "v5e")


def test_error_unknown_chip():
    with pytest.raises(ValueError, match=r"^chip='v9': unknown chip"):
        all_gather_time(1e6, 4, "v9")


def test_error_wraparound_per_axis():
    with pytest.raises(ValueError, match=r"^wraparound=\(True,\)"):
        all_gather_time_multi(1e6, (4, 4), "v5e", wraparound=(True,))


def test_error_negative_latency():
    with pytest.raises(ValueError, match=r"^hop_latency_s=-1"):
        all_gather_time(1e6, 4, "v5e", hop_latency_s=-1)


def test_error_all_to_all_over_two_axes():
    with pytest.raises(ValueError, match=r"^axis_sizes=\(4, 4\): AllToAll"):
        collective_time("all_to_all", 1e6, (4, 4), "v5e")


def test_error_pcie_group_larger_than_host():
    with pytest.raises(ValueError, match=r"^axis_size=16: 16 chips exceed one tpu-v5e host"):
        all_gather_time(1e6, 16, "v5e", link="pcie")


def test_error_nvswitch_group_larger_than_node():
    with pytest.raises(ValueError, match=r"^axis_size=16: 16 GPUs exceed one h100"):
        all_gather_time(1e6, 16, "h100")


def _busiest_link_blocks(n: int, ring: bool) -> float:
    """Blocks (of V / n) an AllGather pushes over its busiest directed link, counted by routing each.

    Every device's block must reach every other device; a block crosses a link at most once (it is
    forwarded, not resent), over the shorter way round on a ring (half each way when both are equal).
    """
    load: dict[tuple[int, int], float] = {}
    for src in range(n):
        crossing: dict[tuple[int, int], float] = {}
        for dst in range(n):
            if dst == src:
                continue
            if ring:
                right = (dst - src) % n
                ways = [(+1, right, 1.0)] if 2 * right < n else [(-1, n - right, 1.0)] if 2 * right > n else [
                    (+1, right, 0.5), (-1, right, 0.5)]  # fmt: skip
            else:
                ways = [(+1 if dst > src else -1, abs(dst - src), 1.0)]
            for step, hops, share in ways:
                for h in range(hops):
                    here = (src + step * h) % n
                    link = (here, (here + step) % n)
                    crossing[link] = max(crossing.get(link, 0.0), share)
        for link, share in crossing.items():
            load[link] = load.get(link, 0.0) + share
    return max(load.values())


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
@pytest.mark.parametrize("ring", [True, False])
def test_all_gather_time_matches_blocks_counted_on_the_busiest_link(n, ring):
    """An independent count: the busiest link's bytes over one link's rate is the bandwidth time."""
    v = 1e9
    counted_s = _busiest_link_blocks(n, ring) * (v / n) / W_V5E
    modelled = collective_time("all_gather", v, n, "v5e", wraparound=ring, hop_latency_s=0)
    assert modelled.bandwidth_s == pytest.approx(counted_s)


def test_one_table_names_each_collective_in_every_spelling():
    names = collectives.NAMES
    assert set(names) == {*collectives.OPS, "permute"}
    assert names["reduce_scatter"].lax == "psum_scatter" and names["all_reduce"].primitive == "psum"
    assert all(n.stablehlo == "stablehlo." + n.hlo.replace("-", "_") for n in names.values())


def test_all_gather_blocks_one_way_and_both_ways_round():
    one_way = collectives.all_gather_blocks(4)
    assert one_way[1] == ((0, 3), (0, 1), (1, 2), (2, 3)), "each device gets the block from its left"
    assert collectives.all_gather_blocks(4, bidirectional=True)[1] == ((0, 1, 3), (0, 1, 2), (1, 2, 3), (0, 2, 3))
    for n in range(1, 10):
        for both in (False, True):
            blocks = collectives.all_gather_blocks(n, bidirectional=both)
            assert blocks[0] == tuple((d,) for d in range(n)) and blocks[-1] == (tuple(range(n)),) * n
            steps = -(-(n - 1) // 2) if both else collectives.permute_steps("all_gather", n)
            assert len(blocks) - 1 == steps, (n, both)
            gained = [len(h) - len(g) for s in range(steps) for g, h in zip(blocks[s], blocks[s + 1], strict=True)]
            assert set(gained) <= ({1, 2} if both else {1}), "a step brings one block from each sending neighbour"
    with pytest.raises(ValueError, match=r"^n_devices=0: not a count"):
        collectives.all_gather_blocks(0)
    with pytest.raises(ValueError, match=r"^bidirectional='yes': not a bool; allowed: True or False"):
        collectives.all_gather_blocks(4, bidirectional="yes")
