"""book_lib.published: each published run against the cost models, and the arithmetic that compares them."""

from __future__ import annotations

import dataclasses

import pytest

from book_lib import efficiency, published
from book_lib.models import get_model

CHECKS = published.check_all()
BY_NAME = {c.run.name: c for c in CHECKS}
COUNTED = [c for c in CHECKS if c.counted]


def test_the_bound_is_never_slower_than_a_published_run():
    assert all(0 < c.bound_ratio <= 1 for c in CHECKS), [(c.run.name, c.bound_ratio) for c in CHECKS]
    assert all(c.expected_s >= c.roofline_s for c in CHECKS)


def test_the_table_holds_25_training_runs_and_10_serving_figures_each_with_its_source():
    training = [c for c in CHECKS if c.run.kind != "tokens_per_s"]
    assert len(training) >= 25 and len(CHECKS) - len(training) >= 10
    assert all(c.run.source.startswith("https://") for c in CHECKS)
    # A100, H100, H800 and TPU rows, 1.7B to 1T parameters, data, FSDP, tensor, pipeline, context, expert
    chips = {published.hardware.get_chip(c.run.chip).family for c in training}
    assert chips == {"gpu", "tpu"}
    sizes = [get_model(c.run.model).param_count() for c in training]
    assert min(sizes) < 2e9 and max(sizes) > 9e11
    degrees = {name for c in training if c.layout for name in ("data", "fsdp", "tensor", "pipeline", "context",
               "expert") if getattr(c.layout, name) > 1}  # fmt: skip
    assert degrees == {"data", "fsdp", "tensor", "pipeline", "context", "expert"}


def test_most_rows_with_a_published_layout_land_within_30_percent_and_every_miss_names_its_cause():
    inside = [c for c in COUNTED if c.within_30_percent]
    # the bar: 80 % of the rows whose layout is published (55 of 67 today: every TPU row, 39 of 51 on
    # GPUs); a change that loses a row fails here
    assert len(inside) / len(COUNTED) >= 0.8, len(inside) / len(COUNTED)
    misses = [c for c in CHECKS if not c.within_30_percent]
    assert all(c.run.cause in published.CAUSES for c in misses), [c.run.name for c in misses if not c.run.cause]
    assert {c.run.cause for c in CHECKS if c.run.cause} == set(published.CAUSES), "every cause explains a row"
    # the rows without a published layout (the model card's whole runs) are reported but not counted
    assert {c.run.name for c in CHECKS if not c.counted} == {
        "Llama 3 8B, 15T tokens (model card)",
        "Llama 3 70B, 15T tokens (model card)",
    }


def test_published_times_are_the_printed_figures_converted_by_hand():
    # PaLM: at 46.2 % MFU by the paper's own count, a step of 2048 x 2048 tokens takes what its 238.3K tokens/s gives
    palm = BY_NAME["PaLM 540B, 6,144 TPU v4"]
    assert palm.published_s == pytest.approx(2048 * 2048 / 238.3e3, rel=0.01)
    # Megatron-LM 2021: eq. (3), 96 B s l h^2 (1 + s/6h + V/16lh), over 1536 GPUs at 148 TFLOP/s
    h, layers, s, v, b = 12288, 80, 2048, 51200, 2304
    flops = 96 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    assert BY_NAME["Megatron-LM 2021, 145.6B, 1,536 A100"].published_s == pytest.approx(flops / 1536 / 148e12)
    # a printed step time is the step time; tokens/s per GPU turn into one: 32 x 4096 tokens on 128 GPUs at 322
    assert BY_NAME["BLOOM 176B, 384 A100"].published_s == 104.70
    assert BY_NAME["NeMo 24.07, Nemotron-4 340B, 128 H100, fp8"].published_s == pytest.approx(32 * 4096 / 128 / 322)
    # DeepSeek-V3: 2.664M GPU hours over 2048 GPUs and 14.8T / (15360 x 4096) steps
    deepseek = BY_NAME["DeepSeek-V3, 14.8T tokens, 2,048 H800"]
    assert deepseek.published_s == pytest.approx(2.664e6 * 3600 / 2048 / (14.8e12 / (15360 * 4096)))
    # decode at batch 1: one step per token
    assert BY_NAME["Llama 2 7B, bf16, 8 A100"].published_s == pytest.approx(1 / 328.43)


def test_the_source_formulas_are_the_papers_and_an_unknown_one_is_refused():
    cfg = get_model("llama-3-70b")
    model = published.source_flops("model", cfg, batch_tokens=8192, seq_len=8192)
    assert model == pytest.approx(8192 * cfg.flops_per_token(8192, training=True, causal=True))
    # PaLM's 6N + 12 L H Q T counts attention whole; the library halves it for a causal mask
    palm = published.source_flops("palm", cfg, batch_tokens=8192, seq_len=8192)
    attention = 8192 * 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * 8192
    assert palm - 8192 * 6 * cfg.param_count() == pytest.approx(attention)
    with pytest.raises(ValueError, match=r"^flops_formula='hfu': unknown"):
        published.source_flops("hfu", cfg, batch_tokens=8192, seq_len=8192)


def test_a_bound_that_ignored_the_machine_would_be_caught():
    # the same 7B row on a machine with twice the bandwidth: the bound halves, and so does the streamed part of
    # the expected time (its per-kernel fixed cost does not move)
    row = BY_NAME["Llama 2 7B, bf16, 1 A100"].run
    faster = dataclasses.replace(row, chip=dataclasses.replace(published.GPT_FAST_A100, hbm_bytes_per_s=3.4e12))
    check, base = published.check_run(faster), BY_NAME[row.name]
    kernels = published.inference.decode_step_time("llama-2-7b", published.GPT_FAST_A100, 1, batch=1,
                                                    context_len=5).t_kernels  # fmt: skip
    assert check.roofline_s == pytest.approx(base.roofline_s / 2, rel=0.01)
    assert check.expected_s - kernels == pytest.approx((base.expected_s - kernels) / 2, rel=0.01)
    # a published figure faster than physics breaks the bound, and the check says so
    impossible = dataclasses.replace(row, published=row.published * 2)
    assert published.check_run(impossible).bound_ratio > 1


def test_no_efficiency_is_taken_from_a_published_run():
    runs = {c.run.source.split(" ")[0].split("(")[0] for c in CHECKS}
    chips = ("a100", "h100", "h200", "b200", "tpu-v5p")
    for chip in chips:
        for name, source in published.hardware.get_chip(chip).efficiency.sources:
            assert source.split(" ")[0] not in runs, (chip, name, source)
    assert set(efficiency.FIELDS) == {name for name, _ in published.hardware.get_chip("h100").efficiency.sources}


def test_check_run_refuses_what_is_not_a_published_run():
    with pytest.raises(ValueError, match=r"^run='PaLM': not a PublishedRun; allowed"):
        published.check_run("PaLM")
    with pytest.raises(ValueError, match=r"^run.kind='flops': unknown"):
        published.check_run(dataclasses.replace(published.PUBLISHED_RUNS[0], kind="flops"))
