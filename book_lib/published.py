"""Published training and serving runs, and what the cost models predict for each: the models' test.

A data table, as `hardware` is for chips and `models` for configs: each `PublishedRun` holds one figure
that a paper, a model card or a benchmark README printed (an MFU, GPU-hours for a run, decode tokens/s),
the setup it was measured on, and its source with the words that state it. `check_run` puts the
published figure next to `roofline_s`, the book's bound, and `expected_s`, the bound plus every term
`training.StepTime.terms` (or `inference.DecodeStep.expected_s`) names, all as seconds for the same
work: one training step, or one decode step of batch 1.

Where a run's machine differs from the table's chip, the row says how and where that is published:
PaLM's pods were 3,072-chip slices of TPU v4, and gpt-fast's A100s were power-limited to 330 W with
about 1,700 GB/s of usable HBM bandwidth by its README. Where a layout is not published (the Llama 3
model card's 8B and 70B), the row takes `planner.plan_training`'s best and says so.

Book: Part 6, "Counting parameters and FLOPs" (MFU); Part 7, "Theoretical estimates for LLM latency and
throughput"; Part 12 (GPUs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from book_lib import checks, hardware, inference, planner, training
from book_lib.hardware import Chip
from book_lib.models import get_model
from book_lib.parallelism import Layout
from book_lib.transformer import TransformerConfig

__all__ = ["KINDS", "PALM_540B", "PublishedRun", "RunCheck", "PUBLISHED_RUNS", "check_run", "check_all"]

KINDS = ("mfu", "gpu_hours", "tokens_per_s")

# PaLM 540B: Chowdhery et al. 2022, Table 1 (118 layers, 48 heads, d_model 18432; "d_ff is always 4 x d_model
# and attention head size is always 256"), multi-query attention, shared input-output embeddings, 256k vocabulary.
PALM_540B = TransformerConfig(
    n_layers=118, d_model=18432, d_ff=73728, n_heads=48, n_kv_heads=1, head_dim=256, vocab_size=256_000,
    tied_embeddings=True, name="palm-540b", source="https://arxiv.org/abs/2204.02311 (Table 1)",
)  # fmt: skip
_PALM = "https://arxiv.org/abs/2204.02311"
_LLAMA3 = "https://arxiv.org/abs/2407.21783"
_LLAMA3_CARD = "https://github.com/meta-llama/llama3/blob/main/MODEL_CARD.md"
_DEEPSEEK = "https://arxiv.org/abs/2412.19437"
_GPT_FAST = "https://github.com/pytorch-labs/gpt-fast"
_MIXTRAL_FAST = "https://github.com/pytorch-labs/gpt-fast/tree/main/mixtral-moe"

# PaLM: "We use 3072 TPU v4 chips in each Pod" (section 4): its pods are 12 x 16 x 16 slices of a v4 pod.
PALM_TPU_V4 = dataclasses.replace(
    hardware.get_chip("tpu-v4"), name="tpu-v4 (PaLM's 3072-chip pods)", pod_shape=(12, 16, 16),
    source=f"{_PALM} (section 4: 3072 TPU v4 chips in each Pod); " + hardware.get_chip("tpu-v4").source,
)  # fmt: skip
# gpt-fast: "8xA100-80GB, power limited to 330W"; "Empirically, seems like peak bandwidth is about 1700 GB/s."
GPT_FAST_A100 = dataclasses.replace(
    hardware.get_chip("a100"), name="a100 (gpt-fast, 330 W)", hbm_bytes_per_s=1.7e12,
    source=f"{_GPT_FAST} (README: power limited to 330W; peak bandwidth about 1700 GB/s)",
)  # fmt: skip
_KERNELS = (
    "per-kernel fixed cost (launch, ramp-up and tail of the ten or so small kernels of each layer), which "
    "grows in share as each GPU's slice of the weights shrinks"
)
_DEQUANT = (
    "dequantising int8/int4 weights inside the matmul: gpt-fast's own bandwidth column shows its kernels "
    "move {0} GB/s of weights against 1,397 GB/s in bf16 on one GPU"
)
_WHOLE_RUN = (
    "a whole run's hours: restarts after failures (the Llama 3 paper counts 466 interruptions in 54 days), "
    "checkpoints, evaluation and the long-context and annealing stages; the layout is the planner's, "
    "Meta's is not published"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One published figure and the setup it was measured on.

    Attributes:
        name: the row's label ("PaLM 540B, 6,144 TPU v4").
        kind: what `published` is (`KINDS`): "mfu" (ratio), "gpu_hours" (chip-hours for `tokens`) or
            "tokens_per_s" (decode tokens/s at batch 1).
        published: the figure as printed (unit by kind).
        model: a preset name or a `TransformerConfig`.
        chip: a chip name or a `Chip` (the run's machine where it differs from the table's).
        layout: the published `Layout`; None for a training run without one (the planner's best).
        n_chips: chips of the run (count).
        batch_tokens, seq_len: a training step's tokens and sequence length (counts; 0 for decode).
        tokens: the tokens a "gpu_hours" run trained on (count), else 0.
        step_options: keywords for `training.step_time` (remat, matmul_dtype, virtual_stages).
        param_dtype: a decode run's weights ("bf16", "int8", "int4").
        source: the URL and the words that state the figure.
        gap: what the cost model lacks that explains a gap between expected and published.
    """

    name: str
    kind: str
    published: float
    model: str | TransformerConfig
    chip: str | Chip
    layout: Layout | None = None
    n_chips: int
    batch_tokens: int = 0
    seq_len: int = 0
    tokens: float = 0.0
    step_options: tuple[tuple[str, object], ...] = ()
    param_dtype: str = "bf16"
    source: str
    gap: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCheck:
    """A published run against the cost models, as seconds for the same work (s).

    published_s: a training step at the published MFU (model FLOPs per chip / (MFU C)), a training step
    at the published hours (hours 3600 / (N steps)), or 1 / (tokens/s) for decode;
    roofline_s, expected_s: the models' bound and expected time for that work.

    Attributes:
        run: the `PublishedRun`.
        layout: the layout costed (the published one, or the planner's best).
        published_s, roofline_s, expected_s: see above (s).
    """

    run: PublishedRun
    layout: Layout | None
    published_s: float
    roofline_s: float
    expected_s: float

    @property
    def bound_ratio(self) -> float:
        """roofline_s / published_s: at most 1 when the bound holds (ratio)."""
        return self.roofline_s / self.published_s

    @property
    def expected_ratio(self) -> float:
        """expected_s / published_s: 1 when the expected time is the published one (ratio)."""
        return self.expected_s / self.published_s

    @property
    def within_30_percent(self) -> bool:
        """|expected_s / published_s - 1| <= 0.3."""
        return abs(self.expected_ratio - 1) <= 0.3


