"""A cycle-by-cycle NumPy model of a weight-stationary systolic array (the TPU's MXU).

Processing element (i, j) of a K x N grid holds weight W[i, j]. Rows of X enter from the left,
skewed so that X[m, i] reaches column 0 of row i at cycle m + i; each value moves one column right
per cycle. Partial sums move one row down per cycle, each element adding x * w on the way, and
Y[m, j] leaves the bottom of column j at cycle m + (K - 1) + j. A product of M rows therefore takes
M + K + N - 2 cycles after the weights are loaded, of which K + N - 2 are the fill-and-drain bubble.

Book: Part 2 (All About TPUs), Appendix B ("How does a systolic array work?").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from book_lib import checks
from book_lib.hardware import Chip, get_chip

__all__ = ["SystolicRun", "simulate", "cycles", "implied_clock_hz", "padded_utilization"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SystolicRun:
    """What the simulated array produced.

    Attributes:
        product: X @ W computed by the grid, f64[M, N].
        active: active[t, i, j] is True when element (i, j) did a multiply-add at cycle t, bool[T, K, N].
    """

    product: np.ndarray
    active: np.ndarray

    def __post_init__(self) -> None:
        if np.ndim(self.product) != 2:
            raise ValueError(f"product.shape={np.shape(self.product)!r}: not 2-D; allowed: [M, N]")
        if np.ndim(self.active) != 3 or np.shape(self.active)[2] != np.shape(self.product)[1]:
            raise ValueError(
                f"active.shape={np.shape(self.active)!r}: not [T, K, N] with N = {np.shape(self.product)[1]}; "
                "allowed: [T, K, N]"
            )

    @property
    def n_cycles(self) -> int:
        """Cycles from the first input to the last output (count)."""
        return int(self.active.shape[0])

    @property
    def utilization(self) -> float:
        """Multiply-adds done over multiply-adds possible in those cycles (fraction)."""
        return float(self.active.mean())


def cycles(M: int, K: int, N: int) -> int:
    """Cycles a K x N array needs to multiply M rows (count): M + K + N - 2.

    The last row enters at cycle M - 1, needs K - 1 more cycles to reach the bottom row and N - 1
    more to reach the last column; counting from cycle 0 that is M + K + N - 2 cycles in all.
    Book: Part 2 (All About TPUs), Appendix B ("How does a systolic array work?").

    Raises:
        ValueError: a size below 1.
    """
    for name, value in (("M", M), ("K", K), ("N", N)):
        checks.count(name, value)
    return M + K + N - 2


def simulate(x: np.ndarray, w: np.ndarray) -> SystolicRun:
    """Multiply x: f[M, K] by w: f[K, N] on a K x N weight-stationary grid, one cycle at a time.

    Each cycle every element passes its input right and its partial sum down (registers update
    together), so the result is built only from neighbour-to-neighbour moves. The run lasts
    cycles(M, K, N) = M + K + N - 2 cycles.
    Book: Part 2 (All About TPUs), Appendix B ("How does a systolic array work?").

    Raises:
        ValueError: x or w not 2-D, or their inner sizes differ.
    """
    x, w = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
    if x.ndim != 2 or w.ndim != 2:
        raise ValueError(f"x.shape={x.shape!r}, w.shape={w.shape!r}: both must be 2-D; allowed: [M, K] and [K, N]")
    (M, K), (K2, N) = x.shape, w.shape
    if K != K2:
        raise ValueError(f"w.shape={w.shape!r}: inner size {K2} differs from x.shape={x.shape!r}; allowed: [{K}, N]")
    total = cycles(M, K, N)
    inputs = np.zeros((K, N))  # value each element multiplies this cycle
    has_input = np.zeros((K, N), dtype=bool)
    sums = np.zeros((K, N))  # partial sum each element passes down
    product = np.zeros((M, N))
    active = np.zeros((total, K, N), dtype=bool)
    for t in range(total):
        inputs[:, 1:], has_input[:, 1:] = inputs[:, :-1].copy(), has_input[:, :-1].copy()
        rows = t - np.arange(K)  # the row of X entering each grid row at column 0
        entering = (rows >= 0) & (rows < M)
        inputs[:, 0] = np.where(entering, x[np.clip(rows, 0, M - 1), np.arange(K)], 0.0)
        has_input[:, 0] = entering
        above = np.vstack([np.zeros((1, N)), sums[:-1]])
        sums = above + np.where(has_input, inputs * w, 0.0)
        active[t] = has_input
        done = t - (K - 1) - np.arange(N)  # the output row leaving each column
        leaving = (done >= 0) & (done < M)
        product[done[leaving], np.arange(N)[leaving]] = sums[K - 1, leaving]
    return SystolicRun(product=product, active=active)


def implied_clock_hz(chip: Chip | str) -> float:
    """Clock rate (Hz) at which a TPU's MXUs would deliver its quoted bf16 peak.

    Each cell of a size x size MXU does one multiply-add (2 FLOPs) per cycle, so
    clock = bf16_flops_per_s / (2 * mxu_size**2 * mxus_per_core * cores_per_chip).
    Book: Part 2 (All About TPUs), "What is a TPU?" (about 5e13 FLOPs/s per MXU at 1.5 GHz on v5e).

    Raises:
        ValueError: an unknown chip, or a chip without MXU figures (a GPU).
    """
    chip = get_chip(chip)
    if chip.mxu_size is None or chip.mxus_per_core is None:
        raise ValueError(f"chip={chip.name!r}: no MXU figures in book_lib.hardware; allowed: a TPU")
    cells = chip.mxu_size**2 * chip.mxus_per_core * chip.cores_per_chip
    return chip.bf16_flops_per_s / (2.0 * cells)


def padded_utilization(K: int, N: int, size: int) -> float:
    """Fraction of MXU cells holding real weights when a K x N weight is tiled onto size x size arrays.

    Each dimension is padded up to a multiple of `size`:
    K * N / (ceil(K / size) * size * ceil(N / size) * size).
    Book: Part 2 (All About TPUs), "Key Takeaways" (weights padded to at least 128, 256 on v6e).

    Raises:
        ValueError: a size below 1.
    """
    for name, value in (("K", K), ("N", N), ("size", size)):
        checks.count(name, value)
    padded_k = -(-K // size) * size
    padded_n = -(-N // size) * size
    return K * N / (padded_k * padded_n)
