"""Timing on the device at hand: `time_jitted` (compile ahead of time, warm up, block, take the median)
and what `make bench` and the chapters measure with it.

    time_jitted                    one jitted function, median of runs
    measure_peaks                  the device's matmul FLOP/s and copy bytes/s
    time_matmul, time_add          a matmul, an elementwise add, over sizes
    time_collectives               the four collectives on a mesh axis
    compare_kernels                Pallas matmul against jnp.dot
    compare_collective_matmuls     ring matmuls against their blocking forms

Book: Part 9 (Profiling) for why a first call (compilation) and a steady-state call differ.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from book_lib import checks, collectives

if TYPE_CHECKING:
    import jax
    from jax.typing import DTypeLike

__all__ = [
    "Timing",
    "time_jitted",
    "Peaks",
    "measure_peaks",
    "time_matmul",
    "time_add",
    "time_collectives",
    "Comparison",
    "compare_kernels",
    "compare_collective_matmuls",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Wall-clock times of repeated calls, in seconds.

    Attributes:
        median_s: median over the runs (s).
        min_s, max_s: fastest and slowest run (s).
        n_runs: runs measured after the warm-up (count).
        compile_s: time to lower and compile (s).
    """

    median_s: float
    min_s: float
    max_s: float
    n_runs: int
    compile_s: float

    @property
    def spread_ratio(self) -> float:
        """(max - min) / median: how noisy the runs were."""
        return (self.max_s - self.min_s) / self.median_s if self.median_s else 0.0


