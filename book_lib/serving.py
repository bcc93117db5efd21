"""Serving a mix of requests: one batch's latency and throughput, and disaggregated prefill.

A batch of B requests, each of P prompt tokens and G generated ones, is prefilled one prompt at a time
and then decoded together (`inference.prefill_time`, `inference.decode_step_time`):

    latency      = prefill + G t_step
    requests / s = B / (B prefill + G t_step)

With prefill on servers of its own, P prefill servers keep G_s generate servers busy when
P / G_s = prefill B / (t_step G).

Book: Part 8 (Serving LLaMA 3-70B), "What About Prefill?"; Part 7, equation (4).
"""

from __future__ import annotations

from dataclasses import dataclass

from book_lib import checks
from book_lib.hardware import Chip, get_chip
from book_lib.inference import DecodeStep, decode_step_time, prefill_time
from book_lib.models import get_model
from book_lib.transformer import TransformerConfig

__all__ = ["RequestMix", "request_mix", "prefill_servers_per_generate_server"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestMix:
    """Requests of `prompt_len` prompt tokens and `output_len` generated ones, `batch` decoded together.

    latency_s = prefill_s + output_len * step.t_lower; requests_per_s = batch / (batch prefill_s +
    output_len step.t_lower): the chips prefill each request of a batch, then decode them together.

    Attributes:
        batch, prompt_len, output_len: as asked (counts).
        prefill_s: one prompt's prefill at the roofline (s).
        step: a decode step at the mean context, prompt_len + output_len / 2 (exact for the sum of the
            steps, whose cache reads grow linearly).
    """

    batch: int
    prompt_len: int
    output_len: int
    prefill_s: float
    step: DecodeStep

    @property
    def latency_s(self) -> float:
        """From a request's prompt to its last token (s): prefill_s + output_len * step.t_lower."""
        return self.prefill_s + self.output_len * self.step.t_lower

    @property
    def requests_per_s(self) -> float:
        """Requests finished per second (1/s): batch / (batch prefill_s + output_len step.t_lower)."""
        return self.batch / (self.batch * self.prefill_s + self.output_len * self.step.t_lower)


def request_mix(
    model: TransformerConfig | str,
    chip: Chip | str,
    n_chips: int,
    *,
    batch: int,
    prompt_len: int,
    output_len: int,
    param_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> RequestMix:
    """Latency per request and throughput for a mix of prompts and outputs on `n_chips` (see `RequestMix`).

    prefill_s = `prefill_time(prompt_len)` at the roofline; step = `decode_step_time` of `batch` at the
    mean context prompt_len + output_len / 2. Book: Part 8, "What About Prefill?"; Part 7, equation (4).

    Raises:
        ValueError: as `decode_step_time` and `prefill_time`, or a length that is not a count.
    """
    cfg, hw = get_model(model), get_chip(chip)
    prompt, output = checks.count("prompt_len", prompt_len), checks.count("output_len", output_len)
    step = decode_step_time(
        cfg, hw, n_chips, batch=batch, context_len=prompt + output // 2, param_dtype=param_dtype, kv_dtype=kv_dtype
    )
    prefill = prefill_time(cfg, hw, n_chips, prompt_len=prompt)
    return RequestMix(batch=step.batch, prompt_len=prompt, output_len=output, prefill_s=prefill, step=step)


def prefill_servers_per_generate_server(
    *, prefill_s: float, decode_step_s: float, decode_batch: int, decode_len: int
) -> float:
    """Prefill servers needed per generate server so that neither idles (disaggregated serving).

    A prefill server finishes one prompt every prefill_s; a generate server retires
    B / (decode_step_s G) sequences per second. Balance: P / prefill_s = G_servers B / (decode_step_s G),
    so P / G_servers = prefill_s B / (decode_step_s G), G the median decode length.
    Book: Part 8, "What About Prefill?" (the prefill:generate ratio question).

    Args:
        prefill_s: one prompt's prefill time on one prefill server (s).
        decode_step_s: one decode step of the generate server (s).
        decode_batch: B, sequences a generate server decodes together (count).
        decode_len: G, tokens generated per sequence (count).
    """
    checks.positive("prefill_s", prefill_s)
    checks.positive("decode_step_s", decode_step_s)
    checks.count("decode_batch", decode_batch)
    checks.count("decode_len", decode_len)
    return prefill_s * decode_batch / (decode_step_s * decode_len)
