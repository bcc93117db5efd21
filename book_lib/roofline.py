"""Roofline arithmetic: time from FLOPs and bytes, arithmetic intensity, the matmul cost model.

Every time is an amount over a rate: T_math = FLOPs / (FLOPs/s), T_comms = bytes / (bytes/s).
Their maximum bounds the run time from below (perfect overlap), their sum from above (none).

Book: Part 1 (Rooflines), "Where Does the Time Go?"
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from book_lib.hardware import Chip, get_chip

__all__ = [
    "RooflineTime",
    "MatmulCost",
    "critical_intensity",
    "roofline_time",
    "matmul_cost",
    "attainable_flops_per_s",
    "critical_batch_size",
    "dot_product_cost",
    "elementwise_cost",
    "OpCost",
]

_DTYPE_PEAK = {"bf16": "bf16_flops_per_s", "int8": "int8_ops_per_s"}


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r}: not a positive finite number; allowed: > 0")
    return value


def _non_negative(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={value!r}: not a non-negative finite number; allowed: >= 0")
    return value


def critical_intensity(chip: Chip | str, dtype: str = "bf16") -> float:
    """FLOPs per HBM byte above which a kernel on `chip` is compute-bound (FLOPs/byte).

    critical = peak FLOPs/s (of `dtype`) / HBM bytes/s
    Book: Part 1 (Rooflines), "Where Does the Time Go?"

    Args:
        chip: a `Chip` or a name for `hardware.get_chip`.
        dtype: `"bf16"` (bf16_flops_per_s) or `"int8"` (int8_ops_per_s).

    Raises:
        ValueError: unknown chip or dtype.
    """
    chip = get_chip(chip)
    if dtype not in _DTYPE_PEAK:
        raise ValueError(f"dtype={dtype!r}: unknown; allowed: {', '.join(_DTYPE_PEAK)}")
    return getattr(chip, _DTYPE_PEAK[dtype]) / chip.hbm_bytes_per_s


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineTime:
    """Roofline estimate of one operation; times in seconds.

    t_math = flops / flops_per_s; t_comms = bytes / bytes_per_s;
    t_lower = max(t_math, t_comms); t_upper = t_math + t_comms; intensity = flops / bytes.
    """

    flops: float
    bytes_moved: float
    t_math: float
    t_comms: float

    @property
    def t_lower(self) -> float:
        """Lower bound (s): compute and communication overlap perfectly."""
        return max(self.t_math, self.t_comms)

    @property
    def t_upper(self) -> float:
        """Upper bound (s): no overlap at all."""
        return self.t_math + self.t_comms

    @property
    def intensity(self) -> float:
        """Arithmetic intensity (FLOPs/byte); infinite when nothing moves."""
        return self.flops / self.bytes_moved if self.bytes_moved else math.inf

    @property
    def bound(self) -> str:
        """`"compute"` when t_math >= t_comms, else `"bandwidth"`."""
        return "compute" if self.t_math >= self.t_comms else "bandwidth"


def roofline_time(flops: float, bytes_moved: float, flops_per_s: float, bytes_per_s: float) -> RooflineTime:
    """Roofline times of an operation doing `flops` FLOPs and moving `bytes_moved` bytes.

    t_math = flops / flops_per_s, t_comms = bytes_moved / bytes_per_s.
    Book: Part 1 (Rooflines), "Where Does the Time Go?"

    Args:
        flops: work (FLOPs), >= 0.
        bytes_moved: data moved over the link in question (bytes), >= 0.
        flops_per_s: peak compute rate (FLOPs/s), > 0.
        bytes_per_s: bandwidth of the link (bytes/s), > 0.

    Raises:
        ValueError: a negative amount or a non-positive rate.
    """
    _non_negative("flops", flops)
    _non_negative("bytes_moved", bytes_moved)
    _positive("flops_per_s", flops_per_s)
    _positive("bytes_per_s", bytes_per_s)
    return RooflineTime(
        flops=flops, bytes_moved=bytes_moved, t_math=flops / flops_per_s, t_comms=bytes_moved / bytes_per_s
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulCost:
    """FLOPs and HBM traffic of X[B, D] @ Y[D, F] -> Z[B, F].

    flops = 2 B D F; bytes = B D x_bytes + D F w_bytes + B F out_bytes.
    """

    flops: float
    bytes_in: float
    bytes_out: float

    @property
    def bytes(self) -> float:
        """Bytes read plus bytes written."""
        return self.bytes_in + self.bytes_out

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (FLOPs/byte)."""
        return self.flops / self.bytes


