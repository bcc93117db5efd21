"""The chips a key draws and the constants the text computes with (`exercises.keys`)."""

from __future__ import annotations

from dataclasses import replace

from book_lib import hardware

__all__ = ["TPUS", "TPUS_2D", "TPUS_3D", "TPUS_WITH_INT8", "V5E", "text_chip", "givens"]

# What a class's variant may draw: the chips with the figures a question needs (`hardware.chip_names` filters).
TPUS = hardware.chip_names(family="tpu", since="tpu-v4")
TPUS_2D = hardware.chip_names(ici_topology="2d-torus")  # square pods: an axis wraps only at the pod's side
TPUS_3D = hardware.chip_names(ici_topology="3d-torus")  # pods of 4x4x4 cubes: every axis wraps in whole cubes
TPUS_WITH_INT8 = tuple(
    name for name in TPUS if hardware.get_chip(name).int8_ops_per_s != hardware.get_chip(name).bf16_flops_per_s
)

# The chip of the text's fixed function problems (chapters 1, 2 and 4), whose statements print its rates (`givens`).
V5E = hardware.get_chip("tpu-v5e")


def text_chip(name: str, hbm_bytes: float | None = None) -> hardware.Chip:
    """`name`'s chip with the HBM per chip a question's text computes with.

    `hbm_bytes` when given; by default the table's whole GiB read as GB of 1e9 bytes: the text's tables
    write "16GB" for a v5e and "96GB" for a v5p, where `book_lib.hardware` holds 16 and 96 GiB (what the
    chips have and JAX reports). A question graded on the text's model accepts the answer either gives
    (`also`). A chip whose HBM is no whole number of GiB comes back unchanged.
    """
    chip = hardware.get_chip(name)
    gib = chip.hbm_bytes / 2**30
    if hbm_bytes is None and gib != round(gib):
        return chip
    hbm = round(gib) * 1e9 if hbm_bytes is None else hbm_bytes
    return replace(chip, name=f"{chip.name} (the text's HBM)", hbm_bytes=hbm)


def givens(chip: str, **printed: str) -> list[tuple[str, float]]:
    """(what a statement prints, the book_lib value it must match) for each field of `chip` in `printed`.

    A function question's statement prints the rates it wants used (`GIVENS` of a keys module);
    `tests/course/test_exercises.py` checks each appears in a statement and agrees within 0.5 %.
    """
    spec = hardware.get_chip(chip)
    return [(text, getattr(spec, name)) for name, text in printed.items()]
