"""book_lib.calibrate and `python -m book_lib calibrate`: the rates measured with JAX on this machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from book_lib import calibrate
from book_lib.efficiency import Calibration


@pytest.mark.slow
def test_calibrate_runs_on_a_cpu_writes_its_profile_and_files_it_under_no_other_chip(tmp_path):
    profile = tmp_path / "cpu.json"
    run = subprocess.run(
        [sys.executable, "-m", "book_lib", "calibrate", "--quick", "--output", str(profile)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "matmul_bf16_flops_per_s" in run.stdout and f"wrote {profile}" in run.stdout
    data = json.loads(profile.read_text())
    assert data["chip"] == "cpu" and data["device_kind"] == "cpu" and data["jax_version"] and data["figures"] == {}
    # a CPU's timings under the H100's name would pass for an H100's: refused, and plan refuses the CPU's profile
    named = subprocess.run(
        [sys.executable, "-m", "book_lib", "calibrate", "--quick", "--chip", "h100", "--output", str(tmp_path / "x")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert named.returncode == 2 and "error: chip='h100': this device is cpu" in named.stderr
    assert not (tmp_path / "x").exists()
    plan = [sys.executable, "-m", "book_lib", "plan", "--model", "llama-3-8b", "--chip", "h100", "--chips", "64",
            "--batch-tokens", "1M", "--seq", "4096", "--calibration", str(profile)]  # fmt: skip
    refused = subprocess.run(plan, capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "not on a h100" in refused.stderr and "--chip h100" not in refused.stderr


def test_a_profile_of_a_device_no_chip_matches_holds_rates_and_no_figures():
    profile = Calibration(chip="cpu", device_kind="cpu", date="2026-11-27", jax_version="0", figures=(),
                          rates=(("copy_bytes_per_s", 2e10), ("kernel_s", 2e-7)))  # fmt: skip
    text = calibrate.report(profile)
    assert "20 GB/s" in text and "200 ns" in text and "rates only" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    with pytest.raises(ValueError, match=r"^mode='slow': unknown"):
        calibrate.measure(mode="slow")