def matmul_cost(B: int, D: int, F: int, x_bytes: float = 2, w_bytes: float = 2, out_bytes: float = 2) -> MatmulCost:
    """Cost of the matmul X[B, D] @ Y[D, F] -> Z[B, F] that reads X and Y and writes Z once.

    flops = 2 B D F (one multiply and one add per term; exactly BF(2D - 1), close enough)
    bytes = x_bytes B D + w_bytes D F + out_bytes B F
    Book: Part 1 (Rooflines), "Matrix multiplication"

    Args:
        B, D, F: sizes (counts), > 0; B is the batch, D contracted, F the output width.
        x_bytes, w_bytes, out_bytes: bytes per element of X, Y and Z (2 for bf16, 1 for int8).

    Raises:
        ValueError: a non-positive size or element width.
    """
    for name, value in (("B", B), ("D", D), ("F", F)):
        _positive(name, value)
    for name, value in (("x_bytes", x_bytes), ("w_bytes", w_bytes), ("out_bytes", out_bytes)):
        _positive(name, value)
    return MatmulCost(
        flops=2.0 * B * D * F,
        bytes_in=float(x_bytes * B * D + w_bytes * D * F),
        bytes_out=float(out_bytes * B * F),
    )


def attainable_flops_per_s(intensity: float, flops_per_s: float, bytes_per_s: float) -> float:
    """Throughput (FLOPs/s) the roofline allows at `intensity` FLOPs/byte.

    attainable = min(flops_per_s, intensity * bytes_per_s)
    Book: Part 1 (Rooflines), "Visualizing rooflines"
    """
    _positive("intensity", intensity)
    _positive("flops_per_s", flops_per_s)
    _positive("bytes_per_s", bytes_per_s)
    return min(flops_per_s, intensity * bytes_per_s)


def critical_batch_size(
    D: int,
    F: int,
    flops_per_s: float,
    bytes_per_s: float,
    *,
    x_bytes: float = 2,
    w_bytes: float = 2,
    out_bytes: float = 2,
) -> float:
    """Exact batch B (tokens) at which X[B, D] @ Y[D, F] has t_math == t_comms.

    2 B D F / flops_per_s = (x_bytes B D + w_bytes D F + out_bytes B F) / bytes_per_s, so
    B = (w_bytes D F / bytes_per_s) / (2 D F / flops_per_s - (x_bytes D + out_bytes F) / bytes_per_s).
    For B << D, F this tends to (w_bytes / 2) * flops_per_s / bytes_per_s. Returns inf when no batch
    makes the matmul compute-bound.
    Book: Part 1 (Rooflines), "Matrix multiplication"

    Raises:
        ValueError: a non-positive size, rate or element width.
    """
    for name, value in (("D", D), ("F", F), ("flops_per_s", flops_per_s), ("bytes_per_s", bytes_per_s)):
        _positive(name, value)
    for name, value in (("x_bytes", x_bytes), ("w_bytes", w_bytes), ("out_bytes", out_bytes)):
        _positive(name, value)
    slope = 2.0 * D * F / flops_per_s - (x_bytes * D + out_bytes * F) / bytes_per_s
    return (w_bytes * D * F / bytes_per_s) / slope if slope > 0 else math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCost:
    """FLOPs and bytes of a non-matmul operation."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (FLOPs/byte)."""
        return self.flops / self.bytes


def dot_product_cost(N: int, bytes_per_value: float = 2) -> OpCost:
    """Cost of x . y for two vectors of N values, reading both and writing one value.

    flops = N multiplies + (N - 1) adds = 2N - 1; bytes = bytes_per_value (2N + 1).
    Book: Part 1 (Rooflines), "Where Does the Time Go?" (the dot-product example)

    Raises:
        ValueError: a non-positive N or element width.
    """
    _positive("N", N)
    _positive("bytes_per_value", bytes_per_value)
    return OpCost(flops=2.0 * N - 1, bytes=float(bytes_per_value * (2 * N + 1)))


def elementwise_cost(n: int, n_inputs: int = 2, bytes_per_value: float = 4, flops_per_value: float = 1) -> OpCost:
    """Cost of an elementwise op over n values that reads n_inputs arrays and writes one.

    flops = flops_per_value n; bytes = bytes_per_value n (n_inputs + 1).
    Book: Part 1 (Rooflines); the elementwise sweep of chapter 1's experiment.

    Raises:
        ValueError: a non-positive size, input count, width or FLOP count.
    """
    for name, value in (("n", n), ("n_inputs", n_inputs), ("bytes_per_value", bytes_per_value)):
        _positive(name, value)
    _non_negative("flops_per_value", flops_per_value)
    return OpCost(flops=float(flops_per_value * n), bytes=float(bytes_per_value * n * (n_inputs + 1)))
