"""book_lib.training against the worked numbers of Parts 5 and 6 of the text, plus its errors and CLI.

Each check against the text names the passage and a tolerance that covers the text's rounding
(it writes 4.59e14 / 1.8e11 as 2550, 70.55e9 parameters as 70e9, and so on).
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import pytest

from book_lib import collectives, hardware, training
from book_lib.transformer import get_model

V5P_POD = {"data_x": 16, "data_y": 20, "data_z": 28}
BATCH_4M = 4 * 2**20  # the text's "4 * 1024 * 1024": 1024 sequences of 4096


# ----- the text's bounds (Part 5) ---------------------------------------------------------------------


def test_dp_and_fsdp_bound_is_c_over_w_per_axis():
    # Part 5, "Data Parallelism": on v5p "our batch size per chip must be at least 2,550", and 850 over
    # three axes; "Fully-Sharded Data Parallelism": the same for FSDP.
    for strategy in ("dp", "fsdp"):
        assert training.compute_bound_batch_per_chip(strategy, "v5p") == pytest.approx(2550, rel=1e-3)
        assert training.compute_bound_batch_per_chip(strategy, "v5p", n_axes=3) == pytest.approx(850, rel=1e-3)
    # The same C / W on a GPU uses every NVLink into the switch: 9.89e14 / (18 * 2.5e10).
    assert training.compute_bound_batch_per_chip("dp", "h100") == pytest.approx(9.89e14 / 4.5e11)


def test_fsdp_bound_gives_the_texts_chip_counts():
    per_chip = training.compute_bound_batch_per_chip("fsdp", "v5p", n_axes=3)
    # Part 5: DeepSeek-V2's 40M-token batch "would allow us to scale to roughly 47,000 chips".
    assert 40e6 / per_chip == pytest.approx(47_000, rel=0.01)
    # Part 5: LLaMA-3 70B's 16M batch over "roughly 16e6 / (2550 / 3) = 18,823 chips".
    assert 16e6 / per_chip == pytest.approx(18_823, rel=1e-3)
    # Solution 5.3: a v5p 16x16x16 needs "850 * 4096 = 3.48M tokens" under pure FSDP.
    assert per_chip * 4096 == pytest.approx(3.48e6, rel=0.01)


def test_mixed_fsdp_tp_bound():
    bound = training.compute_bound_batch_per_chip
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
    assert training.max_tensor_parallelism("v5p", 28_672) == 11
    assert training.max_tensor_parallelism("v5p", 28_672, n_axes=3) == 33
    # Part 5: "The required F for 8 way model sharding is 20k" (8 * 2550 = 20,400; the bound is strict).
    assert training.max_tensor_parallelism("v5p", 20_400) == 7
    assert training.max_tensor_parallelism("v5p", 20_401) == 8


def test_dcn_bound_across_pods():
    # Part 5, "Scaling Between Pods": C_pod / W_DCN = 76,000, "roughly 75,000" in the takeaways. The text
    # takes 8k chips and 2000 hosts and writes 8k * 4.5e14 as 3.8e18 (it is 3.6e18); the full pod, 8960
    # chips on 2240 hosts, gives 8960 * 4.59e14 / (2240 * 2.5e10) = 73,440, within 3 % of 75,000.
    assert training.dcn_compute_bound_batch("v5p", 8960) == pytest.approx(75_000, rel=0.03)
    # A slice smaller than one host still has the whole host's DCN link.
    assert training.dcn_compute_bound_batch("v5p", 1) == pytest.approx(4.59e14 / 2.5e10)


def test_optimal_fsdp_degree_and_the_compute_bound_range():
    # Part 5: N = 64, B = 48,000, F = 32,768 "gives roughly X = 13.9" (13.7 unrounded).
    assert training.optimal_fsdp_degree(48_000, 32_768, 64) == pytest.approx(13.9, rel=0.02)
    # Part 6: X = 4.19e6 / 2550 + sqrt(...) / (2550 F) = 1643 + 284 = 1927 for LLaMA 3-70B on 8960 v5p.
    low, high = training.fsdp_degree_range(BATCH_4M, 28_672, 8960, "v5p")
    assert high == pytest.approx(1927, rel=0.01)
    assert low < training.optimal_fsdp_degree(BATCH_4M, 28_672, 8960) < high
    # Below the mixed bound the quadratic has no root: no FSDP degree is compute-bound.
    assert training.fsdp_degree_range(400 * 8960, 28_672, 8960, "v5p") is None


def test_pipeline_bubble():
    assert training.pipeline_bubble_fraction(1, 1) == 0
    assert training.pipeline_bubble_fraction(4, 16) == pytest.approx(3 / 16)


# ----- training time and cost (Part 6) ---------------------------------------------------------------


def test_llama3_70b_flops_and_days():
    run = training.training_days("llama3-70b", 15e12, "tpu-v5p", 8960, mfu=0.4)
    # Part 6: "6 * 70e9 = 4.2e11 FLOPs / token" and "4.2e11 * 15e12 = 6.3e24 FLOPs"; the preset has 70.55e9.
    assert run.flops_per_token == pytest.approx(4.2e11, rel=0.01)
    assert run.total_flops == pytest.approx(6.3e24, rel=0.01)
    # Part 6: "3.8e6 seconds. This is about 44 days" at 40 % MFU on 8960 chips.
    assert run.seconds == pytest.approx(3.8e6, rel=0.02)
    assert run.days == pytest.approx(44, rel=0.02)
    # Part 6: one chip at full peak: "435 years".
    one = training.training_days("llama3-70b", 15e12, "tpu-v5p", 1, mfu=1.0)
    assert one.days / 365 == pytest.approx(435, rel=0.01)
    # Part 5: 16M batch on 18,823 chips at 50 % MFU: "approximately 17 days".
    assert training.training_days("llama3-70b", 15e12, "v5p", 18_823, mfu=0.5).days == pytest.approx(17, rel=0.01)


def test_ten_pods_is_a_tenth_of_one_pod():
    # Part 5's takeaway says 10 pods train LLaMA-3 70B "in about 2 days". Its own Part 6 figure, 44 days
    # on one pod at 40 % MFU, gives 4.4 days on ten (2 days would need about 90 % MFU): we keep the model.
    one = training.training_days("llama3-70b", 15e12, "v5p", 8960, mfu=0.4)
    ten = training.training_days("llama3-70b", 15e12, "v5p", 89_600, mfu=0.4)
    assert ten.days == pytest.approx(one.days / 10)
    assert ten.days == pytest.approx(4.4, rel=0.02)


def test_attention_term_and_cost():
    cfg = get_model("llama-3-70b")
    plain = training.training_days(cfg, 1e12, "v5p", 64, mfu=0.5)
    long = training.training_days(cfg, 1e12, "v5p", 64, mfu=0.5, seq_len=32_768)
    # With seq_len the count is the Part 4 rule: weights plus 12 L T N H per token.
    assert long.flops_per_token == pytest.approx(cfg.flops_per_token(32_768, training=True))
    assert long.seconds > plain.seconds
    # Part 8 quotes $4.20 per v5p chip-hour; no price for v4.
    assert hardware.price_usd_per_chip_hour("v5p") == 4.20
    assert plain.cost_usd == pytest.approx(plain.chip_hours * 4.20)
    assert plain.chip_hours == pytest.approx(64 * plain.seconds / 3600)
    assert training.training_days(cfg, 1e12, "v4", 64, mfu=0.5).cost_usd is None


def test_mfu_inverts_training_days():
    run = training.training_days("llama3-70b", 15e12, "v5p", 8960, mfu=0.4)
    tokens_per_s = run.tokens / run.seconds
    assert training.mfu(tokens_per_s, run.flops_per_token, 8960, "v5p") == pytest.approx(0.4)


# ----- memory (Parts 5 and 6) ------------------------------------------------------------------------


def test_llama3_70b_memory_for_a_4m_batch():
    total = training.memory_per_chip("llama3-70b", {"data": 1}, 4e6, strategy="fsdp", checkpoints_per_layer=4)
    # Part 6's table: 140 GB of bf16 weights, 560 GB of fp32 Adam moments and 20.9 TB of checkpoints
    # (bf16, D wide, 4 per layer, 80 layers, 4e6 tokens): 21.6 TB. The text counts no gradients; we do.
    assert total.params_bytes == pytest.approx(140e9, rel=0.01)
    assert total.optimizer_bytes == pytest.approx(560e9, rel=0.01)
    assert total.activations_bytes == pytest.approx(20.9e12, rel=0.01)
    assert total.total_bytes - total.grads_bytes == pytest.approx(21.6e12, rel=0.01)
    assert total.grads_bytes == total.params_bytes
    # Part 6: on 8960 chips "about 2.4GB per chip"; it fits in 96 GiB.
    per_chip = training.memory_per_chip("llama3-70b", V5P_POD, 4e6, strategy="fsdp", chip="v5p")
    assert per_chip.total_bytes - per_chip.grads_bytes == pytest.approx(2.4e9, rel=0.02)
    assert per_chip.fits is True
    assert total.fits is None


def test_pure_dp_keeps_ten_bytes_per_parameter_on_every_chip():
    # Part 5: Adam with bf16 weights and fp32 state is 2 + 8 = 10 bytes per parameter, replicated under DP.
    mem = training.memory_per_chip("llama3-70b", V5P_POD, BATCH_4M, strategy="dp", chip="v5p")
    n = get_model("llama3-70b").param_count()
    assert mem.params_bytes + mem.optimizer_bytes == pytest.approx(10 * n)
    assert mem.fits is False
    sgd = training.memory_per_chip("llama3-70b", V5P_POD, BATCH_4M, strategy="dp", optimizer="sgd")
    assert sgd.optimizer_bytes == 0


def test_llama2_13b_activations_of_exercise_5_2():
    # Solution 5.2: checkpoints after the three big matmuls, 2 L B (D + 2F) = 4.2e13 bytes at B = 16M.
    cfg = get_model("llama-2-13b")
    c = (cfg.d_model + 2 * cfg.d_ff) / cfg.d_model
    mem = training.memory_per_chip(cfg, {"data": 1}, 16e6, strategy="dp", checkpoints_per_layer=c)
    assert mem.activations_bytes == pytest.approx(4.2e13, rel=0.01)
    # Solution 5.2: "(2 + 4 + 4) * 13e9 ~ 130GB" of parameters and optimizer state (13.0e9 in the preset).
    assert mem.params_bytes + mem.optimizer_bytes == pytest.approx(130e9, rel=0.01)


def test_memory_splits_by_the_mesh():
    mesh = {"data": 8, "model": 4, "stage": 2}
    base = training.memory_per_chip("llama3-70b", {"data": 1}, BATCH_4M, strategy="fsdp")
    mixed = training.memory_per_chip("llama3-70b", mesh, BATCH_4M, strategy="fsdp+tp")
    assert mixed.params_bytes == pytest.approx(base.params_bytes / 64)
    assert mixed.activations_bytes == pytest.approx(base.activations_bytes / 64)
    tp = training.memory_per_chip("llama3-70b", {"model": 8}, BATCH_4M, strategy="tp")
    assert tp.optimizer_bytes == pytest.approx(base.optimizer_bytes / 8)


# ----- step time -------------------------------------------------------------------------------------


def test_fsdp_alone_on_a_v5p_pod_is_communication_bound():
    # Part 6: 8960-way FSDP of a 4M batch leaves 468 tokens per chip, below 850: "solidly communication-bound".
    step = training.step_time("llama3-70b", "v5p", V5P_POD, BATCH_4M, strategy="fsdp", seq_len=4096)
    assert step.tokens_per_chip == pytest.approx(468, rel=0.01)
    assert step.bound == "communication"
    assert step.t_lower == step.t_comms > step.t_math
    assert step.t_upper == pytest.approx(step.t_math + step.t_comms)
    # 8960 data shards for 1024 sequences: each sequence cut 8.75 ways.
    assert step.context_parallel == pytest.approx(8960 / 1024)
    names = {(c.name, c.phase) for c in step.collectives}
    assert names == {
        ("FSDP weight all-gather", "forward"),
        ("FSDP weight all-gather", "backward"),
        ("FSDP gradient reduce-scatter", "backward"),
    }
    assert step.t_comms_phase("backward") == pytest.approx(2 * step.t_comms_phase("forward"))


def test_fsdp_crosses_over_near_the_texts_850():
    # Math over communication scales as (B / N) / (C / (3 W)): at 2x the bound it is about 2 (attention
    # and the embedding move it a few per cent; the ring's (N - 1) / N is nearly 1 at N = 4096).
    mesh = {"data_x": 16, "data_y": 16, "data_z": 16}
    for factor in (0.5, 2.0):
        batch = int(850 * factor * 4096 // 4096) * 4096
        step = training.step_time("llama3-70b", "v5p", mesh, batch, strategy="fsdp", seq_len=4096)
        assert step.t_math / step.t_comms == pytest.approx(factor, rel=0.06)
        assert step.bound == ("compute" if factor > 1 else "communication")


def test_dp_all_reduce_matches_the_collectives_model():
    mesh = {"data_x": 16, "data_y": 16, "data_z": 16}
    step = training.step_time("llama-3-8b", "v5p", mesh, 2**22, strategy="dp", seq_len=4096)
    (reduce,) = step.collectives
    cfg = get_model("llama-3-8b")
    v = 2 * cfg.param_count() / cfg.n_layers
    expected = collectives.collective_time("all_reduce", v, (16, 16, 16), "v5p", wraparound=True).total_s
    assert (reduce.op, reduce.phase, reduce.calls) == ("all_reduce", "backward", cfg.n_layers)
    assert reduce.seconds_per_call == pytest.approx(expected)


def test_tensor_parallel_activation_traffic_and_pipeline():
    mesh = {"data": 64, "model": 8, "stage": 4}
    step = training.step_time(
        "llama3-70b", "v5p", mesh, BATCH_4M, strategy="fsdp+tp", seq_len=4096, microbatches=16
    )  # fmt: skip
    tp = [c for c in step.collectives if c.name.startswith("TP")]
    assert {c.phase for c in tp} == {"forward", "backward"} and len(tp) == 4
    # Per call: one microbatch's [b, D] in bf16; calls: 2 blocks x 20 layers per stage x 16 microbatches.
    assert tp[0].array_bytes == pytest.approx(BATCH_4M / 64 / 16 * 8192 * 2)
    assert tp[0].calls == 2 * 20 * 16
    assert step.t_bubble == pytest.approx(step.t_math * 3 / 16)
    sends = [c for c in step.collectives if c.op == "permute"]
    assert len(sends) == 2 and all(c.calls == 16 for c in sends)
    # More tensor parallelism moves more activations per FLOP.
    wider = training.step_time("llama3-70b", "v5p", {"data": 32, "model": 16, "stage": 4}, BATCH_4M,
                               strategy="fsdp+tp", seq_len=4096, microbatches=16)  # fmt: skip
    assert sum(c.total_s for c in wider.collectives if c.name.startswith("TP")) > sum(c.total_s for c in tp)


def test_pods_add_one_dcn_all_reduce():
    mesh = {"pod": 4, **V5P_POD}
    step = training.step_time("llama3-70b", "v5p", mesh, 4 * BATCH_4M, strategy="fsdp", seq_len=4096)
    (dcn,) = [c for c in step.collectives if c.link == "dcn"]
    v = 2 * get_model("llama3-70b").param_count() / 8960
    assert dcn.array_bytes == pytest.approx(v)
    assert dcn.total_s == pytest.approx(collectives.collective_time("all_reduce", v, 4, "v5p", link="dcn").total_s)
    # Per-pod batch 4M is far above the ~75,000 DCN bound: the DCN step is small next to the math.
    assert dcn.total_s < 0.1 * step.t_math


def test_results_are_frozen_keyword_only_dataclasses():
    step = training.step_time("llama-3-8b", "v5e", {"data": 16}, 2**20, strategy="fsdp", seq_len=4096)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.t_math = 0.0  # type: ignore[misc]
    for cls in (training.StepTime, training.MemoryPerChip, training.TrainingRun, training.PlanEntry):
        assert cls.__dataclass_params__.frozen
    with pytest.raises(TypeError):
        training.MemoryPerChip(1.0, 1.0, 1.0, 1.0, None)  # keyword-only


# ----- the planner (Part 6) --------------------------------------------------------------------------


def test_plan_for_llama3_70b_on_a_v5p_pod():
    plan = training.plan_training("llama3-70b", "tpu-v5p", 8960, BATCH_4M, seq_len=4096)
    best = plan.best
    # Part 6: mixed FSDP + tensor parallelism is compute-bound; FSDP alone is not; DP does not fit.
    assert best.scheme == "FSDP+TP" and best.step.bound == "compute" and best.memory.fits
    assert best.step.mesh["model"] in (4, 8)
    assert best.mfu == pytest.approx(1.0)
    by_scheme = {e.scheme: e for e in plan.entries}
    assert by_scheme["FSDP"].step.bound == "communication"
    assert by_scheme["DP"].memory.fits is False and by_scheme["DP"].rank == len(plan.entries)
    assert "does not fit" in by_scheme["DP"].reason
    # Part 6 picks 4-way tensor parallelism (2048-way FSDP on 8192 chips); the flagged mesh here is its
    # real counterpart on 8960 chips: 2240-way FSDP, 4-way tensor.
    (flagged,) = [e for e in plan.entries if e.near_text_fsdp_degree]
    assert flagged.step.mesh["model"] == 4 and flagged.step.n_chips == 8960
    assert plan.text_fsdp_degree == pytest.approx(training.optimal_fsdp_degree(BATCH_4M, 28_672, 8960))
    assert [e.rank for e in plan.entries] == list(range(1, len(plan.entries) + 1))
    times = [e.step.t_lower for e in plan.entries if e.memory.fits]
    assert times == sorted(times)
    assert all(e.step.n_chips == 8960 for e in plan.entries)


def test_plan_across_pods_uses_dcn_in_every_scheme():
    # Exercise 6.1: the same 4M batch on four pods.
    plan = training.plan_training("llama3-70b", "v5p", 4 * 8960, BATCH_4M, seq_len=4096)
    assert plan.pods == 4
    assert all(e.step.mesh["pod"] == 4 for e in plan.entries)
    assert all(any(c.link == "dcn" for c in e.step.collectives) for e in plan.entries)


def test_plan_on_gpus_and_a_small_slice():
    plan = training.plan_training("llama-3-8b", "h100", 64, 2**20, seq_len=4096)
    assert plan.pods == 8 and plan.best.memory.fits
    small = training.plan_training("llama-3-8b", "v5e", 256, 2**20, seq_len=4096)
    assert small.slice_shape == (16, 16) and small.best.step.bound == "compute"


# ----- errors ----------------------------------------------------------------------------------------


def _plan(model="llama3-70b", chip="v5p", n_chips=8960, batch=BATCH_4M):
    return training.plan_training(model, chip, n_chips, batch, seq_len=4096)


def _step(mesh, strategy="fsdp", batch=BATCH_4M, seq_len=4096):
    return training.step_time("llama3-70b", "v5p", mesh, batch, strategy=strategy, seq_len=seq_len)


def _memory(**kw):
    return training.memory_per_chip("llama3-70b", {"data": 8}, 1e6, strategy="fsdp", **kw)


BAD = [
    (lambda: _plan(model="llama3-7b"), r"^model='llama3-7b': unknown model; closest: "),
    (lambda: _plan(chip="v9p"), r"^chip='v9p': unknown chip; closest: "),
    (lambda: _plan(n_chips=9000), r"^n_chips=9000: more than a tpu-v5p pod and not whole pods"),
    (lambda: _plan(n_chips=100), r"^n_chips=100: not a tpu-v5p slice; allowed: 4, 8, "),
    (lambda: _plan(n_chips=64, batch=2048), r"^batch_tokens=2048: not a whole number of sequences of 4096"),
    (lambda: _step({"data": 4, "model": 3}, "fsdp+tp"), r"^mesh\['model'\]=3: .* allowed: a divisor of 64"),
    (lambda: _step({"data": 8, "stage": 3}), r"^mesh\['stage'\]=3: does not divide the 80 layers"),
    (lambda: _step({"data": 8192}, batch=4096, seq_len=2048), r"^batch_tokens=4096: fewer tokens than 8192"),
    (lambda: _step({"data": 8, "model": 2}, "dp"), r"^strategy='dp': the mesh has model axes"),
    (lambda: _step({"data": 8}, "zero"), r"^strategy='zero': unknown"),
    (lambda: _step({"batch": 8}), r"^mesh=\{'batch': 8\}: axis 'batch' has no known role"),
    (lambda: _step({"data": 9000}), r"^mesh=.*more than a tpu-v5p pod"),
    (lambda: _step({"data_a": 2, "data_b": 2, "data_c": 2, "model": 2}, "fsdp+tp"), r"^mesh=.*4 ICI axes"),
    (lambda: _step({"data": 0}), r"^mesh\['data'\]=0: not a count"),
    (lambda: training.compute_bound_batch_per_chip("fsdp+tp", "v5p"), r"^d_ff=None"),
    (lambda: training.compute_bound_batch_per_chip("tp", "v5p"), r"^strategy='tp': unknown"),
    (lambda: training.compute_bound_batch_per_chip("fsdp+tp", "v5p", n_axes=3, d_ff=8), r"^n_axes=3: not used"),
    (lambda: training.max_tensor_parallelism("v5p", 0), r"^d_ff=0: not a count"),
    (lambda: _memory(optimizer="adamw"), r"^optimizer='adamw': unknown; closest: adam"),
    (lambda: _memory(param_dtype="fp64"), r"^param_dtype='fp64': unknown"),
    (lambda: training.training_days("llama3-70b", 15e12, "v5p", 8960, mfu=40), r"^mfu=40: more than 1"),
    (lambda: training.training_days("llama3-70b", 0, "v5p", 8960, mfu=0.4), r"^tokens=0: not a positive"),
    (lambda: training.mfu(1e6, 4e11, 0, "v5p"), r"^n_chips=0: not a count"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_names_argument_value_and_what_is_allowed(call, start):
    with pytest.raises(ValueError, match=start):
        call()


# ----- the command line ------------------------------------------------------------------------------

PLAN = [
    "plan",
    "--model",
    "llama3-70b",
    "--chip",
    "tpu-v5p",
    "--chips",
    "8960",
    "--batch-tokens",
    "4M",
    "--seq",
    "4096",
]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "book_lib", *args], capture_output=True, text=True, timeout=60)


def test_cli_prints_the_ranked_table():
    done = _cli(*PLAN)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("llama-3-70b on 8,960 tpu-v5p") and "1,024 sequences of 4,096" in lines[0]
    first = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "FSDP+TP" in first and "compute" in first
    assert any(line.rstrip().endswith("--top 0 shows all)") for line in lines)


def test_cli_json_is_the_plan():
    done = _cli(*PLAN, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    plan = training.plan_training("llama3-70b", "v5p", 8960, BATCH_4M, seq_len=4096)
    assert data["batch_tokens"] == BATCH_4M and len(data["entries"]) == len(plan.entries)
    assert data["entries"][0]["mesh"] == plan.best.step.mesh
    assert math.isclose(data["entries"][0]["t_lower_s"], plan.best.step.t_lower)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--model", "llama3-7b"), "error: model='llama3-7b': unknown model; closest: llama-3-70b"),
        (("--chip", "tpu-v9"), "error: chip='tpu-v9': unknown chip"),
        (("--chips", "9000"), "error: n_chips=9000"),
        (("--batch-tokens", "2K"), "error: batch_tokens=2048: not a whole number of sequences of 4096"),
        (("--batch-tokens", "lots"), "count='lots': not a number"),
    ],
)
def test_cli_bad_input_exits_non_zero_without_a_traceback(change, message):
    args = list(PLAN)
    i = args.index(change[0])
    args[i + 1] = change[1]
    done = _cli(*args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_training_is_a_pure_cost_model():
    code = "import sys, book_lib.training, book_lib.__main__; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_fsdp_tp_comms_ratio_crosses_one_at_the_range_and_is_least_at_the_optimum():
    args = (BATCH_4M, 28_672, 8960, "v5p")
    low, high = training.fsdp_degree_range(*args)
    ratio = training.fsdp_tp_comms_ratio
    assert ratio(low, *args) == pytest.approx(1) and ratio(high, *args) == pytest.approx(1)
    x_opt = training.optimal_fsdp_degree(*args[:3])
    assert ratio(x_opt, *args) < 1 and ratio(0.9 * x_opt, *args) > ratio(x_opt, *args) < ratio(1.1 * x_opt, *args)
    assert ratio(low / 2, *args) > 1 and ratio(2 * high, *args) > 1
    # Part 6: the text's 2048-way FSDP fits on 8192 chips; on the full 8960-chip pod 2240 x 4 falls just outside.
    assert ratio(2048, BATCH_4M, 28_672, 8192, "v5p") < 1 < ratio(2240, *args) < 1.05
    # Below the mixed bound no degree is compute-bound: the minimum stays above 1.
    small = (400 * 8960, 28_672, 8960, "v5p")
    assert ratio(training.optimal_fsdp_degree(*small[:3]), *small) > 1
    with pytest.raises(ValueError, match=r"fsdp_degree=0"):
        ratio(0, *args)


# ----- the per-layer table and ZeRO (Part 5, "Key Takeaways" and Appendix A) ---------------------------


@pytest.mark.parametrize("strategy", training.STRATEGIES)
def test_layer_costs_match_the_formulas_in_letters(strategy):
    b, d, f, x, y = 3 * 5 * 7 * 64, 24, 96, 4, 2  # awkward sizes, so no two terms coincide
    x, y = {"dp": (x, 1), "fsdp": (x, 1), "tp": (1, y), "fsdp+tp": (x, y)}[strategy]
    cost = training.layer_costs(strategy, batch_tokens=b, d_model=d, d_ff=f, x=x, y=y)
    names = {"B": b, "D": d, "F": f, "X": x, "Y": y}
    assert cost.flops_forward == pytest.approx(4 * b * d * f / (x * y))
    assert cost.flops_backward == pytest.approx(8 * b * d * f / (x * y))
    values = [cost.bytes_forward, cost.bytes_backward]
    for formula, value in zip(training.LAYER_COST_FORMULAS[strategy], values, strict=True):
        python = "".join(
            ch + "*" if ch.isalnum() and nxt.isalpha() else ch
            for ch, nxt in zip(formula, formula[1:] + " ", strict=True)
        )
        assert eval(python, {}, names) == pytest.approx(value), (formula, value)  # noqa: S307


def test_layer_costs_give_the_texts_compute_bounds():
    alpha = training.compute_bound_batch_per_chip("fsdp", "v5p")
    # FSDP: FLOPs per byte = B / X in each pass, so compute-bound exactly when B / X > C / W.
    fsdp = training.layer_costs("fsdp", batch_tokens=64 * alpha, d_model=8192, d_ff=28672, x=64)
    assert fsdp.intensity("forward") == pytest.approx(alpha) and fsdp.intensity("backward") == pytest.approx(alpha)
    # DP moves nothing forward, and its backward pass has the same B / X.
    dp = training.layer_costs("dp", batch_tokens=64 * alpha, d_model=8192, d_ff=28672, x=64)
    assert dp.intensity("forward") == math.inf and dp.intensity("backward") == pytest.approx(alpha)
    # TP: F / Y FLOPs per byte whatever the batch, so Y < F / (C / W).
    for b in (1024, 10**6):
        tp = training.layer_costs("tp", batch_tokens=b, d_model=8192, d_ff=28672, y=8)
        assert tp.intensity("forward") == pytest.approx(28672 / 8)
    # In int8 (1 byte) the text notes C doubles and the bytes halve: intensity doubles with the bytes cut.
    half = training.layer_costs("tp", batch_tokens=1024, d_model=8192, d_ff=28672, y=8, bytes_per_value=1)
    assert half.intensity("forward") == pytest.approx(2 * 28672 / 8)


def test_layer_costs_refuse_axes_the_strategy_has_not():
    with pytest.raises(ValueError, match=r"^y=2: 'fsdp' has no model axis"):
        training.layer_costs("fsdp", batch_tokens=8, d_model=2, d_ff=4, y=2)
    with pytest.raises(ValueError, match=r"^x=2: 'tp' has no data axis"):
        training.layer_costs("tp", batch_tokens=8, d_model=2, d_ff=4, x=2)
    with pytest.raises(ValueError, match=r"^strategy='pp': unknown"):
        training.layer_costs("pp", batch_tokens=8, d_model=2, d_ff=4)


def test_zero_stages_reproduce_the_zero_papers_figure():
    # Part 5, Appendix A: Psi = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
    totals = [training.zero_memory_per_chip(7.5e9, 64, stage=s).total_bytes / 1e9 for s in range(4)]
    assert totals == pytest.approx([120, 31.4, 16.6, 1.9], abs=0.05)
    with pytest.raises(ValueError, match=r"^stage=4: not a ZeRO stage"):
        training.zero_memory_per_chip(7.5e9, 64, stage=4)


def test_zero_3_is_what_memory_per_chip_calls_fsdp():
    model, mesh = get_model("llama-3-8b"), {"data": 8}
    fsdp = training.memory_per_chip(model, mesh, 0, strategy="fsdp")  # Adam: 2 fp32 moments, 8 bytes
    zero3 = training.zero_memory_per_chip(model.param_count(), 8, stage=3, optimizer_bytes_per_param=8)
    dp = training.memory_per_chip(model, mesh, 0, strategy="dp")
    zero0 = training.zero_memory_per_chip(model.param_count(), 8, stage=0, optimizer_bytes_per_param=8)
    assert fsdp.total_bytes == pytest.approx(zero3.total_bytes) and dp.total_bytes == pytest.approx(zero0.total_bytes)
