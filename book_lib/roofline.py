"""Roofline arithmetic: time from FLOPs and bytes, arithmetic intensity, the matmul cost model.

Every time is an amount over a rate: T_math = FLOPs / (FLOPs/s), T_comms = bytes / (bytes/s).
Their maximum bounds the run time from below (perfect overlap), their sum from above (none).

Book: Part 1 (Rooflines), "Where Does the Time Go?"
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from book_lib import checks
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
    "batched_weights_matmul_cost",
    "smallest_compute_bound_width",
]


def critical_intensity(chip: Chip | str, dtype: str = "bf16", *, bytes_per_s: float | None = None) -> float:
    """FLOPs per byte above which a kernel on `chip` is compute-bound (FLOPs/byte).

    critical = peak FLOPs/s (of `dtype`) / bytes/s of the link that feeds it (HBM by default)
    Book: Part 1 (Rooflines), "Where Does the Time Go?" and "Visualizing rooflines"

    Args:
        chip: a `Chip` or a name for `hardware.get_chip`.
        dtype: `"bf16"` (bf16_flops_per_s) or `"int8"` (int8_ops_per_s), spelled any common way.
        bytes_per_s: the link's bandwidth (bytes/s), > 0; None for the chip's HBM bandwidth. Pass
            `chip.ici_bytes_per_s` (or PCIe, DCN) for the roofline of bytes that cross that link.

    Raises:
        ValueError: unknown chip or dtype, or a non-positive bandwidth.
    """
    chip = get_chip(chip)
    if bytes_per_s is not None:
        checks.positive("bytes_per_s", bytes_per_s)
    return chip.peak_ops_per_s(dtype) / (chip.hbm_bytes_per_s if bytes_per_s is None else bytes_per_s)


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
    checks.non_negative("flops", flops)
    checks.non_negative("bytes_moved", bytes_moved)
    checks.positive("flops_per_s", flops_per_s)
    checks.positive("bytes_per_s", bytes_per_s)
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

    def __post_init__(self) -> None:
        for name in ("flops", "bytes_in", "bytes_out"):
            checks.non_negative(name, getattr(self, name))

    @property
    def bytes(self) -> float:
        """Bytes read plus bytes written."""
        return self.bytes_in + self.bytes_out

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (FLOPs/byte); infinite when nothing moves."""
        return self.flops / self.bytes if self.bytes else math.inf


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
    for name, size in (("B", B), ("D", D), ("F", F)):
        checks.count(name, size)
    for name, width in (("x_bytes", x_bytes), ("w_bytes", w_bytes), ("out_bytes", out_bytes)):
        checks.positive(name, width)
    return MatmulCost(
        flops=2.0 * B * D * F,
        bytes_in=float(x_bytes * B * D + w_bytes * D * F),
        bytes_out=float(out_bytes * B * F),
    )


def batched_weights_matmul_cost(
    B: int, D: int, F: int, x_bytes: float = 2, w_bytes: float = 2, out_bytes: float = 2
) -> MatmulCost:
    """Cost of X[B, D] ._D Y[B, D, F] -> Z[B, F]: every batch element has its own weight matrix.

    flops = 2 B D F; bytes = x_bytes B D + w_bytes B D F + out_bytes B F, so the intensity stays
    below 2 / w_bytes whatever B is: the weights are read once per element, never reused.
    Book: Part 1 (Rooflines), Question 4.

    Raises:
        ValueError: a size that is not a count, or a non-positive element width.
    """
    plain = matmul_cost(B, D, F, x_bytes, w_bytes, out_bytes)
    return MatmulCost(
        flops=plain.flops, bytes_in=float(x_bytes * B * D + w_bytes * B * D * F), bytes_out=plain.bytes_out
    )


