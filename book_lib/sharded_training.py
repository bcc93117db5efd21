"""A small Transformer's training step in JAX, sharded as a `parallelism.Layout` says, and its memory
as the TPU compiler plans it beside `training.memory_per_chip`.

The step embeds the tokens, runs L pre-norm layers (`attention.transformer_layer`, causal, RoPE) by a
`jax.lax.scan` over weights stacked on a leading layer axis, then the final norm, the unembedding and
the next token's softmax cross-entropy; it takes the gradients and makes one Adam update. Weights and
gradients are bf16 and both Adam moments fp32: 2 + 2 + 8 bytes per parameter, the book's count.

The mesh has the axes "data", "fsdp" and "tensor", of the layout's degrees. Every weight matrix is
split over "fsdp" along D and over "tensor" Megatron's way: the columns of W_Q, W_K, W_V, W_gate and
W_up, the rows of W_O and W_down, the vocabulary of the embeddings. "data" holds whole copies. The
batch is split over data and fsdp; between layers each sequence is split over "tensor" too (sequence
parallelism), so that a layer's saved input is shared by every chip, as `memory_per_chip` counts it.

    row = against_compiler(DEEP_NARROW, "v5e-8", Layout(fsdp=8), batch=16,
                           seq_len=128)  # libtpu compiles it (`tpu_aot`)
    row.states_ratio, row.peak_ratio  # the compiler's bytes / the count's

Book: Part 5 (How to Parallelize a Transformer for Training); Part 6, "Counting parameters";
Part 9, "Memory Profile".
"""

from __future__ import annotations

import functools
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from book_lib import attention, checks, devices, hlo, hlo_arrays, profile, tpu_aot, training
from book_lib.parallelism import Layout
from book_lib.transformer import TransformerConfig

__all__ = ["AXES", "mesh_for", "weight_specs", "step", "program", "CompilerMemory", "DEEP_NARROW", "against_compiler"]

AXES = ("data", "fsdp", "tensor")
_BATCH = ("data", "fsdp")
# Adam's constants (Kingma and Ba 2015); the step size is what a small model trains at.
_LEARNING_RATE, _BETA1, _BETA2, _EPSILON = 3e-4, 0.9, 0.95, 1e-8


def _check_layout(layout: Layout) -> None:
    others = {f: getattr(layout, f) for f in ("pipeline", "context", "expert", "microbatches", "zero")}
    for name, value in others.items():
        if value != (0 if name == "zero" else 1):
            raise ValueError(
                f"layout.{name}={value!r}: this step shards over data, fsdp and tensor only; "
                f"allowed: {0 if name == 'zero' else 1}"
            )


def mesh_for(layout: Layout) -> jax.sharding.Mesh:
    """The mesh (data, fsdp, tensor) of `layout`'s degrees on `devices.mesh_devices()`, Auto axes.

    Raises:
        ValueError: a layout with pipeline, context, expert, microbatch or ZeRO degrees, or needing more
            devices than there are.
    """
    _check_layout(layout)
    return devices.make_mesh((layout.data, layout.fsdp, layout.tensor), AXES, axis_types="auto")


def weight_specs(config: TransformerConfig) -> dict[str, Any]:
    """How each weight is split: `embed` [V, D], `layers` (each [L, ...]), `norm` [D], `unembed` [D, V].

    A matrix D wide on its input side is P("fsdp", "tensor") (W_Q, W_K, W_V, W_gate, W_up, the
    unembedding), one D wide on its output side P("tensor", "fsdp") (W_O, W_down, the embedding);
    the norms' [D] are split over fsdp alone.
    """
    inward, outward = jax.P(None, "fsdp", "tensor"), jax.P(None, "tensor", "fsdp")
    layer = {"wq": inward, "wk": inward, "wv": inward, "wo": outward, "w_up": inward, "w_down": outward}
    if config.gated_mlp:
        layer["w_gate"] = inward
    layer |= {"norm_attn": jax.P(None, "fsdp"), "norm_mlp": jax.P(None, "fsdp")}
    return {
        "embed": jax.P("tensor", "fsdp"),
        "layers": layer,
        "norm": jax.P("fsdp"),
        "unembed": jax.P("fsdp", "tensor"),
    }


def _weight_shapes(config: TransformerConfig) -> dict[str, Any]:
    one = jax.eval_shape(lambda k: attention.init_layer(config, k), jax.random.key(0))
    L, V, D = config.n_layers, config.vocab_size, config.d_model
    return {
        "embed": (V, D),
        "layers": {name: (L, *a.shape) for name, a in one.items()},
        "norm": (D,),
        "unembed": (D, V),
    }


