"""Kernel tiling: the block sizes of the Pallas kernels, chosen from a chip's on-chip memory, and their tolerance.

Pure Python, no JAX: the arithmetic behind `kernels` runs anywhere.

    from book_lib import tiling
    # BlockSizes(block_m=512, ...)
    blocks = tiling.block_sizes("v5e", 4096, 4096, 4096, "bf16")
    # footprint, budget, intensity
    cost = tiling.tile_cost("v5e", blocks, 4096, "bf16")
    # rtol of a kernel against jnp
    r = tiling.tolerance("fp32", 4096)

`BlockSizes` (a matmul's tiles) and `FlashBlockSizes` (flash attention's) are the configs that
`kernels.matmul(x, y, block_sizes=...)` and `kernels.flash_attention(..., block_sizes=...)` take, as
JAX's own Pallas ops take theirs; left out, they come from `block_sizes` and `flash_block_sizes`.
A dtype is a string sized by the one table `checks.DTYPES` (fp32, bf16 or fp16, any common spelling).

Book: Part 2 (All About TPUs), "VMEM and arithmetic intensity"; Part 1 (Rooflines), the matmul's
intensity; Part 10 (Programming TPUs in JAX).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from book_lib import checks, roofline
from book_lib.hardware import Chip, get_chip

__all__ = [
    "KERNEL_DTYPES",
    "SCOPED_VMEM_BYTES",
    "BlockSizes",
    "FlashBlockSizes",
    "TileCost",
    "block_sizes",
    "flash_block_sizes",
    "tile_cost",
    "tolerance",
]

# The dtypes the kernels take (canonical names of `checks.DTYPES`).
KERNEL_DTYPES = ("fp32", "bf16", "fp16")
# VMEM a TPU kernel may use when the chip's total is not in `hardware` (bytes): the 16 MiB that
# v4 and v5 cores have at least. Source: https://docs.jax.dev/en/latest/pallas/tpu/pipelining.html
SCOPED_VMEM_BYTES = 16 * 2**20
# Machine epsilon (2^-mantissa bits) of an output of each width (bytes): f32's, and bf16's for both
# 2-byte types (the coarser of bf16 and f16).
_EPS = {4: 2.0**-23, 2: 2.0**-7}
# Shared memory a GPU block may use when the chip's figure is not in `hardware` (bytes): any GPU since Volta.
_GPU_SHARED_BYTES = 100 * 1024


def _check_sides(config: BlockSizes | FlashBlockSizes) -> None:
    """Every field of a block-size config is a count (`checks.count`)."""
    for field in fields(config):
        checks.count(field.name, getattr(config, field.name))


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockSizes:
    """The tiles of `kernels.matmul` (counts): one (block_m, block_n) output tile per grid cell,
    block_k of the contraction per step. Frozen and hashable, so a jitted kernel takes it as a
    static argument; `block_sizes` gives the chip's default. Book: Part 10; Part 2, "VMEM".

    Attributes:
        block_m, block_n, block_k: tile sides (counts); each must divide its size (no padding).

    Raises:
        ValueError: a side that is not a count.
    """

    block_m: int
    block_n: int
    block_k: int

    def __post_init__(self) -> None:
        _check_sides(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashBlockSizes:
    """The tiles of `kernels.flash_attention` (counts): block_q queries per grid cell, block_k keys
    per step, so at most a (block_q, block_k) tile of scores at once. `flash_block_sizes` gives the
    default. Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?").

    Attributes:
        block_q, block_k: tile sides (counts); each must divide its length (no padding).

    Raises:
        ValueError: a side that is not a count.
    """

    block_q: int
    block_k: int

    def __post_init__(self) -> None:
        _check_sides(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class TileCost:
    """What a matmul's tiles cost on a chip (`tile_cost`).

    Attributes:
        footprint_bytes: on-chip memory the tiles take (bytes): two buffers of each input tile,
            two of the output tile and the f32 accumulator (TPU), or two stages of the inputs (GPU).
        budget_bytes: memory the tiles may take (bytes): VMEM or shared memory per SM.
        intensity_flops_per_byte: an output tile's FLOPs over its HBM bytes,
            `roofline.matmul_cost(block_m, k, block_n).intensity` (FLOPs/byte).
        critical_flops_per_byte: the chip's `roofline.critical_intensity` (FLOPs/byte), None without a chip.
    """

    footprint_bytes: int
    budget_bytes: int
    intensity_flops_per_byte: float
    critical_flops_per_byte: float | None

    @property
    def compute_bound(self) -> bool | None:
        """True when the tile's intensity reaches the chip's critical intensity; None without a chip."""
        if self.critical_flops_per_byte is None:
            return None
        return self.intensity_flops_per_byte >= self.critical_flops_per_byte


def _limits(chip: Chip | None) -> tuple[bool, int, int]:
    """(gpu, align, budget bytes): align = the MXU side on a TPU, 64 on a GPU, 128 without a chip;
    budget = VMEM (else `SCOPED_VMEM_BYTES`) or shared memory per SM (else 100 KiB)."""
    if chip is None:
        return False, 128, SCOPED_VMEM_BYTES
    if not chip.is_tpu:
        return True, 64, chip.shared_memory_bytes_per_sm or _GPU_SHARED_BYTES
    return False, chip.mxu_size or 128, int(chip.vmem_bytes or SCOPED_VMEM_BYTES)


def _footprint_bytes(bm: int, bn: int, bk: int, itemsize: int, gpu: bool) -> int:
    """2 (bm bk + bk bn) itemsize, plus (TPU) 2 bm bn itemsize + 4 bm bn for output and accumulator."""
    inputs = 2 * (bm * bk + bk * bn) * itemsize
    return inputs if gpu else inputs + 2 * bm * bn * itemsize + 4 * bm * bn


def _intensity(bm: int, bn: int, k: int, itemsize: int) -> float:
    """2 bm k bn / (itemsize (bm k + k bn + bm bn)) (FLOPs/byte): `roofline.matmul_cost`'s intensity."""
    return roofline.matmul_cost(bm, k, bn, itemsize, itemsize, itemsize).intensity