def smallest_compute_bound_width(
    flops_per_s: float, bytes_per_s: float, *, f_over_d: float = 4, x_bytes: float = 2, out_bytes: float = 2
) -> float:
    """The width D above which some batch makes X[B, D] @ Y[D, F = f_over_d D] compute-bound (a size).

    Per token the matmul does 2 D F FLOPs and moves x_bytes D + out_bytes F activation bytes; once
    the weights are amortised, it is compute-bound only if 2 D F / flops_per_s > (x_bytes D +
    out_bytes F) / bytes_per_s, that is
        D > flops_per_s (x_bytes + out_bytes f_over_d) / (2 f_over_d bytes_per_s),
    where `critical_batch_size` turns finite. It matters when the link is slow (weights or
    activations over PCIe). Book: Part 2 (All About TPUs), Question 3.

    Raises:
        ValueError: a non-positive rate, ratio or width.
    """
    for name, value in (("flops_per_s", flops_per_s), ("bytes_per_s", bytes_per_s), ("f_over_d", f_over_d)):
        checks.positive(name, value)
    checks.positive("x_bytes", x_bytes)
    checks.positive("out_bytes", out_bytes)
    return flops_per_s * (x_bytes + out_bytes * f_over_d) / (2 * f_over_d * bytes_per_s)


def attainable_flops_per_s(intensity: float, flops_per_s: float, bytes_per_s: float) -> float:
    """Throughput (FLOPs/s) the roofline allows at `intensity` FLOPs/byte.

    attainable = min(flops_per_s, intensity * bytes_per_s)
    Book: Part 1 (Rooflines), "Visualizing rooflines"
    """
    checks.positive("intensity", intensity)
    checks.positive("flops_per_s", flops_per_s)
    checks.positive("bytes_per_s", bytes_per_s)
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
    checks.count("D", D)
    checks.count("F", F)
    checks.positive("flops_per_s", flops_per_s)
    checks.positive("bytes_per_s", bytes_per_s)
    for name, value in (("x_bytes", x_bytes), ("w_bytes", w_bytes), ("out_bytes", out_bytes)):
        checks.positive(name, value)
    slope = 2.0 * D * F / flops_per_s - (x_bytes * D + out_bytes * F) / bytes_per_s
    return (w_bytes * D * F / bytes_per_s) / slope if slope > 0 else math.inf


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCost:
    """FLOPs and bytes of a non-matmul operation."""

    flops: float
    bytes: float

    def __post_init__(self) -> None:
        checks.non_negative("flops", self.flops)
        checks.non_negative("bytes", self.bytes)

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (FLOPs/byte); infinite when nothing moves."""
        return self.flops / self.bytes if self.bytes else math.inf


def dot_product_cost(N: int, bytes_per_value: float = 2) -> OpCost:
    """Cost of x . y for two vectors of N values, reading both and writing one value.

    flops = N multiplies + (N - 1) adds = 2N - 1; bytes = bytes_per_value (2N + 1).
    Book: Part 1 (Rooflines), "Where Does the Time Go?" (the dot-product example)

    Raises:
        ValueError: a non-positive N or element width.
    """
    checks.count("N", N)
    checks.positive("bytes_per_value", bytes_per_value)
    return OpCost(flops=2.0 * N - 1, bytes=float(bytes_per_value * (2 * N + 1)))


def elementwise_cost(n: int, n_inputs: int = 2, bytes_per_value: float = 4, flops_per_value: float = 1) -> OpCost:
    """Cost of an elementwise op over n values that reads n_inputs arrays and writes one.

    flops = flops_per_value n; bytes = bytes_per_value n (n_inputs + 1).
    Book: Part 1 (Rooflines); the elementwise sweep of chapter 1's experiment.

    Raises:
        ValueError: a non-positive size, input count, width or FLOP count.
    """
    checks.count("n", n)
    checks.count("n_inputs", n_inputs)
    checks.positive("bytes_per_value", bytes_per_value)
    checks.non_negative("flops_per_value", flops_per_value)
    return OpCost(flops=float(flops_per_value * n), bytes=float(bytes_per_value * n * (n_inputs + 1)))
