"""The JAX programs the chapters and exercises run on a student's device, rebuilt to be compiled for a TPU.

Each `Program` builds, inside `tpu_aot.compiling_for(target)`, the function and the abstract arguments a
chapter runs (its shapes, its mesh of `devices.n_devices()` devices, its `book_lib` calls), and names a
line of the chapter that must still be there (`snippet`), so that a chapter that changes its program
shows here. `collectives`: what the chapter predicts the compiled program runs, where it says.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from book_lib import (
    attention,
    bench,
    collective_matmul,
    decode,
    devices,
    kernels,
    ring,
    sharded_training,
    tiling,
    transformer,
)
from book_lib import tpu_aot as aot
from book_lib.parallelism import Layout

f32, bf16 = jnp.float32, jnp.bfloat16


@dataclass(frozen=True)
class Built:
    """A program's function and arguments (`tpu_aot.placed` structs), the mesh it is traced under."""

    fn: Callable
    args: tuple
    mesh: Any = None
    jit: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Program:
    name: str
    chapter: str  # the notebook (chapters/<chapter>.ipynb or exercises/source/<chapter>/...)
    snippet: str  # a line of it that builds this program
    build: Callable[[], Built]
    mesh: bool = False  # runs on the mesh demos' devices, not on one chip
    collectives: dict[str, int] | None = None  # the chapter's prediction, where it makes one
    predicts: Callable[[dict[str, int]], bool] | None = None  # the chapter's own asserts on the counts


# Where the TPU compiler chooses otherwise than the CPU's, and the chapter says so: target ("*": every
# one) -> the collectives the TPU program runs instead. A ReduceScatter of a few KiB per device becomes
# an AllReduce and a slice (one latency-bound collective; on a v5e from about 512 KiB per device it
# stays a ReduceScatter, and v2 keeps the AllReduce); a v5p's 2x2 mesh gathers case 4's operand in two
# steps (an AllGather and a collective-permute).
TPU_CHOOSES = {
    "psum_scatter": {"*": {"all-reduce": 1}},
    "gradient of a gather": {"*": {"all-reduce": 1}},
    "sharded MLP": {"*": {"all-reduce": 1}},
    "matmul then ReduceScatter": {"v2-8": {"all-reduce": 1}},
    "matmul case 4": {"v5p-8": {"all-gather": 1, "collective-permute": 1}},
}


def _mesh(shape: tuple[int, ...], names: tuple[str, ...], axis_types: str = "explicit") -> Any:
    return devices.make_mesh(shape, names, axis_types=axis_types)


def _on(mesh: Any, shape: tuple[int, ...], spec: Any, dtype: Any = f32) -> jax.ShapeDtypeStruct:
    return aot.placed(shape, dtype, mesh, spec)


# ----- one chip -------------------------------------------------------------------------------------


def _kernel_matmul(side: int, blocks: tiling.BlockSizes | None) -> Built:
    x = aot.placed((side, side), f32)  # chapter 10: blocks from tiling for this chip unless given
    return Built(functools.partial(kernels.matmul, block_sizes=blocks), (x, x))


def _kernel_flash() -> Built:
    T, S, H, block = 256, 512, 64, 128
    sizes = tiling.FlashBlockSizes(block_q=block, block_k=block)
    args = (aot.placed((T, H), f32), aot.placed((S, H), f32), aot.placed((S, H), f32))
    return Built(functools.partial(kernels.flash_attention, causal=True, block_sizes=sizes), args)


