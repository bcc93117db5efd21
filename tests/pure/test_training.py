"""book_lib.training against the worked numbers of Parts 5 and 6 of the text: step time, memory, runs.

Each check against the text names the passage and a tolerance that covers the text's rounding
(it writes 4.59e14 / 1.8e11 as 2550, 70.55e9 parameters as 70e9, and so on).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from book_lib import collectives, hardware, runs, training
from book_lib.models import get_model
from book_lib.parallelism import Layout

ONE = Layout()  # one chip: the whole step's memory
FSDP_POD = Layout(fsdp=8960)  # a full 16x20x28 v5p pod, all FSDP
DP_POD = Layout(data=8960)
BATCH_4M = 4 * 2**20  # the text's "4 * 1024 * 1024": 1024 sequences of 4096


# ----- training time and cost (Part 6) ---------------------------------------------------------------


def test_llama3_70b_flops_and_days():
    run = runs.training_run("llama3-70b", "tpu-v5p", 8960, tokens=15e12, mfu=0.4)
    # Part 6: "6 * 70e9 = 4.2e11 FLOPs / token" and "4.2e11 * 15e12 = 6.3e24 FLOPs"; the preset has 70.55e9.
    assert run.flops_per_token == pytest.approx(4.2e11, rel=0.01)
    assert run.flops == pytest.approx(6.3e24, rel=0.01)
    # Part 6: "3.8e6 seconds. This is about 44 days" at 40 % MFU on 8960 chips.
    assert run.seconds == pytest.approx(3.8e6, rel=0.02)
    assert run.days == pytest.approx(44, rel=0.02)
    # Part 6: one chip at full peak: "435 years".
    one = runs.training_run("llama3-70b", "tpu-v5p", 1, tokens=15e12, mfu=1.0)
    assert one.days / 365 == pytest.approx(435, rel=0.01)
    # Part 5: 16M batch on 18,823 chips at 50 % MFU: "approximately 17 days".
    assert runs.training_run("llama3-70b", "v5p", 18_823, tokens=15e12, mfu=0.5).days == pytest.approx(17, rel=0.01)


def test_ten_pods_is_a_tenth_of_one_pod():
    # Part 5's takeaway says 10 pods train LLaMA-3 70B "in about 2 days". Its own Part 6 figure, 44 days
    # on one pod at 40 % MFU, gives 4.4 days on ten (2 days would need about 90 % MFU): we keep the model.
    one = runs.training_run("llama3-70b", "v5p", 8960, tokens=15e12, mfu=0.4)
    ten = runs.training_run("llama3-70b", "v5p", 89_600, tokens=15e12, mfu=0.4)
    assert ten.days == pytest.approx(one.days / 10)
    assert ten.days == pytest.approx(4.4, rel=0.02)


def test_attention_term_and_cost():
    cfg = get_model("llama-3-70b")
    plain = runs.training_run(cfg, "v5p", 64, tokens=1e12, mfu=0.5)
    long = runs.training_run(cfg, "v5p", 64, tokens=1e12, mfu=0.5, seq_len=32_768)
    # With seq_len the count is the Part 4 rule: weights plus 12 L T N H per token.
    assert long.flops_per_token == pytest.approx(cfg.flops_per_token(32_768, training=True))
    assert long.seconds > plain.seconds
    # Part 8 quotes $4.20 per v5p chip-hour; no price for v4.
    assert hardware.price_usd_per_chip_hour("v5p") == 4.20
    assert plain.cost_usd == pytest.approx(plain.chip_hours * 4.20)
    assert plain.chip_hours == pytest.approx(64 * plain.seconds / 3600)
    assert runs.training_run(cfg, "v4", 64, tokens=1e12, mfu=0.5).cost_usd is None


def test_mfu_inverts_training_run():
    run = runs.training_run("llama3-70b", "v5p", 8960, tokens=15e12, mfu=0.4)
    tokens_per_s = run.tokens / run.seconds
    assert runs.mfu("v5p", 8960, tokens_per_s=tokens_per_s, flops_per_token=run.flops_per_token) == pytest.approx(0.4)


# ----- memory (Parts 5 and 6) ------------------------------------------------------------------------


def test_llama3_70b_memory_for_a_4m_batch():
    total = training.memory_per_chip("llama3-70b", "v5p", ONE, batch_tokens=4e6, checkpoints_per_layer=4)
    # Part 6's table: 140 GB of bf16 weights, 560 GB of fp32 Adam moments and 20.9 TB of checkpoints
    # (bf16, D wide, 4 per layer, 80 layers, 4e6 tokens): 21.6 TB. The text counts no gradients; we do.
    assert total.params_bytes == pytest.approx(140e9, rel=0.01)
    assert total.optimizer_bytes == pytest.approx(560e9, rel=0.01)
    assert total.activations_bytes == pytest.approx(20.9e12, rel=0.01)
    assert total.total_bytes - total.grads_bytes == pytest.approx(21.6e12, rel=0.01)
    assert total.grads_bytes == total.params_bytes
    # Part 6: on 8960 chips "about 2.4GB per chip"; it fits in 96 GiB.
    per_chip = training.memory_per_chip("llama3-70b", "v5p", FSDP_POD, batch_tokens=4e6)
    assert per_chip.total_bytes - per_chip.grads_bytes == pytest.approx(2.4e9, rel=0.02)
    assert per_chip.fits is True
    assert total.fits is False


def test_pure_dp_keeps_ten_bytes_per_parameter_on_every_chip():
    # Part 5: Adam with bf16 weights and fp32 state is 2 + 8 = 10 bytes per parameter, replicated under DP.
    mem = training.memory_per_chip("llama3-70b", "v5p", DP_POD, batch_tokens=BATCH_4M)
    n = get_model("llama3-70b").param_count()
    assert mem.params_bytes + mem.optimizer_bytes == pytest.approx(10 * n)
    assert mem.fits is False
    sgd = training.memory_per_chip("llama3-70b", "v5p", DP_POD, batch_tokens=BATCH_4M, optimizer="sgd")
    assert sgd.optimizer_bytes == 0


def test_llama2_13b_activations_of_exercise_5_2():
    # Solution 5.2: checkpoints after the three big matmuls, 2 L B (D + 2F) = 4.2e13 bytes at B = 16M.
    cfg = get_model("llama-2-13b")
    c = (cfg.d_model + 2 * cfg.d_ff) / cfg.d_model
    mem = training.memory_per_chip(cfg, "v5p", ONE, batch_tokens=16e6, checkpoints_per_layer=c)
    assert mem.activations_bytes == pytest.approx(4.2e13, rel=0.01)
    # Solution 5.2: "(2 + 4 + 4) * 13e9 ~ 130GB" of parameters and optimizer state (13.0e9 in the preset).
    assert mem.params_bytes + mem.optimizer_bytes == pytest.approx(130e9, rel=0.01)


def test_memory_splits_by_the_layout():
    layout = Layout(fsdp=8, tensor=4, pipeline=2)
    base = training.memory_per_chip("llama3-70b", "v5p", ONE, batch_tokens=BATCH_4M)
    mixed = training.memory_per_chip("llama3-70b", "v5p", layout, batch_tokens=BATCH_4M)
    assert mixed.params_bytes == pytest.approx(base.params_bytes / 64)
    assert mixed.activations_bytes == pytest.approx(base.activations_bytes / 64)
    tp = training.memory_per_chip("llama3-70b", "v5p", Layout(tensor=8), batch_tokens=BATCH_4M)
    assert tp.optimizer_bytes == pytest.approx(base.optimizer_bytes / 8)


# ----- step time -------------------------------------------------------------------------------------


def test_fsdp_alone_on_a_v5p_pod_is_communication_bound():
    # Part 6: 8960-way FSDP of a 4M batch leaves 468 tokens per chip, below 850: "solidly communication-bound".
    step = training.step_time("llama3-70b", "v5p", FSDP_POD, batch_tokens=BATCH_4M, seq_len=4096)
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
    for factor in (0.5, 2.0):
        batch = int(850 * factor * 4096 // 4096) * 4096
        step = training.step_time("llama3-70b", "v5p", Layout(fsdp=4096), batch_tokens=batch, seq_len=4096)
        assert step.t_math / step.t_comms == pytest.approx(factor, rel=0.06)
        assert step.bound == ("compute" if factor > 1 else "communication")


def test_dp_all_reduce_matches_the_collectives_model():
    step = training.step_time("llama-3-8b", "v5p", Layout(data=4096), batch_tokens=2**22, seq_len=4096)
    (reduce,) = step.collectives
    cfg = get_model("llama-3-8b")
    v = 2 * cfg.param_count() / cfg.n_layers
    expected = collectives.collective_time("all_reduce", v, (16, 16, 16), "v5p", wraparound=True).total_s
    assert (reduce.op, reduce.phase, reduce.calls) == ("all_reduce", "backward", cfg.n_layers)
    assert reduce.seconds_per_call == pytest.approx(expected)


def test_tensor_parallel_activation_traffic_and_pipeline():
    layout = Layout(fsdp=64, tensor=8, pipeline=4, microbatches=16)
    step = training.step_time("llama3-70b", "v5p", layout, batch_tokens=BATCH_4M, seq_len=4096)
    tp = [c for c in step.collectives if c.name.startswith("TP")]
    assert {c.phase for c in tp} == {"forward", "backward"} and len(tp) == 4
    # Per call: one microbatch's [b, D] in bf16; calls: 2 blocks x 20 layers per stage x 16 microbatches.
    assert tp[0].array_bytes == pytest.approx(BATCH_4M / 64 / 16 * 8192 * 2)
    assert tp[0].calls == 2 * 20 * 16
    assert step.t_bubble == pytest.approx(step.t_math * 3 / 16)
    sends = [c for c in step.collectives if c.op == "permute"]
    assert len(sends) == 2 and all(c.calls == 16 for c in sends)
    # More tensor parallelism moves more activations per FLOP.
    wider_layout = Layout(fsdp=32, tensor=16, pipeline=4, microbatches=16)
    wider = training.step_time("llama3-70b", "v5p", wider_layout, batch_tokens=BATCH_4M, seq_len=4096)
    assert sum(c.total_s for c in wider.collectives if c.name.startswith("TP")) > sum(c.total_s for c in tp)


def test_pods_add_one_dcn_all_reduce():
    layout = Layout(data=4, fsdp=8960)
    step = training.step_time("llama3-70b", "v5p", layout, batch_tokens=4 * BATCH_4M, seq_len=4096)
    (dcn,) = [c for c in step.collectives if c.link == "dcn"]
    v = 2 * get_model("llama3-70b").param_count() / 8960
    assert dcn.array_bytes == pytest.approx(v)
    assert dcn.total_s == pytest.approx(collectives.collective_time("all_reduce", v, 4, "v5p", link="dcn").total_s)
    # Per-pod batch 4M is far above the ~75,000 DCN bound: the DCN step is small next to the math.
    assert dcn.total_s < 0.1 * step.t_math


def test_results_are_frozen_keyword_only_dataclasses():
    step = training.step_time("llama-3-8b", "v5e", Layout(fsdp=16), batch_tokens=2**20, seq_len=4096)
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.t_math = 0.0  # type: ignore[misc]
    for cls in (training.StepTime, training.MemoryPerChip, runs.TrainingRun, Layout):
        assert cls.__dataclass_params__.frozen
    with pytest.raises(TypeError):
        training.MemoryPerChip(1.0, 1.0, 1.0, 1.0, None)  # keyword-only


def test_zero_stages_reproduce_the_zero_papers_figure():
    # Part 5, Appendix A: Psi = 7.5B, N_d = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB.
    totals = [training.zero_memory_per_chip(param_count=7.5e9, n_data=64, stage=s).total_bytes / 1e9 for s in range(4)]
    assert totals == pytest.approx([120, 31.4, 16.6, 1.9], abs=0.05)
    with pytest.raises(ValueError, match=r"^stage=4: not a ZeRO stage"):
        training.zero_memory_per_chip(param_count=7.5e9, n_data=64, stage=4)


def test_zero_3_is_what_memory_per_chip_calls_fsdp():
    model = get_model("llama-3-8b")
    fsdp = training.memory_per_chip(model, "v5p", Layout(fsdp=8), batch_tokens=0)  # Adam: 2 fp32 moments
    zero3 = training.zero_memory_per_chip(param_count=model.param_count(), n_data=8, stage=3, master_dtype=None)
    dp = training.memory_per_chip(model, "v5p", Layout(data=8), batch_tokens=0)
    zero0 = training.zero_memory_per_chip(param_count=model.param_count(), n_data=8, stage=0, master_dtype=None)
    assert fsdp.total_bytes == pytest.approx(zero3.total_bytes) and dp.total_bytes == pytest.approx(zero0.total_bytes)


def _step(layout, batch=BATCH_4M, seq_len=4096, model="llama3-70b"):
    return training.step_time(model, "v5p", layout, batch_tokens=batch, seq_len=seq_len)


def _memory(**kw):
    return training.memory_per_chip("llama3-70b", "v5p", Layout(fsdp=8), batch_tokens=1e6, **kw)


BAD = [
    (lambda: _step(Layout(fsdp=4, tensor=3)), r"^layout.tensor=3: .* allowed: a divisor of 64"),
    (lambda: _step(Layout(fsdp=8, pipeline=81)), r"^layout.pipeline=81: more stages than the 80 layers"),
    (lambda: _step(Layout(fsdp=8192), batch=4096, seq_len=2048), r"^batch_tokens=4096: fewer tokens than 8192"),
    (lambda: _step(Layout(fsdp=8, context=3)), r"^layout.context=3: does not divide seq_len=4096"),
    (lambda: _step(Layout(fsdp=8, expert=2)), r"^layout.expert=2: does not divide the 1 experts of llama"),
    (lambda: _step(Layout(fsdp=9000)), r"^layout=.*more than a tpu-v5p ICI domain and not whole ones"),
    (lambda: _step(Layout(tensor=17920)), r"^layout=.*its 2 tpu-v5p ICI domains are not spanned by data, pipeline"),
    (lambda: _step(Layout(data=2, fsdp=2, tensor=2, expert=2)), r"^layout=.*4 ICI axes"),
    (lambda: Layout(fsdp=0), r"^layout.fsdp=0: not a count"),
    (lambda: _step({"data": 8}), r"^layout=\{'data': 8\}: not a Layout"),
    (lambda: _memory(optimizer="adamw"), r"^optimizer='adamw': unknown; closest: adam"),
    (lambda: _memory(param_dtype="fp7"), r"^param_dtype='fp7': unknown dtype"),
    (lambda: runs.training_run("llama3-70b", "v5p", 8960, tokens=15e12, mfu=40), r"^mfu=40: more than 1"),
    (lambda: runs.training_run("llama3-70b", "v5p", 8960, tokens=0, mfu=0.4), r"^tokens=0: not a positive"),
    (lambda: runs.mfu("v5p", 0, tokens_per_s=1e6, flops_per_token=4e11), r"^n_chips=0: not a count"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_names_argument_value_and_what_is_allowed(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_training_is_a_pure_cost_model():
    code = "import sys, book_lib.training, book_lib.planner, book_lib.__main__; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_layers_that_do_not_split_evenly_pace_the_pipeline_by_the_largest_stage():
    # Llama 3.1 405B's 126 layers on 16 stages: the largest holds 8, so 8 * 16 / 126 of the even share.
    even = Layout(data=128, tensor=8, pipeline=2, microbatches=8)
    meta = Layout(data=16, tensor=8, pipeline=16, microbatches=64)
    args = {"batch_tokens": 2**24, "seq_len": 8192}
    ratio = (
        training.step_time("llama-3.1-405b", "h100", meta, **args).flops_per_chip
        / training.step_time("llama-3.1-405b", "h100", even, **args).flops_per_chip
    )
    assert ratio == pytest.approx(8 * 16 / 126)
    weights = training.memory_per_chip("llama-3.1-405b", "h100", meta, batch_tokens=0).params_bytes
    assert weights == pytest.approx(2 * get_model("llama-3.1-405b").param_count() * 8 / 126 / 8)


def test_degrees_across_gpu_nodes_pay_the_scale_out_network():
    chip = hardware.get_chip("h100")
    step = training.step_time(
        "llama-3-8b", chip, Layout(fsdp=64, pipeline=2, microbatches=8), batch_tokens=2**20, seq_len=4096
    )
    fsdp = next(c for c in step.collectives if c.name == "FSDP weight all-gather")
    assert fsdp.link == "ici+dcn"  # 128 GPUs: 2 stages, each 8 GPUs of a node times 8 nodes
    cfg = get_model("llama-3-8b")
    v = 2 * cfg.param_count() / 2 / (cfg.n_layers // 2)
    inside = collectives.collective_time("all_gather", v, 8, chip).total_s
    across = collectives.collective_time("all_gather", v / 8, 8, chip, link="dcn").total_s
    assert fsdp.seconds_per_call == pytest.approx(inside + across)
    (send, _) = [c for c in step.collectives if c.op == "permute"]
    assert send.link == "dcn" and send.seconds_per_call > send.array_bytes / chip.dcn_bytes_per_s_per_chip


def test_an_moe_trains_on_the_flops_of_its_active_weights():
    mixtral = get_model("mixtral-8x7b")
    run = runs.training_run(mixtral, "h100", 1024, tokens=1e12, mfu=0.4)
    assert run.flops_per_token == 6 * mixtral.active_param_count() < 6 * mixtral.param_count() / 3


def test_recomputation_trades_a_third_more_flops_for_activation_memory():
    layout, kw = Layout(fsdp=256), {"batch_tokens": 2**22}
    policies = training.REMAT_FORWARD_PASSES
    step = {r: training.step_time("llama-3-8b", "v5e", layout, seq_len=4096, remat=r, **kw) for r in policies}
    memory = {r: training.memory_per_chip("llama-3-8b", "v5e", layout, remat=r, **kw) for r in policies}
    assert step["full"].flops_per_chip == pytest.approx(4 / 3 * step["checkpoints"].flops_per_chip)
    assert step["none"].flops_per_chip == step["checkpoints"].flops_per_chip
    # Part 4, "Gradient checkpointing": 1 D-wide value per layer for the block's input, 4 at the text's
    # checkpoints, about 20 when nothing is recomputed.
    assert memory["full"].activations_bytes * 4 == pytest.approx(memory["checkpoints"].activations_bytes)
    assert memory["none"].activations_bytes == pytest.approx(5 * memory["checkpoints"].activations_bytes)
    with pytest.raises(ValueError, match=r"^remat='selective': unknown; .*allowed: checkpoints, full, none"):
        training.step_time("llama-3-8b", "v5e", layout, seq_len=4096, remat="selective", **kw)


def test_an_interleaved_schedule_divides_the_bubble_and_multiplies_the_sends():
    layout, kw = Layout(fsdp=64, pipeline=4, microbatches=16), {"batch_tokens": BATCH_4M, "seq_len": 4096}
    plain = training.step_time("llama3-70b", "v5p", layout, **kw)
    interleaved = training.step_time("llama3-70b", "v5p", layout, virtual_stages=4, **kw)
    assert plain.t_bubble == pytest.approx(plain.t_math * 3 / 16)
    assert interleaved.t_bubble == pytest.approx(plain.t_bubble / 4)
    sends = {s.calls for s in interleaved.collectives if s.op == "permute"}
    assert sends == {4 * 16}
    with pytest.raises(ValueError, match=r"^virtual_stages=3: does not divide the 20 layers of a stage"):
        training.step_time("llama3-70b", "v5p", layout, virtual_stages=3, **kw)


def test_mixed_precision_master_weights_add_four_bytes_a_parameter():
    model, layout = get_model("llama-3-8b"), Layout(fsdp=8)
    plain = training.memory_per_chip(model, "v5p", layout, batch_tokens=0)
    master = training.memory_per_chip(model, "v5p", layout, batch_tokens=0, master_dtype="fp32")
    assert master.optimizer_bytes - plain.optimizer_bytes == pytest.approx(4 * model.param_count() / 8)


# ----- the roofline and the expected time ------------------------------------------------------------

CASES = [
    ("llama-3-70b", "tpu-v5p", Layout(fsdp=2240, tensor=4), BATCH_4M, 4096),
    ("llama-3-70b", "tpu-v5p", Layout(fsdp=8960), BATCH_4M, 4096),
    ("llama-3.1-405b", "h100", Layout(tensor=8, pipeline=16, data=64, microbatches=32), 16 * 2**20, 8192),
    ("mixtral-8x7b", "h100", Layout(fsdp=8, expert=8), 2**20, 4096),
    ("deepseek-v3", "h800", Layout(pipeline=16, expert=64, data=2, microbatches=64), 15360 * 4096, 4096),
]


@pytest.mark.parametrize(("model", "chip", "layout", "batch", "seq"), CASES)
def test_expected_time_adds_only_non_negative_named_terms_to_the_roofline(model, chip, layout, batch, seq):
    step = training.step_time(model, chip, layout, batch_tokens=batch, seq_len=seq)
    assert all(term.seconds >= 0 and term.name and term.how for term in step.terms)
    assert len({term.name for term in step.terms}) == len(step.terms)
    assert step.terms[0].seconds * step.peak_flops_per_s == pytest.approx(step.model_flops_per_chip)
    assert step.expected_s >= step.roofline_s >= step.model_flops_per_chip / step.peak_flops_per_s
    assert 0 < step.mfu_expected <= step.mfu_bound <= 1
    assert step.roofline_s <= step.t_lower  # the bound leaves the bubble and recomputation to expected_s


def test_each_expected_term_grows_with_what_it_counts():
    base = dict(batch_tokens=16 * 2**20, seq_len=8192)
    layout = Layout(tensor=8, pipeline=16, data=64, microbatches=32)
    step = training.step_time("llama-3.1-405b", "h100", layout, **base)
    terms = {t.name: t.seconds for t in step.terms}
    # the bubble: (S - 1) / M of the stage's critical path; twice the microbatches, about half the bubble
    halved = training.step_time("llama-3.1-405b", "h100", dataclasses.replace(layout, microbatches=64), **base)
    ratio = {t.name: t.seconds for t in halved.terms}["pipeline bubble"] / terms["pipeline bubble"]
    assert ratio == pytest.approx(0.5, rel=0.05)
    # recomputing the forward pass: a third more math, only in its own term
    full = training.step_time("llama-3.1-405b", "h100", layout, remat="full", **base)
    assert {t.name: t.seconds for t in full.terms}["recomputation"] == pytest.approx(step.t_math / 3, rel=0.02)
    assert terms["recomputation"] == 0
    # 126 layers on 16 stages: the busiest has 8, so 128 / 126 of the even math
    assert terms["uneven pipeline stages"] == pytest.approx(terms["matmul FLOPs at peak"] * (128 / 126 - 1))
    # on GPUs each exposed collective pays NCCL's fixed cost: 6.6 us + (n - 1) 0.6 us for 8-way gathers
    tp = [c for c in step.collectives if not c.overlaps]
    assert tp and all(c.latency_s == pytest.approx(6.6e-6 + 7 * 0.6e-6) for c in tp)
    assert terms["collective latency"] == pytest.approx(sum(c.calls * c.latency_s for c in tp))


def test_the_optimizer_update_is_its_bytes_over_hbm_bandwidth():
    layout = Layout(fsdp=256)
    step = training.step_time("llama-3-8b", "tpu-v5e", layout, batch_tokens=2**20, seq_len=4096)
    terms = {t.name: t.seconds for t in step.terms}
    v5e, params = hardware.get_chip("tpu-v5e"), get_model("llama-3-8b").param_count()
    # Adam, bf16 weights and gradients, fp32 moments: 3 x 2 + 2 x 2 x 4 = 22 bytes per parameter
    assert terms["optimizer update (HBM)"] == pytest.approx(params / 256 * 22 / v5e.hbm_bytes_per_s)
    master = training.step_time("llama-3-8b", "tpu-v5e", layout, batch_tokens=2**20, seq_len=4096, master_dtype="fp32")
    assert {t.name: t.seconds for t in master.terms}["optimizer update (HBM)"] == pytest.approx(
        params / 256 * 30 / v5e.hbm_bytes_per_s
    )


def test_fp8_matmuls_halve_the_math_where_the_chip_has_them():
    layout, kw = Layout(tensor=8, pipeline=16, data=64, microbatches=32), dict(batch_tokens=16 * 2**20, seq_len=8192)
    bf16 = training.step_time("llama-3.1-405b", "h100", layout, **kw)
    fp8 = training.step_time("llama-3.1-405b", "h100", layout, matmul_dtype="fp8", **kw)
    assert fp8.t_math == pytest.approx(bf16.t_math / 2, rel=1e-3)  # 1,979 against 2 x 989 TFLOPs/s
    with pytest.raises(ValueError, match=r"^dtype='fp8': a100 has no fp8 matmul peak; allowed: bf16, int8"):
        training.step_time("llama-3-8b", "a100", Layout(fsdp=8), batch_tokens=2**20, seq_len=4096, matmul_dtype="fp8")


def test_expert_parallelism_sends_tokens_by_alltoall_and_shards_only_the_experts():
    model, layout = get_model("mixtral-8x7b"), Layout(fsdp=8, expert=8)
    step = training.step_time(model, "h100", layout, batch_tokens=2**20, seq_len=4096)
    a2a = [c for c in step.collectives if c.op == "all_to_all"]
    assert {c.phase for c in a2a} == {"forward", "backward"} and not any(c.overlaps for c in a2a)
    # two AllToAlls (dispatch, combine) per MoE layer and microbatch, each V = expert k b D bytes
    b = 2**20 / layout.batch_shards
    assert all(c.calls == 2 * 32 and c.array_bytes == pytest.approx(8 * 2 * b * 4096 * 2) for c in a2a)
    memory = training.memory_per_chip(model, "h100", layout, batch_tokens=2**20)
    routed = model.routed_expert_params
    assert memory.params_bytes == pytest.approx(2 * ((model.param_count() - routed) / 8 + routed / 64))
    with pytest.raises(ValueError, match=r"^layout.expert=3: does not divide the 8 experts of mixtral-8x7b"):
        training.step_time(model, "h100", Layout(expert=3), batch_tokens=2**20, seq_len=4096)


def test_expert_parallelism_spans_gpu_nodes_like_deepseek_v3():
    # DeepSeek-V3: 16-way pipeline, 64-way expert parallelism over 8 nodes, data parallelism: 2048 H800s
    step = training.step_time(
        "deepseek-v3", "h800", Layout(pipeline=16, expert=64, data=2, microbatches=64),
        batch_tokens=15360 * 4096, seq_len=4096,
    )  # fmt: skip
    assert step.mesh == {"data_dcn": 2, "pipeline_dcn": 16, "expert_dcn": 8, "expert": 8}
    a2a = next(c for c in step.collectives if c.op == "all_to_all")
    assert a2a.link == "ici+dcn"
    # each GPU sends 7/8 of its k b D bytes to other nodes at 50 GB/s (the report's InfiniBand figure)
    per_gpu = a2a.array_bytes / 64
    assert a2a.bandwidth_s >= per_gpu * 7 / 8 / 50e9


def test_optimizer_state_and_its_update_traffic():
    assert training.optimizer_state_bytes_per_param() == 8  # Adam: two fp32 moments
    assert training.optimizer_state_bytes_per_param(master_dtype="fp32") == 12  # the ZeRO paper's K
    assert training.optimizer_update_bytes_per_param() == 22  # 3 x 2 bf16 bytes + 2 x 8
    assert training.optimizer_update_bytes_per_param(master_dtype="fp32") == 30
    assert training.optimizer_update_bytes_per_param(optimizer="sgd", param_dtype="fp32") == 12
    with pytest.raises(ValueError, match=r"^optimizer='lion': unknown; allowed: adam, momentum, sgd"):
        training.optimizer_state_bytes_per_param(optimizer="lion")


# ----- ZeRO-1 and ZeRO-2 over the data degree -----------------------------------------------------------


def test_zero_shards_the_optimizer_then_the_gradients_over_the_data_replicas_and_makes_nemotron_340b_fit():
    # NeMo's Nemotron-4 340B: TP8 PP8 on 128 H100, mixed-precision Adam (fp32 master and moments), no ZeRO
    # needs 92.5 GB of an 80 GB H100; Megatron's distributed optimizer (ZeRO-1) is how it ran
    from book_lib.published import _NEMOTRON_340B

    layouts = [Layout(data=2, tensor=8, pipeline=8, microbatches=16, zero=z) for z in (0, 1, 2)]
    memory = [training.memory_per_chip(_NEMOTRON_340B, "h100", lay, batch_tokens=32 * 4096, master_dtype="fp32")
              for lay in layouts]  # fmt: skip
    assert [m.fits for m in memory] == [False, True, True]
    assert memory[1].optimizer_bytes == pytest.approx(memory[0].optimizer_bytes / 2)
    assert memory[1].grads_bytes == memory[0].grads_bytes and memory[2].grads_bytes == pytest.approx(
        memory[0].grads_bytes / 2
    )
    assert memory[2].params_bytes == memory[0].params_bytes
    assert layouts[1].label == "DP (ZeRO-1)+TP+PP"


def test_zero_trades_the_gradient_all_reduce_for_a_reduce_scatter_and_an_all_gather_of_the_same_bytes():
    kw = {"batch_tokens": 2**20, "seq_len": 4096}
    for chip, layout, where in (
        ("tpu-v5p", Layout(data=16, tensor=4), ""),
        ("h100", Layout(data=64, tensor=8), " over DCN"),
    ):
        plain = training.step_time("llama-3-8b", chip, layout, **kw)
        sharded = training.step_time("llama-3-8b", chip, dataclasses.replace(layout, zero=1), **kw)
        before, after = ({c.name: c for c in s.collectives} for s in (plain, sharded))
        reduce = before[f"DP gradient all-reduce{where}"]
        assert reduce.name not in after
        scatter = after[f"DP (ZeRO-1) gradient reduce-scatter{where}"]
        gather = after[f"DP (ZeRO-1) weight all-gather{where}"]
        assert scatter.total_s + gather.total_s == pytest.approx(reduce.total_s, rel=0.05)
        update = [next(t for t in s.terms if t.name == "optimizer update (HBM)").seconds for s in (plain, sharded)]
        assert update[1] == pytest.approx(update[0] / layout.data)


def test_a_zero_stage_the_data_degree_does_not_have_is_refused():
    with pytest.raises(ValueError, match=r"^layout.zero=3: not a ZeRO stage of the data degree; allowed: 0, 1, 2 "
                                         r"\(ZeRO-3 is layout.fsdp\)"):  # fmt: skip
        Layout(data=8, zero=3)


def test_one_rule_divides_by_zero_stage_and_one_counts_what_an_expert_chip_holds():
    assert [training.zero_divisors(stage=s, n_data=8) for s in range(4)] == [
        (1, 1, 1), (1, 1, 8), (1, 8, 8), (8, 8, 8)
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"^stage=4: not a ZeRO stage"):
        training.zero_divisors(stage=4, n_data=8)
    # ZeRO-2 in a layout divides as zero_memory_per_chip's stage 2 does
    layout = Layout(data=8, zero=2)
    mem = training.memory_per_chip("llama-3-8b", "h100", layout, batch_tokens=8 * 4096)
    whole = training.memory_per_chip("llama-3-8b", "h100", Layout(data=8), batch_tokens=8 * 4096)
    assert (mem.params_bytes, mem.grads_bytes * 8, mem.optimizer_bytes * 8) == pytest.approx(
        (whole.params_bytes, whole.grads_bytes, whole.optimizer_bytes)
    )
    mixtral = get_model("mixtral-8x7b")
    assert mixtral.params_held(8) == pytest.approx(mixtral.param_count() - mixtral.routed_expert_params * 7 / 8)
    assert mixtral.params_held() == mixtral.param_count()


def test_every_collective_is_named_by_the_scheme_of_the_degree_it_runs_over():
    """A step's collectives speak the layout's vocabulary: each name opens with `Layout.scheme` of its degree."""
    from book_lib.parallelism import DEGREES

    layout = Layout(data=4, fsdp=2, tensor=2, pipeline=2, context=2, expert=2, microbatches=4, zero=1)
    step = training.step_time("deepseek-v3", "h100", layout, batch_tokens=2**18, seq_len=4096)
    seen = set()
    for c in step.collectives:
        degree = "data" if c.axes == ("pod",) else c.axes[0]
        assert c.name.startswith(layout.scheme(degree) + " "), c.name
        seen.add(degree)
    assert seen == set(DEGREES)
    assert layout.scheme("data") == "DP (ZeRO-1)" and Layout(data=2).scheme("data") == "DP"
    with pytest.raises(ValueError, match=r"^degree='pod': .*allowed: tensor, expert"):
        layout.scheme("pod")


def test_a_step_is_worked_out_once_and_every_part_reads_that_record():
    from book_lib.parallelism import StepDtypes, place
    from book_lib.step_collectives import step_shape

    layout = Layout(data=128, tensor=8, pipeline=16, microbatches=16)
    kw = {"batch_tokens": 16 * 2**20, "seq_len": 8192}
    cfg = training.get_model("llama-3.1-405b")
    shape = step_shape(cfg, place("h100", layout), virtual_stages=1, dtypes=StepDtypes(), **kw)
    assert shape.layers == 8  # Meta's 126 layers on 16 stages: the busiest stage holds ceil(126 / 16)
    assert shape.shard_tokens == 2**17 and shape.microbatch_tokens == 2**13
    step = training.step_time(cfg, "h100", layout, **kw)
    assert step.model_flops_per_chip == shape.model_flops and step.tokens_per_chip == shape.shard_tokens
    assert step.flops_per_chip == pytest.approx(shape.model_flops * 8 * 16 / 126)


def test_a_gradient_reduction_the_software_does_not_overlap_waits_after_the_backward_pass():
    from book_lib import overheads

    kw = {"batch_tokens": 512 * 2048, "seq_len": 2048}
    layout = Layout(data=32, tensor=4)
    on = training.step_time("llama-3-8b", "a100", layout, **kw)
    off = training.step_time("llama-3-8b", "a100", layout, overlap_grad_reduce=False, **kw)
    after = [c for c in off.collectives if c.after_backward]
    assert {c.name for c in after} == {"DP gradient all-reduce", "DP gradient all-reduce over DCN"}
    assert not any(c.overlaps for c in after)
    assert not any(c.after_backward for c in on.collectives)
    assert off.roofline_s == on.roofline_s  # the bound counts the same bytes either way
    terms = [{t.name: t.seconds for t in s.terms} for s in (on, off)]
    waited = sum(overheads.achieved(c, hardware.get_chip("a100")).expected_s for c in after)
    assert terms[0]["gradient reduction after the backward pass"] == 0
    assert terms[1]["gradient reduction after the backward pass"] == pytest.approx(waited) and waited > 0
    for name in ("tensor/expert-parallel collectives", "collective latency"):  # the TP ones still block per layer
        assert terms[1][name] == terms[0][name]
    assert off.expected_s > on.expected_s
    with pytest.raises(ValueError, match=r"^overlap_grad_reduce='no': not a bool; allowed: True, False"):
        training.step_time("llama-3-8b", "a100", layout, overlap_grad_reduce="no", **kw)
