"""book_lib.planner against Part 6 of the text: every layout of a step, ranked; and its command line."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace

import pytest

from book_lib import bounds, planner, training

BATCH_4M = 4 * 2**20  # the text's "4 * 1024 * 1024": 1024 sequences of 4096


# ----- the planner (Part 6) --------------------------------------------------------------------------


def test_plan_for_llama3_70b_on_a_v5p_pod():
    # the text's idealisation: 1,024 sequences over 8,960 chips, a fraction of a sequence on each
    plan = planner.plan_training("llama3-70b", "tpu-v5p", 8960, batch_tokens=BATCH_4M, seq_len=4096,
                                 whole_sequences=False)  # fmt: skip
    best = plan.best
    # Part 6: mixed FSDP + tensor parallelism is compute-bound; FSDP alone is not; DP does not fit.
    assert best.scheme == "FSDP+TP" and best.step.bound == "compute" and best.memory.fits
    assert best.step.layout.tensor in (2, 4, 8)
    assert best.mfu_bound == pytest.approx(1.0)
    assert 0.5 < best.mfu_expected < 1 and best.expected_s > best.roofline_s
    by_scheme = {e.scheme: e for e in plan.entries}
    assert by_scheme["FSDP"].step.bound == "communication"
    assert by_scheme["DP"].memory.fits is False and by_scheme["DP"].rank == len(plan.entries)
    assert "does not fit" in by_scheme["DP"].reason
    # Part 6 picks 4-way tensor parallelism (2048-way FSDP on 8192 chips); the flagged mesh here is its
    # real counterpart on 8960 chips: 2240-way FSDP, 4-way tensor.
    (flagged,) = [e for e in plan.entries if e.near_text_fsdp_degree]
    assert flagged.step.layout.tensor == 4 and flagged.step.n_chips == 8960
    assert plan.text_fsdp_degree == pytest.approx(bounds.optimal_fsdp_degree(8960, batch_tokens=BATCH_4M, d_ff=28_672))
    assert [e.rank for e in plan.entries] == list(range(1, len(plan.entries) + 1))
    times = [e.expected_s for e in plan.entries if e.memory.fits]
    assert times == sorted(times)
    assert all(e.step.n_chips == 8960 for e in plan.entries)


def test_plan_across_pods_uses_dcn_in_every_scheme():
    # Exercise 6.1: the same 4M batch on four pods.
    plan = planner.plan_training("llama3-70b", "v5p", 4 * 8960, batch_tokens=BATCH_4M, seq_len=4096)
    assert plan.pods == 4
    assert all(e.step.mesh["pod"] == 4 and e.step.layout.data % 4 == 0 for e in plan.entries)
    assert all(any(c.link == "dcn" for c in e.step.collectives) for e in plan.entries)


def test_plan_on_gpus_and_a_small_slice():
    plan = planner.plan_training("llama-3-8b", "h100", 64, batch_tokens=2**20, seq_len=4096)
    assert plan.pods == 8 and plan.best.memory.fits
    small = planner.plan_training("llama-3-8b", "v5e", 256, batch_tokens=2**20, seq_len=4096)
    assert small.slice_shape == (16, 16) and small.best.step.bound == "compute"


def _plan(model="llama3-70b", chip="v5p", n_chips=8960, batch=BATCH_4M):
    return planner.plan_training(model, chip, n_chips, batch_tokens=batch, seq_len=4096)


BAD = [
    (lambda: _plan(model="llama3-7b"), r"^model='llama3-7b': unknown model; closest: "),
    (lambda: _plan(chip="v9p"), r"^chip='v9p': unknown chip; closest: "),
    (lambda: _plan(n_chips=9000), r"^n_chips=9000: more than a tpu-v5p pod and not whole pods"),
    (lambda: _plan(n_chips=100), r"^n_chips=100: not a tpu-v5p slice; allowed: 4, 8, "),
    (lambda: _plan(n_chips=64, batch=2048), r"^batch_tokens=2048: not a whole number of sequences of 4096"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_names_argument_value_and_what_is_allowed(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_every_layout_is_a_real_cut_of_the_slice():
    plan = _plan()
    labels = {e.scheme.removesuffix("+CP") for e in plan.entries}  # 1,024 sequences: some cut sequences
    assert {"DP", "FSDP", "FSDP+TP", "FSDP+TP+PP"} <= labels
    for e in plan.entries:
        placement = e.step.placement
        assert placement.cut and e.scheme == e.step.layout.label
        assert sum(len(sizes) for sizes in placement.axes.values()) <= 3  # a 3D torus has three axes


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
    assert lines[0].startswith("llama-3-70b on 8\u202f960 tpu-v5p") and "1\u202f024 sequences of 4\u202f096" in lines[0]
    first = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "+CP" in first and "cuts each sequence" in first and "compute" in first
    assert any(line.rstrip().endswith("--top 0 shows all)") for line in lines)
    text = _cli(*PLAN, "--partial-sequences").stdout.splitlines()
    first = next(line for line in text if line.lstrip().startswith("1 "))
    assert "FSDP+TP " in first and "the text's idealisation" in first


def test_the_planner_cuts_sequences_only_by_whole_costed_context_degrees():
    plan = planner.plan_training("llama3-70b", "tpu-v5p", 8960, batch_tokens=BATCH_4M, seq_len=4096)
    sequences = BATCH_4M // 4096
    for e in plan.entries:
        holders = e.layout.batch_shards // e.layout.context
        assert holders <= sequences and e.step.context_parallel == e.layout.context, e.layout
        if e.layout.context > 1:  # its key/value gathers are in the step, not free
            assert any(c.axes == ("context",) for c in e.step.collectives)
    assert any(e.layout.context > 1 for e in plan.entries)
    with pytest.raises(ValueError, match=r"^whole_sequences='yes': not a bool"):
        planner.plan_training("llama3-70b", "tpu-v5p", 8960, batch_tokens=BATCH_4M, seq_len=4096,
                              whole_sequences="yes")  # fmt: skip


def test_cli_json_is_the_plan():
    done = _cli(*PLAN, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    plan = planner.plan_training("llama3-70b", "v5p", 8960, batch_tokens=BATCH_4M, seq_len=4096)
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
        (("--batch-tokens", "lots"), "--batch-tokens='lots': not a number; allowed: 4194304, 4M"),
        (("--chips", "-8"), "--chips='-8': not a whole number >= 1; allowed: 8960, 4K"),
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


def test_names_are_resolved_once_at_the_boundary(monkeypatch):
    from book_lib import checks

    looked_up = []
    real = checks.lookup

    def counting(arg, value, table, *, what, key=str, offered=None):
        looked_up.append((arg, value))
        return real(arg, value, table, what=what, key=key, offered=offered)

    monkeypatch.setattr(checks, "lookup", counting)
    _plan()
    assert sorted(looked_up) == [("chip", "v5p"), ("model", "llama3-70b")]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--chips", "8960000"), "error: --chips=8960000: more chips than any system built; allowed: up to 1,048,576"),
        (("--batch-tokens", "1e30"), "error: --batch-tokens=1e+30: more tokens per step than any published run"),
        (("--seq", "1e12"), "error: --seq=1000000000000: more tokens than llama-3-70b's 8,192 positions"),
    ],
)
def test_cli_refuses_what_no_machine_or_model_can_be(capsys, change, message):
    from book_lib.__main__ import main

    args = list(PLAN)
    args[args.index(change[0]) + 1] = change[1]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(message) and captured.out == ""


def test_cli_says_first_when_nothing_fits_and_what_would(capsys):
    from book_lib.__main__ import main

    big = [
        "plan",
        "--model",
        "llama-3.1-405b",
        "--chip",
        "v5e",
        "--chips",
        "16",
        "--batch-tokens",
        "1M",
        "--seq",
        "4096",
    ]
    assert main(big) == 1  # printed in full, and a script sees it failed
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("NOTHING FITS: the leanest layout needs ") and "x the chips" in first
    assert main(PLAN) == 0
    assert not capsys.readouterr().out.startswith("NOTHING FITS")


def test_llama3_405b_on_16384_h100s_has_a_layout_that_fits_and_the_published_one_is_tried():
    # The Llama 3 paper (Table 4): TP 8 inside the node, PP 16 and DP 128 across 16,384 H100s.
    plan = planner.plan_training("llama-3.1-405b", "h100", 16_384, batch_tokens=16 * 2**20, seq_len=8192)
    assert plan.best.memory.fits and plan.pods == 2048
    meta = [
        e
        for e in plan.entries
        if e.scheme == "DP+TP+PP" and e.step.mesh == {"data_dcn": 128, "pipeline_dcn": 16, "tensor": 8}
    ]
    assert len(meta) == 1 and meta[0].memory.fits and meta[0].step.bound == "compute"
    assert all(len(e.step.placement.axes["tensor"]) <= 1 and e.step.layout.tensor <= 8 for e in plan.entries)


def test_gradient_accumulation_makes_a_layout_fit():
    # LLaMA 3 8B on a v5e-256 at 4M tokens: no layout holds the whole batch's activations at once.
    plan = planner.plan_training("llama-3-8b", "v5e", 256, batch_tokens=BATCH_4M, seq_len=4096)
    best = plan.best
    assert best.memory.fits and best.step.layout.pipeline == 1 and best.step.layout.microbatches > 1
    assert "accumulates gradients over" in best.reason
    whole = training.memory_per_chip(
        "llama-3-8b", "v5e", replace(best.step.layout, microbatches=1), batch_tokens=BATCH_4M
    )
    assert not whole.fits and whole.activations_bytes == best.memory.activations_bytes * best.step.layout.microbatches


def test_the_planner_tries_zero_when_data_parallel_replicas_do_not_fit():
    plan = planner.plan_training("llama-3-70b", "h100", 1024, batch_tokens=4 * 2**20, seq_len=8192)
    zeros = [e for e in plan.entries if e.layout.zero]
    assert zeros and all(e.fits for e in zeros) and all("ZeRO" in e.scheme for e in zeros)
    # each was taken because the same layout without it does not fit
    for entry in zeros[:3]:
        bare = replace(entry.layout, zero=0)
        memory = training.memory_per_chip("llama-3-70b", "h100", bare, batch_tokens=4 * 2**20, remat=entry.step.remat)
        assert not memory.fits


# ----- your own layout, model and run (issue: a planner a practitioner drives) -----------------------

META_405B = [
    "plan", "--model", "llama-3.1-405b", "--chip", "h100-sxm", "--chips", "16K", "--batch-tokens", "16M",
    "--seq", "8192", "--layout", "tensor=8,pipeline=16,data=128", "--microbatches", "16", "--virtual-stages", "2",
]  # fmt: skip


def _json(capsys, args: list[str], status: int = 0) -> dict:
    from book_lib.__main__ import main

    assert main([*args, "--json"]) == status
    return json.loads(capsys.readouterr().out)


def test_plan_layout_gives_metas_405b_layout_an_expected_time_beside_the_best(capsys):
    data = _json(capsys, META_405B)
    yours = data["yours"]
    assert yours["layout"] | {"microbatches": 16} == {
        "data": 128, "fsdp": 1, "tensor": 8, "pipeline": 16, "context": 1, "expert": 1, "microbatches": 16, "zero": 0,
    }  # fmt: skip
    meta = planner.Layout(tensor=8, pipeline=16, data=128, microbatches=16)
    step = training.step_time("llama-3.1-405b", "h100", meta, batch_tokens=16 * 2**20, seq_len=8192, virtual_stages=2)
    assert yours["expected_s"] == pytest.approx(step.expected_s) and yours["expected_s"] > yours["roofline_s"]
    assert "x the best expected step time" in yours["reason"] and data["entries"][0]["rank"] == 1
    from book_lib.__main__ import main

    assert main(META_405B) == 0
    table = capsys.readouterr().out.splitlines()
    (you,) = [line for line in table if line.startswith("you ")]
    assert "DP+TP+PP" in you and "tensor=8" in you
    # the columns stay aligned however long a scheme ("DP (ZeRO-2)+FSDP+TP+PP") or a mesh grows
    (header,) = [line for line in table if line.lstrip().startswith("#  scheme")]
    end = header.index(" step") + len(" step")
    rows = [line for line in table if line.startswith("you ") or line[:3].strip().isdigit()]
    assert len(rows) == 11 and max(len(e["scheme"]) for e in data["entries"][:10]) > 20
    assert all(r[end - 1] != " " and r[end] == " " for r in rows), "each step time ends under 'step'"
    # a layout of other chips than --chips, or a field that is no degree, is refused by name
    assert main([*META_405B[:-6], "--layout", "tensor=8,pipeline=8"]) == 2
    assert "but --chips=16,384" in capsys.readouterr().err
    assert main([*META_405B[:-6], "--layout", "tensors=8"]) == 2
    assert "--layout='tensors': unknown; closest: tensor" in capsys.readouterr().err


def test_plan_layout_can_reduce_its_gradients_after_the_backward_pass_as_older_software_did(capsys):
    overlapped = _json(capsys, META_405B)["yours"]
    after = _json(capsys, [*META_405B, "--no-overlap-grad-reduce"])["yours"]
    meta = planner.Layout(tensor=8, pipeline=16, data=128, microbatches=16)
    step = training.step_time("llama-3.1-405b", "h100", meta, batch_tokens=16 * 2**20, seq_len=8192, virtual_stages=2,
                              overlap_grad_reduce=False)  # fmt: skip
    assert after["expected_s"] == pytest.approx(step.expected_s) and after["expected_s"] > overlapped["expected_s"]
    assert after["roofline_s"] == overlapped["roofline_s"]


MISTRAL_7B = {  # config.json of mistralai/Mistral-7B-v0.1, as its model card's files give it
    "architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000,
}  # fmt: skip
SMALL_PLAN = ["plan", "--chip", "tpu-v5p", "--chips", "64", "--batch-tokens", "1M", "--seq", "4096"]


def test_plan_model_takes_a_hugging_face_config_or_fields(capsys, tmp_path):
    path = tmp_path / "Mistral-7B-v0.1" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(MISTRAL_7B))
    from_file = _json(capsys, [*SMALL_PLAN, "--model", str(path)])
    preset = _json(capsys, [*SMALL_PLAN, "--model", "mistral-7b"])
    assert from_file["model"] == "Mistral-7B-v0.1" and from_file["entries"] == preset["entries"]
    fields = "d_model=4096,n_layers=32,d_ff=14336,n_heads=32,n_kv_heads=8,vocab_size=32000"
    assert _json(capsys, [*SMALL_PLAN, "--model-args", fields])["entries"] == preset["entries"]
    halved = _json(capsys, [*SMALL_PLAN, "--model", "mistral-7b", "--model-args", "n_layers=16"])
    assert (
        halved["entries"][0]["memory_bytes_per_chip"]["params"]
        < preset["entries"][0]["memory_bytes_per_chip"]["params"]
    )
    from book_lib.__main__ import main

    assert main([*SMALL_PLAN, "--model-args", "d_model=4096"]) == 2
    assert "n_layers, d_ff, n_heads, vocab_size missing" in capsys.readouterr().err
    assert main([*SMALL_PLAN, "--model", str(tmp_path / "nowhere.json")]) == 2
    assert "not a readable config.json" in capsys.readouterr().err


def test_plan_tokens_gives_days_chip_hours_and_cost(capsys):
    data = _json(capsys, [*META_405B, "--tokens", "15T"])
    best, run = data["entries"][0], data["runs"]["the best layout"]
    days = 15e12 / (16 * 2**20) * best["expected_s"] / 86_400
    assert run["days"] == pytest.approx(days) and run["chip_hours"] == pytest.approx(16384 * days * 24)
    assert run["cost_usd"] == pytest.approx(run["chip_hours"] * 10.8)  # the text's H100 price per hour
    assert data["runs"]["your layout"]["days"] > run["days"]
    priced = _json(capsys, [*META_405B, "--tokens", "15T", "--price", "2"])["runs"]["the best layout"]
    assert priced["cost_usd"] == pytest.approx(priced["chip_hours"] * 2)
    from book_lib.__main__ import main

    assert main([*META_405B, "--tokens", "15T"]) == 0
    assert "the best layout: 15 × 10¹² tokens in " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*META_405B, "--tokens", "0T"])
    assert "--tokens='0T': not a token count above 0" in capsys.readouterr().err


def test_every_row_keeps_its_legend_bound_is_max_of_math_and_comms(capsys):
    for args in (META_405B, PLAN, [*SMALL_PLAN, "--model", "mixtral-8x7b"]):
        data = _json(capsys, args)
        for e in [*data["entries"], *([data["yours"]] if "yours" in data else [])]:
            assert e["roofline_s"] == max(e["roofline_math_s"], e["t_comms_s"])
            assert e["bound"] == ("compute" if e["roofline_math_s"] >= e["t_comms_s"] else "communication")
    # Issue 42's case: LLaMA-3-70B on a v5p with Layout(fsdp=4096), where the two once disagreed
    step = training.step_time("llama-3-70b", "tpu-v5p", planner.Layout(fsdp=4096), batch_tokens=BATCH_4M, seq_len=4096)
    assert (step.bound == "communication") == (step.roofline_s == step.t_comms > step.roofline_math_s)


def test_serve_where_nothing_fits_exits_1(capsys):
    from book_lib.__main__ import main

    args = ["serve", "--model", "llama-3.1-405b", "--chip", "tpu-v5e", "--chips", "8", "--context", "8192"]
    assert main(args) == 1
    assert capsys.readouterr().out.startswith("NOTHING FITS")
    assert main(["serve", "--model", "llama-3-8b", "--chip", "tpu-v5e", "--chips", "8", "--context", "8192"]) == 0


def test_common_names_of_models_and_chips_answer_and_the_books_problems_are_not_offered():
    from book_lib import hardware, models

    assert hardware.get_chip("a100-80gb").name == "a100" and hardware.get_chip("H100 SXM").name == "h100"
    assert (
        models.get_model("gpt3-175b").name == "gpt-3-175b" and models.get_model("llama-3.1-70b").max_positions == 131072
    )
    assert models.get_model("book-ch4-q1").name == "book-ch4-q1"  # still found by its own name
    assert not any(name.startswith("book-") for name in models.model_names())
    with pytest.raises(ValueError) as refused:
        models.get_model("book-ch4")
    assert "book-" not in str(refused.value).partition("unknown model;")[2]  # neither closest nor allowed


def test_serve_takes_fp8_weights_where_bf16_does_not_fit(capsys):
    from book_lib.__main__ import main

    args = ["serve", "--model", "deepseek-v3", "--chip", "h200", "--chips", "8", "--context", "4096"]
    assert main(args) == 1  # 671e9 parameters in bf16: 1.34 TB on 8 x 141 GB
    capsys.readouterr()
    assert main([*args, "--dtype", "fp8", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["fits"] and 671e9 < rows[0]["memory_bytes"] < 8 * 141e9


def test_serve_spans_nodes_with_the_layers_pipelined_over_them(capsys):
    from book_lib import inference
    from book_lib.__main__ import main

    # DeepSeek-V3 in bf16 needs two H200 nodes: the smallest GPU count that holds it is whole nodes
    assert inference.min_chips("deepseek-v3", "h200", batch=1, context_len=4096) == 16
    one_node = inference.decode_step_time("deepseek-v3", "h200", 8, batch=64, context_len=4096)
    two_nodes = inference.decode_step_time("deepseek-v3", "h200", 16, batch=64, context_len=4096)
    assert two_nodes.stages == 2 and two_nodes.fits and not one_node.fits
    # the nodes run one after another: twice the HBM, the same streaming time, plus the sends between them
    assert two_nodes.t_kv == pytest.approx(one_node.t_kv) and two_nodes.t_send > 0
    assert two_nodes.expected_s > one_node.expected_s and two_nodes.roofline_s > one_node.roofline_s
    assert inference.prefill_time("deepseek-v3", "h200", 16, prompt_len=1024) == pytest.approx(
        inference.prefill_time("deepseek-v3", "h200", 8, prompt_len=1024)
    )
    args = ["serve", "--model", "deepseek-v3", "--chip", "h200", "--chips", "16", "--context", "4096"]
    assert main([*args, "--prompt", "1000", "--output", "200"]) == 0
    assert "(2 nodes, the layers pipelined over them)" in capsys.readouterr().out.splitlines()[0]
    with pytest.raises(ValueError, match=r"^n_chips=12: not whole h200 nodes of 8; allowed: up to 8, or a multiple"):
        inference.decode_step_time("deepseek-v3", "h200", 12, batch=1, context_len=4096)
    with pytest.raises(ValueError, match=r"^n_chips=12: no tpu-v5e slice"):  # TPUs: slices, not nodes
        inference.decode_step_time("llama-3-8b", "tpu-v5e", 12, batch=1, context_len=4096)


def test_gpu_clusters_are_counted_in_nodes():
    done = _cli(*META_405B[:-6], "--top", "1")
    assert done.returncode == 0 and "(2\u202f048 nodes of 8)" in done.stdout.splitlines()[0]


def test_the_tables_write_every_number_by_the_books_one_rule(capsys):
    """Each cell is `numfmt.fmt` with its unit, as the headline is: no Python "1,237" or fixed "6.366"."""
    from book_lib.__main__ import main
    from book_lib.numfmt import fmt

    assert main([*META_405B, "--top", "1"]) == 0
    out = capsys.readouterr().out
    yours = next(line for line in out.splitlines() if line.startswith("you "))
    step = training.step_time(
        "llama-3.1-405b", "h100", planner.Layout(tensor=8, pipeline=16, data=128, microbatches=16),
        batch_tokens=2**24, seq_len=8192, virtual_stages=2,
    )  # fmt: skip
    assert f" {fmt(step.expected_s, 's')} " in yours and f" {fmt(step.t_comms, 's')} " in yours
    assert re.search(r"(\s+\d[\d.]* [kMGT]?B){5}\s", yours)  # parameters, gradients, optimizer, activations, total
    assert main(["serve", "--model", "llama-3-8b", "--chip", "h100", "--chips", "8", "--context", "4096"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:6].strip().isdigit()]
    assert rows and not any("," in row for row in rows)
    assert any("\u202f" in row for row in rows)  # thousands split by a thin no-break space
