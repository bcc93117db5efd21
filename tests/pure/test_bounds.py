"""book_lib.bounds against the worked numbers of Part 5 of the text: the closed-form bounds of each scheme.

Each check against the text names the passage and a tolerance that covers the text's rounding
(it writes 4.59e14 / 1.8e11 as 2550, and so on).
"""

from __future__ import annotations

import math

import pytest

from book_lib import bounds

BATCH_4M = 4 * 2**20  # the text's "4 * 1024 * 1024": 1024 sequences of 4096


# ----- the text's bounds (Part 5) ---------------------------------------------------------------------


def test_dp_and_fsdp_bound_is_c_over_w_per_axis():
    # Part 5, "Data Parallelism": on v5p "our batch size per chip must be at least 2,550", and 850 over
    # three axes; "Fully-Sharded Data Parallelism": the same for FSDP.
    for strategy in ("dp", "fsdp"):
        assert bounds.compute_bound_batch_per_chip("v5p", strategy=strategy) == pytest.approx(2550, rel=1e-3)
        assert bounds.compute_bound_batch_per_chip("v5p", strategy=strategy, n_axes=3) == pytest.approx(850, rel=1e-3)
    # The same C / W on a GPU uses every NVLink into the switch: 9.89e14 / (18 * 2.5e10).
    assert bounds.compute_bound_batch_per_chip("h100", strategy="dp") == pytest.approx(9.89e14 / 4.5e11)


def test_fsdp_bound_gives_the_texts_chip_counts():
    per_chip = bounds.compute_bound_batch_per_chip("v5p", strategy="fsdp", n_axes=3)
    # Part 5: DeepSeek-V2's 40M-token batch "would allow us to scale to roughly 47,000 chips".
    assert 40e6 / per_chip == pytest.approx(47_000, rel=0.01)
    # Part 5: LLaMA-3 70B's 16M batch over "roughly 16e6 / (2550 / 3) = 18,823 chips".
    assert 16e6 / per_chip == pytest.approx(18_823, rel=1e-3)
    # Solution 5.3: a v5p 16x16x16 needs "850 * 4096 = 3.48M tokens" under pure FSDP.
    assert per_chip * 4096 == pytest.approx(3.48e6, rel=0.01)


def test_mixed_fsdp_tp_bound():
    def bound(strategy, chip, **kw):
        return bounds.compute_bound_batch_per_chip(chip, strategy=strategy, **kw)

    # Part 5 takeaway: 2 * 2550^2 / F, "roughly B/N > 400" for F = 32,768.
    assert bound("fsdp+tp", "v5p", d_ff=32_768) == pytest.approx(400, rel=0.01)
    # Part 5, "Scaling Between Pods": 2 * 2550^2 / 30,000 = 432 (433.5 unrounded).
    assert bound("fsdp+tp", "v5p", d_ff=30_000) == pytest.approx(432, rel=0.01)
    # Part 6: LLaMA 3-70B, F = 28,672: 453; Solution 5.3: LLaMA-2 13B, F = 13,824: 940.
    assert bound("fsdp+tp", "v5p", d_ff=28_672) == pytest.approx(453, rel=0.01)
    assert bound("fsdp+tp", "v5p", d_ff=13_824) == pytest.approx(940, rel=0.01)
    # 4 alpha^2 / (M_X M_Y F): one FSDP axis and one tensor axis doubles it.
    assert bound("fsdp+tp", "v5p", d_ff=28_672, fsdp_axes=1) == pytest.approx(2 * bound("fsdp+tp", "v5p", d_ff=28_672))


def test_max_tensor_parallelism():
    # Part 5: "we can only do tensor parallelism up to Y < F/2550"; LLaMA 3-70B: n_axes * 11.
    assert bounds.max_tensor_parallelism("v5p", d_ff=28_672) == 11
    assert bounds.max_tensor_parallelism("v5p", d_ff=28_672, n_axes=3) == 33
    # Part 5: "The required F for 8 way model sharding is 20k" (8 * 2550 = 20,400; the bound is strict).
    assert bounds.max_tensor_parallelism("v5p", d_ff=20_400) == 7
    assert bounds.max_tensor_parallelism("v5p", d_ff=20_401) == 8


def test_dcn_bound_across_pods():
    # Part 5, "Scaling Between Pods": C_pod / W_DCN = 76,000, "roughly 75,000" in the takeaways. The text
    # takes 8k chips and 2000 hosts and writes 8k * 4.5e14 as 3.8e18 (it is 3.6e18); the full pod, 8960
    # chips on 2240 hosts, gives 8960 * 4.59e14 / (2240 * 2.5e10) = 73,440, within 3 % of 75,000.
    assert bounds.dcn_compute_bound_batch("v5p", chips_per_pod=8960) == pytest.approx(75_000, rel=0.03)
    # A slice smaller than one host still has the whole host's DCN link.
    assert bounds.dcn_compute_bound_batch("v5p", chips_per_pod=1) == pytest.approx(4.59e14 / 2.5e10)


