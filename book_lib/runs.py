"""Whole training runs: days, chip-hours and cost, from an MFU or from one step's expected time; MFU.

    seconds    = FLOPs / (n_chips C mfu)       (training_run: 6 P tokens)
               = tokens / B x expected step    (run_of_step)
    chip_hours = n_chips seconds / 3600
    cost       = chip_hours x price per chip-hour
    MFU        = tokens/s x FLOPs per token / (n_chips C)

Book: Part 6 (Training LLaMA 3 on TPUs), "Counting parameters and FLOPs"; Part 1 (MFU).
"""

from __future__ import annotations

from dataclasses import dataclass

from book_lib import checks, hardware
from book_lib.hardware import Chip, get_chip, price_usd_per_chip_hour
from book_lib.models import get_model
from book_lib.training import StepTime
from book_lib.transformer import TransformerConfig

__all__ = ["TrainingRun", "training_run", "run_of_step", "mfu"]

_SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingRun:
    """A training run's length and cost at a given MFU.

    seconds = flops / (n_chips C mfu); days = seconds / 86,400; chip_hours = n_chips seconds / 3600;
    cost_usd = chip_hours * price (None where the text quotes no price for the chip).

    Attributes:
        model, chip: names.
        tokens: training tokens (count).
        n_chips: chips (count).
        mfu: model FLOPs utilisation assumed (ratio, 0 < mfu <= 1).
        flops_per_token: training FLOPs per token (FLOPs).
        flops: flops_per_token * tokens, the whole run (FLOPs).
        seconds: wall-clock time (s).
        price_usd_per_chip_hour: `hardware.price_usd_per_chip_hour`, or None.
    """

    model: str
    chip: str
    tokens: float
    n_chips: int
    mfu: float
    flops_per_token: float
    flops: float
    seconds: float
    price_usd_per_chip_hour: float | None

    @property
    def days(self) -> float:
        """seconds / 86,400 (days)."""
        return self.seconds / _SECONDS_PER_DAY

    @property
    def chip_hours(self) -> float:
        """n_chips * seconds / 3600 (chip-hours)."""
        return self.n_chips * self.seconds / 3600

    @property
    def cost_usd(self) -> float | None:
        """chip_hours * price_usd_per_chip_hour (US dollars), None without a price."""
        price = self.price_usd_per_chip_hour
        return None if price is None else self.chip_hours * price


def training_run(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    tokens: float,
    mfu: float,
    seq_len: int | None = None,
) -> TrainingRun:
    """Training `model` on `tokens` with `n_chips` chips at a given MFU: the run (`.days`, `.flops`, ...).

    FLOPs = 6 P tokens (the text's rule; P = the weights a token passes through, `active_param_count`:
    every parameter of a dense model, the k routed experts of an MoE) when seq_len is None; otherwise
    flops_per_token(seq_len, training=True) * tokens, which adds attention's 12 L T N H per token
    (bidirectional, as the text counts it) and counts matmul weights only.
    seconds = FLOPs / (n_chips C mfu). LLaMA 3-70B, 15T tokens, 8960 v5p at 40 %: about 44 days.
    Book: Part 6, "Counting parameters and FLOPs"; Part 4, "General rule of thumb for Transformer FLOPs".

    Raises:
        ValueError: unknown model or chip; non-positive tokens; n_chips not a count; mfu outside (0, 1].
    """
    cfg, hw = get_model(model), get_chip(chip)
    checks.positive("tokens", tokens)
    n = checks.count("n_chips", n_chips)
    if not checks.positive("mfu", mfu) <= 1:
        raise ValueError(f"mfu={mfu!r}: more than 1; allowed: 0 < mfu <= 1")
    if seq_len is None:
        per_token = 6.0 * cfg.active_param_count()
    else:
        per_token = cfg.flops_per_token(checks.count("seq_len", seq_len), training=True)
    total = per_token * tokens
    return TrainingRun(
        model=cfg.name or "custom",
        chip=hw.name,
        tokens=float(tokens),
        n_chips=n,
        mfu=float(mfu),
        flops_per_token=per_token,
        flops=total,
        seconds=total / (n * hw.peak_ops_per_s("bf16") * mfu),
        price_usd_per_chip_hour=price_usd_per_chip_hour(hw),
    )


def run_of_step(
    model: TransformerConfig | str, *, step: StepTime, tokens: float, price_usd_per_chip_hour: float | None = None
) -> TrainingRun:
    """Training `model` on `tokens` at `step`'s expected time: tokens / batch_tokens steps of `step.expected_s`.

    seconds = tokens / B * expected_s; mfu = step.mfu_expected; flops_per_token = model FLOPs per chip
    N / B; the price is `price_usd_per_chip_hour`, else `hardware.price_usd_per_chip_hour`'s (None
    where no price is cited). Book: Part 6, "Counting parameters and FLOPs" (days to train).

    Raises:
        ValueError: an unknown model; non-positive tokens or price.
    """
    n, b = step.n_chips, step.batch_tokens
    price = hardware.price_usd_per_chip_hour(step.placement.chip)
    if price_usd_per_chip_hour is not None:
        price = checks.positive("price_usd_per_chip_hour", price_usd_per_chip_hour)
    return TrainingRun(
        model=get_model(model).name or "custom",
        chip=step.placement.chip.name,
        tokens=float(checks.positive("tokens", tokens)),
        n_chips=n,
        mfu=step.mfu_expected,
        flops_per_token=step.model_flops_per_chip * n / b,
        flops=step.model_flops_per_chip * n / b * tokens,
        seconds=tokens / b * step.expected_s,
        price_usd_per_chip_hour=price,
    )


def mfu(chip: Chip | str, n_chips: int, *, tokens_per_s: float, flops_per_token: float, dtype: str = "bf16") -> float:
    """Model FLOPs utilisation: useful FLOPs per second over the chips' peak (ratio).

    MFU = tokens_per_s * flops_per_token / (n_chips * peak_ops_per_s(dtype)).
    Book: Part 5, "Fully-Sharded Data Parallelism" (MFU); Part 6.

    Raises:
        ValueError: a non-positive rate, n_chips not a count, unknown chip or dtype.
    """
    rate = checks.positive("tokens_per_s", tokens_per_s) * checks.positive("flops_per_token", flops_per_token)
    return rate / (checks.count("n_chips", n_chips) * get_chip(chip).peak_ops_per_s(dtype))
