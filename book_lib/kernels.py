"""Pallas kernels: a tiled matmul and a flash-attention forward pass, with block sizes from the chip.

How to call them (chapter 10):

    from book_lib import kernels
    print(kernels.backend().describe())   # compiled (TPU v4+, GPU) or interpreted, and why
    z = kernels.matmul(x, y)              # x: f32[M, K], y: f32[K, N] -> f32[M, N]
    o = kernels.flash_attention(q, k, v, causal=True)   # q: f32[T, H], k, v: f32[S, H] -> f32[T, H]
    sizes = kernels.block_sizes("v5e", 4096, 4096, 4096, "bf16")   # pure: no JAX needed

Two forms of each kernel, one per backend:

* `"grid"` (TPU, and interpreted on CPU or TPU v2/v3): the grid runs in order over its last axis,
  the contraction (or the key blocks); an f32 accumulator lives in scratch VMEM
  (`pltpu.VMEM`), is zeroed on the first step and written out on the last.
* `"loop"` (GPU, Triton): every grid cell runs at once, so each cell loops over the contraction
  itself and keeps the f32 accumulator in registers, the loop's carry.

Shapes must divide the blocks: nothing is padded, a shape that does not divide raises ValueError.
Inputs are 2-D; `jax.vmap` adds batch or head axes (it turns them into grid axes).

Tolerance: with float32 data, compared with `jnp` at `jax.default_matmul_precision("highest")`
(the kernel's dots follow the precision in force, as `jnp.dot` does), outputs agree within
`tolerance(dtype, k)`: `rtol = atol / max|ref| = eps(out dtype) + 2 eps(f32) sqrt(k)`; see there.

Book: Part 2 (All About TPUs), "VMEM and arithmetic intensity"; Part 10 (Programming TPUs in JAX);
Part 4, Appendix A (flash attention). Block sizes: Part 1 (Rooflines), the matmul's intensity.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from book_lib import checks, roofline
from book_lib.hardware import Chip

if TYPE_CHECKING:
    import jax

__all__ = [
    "Backend",
    "BlockSizes",
    "ITEMSIZE",
    "SCOPED_VMEM_BYTES",
    "backend",
    "block_sizes",
    "tolerance",
    "matmul",
    "flash_attention",
]

# Bytes per element of the dtypes the kernels take, by any spelling `block_sizes` accepts.
ITEMSIZE = {"float32": 4, "f32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "f16": 2}
# VMEM a TPU kernel may use when the chip's total is not in `hardware` (bytes): the 16 MiB that
# v4 and v5 cores have at least. Source: https://docs.jax.dev/en/latest/pallas/tpu/pipelining.html
SCOPED_VMEM_BYTES = 16 * 2**20
# Machine epsilon (2^-mantissa bits) of each output dtype.
_EPS = {4: 2.0**-23, 2: 2.0**-7}


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """How the kernels run here.

    Attributes:
        platform: the platform of `devices.single_device()` (`"cpu"`, `"tpu"`, `"gpu"`).
        interpret: True when Pallas interprets the kernel (plain JAX ops, slow), False when compiled.
        style: `"grid"` (sequential grid, scratch accumulator) or `"loop"` (in-kernel loop, Triton).
        reason: one sentence saying why.
    """

    platform: str
    interpret: bool
    style: str
    reason: str

    def describe(self) -> str:
        """One line for the reader."""
        how = "interpreted" if self.interpret else "compiled"
        return f"book_lib.kernels: {how} on {self.platform.upper()} ({self.style} kernels): {self.reason}"


def backend() -> Backend:
    """Compiled on TPU v4 and newer (Mosaic) and on NVIDIA GPUs of compute capability 8.0 and newer
    (Triton); interpreted anywhere else.

    The decision is `devices.pallas_compiles()`, made once for `devices.single_device()`.
    """
    from book_lib import devices

    c = devices.choice()
    if devices.pallas_compiles():
        if c.single_platform == "gpu":
            reason = f"Pallas compiles for this GPU (compute capability {c.compute_capability}) via Triton"
            return Backend(platform="gpu", interpret=False, style="loop", reason=reason)
        name = devices.chip().name  # type: ignore[union-attr]  # pallas_compiles() found a known chip
        return Backend(platform="tpu", interpret=False, style="grid", reason=f"Pallas compiles for {name} (Mosaic)")
    if c.single_platform == "cpu":
        why = "Pallas does not compile for CPUs"
    elif c.single_platform == "gpu":
        low = ".".join(map(str, devices.MIN_PALLAS_COMPUTE_CAPABILITY))
        found = f"this one has {c.compute_capability}" if c.compute_capability else "this one is not NVIDIA's"
        why = f"Pallas compiles only for NVIDIA GPUs of compute capability {low} and newer ({found})"
    else:
        why = "Pallas compiles only for TPU v4 and newer"
    return Backend(
        platform=c.single_platform,
        interpret=True,
        style="grid",
        reason=f"{why}, so interpret=True; timings mean nothing",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockSizes:
    """Tiles of a matmul kernel and what they cost.

    Attributes:
        block_m, block_n, block_k: tile sides (counts).
        footprint_bytes: on-chip memory the tiles take (bytes): two buffers of each input tile,
            two of the output tile and the f32 accumulator (TPU), or two stages of the inputs (GPU).
        budget_bytes: memory the tiles may take (bytes): VMEM or shared memory per SM.
        intensity_flops_per_byte: an output tile's FLOPs over its HBM bytes,
            `roofline.matmul_cost(block_m, k, block_n).intensity` (FLOPs/byte).
        critical_flops_per_byte: the chip's `roofline.critical_intensity` (FLOPs/byte), None without a chip.
    """

    block_m: int
    block_n: int
    block_k: int
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


def _footprint_bytes(bm: int, bn: int, bk: int, itemsize: int, gpu: bool) -> int:
    """2 (bm bk + bk bn) itemsize, plus (TPU) 2 bm bn itemsize + 4 bm bn for output and accumulator."""
    inputs = 2 * (bm * bk + bk * bn) * itemsize
    return inputs if gpu else inputs + 2 * bm * bn * itemsize + 4 * bm * bn


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


def block_sizes(chip: Chip | str | None, m: int, n: int, k: int, dtype: str = "float32") -> BlockSizes:
    """The tiles of X[m, k] @ Y[k, n] with the highest HBM intensity that fit on-chip memory.

    Tile sides are align * 2^i that divide the size (align = the MXU side on a TPU, 64 on a GPU,
    128 without a chip; a size <= align is one whole tile), at most 4 align (GPU: 2 align, the
    accumulator sits in registers). Among tiles with footprint <= budget / 2 (budget = VMEM, else
    `SCOPED_VMEM_BYTES`; GPU: shared memory per SM, else 100 KiB) it picks the largest intensity
    2 bm k bn / (itemsize (bm k + k bn + bm bn)) (`roofline.matmul_cost`), then the larger tile.
    Pure Python: no JAX import. Book: Part 2, "VMEM and arithmetic intensity"; Part 1, matmul intensity.

    Raises:
        ValueError: unknown chip or dtype; a size not a count or not a multiple of any aligned side.
    """
    chip = None if chip is None else checks.chip(chip)
    itemsize = ITEMSIZE[checks.one_of("dtype", dtype, ITEMSIZE)]
    gpu = chip is not None and not chip.is_tpu
    if chip is None:
        align, budget = 128, SCOPED_VMEM_BYTES
    elif gpu:
        align, budget = 64, chip.shared_memory_bytes_per_sm or 100 * 1024  # 100 KiB: any GPU since Volta
    else:
        align, budget = chip.mxu_size or 128, int(chip.vmem_bytes or SCOPED_VMEM_BYTES)
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
                used = _footprint_bytes(bm, bn, bk, itemsize, gpu)
                intensity = roofline.matmul_cost(bm, k, bn, itemsize, itemsize, itemsize).intensity
                key = (intensity, bm * bn * bk, bm, bn, bk)
                if used <= budget // 2 and (best is None or key > best):
                    best = key
    if best is None:
        raise ValueError(f"dtype={dtype!r}: even the smallest tiles exceed half of {budget} bytes; allowed: smaller")
    _, _, bm, bn, bk = best
    return BlockSizes(
        block_m=bm,
        block_n=bn,
        block_k=bk,
        footprint_bytes=_footprint_bytes(bm, bn, bk, itemsize, gpu),
        budget_bytes=budget,
        intensity_flops_per_byte=best[0],
        critical_flops_per_byte=None if chip is None else roofline.critical_intensity(chip),
    )


def tolerance(dtype: str, k: int) -> float:
    """Relative tolerance r for a kernel against `jnp` at "highest" precision, contraction length k.

    r = eps(out dtype) + 2 eps(f32) sqrt(k): one rounding of the output (eps = 2^-23 for f32,
    2^-7 for bf16/f16) plus f32 accumulation in another order, whose error grows like sqrt(k).
    Check with `np.testing.assert_allclose(out, ref, rtol=r, atol=r * max|ref|)`.

    Raises:
        ValueError: unknown dtype, or k not a count.
    """
    itemsize = ITEMSIZE[checks.one_of("dtype", dtype, ITEMSIZE)]
    return _EPS[itemsize] + 2 * _EPS[4] * math.sqrt(checks.count("k", k))


def _block(name: str, value: int | None, size: int, default: int) -> int:
    """The block side `value` (or `default`), checked to be a count that divides `size`."""
    side = default if value is None else checks.count(name, value)
    if size % side:
        raise ValueError(f"{name}={side!r}: does not divide {size}; allowed: a divisor of {size} (no padding)")
    return side


def _check_2d(**arrays: Any) -> None:
    for name, array in arrays.items():
        if getattr(array, "ndim", None) != 2:
            shape = getattr(array, "shape", None)
            raise ValueError(f"{name}.shape={shape!r}: not a matrix; allowed: a 2-D array")
        if str(array.dtype) not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"{name}.dtype={array.dtype!s}: not supported; allowed: float32, bfloat16, float16")


def _matmul_grid_kernel(x_ref: Any, y_ref: Any, o_ref: Any, acc_ref: Any) -> None:
    """One (i, j, kk) step: acc += x[i, kk] @ y[kk, j]; zero acc first, write it out last."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    kk = pl.program_id(2)

    @pl.when(kk == 0)
    def _zero() -> None:
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(kk == pl.num_programs(2) - 1)
    def _write() -> None:
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _matmul_loop_kernel(x_ref: Any, y_ref: Any, o_ref: Any, *, block_k: int) -> None:
    """One (i, j) cell: loop over the contraction in block_k steps, the f32 accumulator in the carry."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def step(kk: jax.Array, acc: jax.Array) -> jax.Array:
        x = x_ref[:, pl.ds(kk * block_k, block_k)]
        y = y_ref[pl.ds(kk * block_k, block_k), :]
        return acc + jnp.dot(x, y, preferred_element_type=jnp.float32)

    acc = jnp.zeros(o_ref.shape, jnp.float32)
    o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[1] // block_k, step, acc).astype(o_ref.dtype)


def _pallas_matmul(x: jax.Array, y: jax.Array, bm: int, bn: int, bk: int, style: str, interpret: bool) -> jax.Array:
    """pallas_call of the matmul in `style` ("grid" or "loop") with the given blocks."""
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    (m, k), n = x.shape, y.shape[1]
    out = jax.ShapeDtypeStruct((m, n), x.dtype)
    if style == "loop":
        return pl.pallas_call(
            functools.partial(_matmul_loop_kernel, block_k=bk),
            grid=(m // bm, n // bn),
            in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), pl.BlockSpec((k, bn), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
            out_shape=out,
            interpret=interpret,
        )(x, y)
    params = None if interpret else pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))
    return pl.pallas_call(
        _matmul_grid_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)), pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=out,
        scratch_shapes=[pltpu.VMEM((bm, bn), jax.numpy.float32)],
        compiler_params=params,
        interpret=interpret,
    )(x, y)


def matmul(
    x: jax.Array, y: jax.Array, *, block_m: int | None = None, block_n: int | None = None, block_k: int | None = None
) -> jax.Array:
    """X[M, K] @ Y[K, N] -> Z[M, N] (dtype of x) by a Pallas kernel, accumulating in f32.

    z[i, j] = sum over kk of x[i, kk] @ y[kk, j], one (block_m, block_n) output tile per grid cell,
    block_k of the contraction per step. Blocks left None come from `block_sizes` for
    `devices.chip()`. Within `tolerance(dtype, K)` of `jnp.dot` (see the module docstring).
    Book: Part 10 (Programming TPUs in JAX); Part 2, "VMEM and arithmetic intensity".

    Raises:
        ValueError: not 2-D, dtypes or inner sizes that differ, or a block that is not a count
            dividing its size (no padding).
    """
    from book_lib import devices

    _check_2d(x=x, y=y)
    if x.shape[1] != y.shape[0] or x.dtype != y.dtype:
        raise ValueError(
            f"y.shape={y.shape!r}: does not fit x.shape={x.shape!r} ({x.dtype}); allowed: y[K, N] with x's K and dtype"
        )
    (m, k), n = x.shape, y.shape[1]
    if None in (block_m, block_n, block_k):
        chosen = block_sizes(devices.chip(), m, n, k, str(x.dtype))
        block_m, block_n, block_k = (
            chosen.block_m if block_m is None else block_m,
            chosen.block_n if block_n is None else block_n,
            chosen.block_k if block_k is None else block_k,
        )
    bm, bn, bk = _block("block_m", block_m, m, 0), _block("block_n", block_n, n, 0), _block("block_k", block_k, k, 0)
    how = backend()
    return _pallas_matmul(x, y, bm, bn, bk, how.style, how.interpret)


def _flash_grid_kernel(
    q_ref: Any, k_ref: Any, v_ref: Any, o_ref: Any, m_ref: Any, l_ref: Any, acc_ref: Any, *, causal: bool, offset: int
) -> None:
    """One (query block i, key block j) step of the online softmax; scratch holds m, l and the output."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    i, j = pl.program_id(0), pl.program_id(1)
    bq, bk = q_ref.shape[0], k_ref.shape[0]

    @pl.when(j == 0)
    def _init() -> None:
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    def _step() -> None:
        m, denom, o = _online_softmax_step(q_ref[...], k_ref[...], v_ref[...], i * bq, j * bk, causal, offset,
                                           (m_ref[...], l_ref[...], acc_ref[...]))  # fmt: skip
        m_ref[...], l_ref[...], acc_ref[...] = m, denom, o

    if causal:  # skip key blocks that every query of this block is past
        pl.when(j * bk <= i * bq + bq - 1 + offset)(_step)
    else:
        _step()

    @pl.when(j == pl.num_programs(1) - 1)
    def _write() -> None:
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


