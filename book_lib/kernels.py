"""Pallas kernels: a tiled matmul and a flash-attention forward pass, with block sizes from the chip.

How to call them (chapter 10), as JAX's own Pallas ops are called (jitted, a block-size config):

    from book_lib import kernels, tiling
    # compiled (TPU; GPU of compute capability 8.0+) or interpreted, and why
    print(kernels.backend().describe())
    # x: f32[M, K], y: f32[K, N] -> f32[M, N]
    z = kernels.matmul(x, y)
    z = kernels.matmul(
        x, y,
        block_sizes=tiling.BlockSizes(block_m=128, block_n=128, block_k=128),
    )
    # q: f32[T, H], k, v: f32[S, H] -> f32[T, H]
    o = kernels.flash_attention(q, k, v, causal=True)

The block sizes, their cost and the tolerance are pure arithmetic in `tiling` (no JAX needed):
left out, a matmul's blocks are `tiling.block_sizes(devices.current_chip(), M, N, K, dtype)` and flash
attention's `tiling.flash_block_sizes(T, S)`. The configs are static arguments: each new one compiles.

Two forms of each kernel, one per backend (`backend()`, read when a call is first traced):

* `"grid"` (TPU, and interpreted on CPU, or for bfloat16 on TPU v2/v3): the grid runs in order over its last axis,
  the contraction (or the key blocks); an f32 accumulator lives in scratch VMEM
  (`pltpu.VMEM`), is zeroed on the first step and written out on the last.
* `"loop"` (GPU, Triton): every grid cell runs at once, so each cell loops over the contraction
  itself and keeps the f32 accumulator in registers, the loop's carry.

Shapes must divide the blocks: nothing is padded, a shape that does not divide raises ValueError.
Inputs are 2-D; `jax.vmap` adds batch or head axes (it turns them into grid axes).

Tolerance: with float32 data, compared with `jnp` at `jax.default_matmul_precision("highest")`
(the kernel's dots follow the precision in force, as `jnp.dot` does), outputs agree within
`tiling.tolerance(dtype, k)`: `rtol = atol / max|ref| = eps(out dtype) + 2 eps(f32) sqrt(k)`.

Book: Part 2 (All About TPUs), "VMEM and arithmetic intensity"; Part 10 (Programming TPUs in JAX);
Part 4, Appendix A (flash attention).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from book_lib import checks, devices, tiling

__all__ = ["Backend", "backend", "matmul", "flash_attention"]


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


def backend(dtype: str = "float32") -> Backend:
    """Compiled on TPUs (Mosaic; on TPU v2 and v3 for float32 operands only) and on NVIDIA GPUs of
    compute capability 8.0 and newer (Triton); interpreted anywhere else.

    The decision is `devices.pallas_compiles(dtype)`, for `devices.single_device()`; this reads the
    device choice already made and compiles nothing. libtpu's own compiler agrees (tests/tpu).

    Args:
        dtype: the kernel's operand dtype (`"float32"`, `"bfloat16"`).
    """
    c = devices.choice()
    if devices.pallas_compiles(dtype):
        if c.single_platform == "gpu":
            reason = f"Pallas compiles for this GPU (compute capability {c.compute_capability}) via Triton"
            return Backend(platform="gpu", interpret=False, style="loop", reason=reason)
        name = devices.current_chip().name  # type: ignore[union-attr]  # pallas_compiles() found a known chip
        return Backend(platform="tpu", interpret=False, style="grid", reason=f"Pallas compiles for {name} (Mosaic)")
    if c.single_platform == "cpu":
        why = "Pallas does not compile for CPUs"
    elif c.single_platform == "gpu":
        low = ".".join(map(str, devices.MIN_PALLAS_COMPUTE_CAPABILITY))
        found = f"this one has {c.compute_capability}" if c.compute_capability else "this one is not NVIDIA's"
        why = f"Pallas compiles only for NVIDIA GPUs of compute capability {low} and newer ({found})"
    elif devices.current_chip() is not None:
        why = f"Mosaic on {devices.current_chip().name} has no {dtype} matmul"  # type: ignore[union-attr]
    else:
        why = "Pallas compiles only for the TPUs book_lib knows"
    return Backend(
        platform=c.single_platform,
        interpret=True,
        style="grid",
        reason=f"{why}, so interpret=True; timings mean nothing",
    )


def _check_blocks(blocks: object, kind: type, **sizes: int) -> None:
    """`blocks` is a `kind` config whose every side (the field named by a keyword) divides its size:
    nothing is padded."""
    if not isinstance(blocks, kind):
        name = f"tiling.{kind.__name__}"
        raise ValueError(f"block_sizes={blocks!r}: not a {name}; allowed: a {name}(...) or None")
    for name, size in sizes.items():
        side = getattr(blocks, name)
        if size % side:
            raise ValueError(f"{name}={side!r}: does not divide {size}; allowed: a divisor of {size} (no padding)")


def _check_2d(**arrays: Any) -> None:
    """Each array is 2-D, of a dtype the kernels take (`tiling.KERNEL_DTYPES`)."""
    for name, array in arrays.items():
        if getattr(array, "ndim", None) != 2:
            shape = getattr(array, "shape", None)
            raise ValueError(f"{name}.shape={shape!r}: not a matrix; allowed: a 2-D array")
        checks.dtype(str(array.dtype), f"{name}.dtype", allowed=tiling.KERNEL_DTYPES)


def _matmul_grid_kernel(
    x_ref: Any,
    y_ref: Any,
    o_ref: Any,
    acc_ref: Any,
) -> None:
    """One (i, j, kk) step: acc += x[i, kk] @ y[kk, j].

    Zero acc first, write it out last (the body chapter 10 prints: 80 columns).
    """
    kk = pl.program_id(2)

    @pl.when(kk == 0)
    def _zero() -> None:
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(
        x_ref[...],
        y_ref[...],
        preferred_element_type=jnp.float32,
    )

    @pl.when(kk == pl.num_programs(2) - 1)
    def _write() -> None:
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _matmul_loop_kernel(x_ref: Any, y_ref: Any, o_ref: Any, *, block_k: int) -> None:
    """One (i, j) cell: loop over the contraction in block_k steps, the f32 accumulator in the carry."""

    def step(kk: jax.Array, acc: jax.Array) -> jax.Array:
        x = x_ref[:, pl.ds(kk * block_k, block_k)]
        y = y_ref[pl.ds(kk * block_k, block_k), :]
        return acc + jnp.dot(x, y, preferred_element_type=jnp.float32)

    acc = jnp.zeros(o_ref.shape, jnp.float32)
    o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[1] // block_k, step, acc).astype(o_ref.dtype)


def _pallas_matmul(x: jax.Array, y: jax.Array, blocks: tiling.BlockSizes, style: str, interpret: bool) -> jax.Array:
    """pallas_call of the matmul in `style` ("grid" or "loop") with the tiles `blocks`."""
    (m, k), n = x.shape, y.shape[1]
    bm, bn, bk = blocks.block_m, blocks.block_n, blocks.block_k
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
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=params,
        interpret=interpret,
    )(x, y)


@functools.partial(jax.jit, static_argnames=("block_sizes",))
def matmul(x: jax.Array, y: jax.Array, *, block_sizes: tiling.BlockSizes | None = None) -> jax.Array:
    """X[M, K] @ Y[K, N] -> Z[M, N] (dtype of x) by a Pallas kernel, accumulating in f32; jitted.

    z[i, j] = sum over kk of x[i, kk] @ y[kk, j], one (block_m, block_n) output tile per grid cell,
    block_k of the contraction per step, from `block_sizes` (a static `tiling.BlockSizes`; None:
    `tiling.block_sizes(devices.current_chip(), M, N, K, dtype)`). Within `tiling.tolerance(dtype, K)` of
    `jnp.dot` (see the module docstring).
    Book: Part 10 (Programming TPUs in JAX); Part 2, "VMEM and arithmetic intensity".

    Raises:
        ValueError: not 2-D, dtypes or inner sizes that differ, or a block that does not divide its
            size (no padding).
    """
    _check_2d(x=x, y=y)
    if x.shape[1] != y.shape[0] or x.dtype != y.dtype:
        raise ValueError(
            f"y.shape={y.shape!r}: does not fit x.shape={x.shape!r} ({x.dtype}); allowed: y[K, N] with x's K and dtype"
        )
    (m, k), n = x.shape, y.shape[1]
    blocks = tiling.block_sizes(devices.current_chip(), m, n, k, str(x.dtype)) if block_sizes is None else block_sizes
    _check_blocks(blocks, tiling.BlockSizes, block_m=m, block_n=n, block_k=k)
    how = backend(str(x.dtype))
    return _pallas_matmul(x, y, blocks, how.style, how.interpret)


def _flash_grid_kernel(
    q_ref: Any, k_ref: Any, v_ref: Any, o_ref: Any, m_ref: Any, l_ref: Any, acc_ref: Any, *, causal: bool, offset: int
) -> None:
    """One (query block i, key block j) step of the online softmax; scratch holds m, l and the output."""
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
    q: jax.Array, k: jax.Array, v: jax.Array, blocks: tiling.FlashBlockSizes, causal: bool, style: str, interpret: bool
) -> jax.Array:
    """pallas_call of flash attention in `style` ("grid" or "loop") with the tiles `blocks`."""
    (t, h), (s, hv) = q.shape, v.shape
    bq, bk = blocks.block_q, blocks.block_k
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
    f32 = jnp.float32
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


@functools.partial(jax.jit, static_argnames=("causal", "block_sizes"))
def flash_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool = False, block_sizes: tiling.FlashBlockSizes | None = None
) -> jax.Array:
    """softmax(q k^T / sqrt(H)) v for one head by a Pallas kernel, never holding more than a
    (block_q, block_k) tile of scores; jitted.

    q: [T, H], k: [S, H], v: [S, H'] -> [T, H'] (q's dtype); with `causal`, query t sees keys
    s <= t + S - T (as `attention.naive_attention`). Per key block: m' = max(m, rowmax s),
    l' = l e^(m - m') + rowsum e^(s - m'), o' = o e^(m - m') + e^(s - m') v; finally o / l.
    The tiles are `block_sizes` (a static `tiling.FlashBlockSizes`; None: `tiling.flash_block_sizes(T, S)`,
    min(128, T) by min(128, S)). Within `tiling.tolerance(dtype, S)` of `attention.naive_attention`
    at "highest" precision.
    Book: Part 4 (Transformers), Appendix A ("How does Flash Attention work?").

    Raises:
        ValueError: not 2-D, shapes or dtypes that do not fit, causal with S < T, or a block that
            does not divide its length (no padding).
    """
    _check_2d(q=q, k=k, v=v)
    if q.shape[1] != k.shape[1] or k.shape[0] != v.shape[0] or not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"k.shape={k.shape!r}: does not fit q.shape={q.shape!r}, v.shape={v.shape!r}; "
            "allowed: q[T, H], k[S, H], v[S, H'] of one dtype"
        )
    if causal and k.shape[0] < q.shape[0]:
        raise ValueError(f"causal={causal!r}: {k.shape[0]} keys for {q.shape[0]} queries; allowed: S >= T")
    blocks = tiling.flash_block_sizes(q.shape[0], k.shape[0]) if block_sizes is None else block_sizes
    _check_blocks(blocks, tiling.FlashBlockSizes, block_q=q.shape[0], block_k=k.shape[0])
    how = backend(str(q.dtype))
    return _pallas_flash(q, k, v, blocks, bool(causal), how.style, how.interpret)
