"""`python -m book_lib calibrate`: the rates `efficiency.Efficiency` cites, measured on the reader's own device.

Each measurement is a jitted JAX program timed by `bench.time_jitted` (compiled first, warmed up, blocked):

| rate                 | program                                              | figure it sets           |
|----------------------|------------------------------------------------------|--------------------------|
| matmul FLOP/s        | X[M, K] @ Y[K, N] over a grid of sizes, bf16 and f32 | matmul, matmul_sweep     |
| copy bytes/s         | y = x + 1 on a large vector: read and write          | hbm (/ datasheet)        |
| attention FLOP/s     | `jax.nn.dot_product_attention`, causal, and its grad | attention_forward, _backward |
| kernel fixed cost    | a chain of tiny ops fenced by optimization barriers  | kernel_s                 |
| bus bandwidth        | AllGather, ReduceScatter, AllReduce over every device | ici (GPUs: / NVLink spec) |

A figure is a measured rate over the chip's datasheet (`hardware.Chip`), so it needs to know the chip:
the device's own (`hardware.chip_from_device_kind`) or `chip=`; on a device no chip matches (a CPU)
the profile holds the raw rates and no figures. `calibration=` (and `--calibration FILE`) in `plan`,
`serve`, `training.step_time`, `inference.decode_step_time` and the calculators replaces the cited
figures with these (`hardware.with_calibration`).

Book: Part 9 (Profiling: measure, do not assume); Part 1 ("Rooflines").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from book_lib import bench, checks
from book_lib.efficiency import Calibration
from book_lib.hardware import Chip, chip_from_device_kind, get_chip
from book_lib.numfmt import fmt

__all__ = ["Sizes", "SIZES", "measure", "report"]

# Sizes per mode: (matmul sides, copy elements, attention (batch, sequence, heads, head dim), kernel chain,
# collective bytes). "quick" keeps CI's CPU run to seconds; "full" fills an accelerator.
Sizes = tuple[tuple[int, ...], int, tuple[int, int, int, int], int, int]
SIZES: dict[str, Sizes] = {
    "quick": ((128,), 2**18, (1, 128, 2, 32), 16, 2**16),
    "full": ((1024, 2048, 4096, 8192), 2**28, (4, 4096, 16, 128), 256, 2**28),
}


def _matmul_rates(sides: tuple[int, ...], device: Any) -> dict[str, float]:
    """Best FLOP/s of square and flat matmuls per dtype, 2 M N K / t, and each square bf16 side's own
    ("matmul_bf16_n1024_flops_per_s"): the sweep `efficiency.calibrated` reads matmuls' shapes from."""
    import jax.numpy as jnp

    rates: dict[str, float] = {}
    for dtype, name in ((jnp.bfloat16, "bf16"), (jnp.float32, "fp32")):
        for n in sides:
            for m, k in ((n, n), (4 * n, n // 2)):
                rate = 2 * m * n * k / bench.time_matmul(m, k, n, device, dtype, n_runs=5).min_s
                rates[f"matmul_{name}_flops_per_s"] = max(rates.get(f"matmul_{name}_flops_per_s", 0.0), rate)
                if name == "bf16" and m == n:
                    rates[f"matmul_bf16_n{n}_flops_per_s"] = rate
    return rates


def _copy_rate(n: int, device: Any) -> float:
    """Bytes/s of y = x + 1 on n f32 values: 2 n 4 / t (read x, write y)."""
    import jax
    import jax.numpy as jnp

    x = jax.device_put(jnp.ones((n,), jnp.float32), device)
    return 2 * n * 4 / bench.time_jitted(lambda v: v + 1, x, n_runs=5).min_s


def _attention_rates(shape: tuple[int, int, int, int], device: Any) -> dict[str, float]:
    """FLOP/s of causal attention, forward (2 B S^2 N H of its 4 B S^2 N H are computed) and backward
    (twice the forward's FLOPs, the convention of `training`), with `jax.nn.dot_product_attention`
    (cuDNN's flash kernel where the device has one)."""
    import jax
    import jax.numpy as jnp

    b, s, n, h = shape
    q, k, v = (
        jax.device_put(jax.random.normal(jax.random.key(i), (b, s, n, h), jnp.bfloat16), device) for i in range(3)
    )
    implementation: Literal["cudnn"] | None = "cudnn" if device.platform == "gpu" else None

    def forward(q: Any, k: Any, v: Any) -> Any:
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation=implementation)

    flops = 2 * b * s * s * n * h
    t_forward = bench.time_jitted(forward, q, k, v, n_runs=5).min_s
    loss = jax.grad(lambda q, k, v: forward(q, k, v).astype(jnp.float32).sum(), argnums=(0, 1, 2))
    t_both = bench.time_jitted(loss, q, k, v, n_runs=5).min_s
    return {
        "attention_forward_flops_per_s": flops / t_forward,
        "attention_backward_flops_per_s": 2 * flops / max(t_both - t_forward, t_forward / 100),
    }


def _kernel_cost(chain: int, device: Any) -> float:
    """Seconds per kernel: (t(chain tiny ops) - t(one)) / (chain - 1), each op fenced by
    `jax.lax.optimization_barrier` so the compiler cannot fuse the chain into one kernel."""
    import jax
    import jax.numpy as jnp

    def chained(length: int) -> Callable[[Any], Any]:
        def run(x: Any) -> Any:
            for _ in range(length):
                x = jax.lax.optimization_barrier(x * 1.0001 + 1.0)
            return x

        return run

    x = jax.device_put(jnp.ones((1024,), jnp.float32), device)
    one, many = (bench.time_jitted(chained(n), x, n_runs=5).min_s for n in (1, chain))
    return max(many - one, 0.0) / (chain - 1)


def _bus_rates(array_bytes: int) -> dict[str, float]:
    """Bus bandwidth of each ring collective over every device (bytes/s): V (N - 1) / N / t for an
    AllGather or ReduceScatter, twice that for an AllReduce (nccl-tests' busbw). {} on one device."""
    import jax

    n = len(jax.devices())
    if n < 2:
        return {}
    mesh = jax.make_mesh((n,), ("X",), axis_types=(jax.sharding.AxisType.Explicit,))
    v = array_bytes - array_bytes % (4 * n * n)
    timings = bench.time_collectives(v, mesh, "X", n_runs=5)
    factor = {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 2}
    return {f"{op}_bus_bytes_per_s": factor[op] * v * (n - 1) / n / timings[op].min_s for op in factor}


def _figures(rates: dict[str, float], chip: Chip) -> dict[str, float]:
    """Each measured rate over `chip`'s datasheet, at most 1 (a device that beats its sheet is at its sheet)."""
    peak = chip.bf16_flops_per_s
    figures = {
        "matmul": rates["matmul_bf16_flops_per_s"] / peak,
        "hbm": rates["copy_bytes_per_s"] / chip.hbm_bytes_per_s,
        "attention_forward": rates["attention_forward_flops_per_s"] / peak,
        "attention_backward": rates["attention_backward_flops_per_s"] / peak,
    }
    if not chip.is_tpu and "all_gather_bus_bytes_per_s" in rates:
        spec = chip.ici_bytes_per_s * chip.ici_links
        figures["ici"] = min(rates[f"{op}_bus_bytes_per_s"] for op in ("all_gather", "reduce_scatter")) / spec
    figures = {name: min(value, 1.0) for name, value in figures.items()}
    return {**figures, "kernel_s": rates["kernel_s"]}


def measure(*, chip: str | Chip | None = None, mode: str = "full") -> Calibration:
    """Measure the first JAX device's rates (see the module's table) and, where its chip is known, the figures.

    Args:
        chip: the chip whose datasheet the rates are divided by; None: the device's own
            (`hardware.chip_from_device_kind`), and no figures where none matches (a CPU). Only an
            accelerator the table does not recognise may be named: a profile of one chip's device filed
            under another's name would pass for a measurement of it.
        mode: "full" (sizes that fill an accelerator) or "quick" (seconds on a CPU), `SIZES`.

    Raises:
        ValueError: an unknown chip or mode; a chip other than the device's own, or any chip on a CPU.
    """
    import jax

    sides, copy_n, attention, chain, bus = SIZES[checks.one_of("mode", mode, tuple(SIZES))]
    device = jax.devices()[0]
    own = chip_from_device_kind(device.device_kind)
    known = own
    if chip is not None:
        known = get_chip(chip)
        if (own is not None and own.name != known.name) or (own is None and device.platform == "cpu"):
            raise ValueError(
                f"chip={known.name!r}: this device is {device.device_kind}, and a profile keeps what it measured "
                f"under the chip it measured; allowed: {own.name if own else 'no chip (a CPU has no datasheet here)'}"
            )
    rates = {
        **_matmul_rates(sides, device),
        "copy_bytes_per_s": _copy_rate(copy_n, device),
        **_attention_rates(attention, device),
        "kernel_s": _kernel_cost(chain, device),
        **_bus_rates(bus),
    }
    figures = _figures(rates, known) if known is not None else {}
    return Calibration(
        chip=known.name if known is not None else device.device_kind, device_kind=device.device_kind,
        date=Calibration.today(), jax_version=jax.__version__, figures=tuple(figures.items()),
        rates=tuple(rates.items()),
    )  # fmt: skip


_UNITS = (("_flops_per_s", "FLOP/s"), ("_bytes_per_s", "B/s"), ("_s", "s"))


def _rate(name: str, value: float) -> str:
    """A measured rate written by `numfmt.fmt`, its unit read off its name ("copy_bytes_per_s" -> B/s)."""
    unit = next(u for suffix, u in _UNITS if name.endswith(suffix))
    return fmt(value, unit)


def report(calibration: Calibration) -> str:
    """The table `calibrate` prints (80 columns): each measured rate, and each figure beside the one
    `efficiency` cites and where that comes from."""
    lines = [f"{calibration.device_kind} ({calibration.chip}), {calibration.date}, jax {calibration.jax_version}", ""]
    lines += [f"  {name:<32} {_rate(name, value):>14}" for name, value in calibration.rates]
    figures = dict(calibration.figures)
    if not figures:
        lines += ["", "no chip of book_lib.hardware matches this device:", "rates only (--chip compares them)"]
        return "\n".join(lines)
    cited = get_chip(calibration.chip).efficiency
    lines += ["", f"  {'figure':<19} {'measured':>9} {'cited':>9}  cited from"]
    for name, value in figures.items():
        source = cited.source(name)
        where = "datasheet" if source.startswith("no published") else "/".join(source.split(" ")[0].split("/")[2:5])
        lines.append(f"  {name:<19} {value:>9.3g} {getattr(cited, name):>9.3g}  {where[:36]}")
    return "\n".join(lines)