def _ch10_pallas_matmul() -> Built:
    from jax.experimental import pallas as pl

    def matmul_kernel(a_ref: Any, b_ref: Any, out_ref: Any) -> None:
        @pl.when(pl.program_id(2) == 0)
        def _() -> None:
            out_ref[...] = jnp.zeros_like(out_ref)

        out_ref[...] += a_ref[...] @ b_ref[...]

    how = kernels.backend()
    sequential_grid = how.style == "grid" and not how.interpret

    def pallas_matmul(a: Any, b: Any, bm: int = 128, bk: int = 128, bn: int = 128) -> Any:
        (m, k), n_cols = a.shape, b.shape[1]
        return pl.pallas_call(
            matmul_kernel,
            grid=(m // bm, n_cols // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, s: (i, s)), pl.BlockSpec((bk, bn), lambda i, j, s: (s, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, s: (i, j)),
            out_shape=jax.ShapeDtypeStruct((m, n_cols), a.dtype),
            interpret=not sequential_grid,
        )(a, b)

    a = aot.placed((256, 512), f32)
    return Built(pallas_matmul, (a, aot.placed((512, 256), f32)))


def _ch09_multiply() -> Built:
    return Built(lambda x, y: jnp.einsum("ij,jk->ki", x, y), (aot.placed((64, 128), f32), aot.placed((128, 32), bf16)))


CH09_TINY = transformer.TransformerConfig(
    n_layers=2, d_model=128, d_ff=384, n_heads=4, n_kv_heads=2, head_dim=32, vocab_size=256
)


def _layer_structs(config: transformer.TransformerConfig, mesh: Any = None, dtype: Any = f32) -> list[dict]:
    shapes = jax.eval_shape(lambda k: attention.init_layer(config, k), jax.random.key(0))
    return [{k: aot.placed(v.shape, dtype, mesh) for k, v in shapes.items()} for _ in range(config.n_layers)]


def _ch09_step(remat: str) -> Built:
    step = jax.value_and_grad(lambda ws, x: attention.stack_loss(ws, x, CH09_TINY, remat=remat))
    return Built(step, (_layer_structs(CH09_TINY), aot.placed((128, CH09_TINY.d_model), f32)))


def _ch09_scoped_mlp() -> Built:
    def scoped_mlp(x: Any, w_up: Any, w_down: Any) -> Any:
        with jax.named_scope("mlp_up"):
            h = jax.nn.gelu(x @ w_up)
        with jax.named_scope("mlp_down"):
            return h @ w_down

    d, f = CH09_TINY.d_model, CH09_TINY.d_ff
    return Built(scoped_mlp, (aot.placed((128, d), f32), aot.placed((d, f), f32), aot.placed((f, d), f32)))


CH07_TINY = transformer.TransformerConfig(
    n_layers=4, d_model=256, d_ff=768, n_heads=8, n_kv_heads=2, head_dim=32, vocab_size=2048
)
CH07_BATCH, CH07_PROMPT, CH07_NEW = 4, 48, 16


def _structs(tree: Any) -> Any:
    return jax.tree.map(lambda v: aot.placed(v.shape, v.dtype), tree)


def _ch07_params(int8: bool = False) -> Any:
    def make(key: Any) -> Any:
        params = decode.init_model(CH07_TINY, key)
        return decode.quantize_int8(params) if int8 else params

    return _structs(jax.eval_shape(make, jax.random.key(0)))


def _ch07_cache() -> Any:
    return _structs(jax.eval_shape(lambda: decode.init_cache(CH07_TINY, CH07_BATCH, CH07_PROMPT + CH07_NEW)))


def _ch07_prefill() -> Built:
    prompt = aot.placed((CH07_BATCH, CH07_PROMPT), jnp.int32)
    return Built(functools.partial(decode.prefill, config=CH07_TINY), (_ch07_params(), prompt, _ch07_cache()))


def _ch07_decode(int8: bool) -> Built:
    token, pos = aot.placed((CH07_BATCH,), jnp.int32), aot.placed((), jnp.int32)
    step = functools.partial(decode.decode_step, config=CH07_TINY)
    return Built(step, (_ch07_params(int8), _ch07_cache(), token, pos), jit={"donate_argnums": 1})


def _ch07_forward() -> Built:
    tokens = aot.placed((CH07_BATCH, CH07_PROMPT + CH07_NEW), jnp.int32)
    return Built(functools.partial(decode.forward, config=CH07_TINY), (_ch07_params(), tokens))


def _peaks_matmul() -> Built:  # bench.measure_peaks and time_matmul: jnp.matmul on the chip
    return Built(jnp.matmul, (aot.placed((2048, 2048), f32), aot.placed((2048, 2048), f32)))


# ----- the mesh ---------------------------------------------------------------------------------------


def _ch02_ring() -> Built:
    n = devices.n_devices()
    ring_pairs = [(i, (i + 1) % n) for i in range(n)]
    step = jax.shard_map(
        lambda block: jax.lax.ppermute(block, "X", ring_pairs), in_specs=jax.P("X"), out_specs=jax.P("X")
    )
    mesh = _mesh((n,), ("X",))
    return Built(step, (_on(mesh, (2 * n, 4), jax.P("X")),), mesh)


CH03_SIZES = {"I": 256, "J": 1024, "K": 512}
CH03_CASES = {
    1: ("A[I_X, J]", "B[J, K_Y]"),
    2: ("A[I, J_X]", "B[J, K]"),
    3: ("A[I, J_X]", "B[J_X, K]"),
    4: ("A[I_X, J]", "B[J, K_X]"),
}


def _ch03_case(case: int) -> Built:
    mesh = _mesh(devices.mesh_shape(2), ("X", "Y"), axis_types="auto")
    lhs, rhs = CH03_CASES[case]
    s = CH03_SIZES
    a = _on(mesh, (s["I"], s["J"]), ring.partition_spec(lhs))
    b = _on(mesh, (s["J"], s["K"]), ring.partition_spec(rhs))
    return Built(jnp.matmul, (a, b), mesh)


def _ring_program(body: Callable, out_spec: Any = None, rows_per_device: int | None = None) -> Built:
    n = devices.n_devices()
    mesh = _mesh((n,), ("X",))
    fn = jax.shard_map(body, in_specs=jax.P("X"), out_specs=jax.P() if out_spec is None else out_spec, check_vma=False)
    rows = n * 4 if rows_per_device is None else n * rows_per_device
    return Built(fn, (_on(mesh, (rows, 8), jax.P("X")),), mesh)


def _ch03_scatter_product() -> Built:
    n = devices.n_devices()
    mesh = _mesh((n,), ("X",))

    def scatter_product(a_block: Any, b_block: Any) -> Any:
        return jax.lax.psum_scatter(a_block @ b_block, "X", scatter_dimension=1, tiled=True)

    fn = jax.shard_map(scatter_product, in_specs=(jax.P(None, "X"), jax.P("X", None)), out_specs=jax.P(None, "X"))
    s = CH03_SIZES
    return Built(
        fn, (_on(mesh, (s["I"], s["J"]), jax.P(None, "X")), _on(mesh, (s["J"], s["K"]), jax.P("X", None))), mesh
    )


def _ch03_cut_output() -> Built:
    mesh = _mesh(devices.mesh_shape(2), ("X", "Y"))
    n = devices.n_devices()
    dims = {"I": 16 * n, "J": 8 * n}
    a = _on(mesh, (dims["I"], dims["J"]), jax.P(None, "X"))
    w = _on(mesh, (dims["J"], 4 * n), jax.P("X", None))
    return Built(lambda x, y: jnp.matmul(x, y, out_sharding=jax.P(None, "X")), (a, w), mesh)


def _ch03_gathered_grad() -> Built:
    n = devices.n_devices()
    mesh = _mesh((n,), ("X",))

    def gathered_loss(block: Any, weights: Any) -> Any:
        return (jax.lax.all_gather(block, "X", tiled=True) * weights).sum()

    fn = jax.shard_map(jax.grad(gathered_loss), in_specs=(jax.P("X"), jax.P("X")), out_specs=jax.P("X"))
    return Built(fn, (_on(mesh, (n * 4, 8), jax.P("X")), _on(mesh, (n * n * 4, 8), jax.P("X"))), mesh)


def _ch03_bench_collective(op: str) -> Built:  # bench.time_collectives: one of jax.lax's four, 1 MiB of f32
    n = devices.n_devices()
    mesh = _mesh((n,), ("X",))
    spec = jax.P("X")
    out = jax.P() if op in ("all_gather", "all_reduce") else spec
    fn = jax.shard_map(bench._lax_collective(op, "X"), mesh=mesh, in_specs=spec, out_specs=out, check_vma=False)
    per_device = max(2**20 // 4 // n // n * n, n)
    return Built(fn, (_on(mesh, (n * per_device,), spec),), mesh)


# Chapter 5's schemes: `stack_loss` of its cell 15, on a (data, model) mesh; L, B, D, F of its cell 14.
def _ch05_scheme(shape_of: Callable[[int], tuple[int, int]], act: Any, w_in: Any, w_out: Any) -> Built:
    n = devices.n_devices()
    L, B, D, F = 2, 12 * n, 4 * n, 16 * n
    mesh = _mesh(shape_of(n), ("data", "model"))

    def gathered(spec: Any, axis: str) -> Any:
        return jax.P(*(None if part == axis else part for part in spec))

    def unsharded(w: Any, axis: str = "data") -> Any:
        return jax.sharding.reshard(w, gathered(jax.typeof(w).sharding.spec, axis))

    def stack_loss(params: Any, x: Any) -> Any:
        h = x
        for a, b in params:
            a, b = unsharded(a), unsharded(b)
            tmp = jax.nn.relu(jax.sharding.reshard(h, gathered(act, "model")) @ a)
            h = h + jnp.matmul(tmp, b, out_sharding=act)
        return jnp.mean(h**2)

    params = [(_on(mesh, (D, F), w_in), _on(mesh, (F, D), w_out)) for _ in range(L)]
    return Built(jax.value_and_grad(stack_loss), (params, _on(mesh, (B, D), act)), mesh)


# Chapter 13 compiles `sharded_training.DEEP_NARROW` itself (3 to 9 s a layout); this smaller model
# is the same program, for every slice's own mesh.
CH13_SMALL = transformer.TransformerConfig(
    n_layers=4, d_model=128, d_ff=256, n_heads=4, n_kv_heads=2, head_dim=32, vocab_size=512
)


def _ch13_step() -> Built:
    n = devices.n_devices()
    layout = Layout(fsdp=n // 2, tensor=2)
    fn, args, jit = sharded_training.program(CH13_SMALL, layout, batch=n, seq_len=64)
    return Built(fn, args, sharded_training.mesh_for(layout), jit)


def _ch05_pipeline() -> Built:
    S, M, L = 2, 4, 4
    n = devices.n_devices()
    B, D, F = 12 * n, 4 * n, 16 * n
    mesh = _mesh((S,), ("stage",))

    def layers(h: Any, w_in: Any, w_out: Any) -> Any:
        for i in range(w_in.shape[0]):
            h = h + jax.nn.relu(h @ w_in[i]) @ w_out[i]
        return h

    def pipelined_loss(w_in: Any, w_out: Any, micro: Any) -> Any:
        stage = jax.lax.axis_index("stage")
        carry, total = jnp.zeros_like(micro[0]), 0.0
        pairs = [(i, i + 1) for i in range(S - 1)]
        for t in range(M + S - 1):
            h = jnp.where(stage == 0, micro[min(t, M - 1)], carry)
            out = layers(h, w_in, w_out)
            if t >= S - 1:
                total = total + jnp.where(stage == S - 1, jnp.sum(out**2), 0.0)
            if t < M + S - 2:
                carry = jax.lax.ppermute(out, "stage", pairs)
        return jax.lax.psum(total, "stage") / (B * D)

    fn = jax.shard_map(pipelined_loss, mesh=mesh, in_specs=(jax.P("stage"), jax.P("stage"), jax.P()), out_specs=jax.P())
    args = (
        _on(mesh, (L, D, F), jax.P("stage")),
        _on(mesh, (L, F, D), jax.P("stage")),
        _on(mesh, (M, B // M, D), jax.P()),
    )
    return Built(jax.value_and_grad(fn, argnums=(0, 1)), args, mesh)


def _ch09_mlp() -> Built:
    nx, ny = devices.mesh_shape(2)
    mesh = _mesh((nx, ny), ("X", "Y"))
    b, t, d, f = 2 * nx, 64, 64 * ny, 256 * ny

    def mlp_block(x_blk: Any, w_in_blk: Any, w_out_blk: Any) -> Any:
        partial = jax.nn.gelu(x_blk @ w_in_blk) @ w_out_blk
        return jax.lax.psum_scatter(partial, "Y", scatter_dimension=2, tiled=True)

    specs = (jax.P("X", None, None), jax.P(None, "Y"), jax.P("Y", None))
    fn = jax.shard_map(mlp_block, in_specs=specs, out_specs=jax.P("X", None, "Y"))
    args = tuple(_on(mesh, s, p) for s, p in zip([(b, t, d), (d, f), (f, d)], specs, strict=True))
    return Built(fn, args, mesh)


def _ch10_square_matmul(typed: bool) -> Built:
    n = devices.n_devices()
    B, D, F = 2 * n, 16 * n, 32 * n
    mesh = _mesh(devices.mesh_shape(2), ("X", "Y"), axis_types="explicit" if typed else "auto")
    if typed:
        fn, jit = (lambda x, w: jnp.einsum("bd,df->bf", jnp.square(x), w, out_sharding=jax.P("X", None))), {}
    else:
        fn = lambda x, w: jnp.einsum("bd,df->bf", jnp.square(x), w)  # noqa: E731
        jit = {"out_shardings": jax.NamedSharding(mesh, jax.P("X", None))}
    return Built(fn, (_on(mesh, (B, D), jax.P("X", "Y")), _on(mesh, (D, F), jax.P("Y", None))), mesh, jit)


def _ch10_mlp(hidden_spec: Any, resharded: bool = False) -> Built:
    n = devices.n_devices()
    B, D, F = 2 * n, 16 * n, 32 * n
    mesh = _mesh(devices.mesh_shape(2), ("X", "Y"), axis_types="explicit" if resharded else "auto")

    def mlp(x: Any, w1: Any, w2: Any) -> Any:
        hidden = x @ w1
        if resharded:
            hidden = jax.sharding.reshard(hidden, jax.P("X", None))
        elif hidden_spec is not None:
            hidden = jax.lax.with_sharding_constraint(hidden, hidden_spec)
        return hidden @ w2

    specs = (jax.P("X"), jax.P(None, "Y"), jax.P("Y"))
    args = tuple(_on(mesh, s, p) for s, p in zip([(B, D), (D, F), (F, D)], specs, strict=True))
    return Built(mlp, args, mesh)


def _ch10_head_mean() -> Built:
    n = devices.n_devices()
    mesh = _mesh(devices.mesh_shape(2), ("X", "Y"))
    fn = jax.shard_map(
        lambda block: jax.lax.pmean(block[:4], axis_name=("X", "Y")), in_specs=jax.P(("X", "Y")), out_specs=jax.P()
    )
    return Built(fn, (_on(mesh, (64 * n,), jax.P(("X", "Y"))),), mesh)


def _ch10_three_collectives() -> Built:
    n = devices.n_devices()
    mesh = _mesh((n,), ("X",))
    to_the_right = [(i, (i + 1) % n) for i in range(n)]

    def three_collectives(block: Any) -> Any:
        total = jax.lax.psum(block, "X")
        everything = jax.lax.all_gather(block, "X", tiled=True, to="invarying")
        return total, everything, jax.lax.ppermute(block, "X", perm=to_the_right)

    fn = jax.shard_map(three_collectives, in_specs=jax.P("X"), out_specs=(jax.P(), jax.P(), jax.P("X")))
    return Built(fn, (_on(mesh, (2 * n,), jax.P("X")),), mesh)


def _ch10_collective_matmul(name: str) -> Built:
    n = devices.n_devices()
    x_size, y_size = devices.mesh_shape(2)
    mesh = _mesh((min(x_size, y_size), max(x_size, y_size)), ("X", "Y"))
    Bc, Dc, Fc = 16 * n, 64 * n, 64 * n
    fn = functools.partial(getattr(collective_matmul, name), mesh=mesh, batch_axis="X")
    return Built(fn, (_on(mesh, (Bc, Dc), jax.P()), _on(mesh, (Dc, Fc), jax.P())), mesh)  # host arrays: replicated


P = Program
PROGRAMS: tuple[Program, ...] = (
    # one chip: what a v5e-1's TPU runs (the mesh demos run on virtual CPU devices beside it)
    P(
        "kernel matmul, tiling's blocks",
        "10_jax",
        "kernel_time = bench.time_jitted(kernels.matmul, x_t, y_t)",
        lambda: _kernel_matmul(4096, None),
    ),
    P(
        "kernel matmul, 128 blocks",
        "10_jax",
        "kernels.matmul(a_host, b_host, block_sizes=blocks)",
        lambda: _kernel_matmul(512, tiling.BlockSizes(block_m=128, block_n=128, block_k=128)),
    ),
    P("flash attention", "10_jax", "flash = np.asarray(kernels.flash_attention(q, k, v, causal=True,", _kernel_flash),
    P("pallas_matmul by hand", "10_jax", "def pallas_matmul(a, b, bm=128, bk=128, bn=128):", _ch10_pallas_matmul),
    P("einsum f32 x bf16", "09_profiling", 'return jnp.einsum("ij,jk->ki", x, y)', _ch09_multiply),
    P("Transformer step", "09_profiling", "attention.stack_loss(ws, x, tiny)", lambda: _ch09_step("none")),
    P(
        "Transformer step, remat",
        "09_profiling",
        'attention.stack_loss(layers, x, tiny, remat="full")',
        lambda: _ch09_step("full"),
    ),
    P("scoped MLP", "09_profiling", "def scoped_mlp(x, w_up, w_down):", _ch09_scoped_mlp),
    P("prefill", "07_inference", "prefill = jax.jit(decode.prefill, static_argnums=3)", _ch07_prefill),
    P(
        "decode step",
        "07_inference",
        "step = jax.jit(decode.decode_step, static_argnums=4, donate_argnums=1)",
        lambda: _ch07_decode(False),
    ),
    P(
        "decode step, int8 weights",
        "07_inference",
        "q_params = decode.quantize_int8(params)",
        lambda: _ch07_decode(True),
    ),
    P("forward", "07_inference", "forward = jax.jit(decode.forward, static_argnums=2)", _ch07_forward),
    P("peak matmul", "07_inference", "peaks = bench.measure_peaks(device, jnp.float32)", _peaks_matmul),
    # the mesh: what a slice of 4 or 8 devices runs
    P(
        "ring of ppermutes",
        "02_tpus",
        'step = jax.jit(jax.shard_map(lambda block: jax.lax.ppermute(block, "X", ring),',
        _ch02_ring,
        True,
        {"collective-permute": 1},
    ),
    P("matmul case 1", "03_sharding", "_, compiled, layout = compile_case(*CASES[1])", lambda: _ch03_case(1), True, {}),
    P(
        "matmul case 2",
        "03_sharding",
        "_, compiled, layout = compile_case(*CASES[2])",
        lambda: _ch03_case(2),
        True,
        {"all-gather": 1},
    ),
    P(
        "matmul case 3",
        "03_sharding",
        'CASES = {1: ("A[I_X, J]", "B[J, K_Y]"), 2: ("A[I, J_X]", "B[J, K]"),',
        lambda: _ch03_case(3),
        True,
    ),
    P(
        "matmul case 4",
        "03_sharding",
        "_, compiled, layout = compile_case(*CASES[4])",
        lambda: _ch03_case(4),
        True,
        {"all-gather": 1},
    ),
    P(
        "AllGather by hand",
        "03_sharding",
        'gather_mine = on_ring(lambda block: ring.all_gather(block, "X"))',
        lambda: _ring_program(lambda b: ring.all_gather(b, "X")),
        True,
    ),
    P(
        "AllGather by hand, both ways",
        "03_sharding",
        'ring.all_gather(b, "X", bidirectional=True)',
        lambda: _ring_program(lambda b: ring.all_gather(b, "X", bidirectional=True)),
        True,
    ),
    P(
        "all_gather",
        "03_sharding",
        'jax.lax.all_gather(block, "X", tiled=True))',
        lambda: _ring_program(lambda b: jax.lax.all_gather(b, "X", tiled=True)),
        True,
        {"all-gather": 1},
    ),
    P(
        "ReduceScatter by hand",
        "03_sharding",
        'lambda b: ring.reduce_scatter(b, "X"), cut),',
        lambda: _ring_program(lambda b: ring.reduce_scatter(b, "X"), jax.P("X"), 4 * 8),
        True,
    ),
    P(
        "psum_scatter",
        "03_sharding",
        'lambda b: jax.lax.psum_scatter(b, "X", tiled=True), cut),',
        lambda: _ring_program(lambda b: jax.lax.psum_scatter(b, "X", tiled=True), jax.P("X"), 4 * 8),
        True,
        {"reduce-scatter": 1},
    ),
    P(
        "AllReduce by hand",
        "03_sharding",
        '"AllReduce by hand": on_ring(lambda b: ring.all_reduce(b, "X")),',
        lambda: _ring_program(lambda b: ring.all_reduce(b, "X"), jax.P(), 4 * 8),
        True,
    ),
    P(
        "psum",
        "03_sharding",
        '"psum": on_ring(lambda b: jax.lax.psum(b, "X")),',
        lambda: _ring_program(lambda b: jax.lax.psum(b, "X"), jax.P(), 4 * 8),
        True,
        {"all-reduce": 1},
    ),
    P(
        "matmul then ReduceScatter",
        "03_sharding",
        'return jax.lax.psum_scatter(a_block @ b_block, "X", scatter_dimension=1,',
        _ch03_scatter_product,
        True,
        {"reduce-scatter": 1},
    ),
    P(
        "matmul with a cut output",
        "03_sharding",
        'cut_output = lambda x, y: jnp.matmul(x, y, out_sharding=jax.P(None, "X"))',
        _ch03_cut_output,
        True,
    ),
    P(
        "gradient of a gather",
        "03_sharding",
        "def gathered_loss(block, weights):",
        _ch03_gathered_grad,
        True,
        {"reduce-scatter": 1},
    ),
    *(
        P(
            f"timed {op}",
            "03_sharding",
            "sweep = {v: bench.time_collectives(v, ring_mesh)",
            functools.partial(_ch03_bench_collective, op),
            True,
        )
        for op in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")
    ),
    P(
        "data parallel step",
        "05_training",
        'dp = train_step((n, 1), act=jax.P("data", None), w_in=jax.P(), w_out=jax.P())',
        lambda: _ch05_scheme(lambda n: (n, 1), jax.P("data", None), jax.P(), jax.P()),
        True,
        predicts=lambda c: "all-gather" not in c and "all-reduce" in c,
    ),
    P(
        "FSDP step",
        "05_training",
        'w_in=jax.P("data", None), w_out=jax.P(None, "data"))',
        lambda: _ch05_scheme(lambda n: (n, 1), jax.P("data", None), jax.P("data", None), jax.P(None, "data")),
        True,
        predicts=lambda c: c.get("all-gather", 0) >= 4,
    ),
    P(
        "tensor parallel step",
        "05_training",
        'tp = train_step((1, n), act=jax.P(None, "model"),',
        lambda: _ch05_scheme(lambda n: (1, n), jax.P(None, "model"), jax.P(None, "model"), jax.P("model", None)),
        True,
        predicts=lambda c: "all-gather" in c,
    ),
    P(
        "FSDP and tensor step",
        "05_training",
        'w_in=jax.P("data", "model"), w_out=jax.P("model", "data"))',
        lambda: _ch05_scheme(
            lambda n: devices.mesh_shape(2), jax.P("data", "model"), jax.P("data", "model"), jax.P("model", "data")
        ),
        True,
        predicts=lambda c: "all-gather" in c,
    ),
    P(
        "pipeline step",
        "05_training",
        "grad_fn = jax.jit(jax.value_and_grad(pipe_fn, argnums=(0, 1)))",
        _ch05_pipeline,
        True,
        {"collective-permute": 8, "all-reduce": 1},
    ),
    P(
        "sharded MLP",
        "09_profiling",
        "mlp = jax.jit(jax.shard_map(mlp_block, in_specs=specs,",
        _ch09_mlp,
        True,
        {"reduce-scatter": 1},
    ),
    P("square matmul, typed", "10_jax", "def square_matmul_typed(x, w):", lambda: _ch10_square_matmul(True), True),
    P(
        "square matmul, auto",
        "10_jax",
        'chosen = jax.jit(square_matmul, out_shardings=jax.P("X", None)',
        lambda: _ch10_square_matmul(False),
        True,
    ),
    *(
        P(
            f"MLP, hidden pinned to {spec}",
            "10_jax",
            "pin = functools.partial(mlp, hidden_spec=spec)",
            functools.partial(_ch10_mlp, spec),
            True,
        )
        for spec in (None, jax.P("X", "Y"), jax.P("X", None))
    ),
    P(
        "MLP, resharded",
        "10_jax",
        "resharded = jax.jit(mlp_resharded).lower(*args).compile()",
        lambda: _ch10_mlp(None, True),
        True,
    ),
    P(
        "sharded Transformer step",
        "13_published_runs",
        "sharded_training.against_compiler(model, target, layout, batch=BATCH,",
        _ch13_step,
        True,
    ),
    P("head mean", "10_jax", 'return jax.lax.pmean(block[:keep], axis_name=("X", "Y"))', _ch10_head_mean, True),
    P("three collectives", "10_jax", "def three_collectives(block):", _ch10_three_collectives, True),
    *(
        P(
            f"collective matmul: {name}",
            "10_jax",
            "collective_matmul",
            functools.partial(_ch10_collective_matmul, name),
            True,
        )
        for name in (
            "allgather_matmul",
            "allgather_matmul_blocking",
            "matmul_reducescatter",
            "matmul_reducescatter_blocking",
        )
    ),
)


def snippet_found(program: Program, root: Any) -> bool:
    """True when the program's chapter still holds its snippet (spaces as written)."""
    import json

    nb = json.loads((root / "chapters" / f"{program.chapter}.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return program.snippet in code or re.sub(r"\s+", " ", program.snippet) in re.sub(r"\s+", " ", code)