def _candidates(size: int, align: int, cap: int) -> list[int]:
    """align, 2 align, 4 align, ... up to cap that divide size; [size] when size <= align."""
    if size <= align:
        return [size]
    sides, side = [], align
    while side <= min(cap, size):
        if size % side == 0:
            sides.append(side)
        side *= 2
    return sides


def _itemsize(dtype: str) -> int:
    """Bytes per element of a kernel dtype, from `checks.DTYPES` (4 for fp32, 2 for bf16 and fp16)."""
    return int(checks.dtype_bytes(dtype, "dtype", allowed=KERNEL_DTYPES))


def block_sizes(chip: Chip | str | None, m: int, n: int, k: int, dtype: str = "fp32") -> BlockSizes:
    """The tiles of X[m, k] @ Y[k, n] with the highest HBM intensity that fit on-chip memory.

    Tile sides are align * 2^i that divide the size (align = the MXU side on a TPU, 64 on a GPU,
    128 without a chip; a size <= align is one whole tile), at most 4 align (GPU: 2 align, the
    accumulator sits in registers). Among tiles with footprint <= budget / 2 (budget = VMEM, else
    `SCOPED_VMEM_BYTES`; GPU: shared memory per SM, else 100 KiB) it picks the largest intensity
    2 bm k bn / (itemsize (bm k + k bn + bm bn)) (`roofline.matmul_cost`), then the larger tile.
    `tile_cost` gives what the chosen tiles cost. Book: Part 2, "VMEM and arithmetic intensity";
    Part 1, the matmul's intensity.

    Raises:
        ValueError: unknown chip or dtype; a size not a count or not a multiple of any aligned side.
    """
    chip = None if chip is None else get_chip(chip)
    itemsize = _itemsize(dtype)
    gpu, align, budget = _limits(chip)
    options = []
    for name, size in (("m", m), ("n", n), ("k", k)):
        sides = _candidates(checks.count(name, size), align, (2 if gpu else 4) * align)
        if not sides:
            raise ValueError(f"{name}={size!r}: no tile side divides it; allowed: <= {align} or a multiple of {align}")
        options.append(sides)
    best: tuple[float, int, int, int, int] | None = None
    for bm in options[0]:
        for bn in options[1]:
            for bk in options[2]:
                key = (_intensity(bm, bn, k, itemsize), bm * bn * bk, bm, bn, bk)
                if _footprint_bytes(bm, bn, bk, itemsize, gpu) <= budget // 2 and (best is None or key > best):
                    best = key
    if best is None:
        raise ValueError(f"dtype={dtype!r}: even the smallest tiles exceed half of {budget} bytes; allowed: smaller")
    return BlockSizes(block_m=best[2], block_n=best[3], block_k=best[4])


def tile_cost(chip: Chip | str | None, blocks: BlockSizes, k: int, dtype: str = "fp32") -> TileCost:
    """What the tiles `blocks` of a matmul with contraction k cost on `chip` (None: no chip, a TPU's floor).

    footprint = 2 (bm bk + bk bn) itemsize, plus on a TPU 2 bm bn itemsize + 4 bm bn (output buffers
    and the f32 accumulator) (bytes); budget = VMEM (else `SCOPED_VMEM_BYTES`) or a GPU's shared
    memory per SM (else 100 KiB) (bytes); intensity = 2 bm k bn / (itemsize (bm k + k bn + bm bn))
    (FLOPs/byte), against the chip's critical intensity. Book: Part 2, "VMEM and arithmetic intensity".

    Raises:
        ValueError: unknown chip or dtype, or k not a count.
    """
    chip = None if chip is None else get_chip(chip)
    itemsize = _itemsize(dtype)
    gpu, _, budget = _limits(chip)
    bm, bn, bk = blocks.block_m, blocks.block_n, blocks.block_k
    return TileCost(
        footprint_bytes=_footprint_bytes(bm, bn, bk, itemsize, gpu),
        budget_bytes=budget,
        intensity_flops_per_byte=_intensity(bm, bn, checks.count("k", k), itemsize),
        critical_flops_per_byte=None if chip is None else roofline.critical_intensity(chip),
    )


def flash_block_sizes(t: int, s: int) -> FlashBlockSizes:
    """The default tiles of flash attention over t queries and s keys: min(128, t) by min(128, s).

    Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?").

    Raises:
        ValueError: t or s not a count.
    """
    return FlashBlockSizes(block_q=min(128, checks.count("t", t)), block_k=min(128, checks.count("s", s)))


def tolerance(dtype: str, k: int) -> float:
    """Relative tolerance r for a kernel against `jnp` at "highest" precision, contraction length k.

    r = eps(out dtype) + 2 eps(f32) sqrt(k): one rounding of the output (eps = 2^-23 for f32,
    2^-7 for bf16/f16) plus f32 accumulation in another order, whose error grows like sqrt(k).
    Check with `np.testing.assert_allclose(out, ref, rtol=r, atol=r * max|ref|)`.
    Book: Part 10 (Programming TPUs in JAX).

    Raises:
        ValueError: unknown dtype, or k not a count.
    """
    return _EPS[_itemsize(dtype)] + 2 * _EPS[4] * math.sqrt(checks.count("k", k))
