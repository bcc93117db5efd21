"""Every function of book_lib that builds a jitted, shard_map or Pallas program is one that a TPU compile covers.

Found by reading book_lib's source (a call of `jax.jit`, `jax.shard_map` or `pallas_call`, or a `jax.jit`
decorator), and covered when tracing `tpu_programs.PROGRAMS` for a TPU enters it; the few that only time,
profile or export what they are handed, or compile for the host on purpose, are named with the reason.
"""

import ast
import sys
from pathlib import Path

import jax
import pytest
from tpu_programs import PROGRAMS

from book_lib import tpu_aot as aot

BOOK_LIB = Path(__file__).resolve().parents[2] / "book_lib"
BUILDERS = ("jit", "shard_map", "pallas_call")
# module.function -> why no TPU compile needs to enter it
NOT_FOR_A_TPU = {
    "answer_check.export_program": "exports a student's answer for the grader, on the CPU (a TPU compile of each reference solution: test_exercise_solutions.py)",  # noqa: E501
    "answer_check._program_problems": "compiles a student's export on the CPU, as the grader does",
    "bench.time_jitted": "times whatever program it is handed on the device at hand; the programs handed to it are in PROGRAMS",  # noqa: E501
    "bench.time_collectives": "times the four jax.lax collectives; their programs are PROGRAMS' 'timed ...'",
    "decode.generate": "runs prefill and decode_step, which PROGRAMS compile",
    "hlo.compile_on_cpu": "compiles for the host CPU on purpose (the CPU's HLO, the same on every machine)",
    "profile._compile": "compiles whatever program it is handed, to profile it on the device at hand",
    "tpu_aot.compile": "is the TPU compile itself (test_compile.py runs it on every program)",
}


def _builders() -> set[str]:
    found = set()
    for path in sorted(BOOK_LIB.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            calls = [n for n in ast.walk(node) if isinstance(n, (ast.Call, ast.Attribute, ast.Name))]
            names = {getattr(n, "attr", getattr(n, "id", None)) for n in calls}
            if names & set(BUILDERS):
                found.add(f"{path.stem}.{node.name}")
    return found


def _entered() -> set[str]:
    """book_lib's functions entered while tracing every program for a v5e-8 and a v5e-1."""
    seen = set()

    def watch(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(str(BOOK_LIB)):
            seen.add(f"{Path(frame.f_code.co_filename).stem}.{frame.f_code.co_name}")

    for target in ("v5e-8", "v5e-1"):
        with aot.compiling_for(target):
            for program in PROGRAMS:
                if program.mesh and aot.TARGETS[target].n_devices == 1:
                    continue
                sys.setprofile(watch)
                try:
                    built = program.build()
                    with jax.set_mesh(built.mesh) if built.mesh is not None else _nothing():
                        jax.jit(built.fn, **built.jit).trace(*built.args)
                finally:
                    sys.setprofile(None)
    return seen


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


@pytest.fixture(scope="module")
def entered():
    return _entered()


def test_every_program_builder_of_book_lib_is_compiled_for_a_tpu(entered):
    builders = _builders()
    assert {"kernels.matmul", "kernels._pallas_matmul", "collective_matmul._run"} <= builders, "the scan finds them"
    missed = sorted(builders - entered - set(NOT_FOR_A_TPU))
    assert not missed, f"book_lib functions that build a program no TPU compile covers: {missed}"


def test_every_exemption_names_a_builder_no_compile_enters(entered):
    builders = _builders()
    assert set(NOT_FOR_A_TPU) <= builders, sorted(set(NOT_FOR_A_TPU) - builders)
    assert not set(NOT_FOR_A_TPU) & entered, sorted(set(NOT_FOR_A_TPU) & entered)


def test_a_new_builder_nobody_compiles_is_caught(tmp_path, monkeypatch):
    """Plant one: a function that jits, in a copy of book_lib, is reported."""
    planted = tmp_path / "book_lib"
    planted.mkdir()
    (planted / "planted.py").write_text("import jax\n\ndef fresh(x):\n    return jax.jit(lambda y: y + 1)(x)\n")
    monkeypatch.setattr(sys.modules[__name__], "BOOK_LIB", planted)
    assert _builders() == {"planted.fresh"}