def test_optimal_fsdp_degree_and_the_compute_bound_range():
    # Part 5: N = 64, B = 48,000, F = 32,768 "gives roughly X = 13.9" (13.7 unrounded).
    assert bounds.optimal_fsdp_degree(64, batch_tokens=48_000, d_ff=32_768) == pytest.approx(13.9, rel=0.02)
    # Part 6: X = 4.19e6 / 2550 + sqrt(...) / (2550 F) = 1643 + 284 = 1927 for LLaMA 3-70B on 8960 v5p.
    low, high = bounds.fsdp_degree_range("v5p", 8960, batch_tokens=BATCH_4M, d_ff=28_672)
    assert high == pytest.approx(1927, rel=0.01)
    assert low < bounds.optimal_fsdp_degree(8960, batch_tokens=BATCH_4M, d_ff=28_672) < high
    # Below the mixed bound the quadratic has no root: no FSDP degree is compute-bound.
    assert bounds.fsdp_degree_range("v5p", 8960, batch_tokens=400 * 8960, d_ff=28_672) is None


def test_pipeline_bubble():
    assert bounds.pipeline_bubble_fraction(stages=1, microbatches=1) == 0
    assert bounds.pipeline_bubble_fraction(stages=4, microbatches=16) == pytest.approx(3 / 16)


def test_pipeline_schedules_of_four_stages_and_eight_microbatches():
    plain = bounds.pipeline_schedule(stages=4, microbatches=8, split_backward=False)
    split = bounds.pipeline_schedule(stages=4, microbatches=8)
    both = bounds.pipeline_schedule(stages=4, microbatches=8, both_ways=True)
    # 24 units of work per device; 1F1B idles (S - 1) (F + B + W) = 9, split only the warm-up's 3
    assert (plain.span_units, split.span_units, both.span_units) == (33, 27, 25)
    assert plain.busy_units == split.busy_units == both.busy_units == 3 * 8
    assert plain.bubble_fraction == pytest.approx(3 / 8) and split.bubble_fraction == pytest.approx(1 / 8)
    first = plain.timeline[0][:5]
    assert [(op.kind, op.microbatch, op.start) for op in first] == [("F", 0, 0), ("F", 1, 1), ("F", 2, 2),
                                                                    ("F", 3, 3), ("B", 0, 10)]  # fmt: skip
    assert {op.stage for op in both.timeline[0]} == {0, 3}, "both ways round, each device holds two stages"
    for stages, micro in ((1, 1), (2, 4), (3, 5), (8, 16)):
        schedule = bounds.pipeline_schedule(stages=stages, microbatches=micro, split_backward=False)
        expected = bounds.pipeline_bubble_fraction(stages=stages, microbatches=micro)
        assert schedule.bubble_fraction == pytest.approx(expected), "1F1B's bubble is (S - 1) / M"
        assert all(len(ops) == 2 * micro for ops in schedule.timeline), "an F and a B per microbatch"


def test_fsdp_tp_comms_ratio_crosses_one_at_the_range_and_is_least_at_the_optimum():
    low, high = bounds.fsdp_degree_range("v5p", 8960, batch_tokens=BATCH_4M, d_ff=28_672)

    def ratio(x, batch=BATCH_4M, n=8960):
        return bounds.fsdp_tp_comms_ratio("v5p", n, fsdp_degree=x, batch_tokens=batch, d_ff=28_672)

    assert ratio(low) == pytest.approx(1) and ratio(high) == pytest.approx(1)
    x_opt = bounds.optimal_fsdp_degree(8960, batch_tokens=BATCH_4M, d_ff=28_672)
    assert ratio(x_opt) < 1 and ratio(0.9 * x_opt) > ratio(x_opt) < ratio(1.1 * x_opt)
    assert ratio(low / 2) > 1 and ratio(2 * high) > 1
    # Part 6: the text's 2048-way FSDP fits on 8192 chips; on the full 8960-chip pod 2240 x 4 falls just outside.
    assert ratio(2048, n=8192) < 1 < ratio(2240) < 1.05
    # Below the mixed bound no degree is compute-bound: the minimum stays above 1.
    small_opt = bounds.optimal_fsdp_degree(8960, batch_tokens=400 * 8960, d_ff=28_672)
    assert ratio(small_opt, batch=400 * 8960) > 1
    with pytest.raises(ValueError, match=r"fsdp_degree=0"):
        ratio(0)


