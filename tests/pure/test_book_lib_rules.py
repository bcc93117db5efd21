"""Rules the whole of book_lib keeps: short functions, one clear error for bad input, layers apart."""

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

import book_lib
from book_lib import collectives, models, roofline, sharding, systolic, topology, transformer

BOOK_LIB = Path(__file__).resolve().parents[2] / "book_lib"
# The base and the cost models: plain Python, no JAX (`book_lib.LAYERS`).
PURE = (*book_lib.LAYERS["base"], *book_lib.LAYERS["cost models"])


def test_no_function_is_longer_than_sixty_lines():
    long = []
    for path in sorted(BOOK_LIB.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_cost_models_import_no_jax_and_the_package_reaches_every_module():
    modules = ", ".join(PURE)
    out = _run(f"import sys, book_lib; from book_lib import {modules}; print('jax' in sys.modules, book_lib.ring)")
    assert out.startswith("False <module 'book_lib.ring'"), out


def test_importing_plots_changes_no_matplotlib_setting():
    code = "import matplotlib as m; b = dict(m.rcParams); import book_lib.plots, book_lib.model_plots; "
    code += "print(dict(m.rcParams) == b)"
    assert _run(code) == "True"


BAD = [
    # (call, the error's start): each names the argument and the value it got
    (lambda: roofline.critical_intensity("v9"), r"^chip='v9': unknown chip; closest: "),
    (lambda: roofline.critical_intensity("v5e", "fp8"), r"^dtype='fp8': tpu-v5e has no fp8 matmul peak; allowed"),
    (lambda: roofline.matmul_cost(1.5, 2, 3), r"^B=1.5: not a count"),
    (lambda: roofline.roofline_time(1.0, 1.0, 0.0, 1.0), r"^flops_per_s=0.0: not a positive"),
    (lambda: roofline.MatmulCost(flops=-1.0, bytes_in=1.0, bytes_out=1.0), r"^flops=-1.0"),
    (lambda: transformer.score_bytes("a", 4), r"^q_len='a': not a count"),
    (lambda: models.get_model("llama 9"), r"^model='llama 9': unknown model; closest: "),
    (
        lambda: transformer.TransformerConfig(
            n_layers=2, d_model=8, d_ff=8, n_heads=4, n_kv_heads=3, head_dim=2, vocab_size=8
        ),
        r"^n_kv_heads=3: does not divide",
    ),  # fmt: skip
    (lambda: transformer.attention_cost(8, 8, n_heads=0, n_kv_heads=1, head_dim=2), r"^n_heads=0"),
    (lambda: transformer.moe_critical_batch(8, 9, 1.0, 1.0), r"^experts_per_token=9"),
    (lambda: collectives.all_gather_time(1e9, 10**6, "v5e"), r"^axis_size=1000000: 1000000 chips exceed"),
    (lambda: collectives.all_gather_time(1e9, 10**6, "v5e", wraparound=True), r"^axis_size=1000000: 1000000 chips"),
    (lambda: collectives.collective_time("all_gather", 1e9, [4, 4], "v5e"), r"^axis_size=\[4, 4\]"),
    (lambda: collectives.collective_time("gather", 1e9, 4, "v5e"), r"^op='gather': unknown; closest: all_gather"),
    (lambda: collectives.all_gather_time(1e9, 4, "v5e", link="nvlink"), r"^link='nvlink'"),
    (lambda: collectives.link_load_fraction("all_gather", 2.5), r"^n_devices=2.5"),
    (lambda: topology.Slice.of("v5e", "4x4x4"), r"^shape=\(4, 4, 4\)"),
    (lambda: topology.pod("tpu-v9"), r"^chip='tpu-v9'"),
    (
        lambda: sharding.matmul_plan(
            "A[I, J_X]",
            "B[J_X, K]",
            contracting="J",
            sizes={"I": 8, "J": 8, "K": 8},
            mesh={"X": 2},
            chip="v5e",
            reduce="psum",
        ),
        r"^reduce='psum'",
    ),  # fmt: skip
    (lambda: systolic.implied_clock_hz("h100"), r"^chip='h100': no MXU figures"),
    (lambda: systolic.padded_utilization(0, 8, 128), r"^K=0: not a count"),
]


@pytest.mark.parametrize(("call", "start"), BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_input_gets_a_value_error_naming_the_argument(call, start):
    with pytest.raises(ValueError, match=start):
        call()


def test_plots_refuse_a_dtype_without_a_peak():
    from book_lib import plots

    with pytest.raises(ValueError, match=r"^dtype='fp8'"):
        plots.roofline(["v5e"], dtype="fp8")


def test_any_common_dtype_spelling_and_no_division_by_zero():
    assert roofline.critical_intensity("v5e", "BF16") == roofline.critical_intensity("v5e", "bfloat16")
    assert roofline.MatmulCost(flops=1.0, bytes_in=0.0, bytes_out=0.0).intensity == math.inf
