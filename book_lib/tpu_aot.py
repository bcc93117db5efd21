"""The TPU's own compiler without a TPU: programs compiled ahead of time for a described TPU slice.

libtpu (PyPI; `pip install "jax[tpu]"` brings the one that matches jax) compiles for a TPU slice
described by name, `jax.experimental.topologies.get_topology_desc`, on any machine, a CPU-only one
included. The program is XLA's TPU program: its tiled layouts (`bf16[2048,4096]{1,0:T(8,128)(2,1)}`),
the collectives the TPU compiler chose, its `memory_analysis()`, and the Pallas kernels through
Mosaic, which refuses what a TPU cannot do. Nothing runs: the devices are descriptions.

    from book_lib import devices, tpu_aot
    if tpu_aot.available():
        # Inside, book_lib's devices are the slice's.
        with tpu_aot.compiling_for("v5e-8"):
            mesh = devices.make_mesh((2, 4), ("X", "Y"))
            x = tpu_aot.placed((1024, 512), "bfloat16", mesh, jax.P("X", "Y"))
            compiled = tpu_aot.compile(fn, x)  # .as_text(), .memory_analysis()

`TARGETS` are the TPUs students open: Colab's single v5e, Kaggle's v5e-8, the course design's v2-8
(Colab's former TPU), a v5p-8 and a v6e-8. One compile of a small program takes 0.05 to 1 s here.
Book: Part 9 (How to Profile TPU Programs), "A real(ish) example"; Part 10 (Programming TPUs in JAX).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from book_lib import checks, devices

__all__ = ["Target", "TARGETS", "available", "target_devices", "compiling_for", "placed", "compile"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A TPU slice students open, as libtpu describes it.

    Attributes:
        name: how the book calls it (`"v5e-8"`: generation, then TensorCores as Google counts them).
        topology: libtpu's topology name (`"v5e:2x4"`: chips along each axis).
        chip: its `hardware.Chip` name.
        n_devices: the devices JAX shows (a TensorCore each on v2, a megacore chip each on v5p) (count).
        where: who opens one.
        chips_per_host: the host's chip grid where the slice is smaller than a host (a v5e-1).
    """

    name: str
    topology: str
    chip: str
    n_devices: int
    where: str
    chips_per_host: tuple[int, int, int] | None = None


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="v5e-1",
            topology="v5e:1x1",
            chip="tpu-v5e",
            n_devices=1,
            where="Colab's TPU runtime",
            chips_per_host=(1, 1, 1),
        ),
        Target(name="v5e-8", topology="v5e:2x4", chip="tpu-v5e", n_devices=8, where="Kaggle's TPU runtime"),
        Target(
            name="v2-8", topology="v2:2x2", chip="tpu-v2", n_devices=8, where="the course's design, Colab's former TPU"
        ),
        Target(name="v5p-8", topology="v5p:2x2x1", chip="tpu-v5p", n_devices=4, where="a Cloud TPU VM (4 chips)"),
        Target(name="v6e-8", topology="v6e:2x4", chip="tpu-v6e", n_devices=8, where="a Cloud TPU VM (8 chips)"),
    )
}


def available() -> bool:
    """True when libtpu is installed, so `compile` can run (it is about 700 MB; `make tpu` installs it)."""
    return importlib.util.find_spec("libtpu") is not None


def _target(name: str) -> Target:
    checks.one_of("target", name, tuple(TARGETS))
    return TARGETS[name]


@functools.cache
def target_devices(name: str) -> tuple[jax.Device, ...]:
    """The described devices of the slice `name` (one per TensorCore JAX shows: 8 on a v2-8, 4 on a v5p-8).

    Sets `TPU_SKIP_MDS_QUERY=1` unless set, so that libtpu does not wait for a cloud metadata server,
    and `ALLOW_MULTIPLE_LIBTPU_LOAD=1`, so that several processes (test workers, notebook kernels)
    compile at once instead of failing on libtpu's lock file.

    Raises:
        ValueError: an unknown target (the message lists `TARGETS`).
        RuntimeError: libtpu is not installed.
    """
    target = _target(name)
    if not available():
        raise RuntimeError("libtpu is not installed: pip install libtpu (make tpu installs the pinned one)")
    from jax.experimental import topologies

    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    extra = {} if target.chips_per_host is None else {"chips_per_host_bounds": target.chips_per_host}
    with _quiet_stderr():  # libtpu logs that it found no TPU on this machine: it needs none
        return tuple(topologies.get_topology_desc(platform="tpu", topology_name=target.topology, **extra).devices)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null while inside (libtpu's C++ logging writes there, not to sys.stderr)."""
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextlib.contextmanager
def compiling_for(name: str) -> Iterator[devices.Choice]:
    """While inside, book_lib's devices are the slice `name`'s (`devices.compiling_for`): meshes,
    kernels and block sizes are what a student there gets.

    Raises:
        ValueError: an unknown target.
        RuntimeError: libtpu is not installed.
    """
    with devices.compiling_for(target_devices(name)) as chosen:
        yield chosen


def placed(
    shape: Sequence[int],
    dtype: Any,
    mesh: jax.sharding.Mesh | None = None,
    spec: jax.sharding.PartitionSpec | None = None,
) -> jax.ShapeDtypeStruct:
    """An argument of `shape` and `dtype` laid out on `mesh` as `spec` says; without a mesh, on
    `devices.single_device()` (inside `compiling_for`, the slice's first device).
    """
    if mesh is None:
        sharding: jax.sharding.Sharding = jax.sharding.SingleDeviceSharding(devices.single_device())
    else:
        sharding = jax.sharding.NamedSharding(mesh, jax.P() if spec is None else spec)
    return jax.ShapeDtypeStruct(tuple(shape), dtype, sharding=sharding)


def compile(
    fn: Callable, *args: Any, compiler_options: dict[str, Any] | None = None, **jit_kwargs: Any
) -> jax.stages.Compiled:
    """`jax.jit(fn, **jit_kwargs)` traced on `args`, lowered and compiled with `compiler_options`
    (XLA's, such as `{"xla_dump_to": folder}`); nothing runs.

    An argument is an array-like with a shape and dtype (a `jax.ShapeDtypeStruct` from `placed`, or a
    pytree of them); one with no sharding goes to `devices.single_device()`.
    """

    def abstract(x: Any) -> jax.ShapeDtypeStruct:
        sharding = getattr(x, "sharding", None)
        if sharding is None:
            sharding = jax.sharding.SingleDeviceSharding(devices.single_device())
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)

    avals = jax.tree.map(abstract, args)
    return jax.jit(fn, **jit_kwargs).trace(*avals).lower().compile(compiler_options)