def _loss(weights: dict[str, Any], tokens: jax.Array, config: TransformerConfig, mesh: Any) -> jax.Array:
    """Mean cross-entropy of each next token: tokens int32[B, T + 1] -> f32[]."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    positions = jnp.arange(inputs.shape[1])
    between = jax.sharding.NamedSharding(mesh, jax.P(_BATCH, "tensor", None))

    def layer(x: jax.Array, w: dict[str, jax.Array]) -> tuple[jax.Array, None]:
        out = attention.transformer_layer(w, x, config, positions=positions).astype(x.dtype)
        return jax.lax.with_sharding_constraint(out, between), None

    x = jax.lax.with_sharding_constraint(weights["embed"][inputs], between)
    x, _ = jax.lax.scan(jax.checkpoint(layer), x, weights["layers"])
    logits = (attention.rms_norm(x, weights["norm"]) @ weights["unembed"]).astype(jnp.float32)
    picked = jnp.take_along_axis(jax.nn.log_softmax(logits), targets[..., None], axis=-1)
    return -jnp.mean(picked)


def step(
    weights: dict[str, Any],
    moments: tuple[Any, Any],
    tokens: jax.Array,
    *,
    config: TransformerConfig,
    mesh: jax.sharding.Mesh,
) -> tuple[dict[str, Any], tuple[Any, Any], jax.Array]:
    """One training step: (weights, (m, v), tokens int32[B, T + 1]) -> (new weights, new (m, v), loss).

    g = grad of the loss (bf16, as the weights); m' = b1 m + (1 - b1) g; v' = b2 v + (1 - b2) g^2
    (fp32); w' = w - lr m' / (sqrt(v') + eps), kept bf16 (Adam without bias correction, which changes
    no memory). Each layer runs under `jax.checkpoint`: the backward pass recomputes it from its saved
    input (the book's block remat, remat="full": one D-wide value per token and layer kept).
    Book: Part 5, "Data Parallelism" (weights, gradients and Adam's two moments).
    """
    loss, grads = jax.value_and_grad(_loss)(weights, tokens, config, mesh)
    m = jax.tree.map(lambda m, g: _BETA1 * m + (1 - _BETA1) * g.astype(jnp.float32), moments[0], grads)
    v = jax.tree.map(lambda v, g: _BETA2 * v + (1 - _BETA2) * jnp.square(g.astype(jnp.float32)), moments[1], grads)

    def update(w: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        return (w.astype(jnp.float32) - _LEARNING_RATE * m / (jnp.sqrt(v) + _EPSILON)).astype(w.dtype)

    return jax.tree.map(update, weights, m, v), (m, v), loss


def program(
    config: TransformerConfig, layout: Layout, *, batch: int, seq_len: int
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """`step` ready for `tpu_aot.compile(fn, *args, **jit_kwargs)`: (fn, args, jit_kwargs) on the
    devices at hand (inside `tpu_aot.compiling_for`, the slice's), weights and moments donated.

    Raises:
        ValueError: a layout `mesh_for` refuses, an MoE config, or a batch or a
            length the mesh does not divide (batch by data * fsdp, seq_len by tensor).
    """
    if config.is_moe:
        raise ValueError(f"n_experts={config.n_experts!r}: the step's layers are dense; allowed: 1")
    mesh = mesh_for(layout)
    if checks.count("batch", batch) % layout.batch_shards:
        raise ValueError(f"batch={batch!r}: not split evenly over data * fsdp = {layout.batch_shards}")
    if checks.count("seq_len", seq_len) % layout.tensor:
        raise ValueError(f"seq_len={seq_len!r}: not split evenly over tensor = {layout.tensor}")
    specs = weight_specs(config)

    def placed(dtype: Any) -> Any:
        return jax.tree.map(
            lambda shape, spec: tpu_aot.placed(shape, dtype, mesh, spec),
            _weight_shapes(config),
            specs,
            is_leaf=lambda x: isinstance(x, tuple),
        )

    tokens = tpu_aot.placed((batch, seq_len + 1), jnp.int32, mesh, jax.P(_BATCH, None))
    fn = functools.partial(step, config=config, mesh=mesh)
    return fn, (placed(jnp.bfloat16), (placed(jnp.float32), placed(jnp.float32)), tokens), {"donate_argnums": (0, 1)}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompilerMemory:
    """One step's memory per device: `training.memory_per_chip`'s count beside the TPU compiler's plan.

    states: the compiler's arguments (weights, both moments, the tokens) against params + optimizer;
    working: its temporaries in HBM against grads + activations (checkpoints); peak: arguments +
    outputs - aliased + temporaries + code (`profile.MemoryReport.total_bytes`) against
    `MemoryPerChip.total_bytes`.

    Attributes:
        target: the `tpu_aot.TARGETS` name; layout: the step's layout.
        book: what `training.memory_per_chip` counts for the step.
        compiled: what the compiler planned (`profile.memory_report`), per device.
        checkpoint_shape: the per-device shape of the saved layer inputs in the compiled program
            ([L, B / (data fsdp), T / tensor, D] where the checkpoints are split as the book counts).
        vmem_bytes: the on-chip VMEM the compiler's buffers use (its memory-usage report), None
            where the report is not written; `memory_analysis()` counts HBM only.
        checkpoints_in: the memory space the report places the saved layer inputs in ("vmem" or
            "default", HBM), None where the report does not list them.
        fp32_stacks_in_hbm: the report holds fp32 arrays of the stacked weights' [L, ...] shape in HBM
            (the update's fp32 values), None without a report.
    """

    target: str
    layout: Layout
    book: training.MemoryPerChip
    compiled: profile.MemoryReport
    checkpoint_shape: tuple[int, ...] | None
    vmem_bytes: int | None
    checkpoints_in: str | None
    fp32_stacks_in_hbm: bool | None

    @property
    def states_ratio(self) -> float:
        """compiled arguments / (params + optimizer) (ratio)."""
        return self.compiled.argument_bytes / (self.book.params_bytes + self.book.optimizer_bytes)

    @property
    def working_ratio(self) -> float:
        """compiled temporaries / (grads + activations) (ratio): below 1 where the compiler keeps part of
        them in the chip's VMEM, which is not HBM."""
        return self.compiled.temp_bytes / (self.book.grads_bytes + self.book.activations_bytes)

    @property
    def peak_ratio(self) -> float:
        """compiled peak / book_lib's total (ratio)."""
        return self.compiled.total_bytes / self.book.total_bytes


# 128 narrow layers: most of a step's bytes are then its states and checkpoints, as in a large model,
# while the TPU compiler's time grows with a layer's width, not with the depth a scan runs (3 to 9 s).
DEEP_NARROW = TransformerConfig(
    n_layers=128, d_model=128, d_ff=512, n_heads=8, n_kv_heads=8, head_dim=16, vocab_size=1024
)


# XLA's memory-usage report (`xla_dump_to`): a section per memory space, "Memory Space: vmem (color=1)",
# its "Total bytes: N", then one line per allocation with the shapes of the values it holds.
_SPACE = re.compile(r"^Memory Space: (\w+) \(color=\d+\)\s*Total bytes: (\d+)", re.MULTILINE)


def _spaces(report: str) -> dict[str, tuple[int, str]]:
    """Each memory space of a memory-usage report: its name -> (total bytes, its allocations' text)."""
    heads = list(_SPACE.finditer(report))
    ends = [h.start() for h in heads[1:]] + [len(report)]
    return {h[1]: (int(h[2]), report[h.end() : end]) for h, end in zip(heads, ends, strict=True)}


def against_compiler(
    config: TransformerConfig, target: str, layout: Layout, *, batch: int, seq_len: int
) -> CompilerMemory:
    """`program` compiled for the TPU slice `target` by libtpu, its memory beside `memory_per_chip`'s.

    book_lib's side: memory_per_chip(config, the target's chip, layout, batch_tokens = batch seq_len,
    remat="full") with Adam in fp32 and bf16 weights, gradients and activations, as `step` keeps them.
    Book: Part 5, "Data Parallelism" (10 bytes per parameter plus gradients); Part 9, "Memory Profile".

    Raises:
        ValueError: an unknown target, or what `program` refuses. RuntimeError: libtpu is not installed.
    """
    chip = tpu_aot.TARGETS[checks.one_of("target", target, tuple(tpu_aot.TARGETS))].chip
    with tpu_aot.compiling_for(target), tempfile.TemporaryDirectory() as folder:
        fn, args, jit_kwargs = program(config, layout, batch=batch, seq_len=seq_len)
        compiled = tpu_aot.compile(fn, *args, compiler_options={"xla_dump_to": folder}, **jit_kwargs)
        spaces = {
            k: v for p in Path(folder).glob("*memory-usage-report.txt") for k, v in _spaces(p.read_text()).items()
        }
    book = training.memory_per_chip(config, chip, layout, batch_tokens=batch * seq_len, remat="full")
    L, D = config.n_layers, config.d_model
    stacks = {
        a.shape
        for a in hlo_arrays.find_arrays(hlo.hlo_text(compiled))
        if a.dtype == "bf16" and len(a.shape) == 4 and a.shape[0] == L and a.shape[-1] == D
    }
    shape = max(stacks, key=math.prod) if stacks else None
    written = f"bf16[{','.join(map(str, shape))}]" if shape else None
    held_in = [name for name, (_, text) in spaces.items() if written and written in text]
    return CompilerMemory(
        target=target, layout=layout, book=book, compiled=profile.memory_report(compiled), checkpoint_shape=shape,
        vmem_bytes=spaces["vmem"][0] if "vmem" in spaces else None, checkpoints_in=held_in[0] if held_in else None,
        fp32_stacks_in_hbm=f"f32[{L}," in spaces["default"][1] if "default" in spaces else None,
    )  # fmt: skip