def _decode(name: str, model: str, n: int, dtype: str, tokens_per_s: float, source: str, gap: str) -> PublishedRun:
    return PublishedRun(
        name=name, kind="tokens_per_s", published=tokens_per_s, model=model, chip=GPT_FAST_A100, n_chips=n,
        param_dtype=dtype, source=source, gap=gap,
    )  # fmt: skip


def _gpt_fast(model: str, label: str, rows: tuple[tuple[int, str, float], ...], source: str) -> list[PublishedRun]:
    """gpt-fast's rows of one model: (GPUs, dtype, tokens/s), batch 1, a 5-token prompt."""
    out = []
    for n, dtype, rate in rows:
        if dtype != "bf16":
            gap = _DEQUANT.format("1,069" if dtype == "int8" else "863")
        elif n > 1:
            gap = _KERNELS
        else:
            gap = "the weights stream at the machine's 1,700 GB/s; the rest is kernel fixed cost"
        quoted = f"{source}: {n} GPU{'s' * (n > 1)}, {dtype}, {rate:g} tokens/s"
        out.append(_decode(f"{label}, {dtype}, {n} A100", model, n, dtype, rate, quoted, gap))
    return out


_SCHEDULE = "Meta's Table 4 gives no schedule: one virtual stage and one sequence per microbatch are assumed"
_TABLE4 = "Table 4: GPUs, TP, CP, PP, DP, seq. len., batch size/DP, tokens/batch, TFLOPs/GPU, BF16 MFU"
_TRAINING = [
    PublishedRun(
        name="PaLM 540B, 6,144 TPU v4",
        kind="mfu",
        published=0.462,
        model=PALM_540B,
        chip=PALM_TPU_V4,
        layout=Layout(data=2, fsdp=256, tensor=12),
        n_chips=6144,
        batch_tokens=2048 * 2048,
        seq_len=2048,
        step_options=(("remat", "full"),),
        source=f"{_PALM} (Table 3: 46.2% MFU; 12-way model parallelism, 256-way fully sharded data "
        "parallelism, two-way data parallelism across pods; batch 2048 x 2048 tokens; hardware FLOPs "
        "utilisation with rematerialisation 57.8%)",
        gap="matmuls below the MXU's peak: the paper's own hardware FLOPs utilisation is 57.8%, and ours "
        "assumes recomputing the whole forward pass, which the paper does only in part",
    ),
    PublishedRun(
        name="Llama 3 405B, 8,192 H100",
        kind="mfu",
        published=0.43,
        model="llama-3.1-405b",
        chip="h100",
        layout=Layout(tensor=8, pipeline=16, data=64, microbatches=32),
        n_chips=8192,
        batch_tokens=16 * 2**20,
        seq_len=8192,
        source=f"{_LLAMA3} ({_TABLE4}: 8,192 8 1 16 64 8,192 32 16M 430 43%)",
        gap=f"cuBLAS matmuls below the 989 TFLOPs/s peak, which the model assumes; {_SCHEDULE}",
    ),
    PublishedRun(
        name="Llama 3 405B, 16,384 H100",
        kind="mfu",
        published=0.41,
        model="llama-3.1-405b",
        chip="h100",
        layout=Layout(tensor=8, pipeline=16, data=128, microbatches=16),
        n_chips=16384,
        batch_tokens=16 * 2**20,
        seq_len=8192,
        source=f"{_LLAMA3} ({_TABLE4}: 16,384 8 1 16 128 8,192 16 16M 400 41%)",
        gap=f"{_SCHEDULE}; with half the microbatches the bubble dominates",
    ),
    PublishedRun(
        name="Llama 3 405B, 16,384 H100, 128K context",
        kind="mfu",
        published=0.38,
        model="llama-3.1-405b",
        chip="h100",
        layout=Layout(tensor=8, context=16, pipeline=16, data=8, microbatches=16),
        n_chips=16384,
        batch_tokens=128 * 131072,
        seq_len=131072,
        source=f"{_LLAMA3} ({_TABLE4}: 16,384 8 16 16 8 131,072 16 16M 380 38%; DP 8 in the paper's v3)",
        gap=f"context parallelism as an all-gather of keys and values, not Meta's; {_SCHEDULE}",
    ),
    PublishedRun(
        name="Llama 3 8B, 15T tokens (model card)",
        kind="gpu_hours",
        published=1.3e6,
        model="llama-3-8b",
        chip="h100",
        n_chips=2048,
        batch_tokens=4 * 2**20,
        seq_len=8192,
        tokens=15e12,
        source=f"{_LLAMA3_CARD} (Llama 3 8B: 1.3M H100-80GB GPU hours; 15T+ tokens)",
        gap=_WHOLE_RUN,
    ),
    PublishedRun(
        name="Llama 3 70B, 15T tokens (model card)",
        kind="gpu_hours",
        published=6.4e6,
        model="llama-3-70b",
        chip="h100",
        n_chips=4096,
        batch_tokens=8 * 2**20,
        seq_len=8192,
        tokens=15e12,
        source=f"{_LLAMA3_CARD} (Llama 3 70B: 6.4M H100-80GB GPU hours; 15T+ tokens)",
        gap=_WHOLE_RUN,
    ),
    PublishedRun(
        name="DeepSeek-V3, 14.8T tokens, 2,048 H800",
        kind="gpu_hours",
        published=2.664e6,
        model="deepseek-v3",
        chip="h800",
        layout=Layout(pipeline=16, expert=64, data=2, microbatches=120),
        n_chips=2048,
        batch_tokens=15360 * 4096,
        seq_len=4096,
        tokens=14.8e12,
        step_options=(("matmul_dtype", "fp8"),),
        source=f"{_DEEPSEEK} (2.664M H800 GPU hours of pre-training on 14.8T tokens; 16-way pipeline, "
        "64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism; FP8 training; batch 15360 "
        "sequences of 4K)",
        gap="the model sends each token to its 8 experts' nodes and leaves the AllToAll exposed; DeepSeek "
        "routes a token to at most 4 nodes, dispatches in fp8 and hides the AllToAll under compute "
        "(DualPipe); the expected time is slower than the run",
    ),
]
_DECODE: list[PublishedRun] = []
_README = f"{_GPT_FAST} (README at commit 32971d3; 8xA100-80GB power limited to 330W, batch size 1)"
_DECODE += _gpt_fast("llama-2-7b", "Llama 2 7B", (
    (1, "bf16", 104.9), (2, "bf16", 168.84), (4, "bf16", 254.02), (8, "bf16", 328.43),
    (1, "int8", 155.58), (1, "int4", 196.80),
), _README)  # fmt: skip
_DECODE += _gpt_fast("llama-2-70b", "Llama 2 70B", (
    (2, "bf16", 21.32), (4, "bf16", 38.01), (8, "bf16", 62.50), (1, "int8", 19.13), (1, "int4", 25.25),
    (8, "int8", 80.44), (8, "int4", 90.77),
), _README)  # fmt: skip
_DECODE += _gpt_fast("mixtral-8x7b", "Mixtral 8x7B", (
    (2, "bf16", 96.67), (4, "bf16", 155.35), (8, "bf16", 227.82), (1, "int8", 97.92), (8, "int8", 279.35),
), f"{_MIXTRAL_FAST} (README at commit 32971d3, batch size 1)")  # fmt: skip


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (*_TRAINING, *_DECODE)


