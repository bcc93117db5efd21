"""book_lib.calibrate and `python -m book_lib calibrate`: the rates measured with JAX on this machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from book_lib import calibrate
from book_lib.efficiency import Calibration


@pytest.mark.slow
def test_calibrate_runs_on_a_cpu_writes_a_profile_and_plan_takes_it(tmp_path):
    profile = tmp_path / "h100.json"
    run = subprocess.run(
        [sys.executable, "-m", "book_lib", "calibrate", "--quick", "--chip", "h100", "--output", str(profile)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "matmul_bf16_flops_per_s" in run.stdout and f"wrote {profile}" in run.stdout
    data = json.loads(profile.read_text())
    assert data["chip"] == "h100" and data["device_kind"] == "cpu" and data["jax_version"]
    # a CPU against the H100's datasheet: every measured fraction is tiny, and the plan's expected times grow
    assert 0 < data["figures"]["matmul"] < 0.01 and set(data["figures"]) >= {"matmul", "hbm", "attention_forward"}
    plan = [sys.executable, "-m", "book_lib", "plan", "--model", "llama-3-8b", "--chip", "h100", "--chips", "64",
            "--batch-tokens", "1M", "--seq", "4096", "--json"]  # fmt: skip
    cited, measured = (json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
                       for cmd in (plan, [*plan, "--calibration", str(profile)]))  # fmt: skip
    best = {e["scheme"]: e for e in cited["entries"]}
    for entry in measured["entries"]:
        if entry["scheme"] in best:
            assert entry["roofline_s"] == best[entry["scheme"]]["roofline_s"]
    assert measured["entries"][0]["expected_s"] > 100 * cited["entries"][0]["expected_s"]


def test_a_profile_of_a_device_no_chip_matches_holds_rates_and_no_figures():
    profile = Calibration(chip="cpu", device_kind="cpu", date="2026-11-27", jax_version="0", figures=(),
                          rates=(("copy_bytes_per_s", 2e10), ("kernel_s", 2e-7)))  # fmt: skip
    text = calibrate.report(profile)
    assert "20 GB/s" in text and "200 ns" in text and "rates only" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    with pytest.raises(ValueError, match=r"^mode='slow': unknown"):
        calibrate.measure(mode="slow")
