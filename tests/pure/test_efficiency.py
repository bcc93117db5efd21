"""book_lib.efficiency: the measured rates beside each chip, their sources, and a reader's own profile."""

from __future__ import annotations

import dataclasses
import json

import pytest

from book_lib import efficiency, inference, training
from book_lib.efficiency import Calibration, Efficiency
from book_lib.hardware import CHIPS, get_chip, with_calibration
from book_lib.parallelism import Layout

SLOW = Calibration(
    chip="h100", device_kind="NVIDIA H100 80GB HBM3", date="2026-11-27", jax_version="0.10.2",
    figures=(("matmul", 0.4), ("hbm", 0.5), ("attention_forward", 0.3), ("attention_backward", 0.2)),
    rates=(("matmul_bf16_flops_per_s", 3.96e14),),
)  # fmt: skip


def test_every_gpu_cites_a_measurement_for_each_figure_and_no_figure_claims_the_peak_without_saying_so():
    for name, chip in CHIPS.items():
        eff = chip.efficiency
        assert {n for n, _ in eff.sources} == set(efficiency.FIELDS)
        if chip.is_tpu:
            assert eff.kernel_s == 0, name  # XLA fuses a step into a few programs
            if name == "tpu-7x":  # Ironwood's own sweep: 956.4 TFLOP/s per device at 32768 cubed, of 1153.5
                assert eff.matmul == pytest.approx(956.3824592 / 1153.5) and "accelerator-microbenchmarks" in (
                    eff.source("matmul")
                )
                continue
            # XLA's 8192-cubed bf16 matmul on a v5e (JAX's Pallas guide); on other generations a stand-in, said so
            assert eff.matmul == pytest.approx(0.923, abs=1e-3), name
            assert eff.source("matmul").startswith("https://docs.jax.dev/"), name
            assert ("stands in" in eff.source("matmul")) == (name != "tpu-v5e"), name
            continue
        assert 0.6 < eff.matmul < 0.9 and eff.kernel_s > 0 and eff.overlap_slowdown > 0, name
        for figure in ("matmul", "attention_forward", "attention_backward", "kernel_s", "overlap_slowdown", "ici"):
            assert eff.source(figure).startswith("https://"), (name, figure)
    # Hopper's bf16 GEMMs run at the rate a full H200 node sustains (MSMF, 698.6 of 989 TFLOP/s), not the
    # burst best (MAMF); its fp8 GEMMs at an H200's sustained 1288.7 of 1979 (MAMF: 1491.9), on the H100 a
    # stand-in; the B200's at 1426.4 of 2250 and 2795.7 of 4500. Sustained rates live on the branch fast-mamf.
    h100 = get_chip("h100").efficiency
    assert h100.matmul_for("bf16") == pytest.approx(698.6 / 989) and h100.matmul_for("fp8") == pytest.approx(
        1288.7 / 1979
    )
    for figure in ("matmul", "matmul_fp8"):
        assert "sustained" in h100.source(figure) or "saturated" in h100.source(figure), figure
        assert "stands in" in h100.source(figure) and "stands in" not in get_chip("h200").efficiency.source(figure)
        assert "/blob/082816f9be8aeb6b65b074c33cb354a7ca1e7087/" in h100.source(figure), figure
    assert get_chip("h200").efficiency.matmul_fp8 == h100.matmul_fp8
    b200 = get_chip("b200").efficiency
    assert (b200.matmul, b200.matmul_fp8) == (pytest.approx(1426.4 / 2250), pytest.approx(2795.7 / 4500))
    assert get_chip("a100").efficiency.matmul == pytest.approx(271.2 / 312)  # no sustained A100 figure


def test_an_efficiency_outside_its_range_or_without_a_source_is_refused():
    with pytest.raises(ValueError, match=r"^matmul=1.2: not a fraction of the datasheet; allowed: 0 < matmul <= 1"):
        Efficiency(matmul=1.2)
    with pytest.raises(ValueError, match=r"^kernel_s=-1e-06: "):
        Efficiency(kernel_s=-1e-6)
    with pytest.raises(ValueError, match=r"no source for \['dcn'\]"):
        Efficiency(sources=tuple((n, "x") for n in efficiency.FIELDS if n != "dcn"))


def test_a_profile_round_trips_through_its_file_and_says_which_figures_it_measured(tmp_path):
    path = tmp_path / "h100.json"
    path.write_text(SLOW.to_json())
    assert efficiency.load_calibration(path) == SLOW
    chip = with_calibration("h100", path)
    assert chip.efficiency.measured == ("matmul", "attention_forward", "attention_backward", "hbm")
    assert chip.efficiency.matmul == 0.4 and chip.efficiency.source("matmul").startswith(
        "measured by `calibrate` on NVIDIA"
    )
    assert chip.efficiency.kernel_s == get_chip("h100").efficiency.kernel_s  # not measured: still cited
    assert chip.bf16_flops_per_s == get_chip("h100").bf16_flops_per_s  # the datasheet, and so the bound, stay