def check_run(run: PublishedRun) -> RunCheck:
    """`run`'s published figure next to the cost models' roofline and expected time (see `RunCheck`).

    Training rows time one step with `training.step_time` on the published layout (or
    `planner.plan_training`'s best when none is published); decode rows one batch-1 step with
    `inference.decode_step_time` at a 5-token context.

    Raises:
        ValueError: a run that is not a `PublishedRun`, or of an unknown kind.
    """
    if not isinstance(run, PublishedRun):
        raise ValueError(f"run={run!r}: not a PublishedRun; allowed: one of PUBLISHED_RUNS")
    kind = checks.one_of("run.kind", run.kind, KINDS)
    if kind == "tokens_per_s":
        decode = inference.decode_step_time(
            run.model, run.chip, run.n_chips, batch=1, context_len=5, param_dtype=run.param_dtype
        )
        return RunCheck(run=run, layout=None, published_s=1 / run.published, roofline_s=decode.roofline_s,
                        expected_s=decode.expected_s)  # fmt: skip
    if run.layout is None:
        step = planner.plan_training(
            run.model, run.chip, run.n_chips, batch_tokens=run.batch_tokens, seq_len=run.seq_len
        ).best.step
    else:
        options: dict[str, Any] = dict(run.step_options)
        step = training.step_time(
            get_model(run.model, arg="run.model"), run.chip, run.layout, batch_tokens=run.batch_tokens,
            seq_len=run.seq_len, **options,
        )  # fmt: skip
    if kind == "mfu":
        published_s = step.model_flops_per_chip / (run.published * step.peak_flops_per_s)
    else:
        published_s = run.published * 3600 / run.n_chips / (run.tokens / run.batch_tokens)
    return RunCheck(run=run, layout=step.layout, published_s=published_s, roofline_s=step.roofline_s,
                    expected_s=step.expected_s)  # fmt: skip


def check_all() -> tuple[RunCheck, ...]:
    """`check_run` of every row of `PUBLISHED_RUNS`, in table order."""
    return tuple(check_run(run) for run in PUBLISHED_RUNS)