def time_jitted(fn: Callable, *args: Any, n_warmup: int = 2, n_runs: int = 7, min_time_s: float = 0.0) -> Timing:
    """Time `jax.jit(fn)(*args)`: compile first, warm up, then the median of `n_runs` blocked runs.

    Each run ends with `jax.block_until_ready` on the outputs, so asynchronous dispatch does not hide
    the work. With `min_time_s > 0`, more runs are added until their total passes it.

    Args:
        fn: a function of JAX arrays (jitted or not).
        *args: its arguments.
        n_warmup: untimed calls after compilation (count), >= 0.
        n_runs: timed calls (count), >= 1.
        min_time_s: least total time to measure (s), >= 0.

    Raises:
        ValueError: a negative warm-up, no runs or a negative time.
    """
    import jax

    checks.count("n_warmup", n_warmup, minimum=0)
    checks.count("n_runs", n_runs)
    checks.non_negative("min_time_s", min_time_s)
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_s = time.perf_counter() - start
    for _ in range(n_warmup):
        jax.block_until_ready(compiled(*args))
    runs: list[float] = []
    while len(runs) < n_runs or sum(runs) < min_time_s:
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - start)
    return Timing(
        median_s=statistics.median(runs), min_s=min(runs), max_s=max(runs), n_runs=len(runs), compile_s=compile_s
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Peaks:
    """Throughputs measured on the device at hand (not from a spec sheet).

    Attributes:
        flops_per_s: a large square matmul's FLOPs over its fastest time (FLOPs/s).
        bytes_per_s: a large elementwise scale's bytes read and written over its fastest time (bytes/s).
        vector_bytes: bytes read and written by that scale (bytes): far above a cache, the bandwidth
            is that of main memory (HBM on an accelerator).
        dtype: the element type used.
    """

    flops_per_s: float
    bytes_per_s: float
    vector_bytes: float
    dtype: str


def _random(shape: tuple[int, ...], dtype: DTypeLike, seed: int, device: jax.Device) -> jax.Array:
    import jax

    return jax.device_put(jax.random.normal(jax.random.key(seed), shape, dtype=dtype), device)


def measure_peaks(device: jax.Device, dtype: DTypeLike, *, matmul_n: int = 2048, vector_n: int = 2**25) -> Peaks:
    """Measure peak FLOPs/s (an n x n x n matmul) and memory bandwidth (y = 2 x) on `device`.

    flops_per_s = 2 n^3 / t_matmul; bytes_per_s = 2 * vector_n * itemsize / t_scale, each from the
    fastest of several runs (a peak is the best the device did, not its typical speed). The default
    vector (128 MiB in float32, read and written) is larger than any CPU's last-level cache, so
    the bandwidth is main memory's.
    """
    import jax.numpy as jnp

    a = _random((matmul_n, matmul_n), dtype, 0, device)
    b = _random((matmul_n, matmul_n), dtype, 1, device)
    t_matmul = time_jitted(jnp.matmul, a, b, n_runs=5).min_s
    x = _random((vector_n,), dtype, 2, device)
    t_scale = time_jitted(lambda v: v * 2, x, n_runs=7).min_s
    return Peaks(
        flops_per_s=2.0 * matmul_n**3 / t_matmul,
        bytes_per_s=2.0 * vector_n * x.dtype.itemsize / t_scale,
        vector_bytes=2.0 * vector_n * x.dtype.itemsize,
        dtype=str(x.dtype),
    )


def time_matmul(B: int, D: int, F: int, device: jax.Device, dtype: DTypeLike, *, n_runs: int = 5) -> Timing:
    """Time X[B, D] @ Y[D, F] on `device` with random `dtype` inputs."""
    import jax.numpy as jnp

    x = _random((B, D), dtype, 3, device)
    y = _random((D, F), dtype, 4, device)
    return time_jitted(jnp.matmul, x, y, n_runs=n_runs)


def time_add(n: int, device: jax.Device, dtype: DTypeLike, *, n_runs: int = 5) -> Timing:
    """Time x + y for two random vectors of n `dtype` values on `device`."""
    import jax.numpy as jnp

    x = _random((n,), dtype, 5, device)
    y = _random((n,), dtype, 6, device)
    return time_jitted(jnp.add, x, y, n_runs=n_runs)


# The collectives a device enters with V / N bytes (the others start from all of V).
_START_WITH_A_SHARE = ("all_gather", "all_to_all")


def _lax_collective(op: str, axis_name: str) -> Callable[[jax.Array], jax.Array]:
    """The body that runs `op` on one device's block of a 1-D array, as jax.lax spells it."""
    import jax

    if op == "all_gather":
        return lambda block: jax.lax.all_gather(block, axis_name, tiled=True)
    if op == "reduce_scatter":
        return lambda block: jax.lax.psum_scatter(block, axis_name, tiled=True)
    if op == "all_reduce":
        return lambda block: jax.lax.psum(block, axis_name)
    return lambda block: jax.lax.all_to_all(block, axis_name, 0, 0, tiled=True)


def time_collectives(
    array_bytes: int, mesh: jax.sharding.Mesh, axis_name: str = "X", *, n_runs: int = 5
) -> dict[str, Timing]:
    """Time jax.lax's four collectives over one mesh axis, for an f32 array of V = `array_bytes`.

    V is `book_lib.collectives`' V, so each timing sits beside `collectives.collective_time(op, V,
    N, chip)`: a device holds V / N before an AllGather and V after it; V before a ReduceScatter
    (V / N after) or an AllReduce (V after); V / N before and after an AllToAll. Each program is
    `jit(shard_map(...))` of `jax.lax.all_gather`, `psum_scatter`, `psum` or `all_to_all`.
    Book: Part 3 (Sharded Matrices and How to Multiply Them), worked problem 3.8.

    Args:
        array_bytes: V (bytes), a multiple of 4 N^2 so that every split is whole.
        mesh: the mesh holding `axis_name`.
        axis_name: the mesh axis of N devices to run over.
        n_runs: timed calls per collective (count), >= 1.

    Returns:
        A `Timing` per op, keyed by the names of `collectives.OPS`, in that order.

    Raises:
        ValueError: unknown axis, non-positive V or one that does not split into whole f32 pieces.
    """
    import jax
    import jax.numpy as jnp

    checks.count("n_runs", n_runs)
    checks.one_of("axis_name", axis_name, tuple(mesh.axis_names))
    n = mesh.shape[axis_name]
    checks.count("array_bytes", array_bytes)
    if array_bytes % (4 * n * n):
        raise ValueError(
            f"array_bytes={array_bytes!r}: not whole f32 pieces; allowed: a multiple of 4 N^2 = {4 * n * n}"
        )
    spec = jax.P(axis_name)
    timings = {}
    for op in collectives.OPS:
        per_device = array_bytes // 4 // (n if op in _START_WITH_A_SHARE else 1)
        x = jax.device_put(jnp.ones((n * per_device,), jnp.float32), jax.NamedSharding(mesh, spec))
        out = jax.P() if op in ("all_gather", "all_reduce") else spec
        body = jax.shard_map(_lax_collective(op, axis_name), mesh=mesh, in_specs=spec, out_specs=out, check_vma=False)
        timings[op] = time_jitted(jax.jit(body), x, n_runs=n_runs)
    return timings


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Two programs that compute the same thing, timed in the same run.

    Attributes:
        name: what was compared (with its sizes).
        candidate_s: median time of the program under test (s).
        baseline_s: median time of the reference program (s).
    """

    name: str
    candidate_s: float
    baseline_s: float

    @property
    def speed_ratio(self) -> float:
        """baseline_s / candidate_s: above 1 the candidate is faster (0.9 = 90 % of the baseline's speed)."""
        return self.baseline_s / self.candidate_s


def compare_kernels(sizes: tuple[int, ...], dtype: DTypeLike, *, n_runs: int = 5) -> list[Comparison]:
    """`kernels.matmul` against `jnp.dot` for square n x n x n matmuls on `devices.single_device()`.

    speed_ratio = t(jnp.dot) / t(kernels.matmul), each the median of `n_runs` (`time_jitted`). Where
    `kernels.backend().interpret` is True the kernel is interpreted and the ratio says nothing of
    Pallas. Book: Part 10 (Programming TPUs in JAX).

    Raises:
        ValueError: a size that is not a count, or no runs.
    """
    import jax.numpy as jnp

    from book_lib import devices, kernels

    checks.count("n_runs", n_runs)
    device = devices.single_device()
    rows = []
    for n in sizes:
        checks.count("n", n)
        x, y = _random((n, n), dtype, 7, device), _random((n, n), dtype, 8, device)
        pallas = time_jitted(kernels.matmul, x, y, n_runs=n_runs)
        xla = time_jitted(jnp.dot, x, y, n_runs=n_runs)
        rows.append(
            Comparison(name=f"matmul {n}x{n}x{n} {x.dtype}", candidate_s=pallas.median_s, baseline_s=xla.median_s)
        )
    return rows


def compare_collective_matmuls(B: int, D: int, F: int, dtype: DTypeLike, *, n_runs: int = 5) -> list[Comparison]:
    """The collective matmuls against their blocking versions on a 1-D mesh of `devices.n_devices()`.

    A[B, D_Y] @ W[D, F_Y] (`allgather_matmul`) and Tmp[B, D_Y] @ W2[D_Y, F] (`matmul_reducescatter`);
    speed_ratio = t(blocking) / t(collective), medians of `n_runs`. Book: Part 10, "Collective matmul".

    Raises:
        ValueError: sizes that are not counts or do not split over the mesh, or no runs.
    """
    import jax

    from book_lib import collective_matmul as cm
    from book_lib import devices

    checks.count("n_runs", n_runs)
    for name, size in (("B", B), ("D", D), ("F", F)):
        checks.count(name, size)
    mesh = devices.make_mesh((devices.n_devices(),), ("Y",))
    first = devices.mesh_devices()[0]
    pairs = (
        ("allgather", cm.allgather_matmul, cm.allgather_matmul_blocking, (jax.P(None, "Y"), jax.P(None, "Y"))),
        ("reducescatter", cm.matmul_reducescatter, cm.matmul_reducescatter_blocking, (jax.P(None, "Y"), jax.P("Y"))),
    )
    rows = []
    for name, ring, blocking, specs in pairs:
        a = jax.device_put(_random((B, D), dtype, 9, first), jax.NamedSharding(mesh, specs[0]))
        w = jax.device_put(_random((D, F), dtype, 10, first), jax.NamedSharding(mesh, specs[1]))
        fast = time_jitted(lambda x, y, f=ring: f(x, y, mesh=mesh), a, w, n_runs=n_runs)
        slow = time_jitted(lambda x, y, f=blocking: f(x, y, mesh=mesh), a, w, n_runs=n_runs)
        label = f"{name} collective matmul {B}x{D}x{F} on {devices.n_devices()} devices"
        rows.append(Comparison(name=label, candidate_s=fast.median_s, baseline_s=slow.median_s))
    return rows
