"""Every solution notebook also runs with float32 matmuls rounded as an accelerator rounds them.

A TPU multiplies float32 matrices in one bf16 pass by default and an Ampere or newer GPU in TF32, so a
check that passes only with exact float32 would fail for a reader on Colab. Each notebook is executed
with `book_lib.precision`'s emulation switched on through its environment variable (the kernel
inherits it); outputs are not compared, since rounding changes the printed digits, but every cell
must run and every `assert` hold.

Only bf16 runs here: TF32 keeps 10 mantissa bits to bf16's 7, so its rounding error is 8 times
smaller and a check that holds under bf16 holds under TF32 (`tests/jax/test_devices.py` checks that both
emulations round). One run per notebook instead of two keeps `make test` within its budget, and the
chapters run so in `make floor` (at the jax floor, as a one-chip runtime mixes devices), not here.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from book_lib import precision

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb"))


@pytest.mark.parametrize("kind", ["bf16"])
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_holds_under_accelerator_matmul_precision(path, kind, monkeypatch):
    monkeypatch.setenv(precision.ENV_VAR, kind)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    setup_output = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert f"round float32 operands to {kind}" in setup_output, "the kernel ran with the emulation on"