def _online_softmax_step(
    q: Any, k: Any, v: Any, q_start: Any, k_start: Any, causal: bool, offset: int, carry: tuple[Any, Any, Any]
) -> tuple[Any, Any, Any]:
    """(m, l, o) after one key block: s = q k^T / sqrt(H); m' = max(m, rowmax s); p = e^(s - m');
    l' = l e^(m - m') + rowsum p; o' = o e^(m - m') + p v. m and l have shape (rows, 1)."""
    import jax
    import jax.numpy as jnp

    m, denom, o = carry
    s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    s = s / math.sqrt(q.shape[1])
    if causal:
        rows = q_start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        cols = k_start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(cols <= rows + offset, s, -jnp.inf)
    m_new = jnp.maximum(m, s.max(axis=1, keepdims=True))
    scale = jnp.exp(m - m_new)
    p = jnp.exp(s - m_new)
    o = o * scale + jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return m_new, denom * scale + p.sum(axis=1, keepdims=True), o


def _flash_loop_kernel(
    q_ref: Any, k_ref: Any, v_ref: Any, o_ref: Any, *, block_k: int, causal: bool, offset: int
) -> None:
    """One query block: loop over the key blocks it can see, (m, l, o) in the loop's carry."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    bq, q_start = q_ref.shape[0], pl.program_id(0) * q_ref.shape[0]
    n_blocks = k_ref.shape[0] // block_k
    if causal:
        n_blocks = jnp.minimum(n_blocks, (q_start + bq - 1 + offset) // block_k + 1)

    def step(j: jax.Array, carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k = k_ref[pl.ds(j * block_k, block_k), :]
        v = v_ref[pl.ds(j * block_k, block_k), :]
        return _online_softmax_step(q_ref[...], k, v, q_start, j * block_k, causal, offset, carry)

    init = (jnp.full((bq, 1), -jnp.inf, jnp.float32), jnp.zeros((bq, 1), jnp.float32),
            jnp.zeros((bq, v_ref.shape[1]), jnp.float32))  # fmt: skip
    _, denom, o = jax.lax.fori_loop(0, n_blocks, step, init)
    o_ref[...] = (o / denom).astype(o_ref.dtype)


def _pallas_flash(
    q: jax.Array, k: jax.Array, v: jax.Array, bq: int, bk: int, causal: bool, style: str, interpret: bool
) -> jax.Array:
    """pallas_call of flash attention in `style` ("grid" or "loop")."""
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    (t, h), (s, hv) = q.shape, v.shape
    out = jax.ShapeDtypeStruct((t, hv), q.dtype)
    offset = s - t
    if style == "loop":
        return pl.pallas_call(
            functools.partial(_flash_loop_kernel, block_k=bk, causal=causal, offset=offset),
            grid=(t // bq,),
            in_specs=[
                pl.BlockSpec((bq, h), lambda i: (i, 0)),
                pl.BlockSpec((s, h), lambda i: (0, 0)),
                pl.BlockSpec((s, hv), lambda i: (0, 0)),
            ],  # fmt: skip
            out_specs=pl.BlockSpec((bq, hv), lambda i: (i, 0)),
            out_shape=out,
            interpret=interpret,
        )(q, k, v)
    f32 = jax.numpy.float32
    params = None if interpret else pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))
    return pl.pallas_call(
        functools.partial(_flash_grid_kernel, causal=causal, offset=offset),
        grid=(t // bq, s // bk),
        in_specs=[
            pl.BlockSpec((bq, h), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, h), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, hv), lambda i, j: (j, 0)),
        ],  # fmt: skip
        out_specs=pl.BlockSpec((bq, hv), lambda i, j: (i, 0)),
        out_shape=out,
        scratch_shapes=[pltpu.VMEM((bq, 1), f32), pltpu.VMEM((bq, 1), f32), pltpu.VMEM((bq, hv), f32)],
        compiler_params=params,
        interpret=interpret,
    )(q, k, v)


def flash_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, *, block_q: int | None = None, block_k: int | None = None,
    causal: bool = False,
) -> jax.Array:  # fmt: skip
    """softmax(q k^T / sqrt(H)) v for one head by a Pallas kernel, never holding more than a
    (block_q, block_k) tile of scores.

    q: [T, H], k: [S, H], v: [S, H'] -> [T, H'] (q's dtype); with `causal`, query t sees keys
    s <= t + S - T (as `attention.naive_attention`). Per key block: m' = max(m, rowmax s),
    l' = l e^(m - m') + rowsum e^(s - m'), o' = o e^(m - m') + e^(s - m') v; finally o / l.
    Blocks default to min(128, T) and min(128, S). Within `tolerance(dtype, S)` of
    `attention.naive_attention` at "highest" precision.
    Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?").

    Raises:
        ValueError: not 2-D, shapes or dtypes that do not fit, causal with S < T, or a block that
            is not a count dividing its length (no padding).
    """
    _check_2d(q=q, k=k, v=v)
    if q.shape[1] != k.shape[1] or k.shape[0] != v.shape[0] or not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"k.shape={k.shape!r}: does not fit q.shape={q.shape!r}, v.shape={v.shape!r}; "
            "allowed: q[T, H], k[S, H], v[S, H'] of one dtype"
        )
    if causal and k.shape[0] < q.shape[0]:
        raise ValueError(f"causal={causal!r}: {k.shape[0]} keys for {q.shape[0]} queries; allowed: S >= T")
    bq = _block("block_q", block_q, q.shape[0], min(128, q.shape[0]))
    bk = _block("block_k", block_k, k.shape[0], min(128, k.shape[0]))
    how = backend()
    return _pallas_flash(q, k, v, bq, bk, bool(causal), how.style, how.interpret)