def test_a_bad_profile_is_refused_with_what_is_allowed(tmp_path):
    with pytest.raises(ValueError, match=r"^calibration='nowhere.json': no such file; allowed: a profile"):
        efficiency.load_calibration("nowhere.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match=r"not JSON"):
        efficiency.load_calibration(broken)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"chip": "h100"}))
    with pytest.raises(ValueError, match=r"missing \['device_kind', 'date', 'jax_version', 'figures'\]"):
        efficiency.load_calibration(partial)
    with pytest.raises(ValueError, match=r"^calibration='h100': a profile measured on NVIDIA H100 80GB HBM3 against"):
        with_calibration("a100", SLOW)
    # a CPU's timings filed under the H100's name (what `calibrate --chip h100` once wrote on a CPU)
    cpu_as_h100 = dataclasses.replace(SLOW, device_kind="cpu")
    with pytest.raises(ValueError, match=r"measured on cpu against h100's datasheet, not on a h100; allowed: "):
        with_calibration("h100", cpu_as_h100)


def test_a_slower_profile_makes_every_expected_time_slower_and_leaves_every_bound_alone():
    layout = Layout(data=16, tensor=8, pipeline=8, microbatches=32)
    kw = {"batch_tokens": 4 * 2**20, "seq_len": 8192}
    cited = training.step_time("llama-3-70b", "h100", layout, **kw)
    measured = training.step_time("llama-3-70b", "h100", layout, calibration=SLOW, **kw)
    assert measured.roofline_s == cited.roofline_s and measured.expected_s > 1.5 * cited.expected_s
    decode = [inference.decode_step_time("llama-3-70b", "h100", 8, batch=64, context_len=4096, calibration=c)
              for c in (None, SLOW)]  # fmt: skip
    assert decode[1].roofline_s == decode[0].roofline_s and decode[1].expected_s > 1.5 * decode[0].expected_s
    prefill = [inference.prefill_step("llama-3-70b", "h100", 8, prompt_len=4096, calibration=c) for c in (None, SLOW)]
    assert prefill[1].roofline_s == prefill[0].roofline_s and prefill[1].expected_s > 1.5 * prefill[0].expected_s


def test_each_rate_is_applied_only_to_the_system_its_source_measured():
    a100, h100, b200, v5e = (get_chip(n).efficiency for n in ("a100", "h100", "b200", "tpu-v5e"))
    # inter-node: the B200 EFA measurement stays the B200's; DGX A100 and H100 over InfiniBand have their own
    assert b200.dcn == pytest.approx(36.52 / 50) and "EFA" in b200.source("dcn")
    assert a100.dcn == pytest.approx(192 / 200) and "DGX A100" in a100.source("dcn")
    assert h100.dcn == pytest.approx(380 / 400) and "DGX H100" in h100.source("dcn")
    # attention: FlashAttention-2's own backward figure on the A100, FlashAttention-4's on the B200
    assert a100.attention_backward == pytest.approx(0.63 * 2 / 2.5) and "63%" in a100.source("attention_backward")
    assert b200.attention_forward == pytest.approx(1613 / 2250) and "2603.05451" in b200.source("attention_forward")
    assert b200.attention_backward == pytest.approx(1237 / 2250 * 2 / 2.5)
    assert b200.attention_forward != h100.attention_forward
    # the text's own v5e AllGather profile: 560 us in theory, 680 us measured
    assert v5e.ici == pytest.approx(560 / 680) and get_chip("tpu-v5p").efficiency.ici == 1.0


def test_a_matmul_runs_at_the_sweeps_rate_for_a_square_of_its_intensity():
    ironwood = get_chip("tpu-7x").efficiency
    assert ironwood.shape_factor(32768, 32768, 32768) == 1.0
    assert ironwood.shape_factor(2048, 2048, 2048) == pytest.approx(679.284728 / 956.3824592)
    # between measured sides, interpolated in log2: 2048 < 3 m n k / (m k + k n + m n) < 4096 here
    between = ironwood.shape_factor(4096, 2048, 4096)
    assert ironwood.shape_factor(2048, 2048, 2048) < between < ironwood.shape_factor(4096, 4096, 4096)
    assert ironwood.shape_factor(16, 16, 16) == pytest.approx(2.589961271 / 956.3824592)  # held at the ends
    assert get_chip("a100").efficiency.shape_factor(128, 128, 128) == 1.0  # no sweep published: the best rate
    with pytest.raises(ValueError, match=r"^matmul_sweep=\(\(2048, 0.5\), \(1024, 0.3\)\): not \(side, ratio\)"):
        Efficiency(matmul_sweep=((2048, 0.5), (1024, 0.3)))
    with pytest.raises(ValueError, match=r"^m=0: "):
        ironwood.shape_factor(0, 1, 1)


def test_a_profiles_square_matmuls_become_the_chips_sweep():
    grid = dataclasses.replace(
        SLOW, rates=(("matmul_bf16_n1024_flops_per_s", 1e14), ("matmul_bf16_n4096_flops_per_s", 4e14))
    )
    eff = with_calibration("h100", grid).efficiency
    assert eff.matmul_sweep == ((1024, pytest.approx(0.1)), (4096, pytest.approx(0.4)))
    assert eff.shape_factor(1024, 1024, 1024) == pytest.approx(0.25)
    # one side only: no sweep of the reader's, so the cited one stays
    assert with_calibration("h100", SLOW).efficiency.matmul_sweep == get_chip("h100").efficiency.matmul_sweep
