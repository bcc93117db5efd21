"""book_lib.published: each published run against the cost models, and the arithmetic that compares them."""

from __future__ import annotations

import dataclasses

import pytest

from book_lib import published

CHECKS = published.check_all()
BY_NAME = {c.run.name: c for c in CHECKS}


def test_the_bound_is_never_slower_than_a_published_run():
    assert len(CHECKS) == len(published.PUBLISHED_RUNS) >= 25
    assert all(0 < c.bound_ratio <= 1 for c in CHECKS), [(c.run.name, c.bound_ratio) for c in CHECKS]
    assert all(c.expected_s >= c.roofline_s for c in CHECKS)


def test_most_rows_land_within_30_percent_and_every_row_names_its_gap_and_source():
    inside = [c for c in CHECKS if c.within_30_percent]
    assert 2 * len(inside) > len(CHECKS)
    assert all(c.run.gap and c.run.source.startswith("https://") for c in CHECKS)
    # the runs are all there: PaLM, Llama 3 405B on 8,192 and 16,384 GPUs, the model card's 8B and
    # 70B, DeepSeek-V3, gpt-fast's Llama 2 7B and 70B in bf16, int8 and int4 on 1 to 8 GPUs, and Mixtral
    names = " | ".join(BY_NAME)
    for needle in ("PaLM 540B", "8,192 H100", "16,384 H100", "Llama 3 8B", "Llama 3 70B", "DeepSeek-V3",
                   "Llama 2 7B, int4", "Llama 2 70B, int8, 8 A100", "Mixtral 8x7B"):  # fmt: skip
        assert needle in names, needle


def test_published_times_are_the_printed_figures_converted_by_hand():
    # PaLM: at 46.2 % MFU our step of 2048 x 2048 tokens takes what the paper's 238.3K tokens/s gives (to 1 %)
    palm = BY_NAME["PaLM 540B, 6,144 TPU v4"]
    assert palm.published_s == pytest.approx(2048 * 2048 / 238.3e3, rel=0.01)
    # DeepSeek-V3: 2.664M GPU hours over 2048 GPUs and 14.8T / (15360 x 4096) steps
    deepseek = BY_NAME["DeepSeek-V3, 14.8T tokens, 2,048 H800"]
    assert deepseek.published_s == pytest.approx(2.664e6 * 3600 / 2048 / (14.8e12 / (15360 * 4096)))
    # decode at batch 1: one step per token
    assert BY_NAME["Llama 2 7B, bf16, 8 A100"].published_s == pytest.approx(1 / 328.43)


def test_a_bound_that_ignored_the_machine_would_be_caught():
    # the same 7B row on a machine with twice the bandwidth: the bound still holds, the expected time moves
    row = BY_NAME["Llama 2 7B, bf16, 1 A100"].run
    faster = dataclasses.replace(row, chip=dataclasses.replace(published.GPT_FAST_A100, hbm_bytes_per_s=3.4e12))
    assert published.check_run(faster).expected_ratio == pytest.approx(BY_NAME[row.name].expected_ratio / 2, rel=0.01)
    # a published figure faster than physics breaks the bound, and the check says so
    impossible = dataclasses.replace(row, published=row.published * 2)
    assert published.check_run(impossible).bound_ratio > 1


def test_check_run_refuses_what_is_not_a_published_run():
    with pytest.raises(ValueError, match=r"^run='PaLM': not a PublishedRun; allowed"):
        published.check_run("PaLM")
    with pytest.raises(ValueError, match=r"^run.kind='flops': unknown"):
        published.check_run(dataclasses.replace(published.PUBLISHED_RUNS[0], kind="flops"))