@pytest.mark.parametrize("strategy", bounds.STRATEGIES)
def test_layer_costs_match_the_formulas_in_letters(strategy):
    b, d, f, x, y = 3 * 5 * 7 * 64, 24, 96, 4, 2  # awkward sizes, so no two terms coincide
    x, y = {"dp": (x, 1), "fsdp": (x, 1), "tp": (1, y), "fsdp+tp": (x, y)}[strategy]
    cost = bounds.layer_costs(strategy=strategy, batch_tokens=b, d_model=d, d_ff=f, x=x, y=y)
    names = {"B": b, "D": d, "F": f, "X": x, "Y": y}
    assert cost.flops_forward == pytest.approx(4 * b * d * f / (x * y))
    assert cost.flops_backward == pytest.approx(8 * b * d * f / (x * y))
    values = [cost.bytes_forward, cost.bytes_backward]
    for formula, value in zip(bounds.LAYER_COST_FORMULAS[strategy], values, strict=True):
        python = "".join(
            ch + "*" if ch.isalnum() and nxt.isalpha() else ch
            for ch, nxt in zip(formula, formula[1:] + " ", strict=True)
        )
        assert eval(python, {}, names) == pytest.approx(value), (formula, value)  # noqa: S307


def test_layer_costs_give_the_texts_compute_bounds():
    alpha = bounds.compute_bound_batch_per_chip("v5p", strategy="fsdp")
    # FSDP: FLOPs per byte = B / X in each pass, so compute-bound exactly when B / X > C / W.
    fsdp = bounds.layer_costs(strategy="fsdp", batch_tokens=64 * alpha, d_model=8192, d_ff=28672, x=64)
    assert fsdp.intensity("forward") == pytest.approx(alpha) and fsdp.intensity("backward") == pytest.approx(alpha)
    # DP moves nothing forward, and its backward pass has the same B / X.
    dp = bounds.layer_costs(strategy="dp", batch_tokens=64 * alpha, d_model=8192, d_ff=28672, x=64)
    assert dp.intensity("forward") == math.inf and dp.intensity("backward") == pytest.approx(alpha)
    # TP: F / Y FLOPs per byte whatever the batch, so Y < F / (C / W).
    for b in (1024, 10**6):
        tp = bounds.layer_costs(strategy="tp", batch_tokens=b, d_model=8192, d_ff=28672, y=8)
        assert tp.intensity("forward") == pytest.approx(28672 / 8)
    # In int8 (1 byte) the text notes C doubles and the bytes halve: intensity doubles with the bytes cut.
    half = bounds.layer_costs(strategy="tp", batch_tokens=1024, d_model=8192, d_ff=28672, y=8, dtype="int8")
    assert half.intensity("forward") == pytest.approx(2 * 28672 / 8)


def test_layer_costs_refuse_axes_the_strategy_has_not():
    with pytest.raises(ValueError, match=r"^y=2: 'fsdp' has no model axis"):
        bounds.layer_costs(strategy="fsdp", batch_tokens=8, d_model=2, d_ff=4, y=2)
    with pytest.raises(ValueError, match=r"^x=2: 'tp' has no data axis"):
        bounds.layer_costs(strategy="tp", batch_tokens=8, d_model=2, d_ff=4, x=2)
    with pytest.raises(ValueError, match=r"^strategy='pp': unknown"):
        bounds.layer_costs(strategy="pp", batch_tokens=8, d_model=2, d_ff=4)


BAD = [
    (lambda: bounds.compute_bound_batch_per_chip("v5p", strategy="fsdp+tp"), r"^d_ff=None"),
    (lambda: bounds.compute_bound_batch_per_chip("v5p", strategy="tp"), r"^strategy='tp': unknown"),
    (lambda: bounds.compute_bound_batch_per_chip("v5p", strategy="fsdp+tp", n_axes=3, d_ff=8), r"^n_axes=3: not used"),
    (lambda: bounds.max_tensor_parallelism("v5p", d_ff=0), r"^d_ff=0: not a count"),
    (lambda: bounds.layer_costs(strategy="tp", batch_tokens=8, d_model=2, d_ff=4, dtype="fp7"), r"^dtype='fp7'"),
    (lambda: bounds.pipeline_schedule(stages=0, microbatches=8), r"^stages=0: not a count"),
    (lambda: bounds.pipeline_schedule(stages=4, microbatches=8, both_ways=1), r"^both_ways=1: not a bool; allowed"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_names_argument_value_and_what_is_allowed(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_the_texts_schemes_are_spelled_from_one_table_of_layout_degrees():
    from book_lib.parallelism import SCHEMES, Layout

    assert bounds.STRATEGIES == ("dp", "fsdp", "tp", "fsdp+tp")
    for strategy, degrees in zip(bounds.STRATEGIES, bounds.STRATEGY_DEGREES, strict=True):
        # the planner's label of a layout sharded over those degrees is the same scheme
        assert Layout(**dict.fromkeys(degrees, 2)).label.lower() == strategy
    assert set(SCHEMES) == {"data", "fsdp", "tensor", "pipeline", "context", "expert"}
