"""Every program of `tpu_programs.PROGRAMS` compiled by the TPU compiler for each slice students open.

One chip's programs on all five targets; the mesh's on the four with a mesh (a v5e-1's mesh demos run on
virtual CPU devices). Each compiled program fits its chip's HBM, and runs the collectives its chapter
predicts, where the chapter predicts them.
"""

import functools
from pathlib import Path

import jax
import pytest
from tpu_programs import PROGRAMS, TPU_CHOOSES, snippet_found

from book_lib import hardware, hlo
from book_lib import tpu_aot as aot

ROOT = Path(__file__).resolve().parents[2]
BY_NAME = {p.name: p for p in PROGRAMS}
CASES = [
    pytest.param(target, program, id=f"{target}-{program.name}")
    for target, t in aot.TARGETS.items()
    for program in PROGRAMS
    if not program.mesh or t.n_devices > 1
]


@functools.cache
def compiled(target: str, name: str) -> jax.stages.Compiled:
    program = BY_NAME[name]
    with aot.compiling_for(target):
        built = program.build()
        if built.mesh is None:
            return aot.compile(built.fn, *built.args, **built.jit)
        with jax.set_mesh(built.mesh):
            return aot.compile(built.fn, *built.args, **built.jit)


def test_each_target_has_the_devices_it_says():
    for name, target in aot.TARGETS.items():
        found = aot.target_devices(name)
        assert len(found) == target.n_devices, name
        assert hardware.chip_from_device_kind(found[0].device_kind).name == target.chip, name


@pytest.mark.parametrize(("target", "program"), CASES)
def test_the_program_compiles_and_fits_the_chip(target, program):
    memory = compiled(target, program.name).memory_analysis()
    used = memory.argument_size_in_bytes + memory.output_size_in_bytes - memory.alias_size_in_bytes
    used += memory.temp_size_in_bytes
    per_device = hardware.get_chip(aot.TARGETS[target].chip).per_device().hbm_bytes
    assert 0 < used <= per_device, f"{used} bytes on a device of {per_device}"


PREDICTED = [c for c in CASES if c.values[1].mesh and (c.values[1].collectives, c.values[1].predicts) != (None, None)]


@pytest.mark.parametrize(("target", "program"), PREDICTED)
def test_the_collectives_are_the_chapters(target, program):
    """The chapter's counts, or what `TPU_CHOOSES` says the TPU compiler picks instead (and the chapter says)."""
    counts = {op: k for op, k in hlo.collective_counts(compiled(target, program.name)).items() if k}
    instead = TPU_CHOOSES.get(program.name, {})
    want = instead.get(target, instead.get("*", program.collectives))
    if want is not None:
        assert counts == want, program.name
    if program.predicts is not None:
        assert program.predicts(counts), f"{program.name}: {counts}"


def test_every_difference_from_the_chapters_is_one_the_compiler_makes():
    """No stale entry in TPU_CHOOSES: each names a predicted program and differs from the prediction."""
    by_name = {p.name: p for p in PROGRAMS}
    for name, instead in TPU_CHOOSES.items():
        assert by_name[name].collectives is not None, name
        assert all(counts != by_name[name].collectives for counts in instead.values()), name


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_the_chapter_still_builds_the_program(program):
    assert snippet_found(program, ROOT), f"chapters/{program.chapter}.ipynb no longer holds {program.snippet!r}"
