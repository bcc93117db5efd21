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
from types import MappingProxyType
from typing import Any

from book_lib import checks, hardware, inference, planner, training
from book_lib.hardware import Chip
from book_lib.models import get_model
from book_lib.parallelism import Layout
from book_lib.transformer import TransformerConfig

__all__ = [
    "KINDS",
    "FLOPS_FORMULAS",
    "CAUSES",
    "PALM_540B",
    "PublishedRun",
    "RunCheck",
    "PUBLISHED_RUNS",
    "source_flops",
    "check_run",
    "check_all",
]

KINDS = ("mfu", "flops_per_s", "step_s", "tokens_per_s_per_chip", "gpu_hours", "tokens_per_s")
# How a source turned its step time into the FLOPs behind an MFU or a FLOP/s figure, per step of B sequences
# of s tokens (L layers, width h, vocabulary V, N parameters, heads of width H Q = n_heads head_dim):
#   "model"         this library's `TransformerConfig.flops_per_token`, causal, times B s
#   "megatron_hfu"  96 B s L h^2 (1 + s / (6 h) + V / (16 L h)): Narayanan et al. 2021, eq. (3), with the
#                   recomputed forward pass
#   "megatron_mfu"  72 B s L h^2 (1 + s / (6 h) + V / (12 L h)): Korthikanti et al. 2022, appendix A
#   "palm"          B s (6 N + 12 L H Q s): Chowdhery et al. 2022, appendix B (attention not halved)
FLOPS_FORMULAS = ("model", "megatron_hfu", "megatron_mfu", "palm")
# What the model lacks that a run had, for the rows it misses: each cause said once (chapter 13 groups by it).
CAUSES: MappingProxyType[str, str] = MappingProxyType({
    "whole_run": (
        "restarts after failures (the Llama 3 paper counts 466 interruptions "
        "in 54 days), checkpoints, evaluation and the long-context and annealing stages; and the layout is the "
        "planner's, since Meta's is not published"
    ),
    "dequantizing": (
        "gpt-fast's int8 and int4 kernels stream weights well below its bf16 kernel: its own bandwidth column "
        "gives Llama 2 7B 1,397 GB/s in bf16 against 1,069 (int8) and 863 (int4), Llama 2 70B on one GPU 1,322.58 "
        "(int8) and 1,097.66 (int4), and on 8 GPUs 1,135.29 in bf16 against 752.04 and 548.10; no measurement "
        "of those kernels apart from the run is in our sources, so the model streams them at the bf16 rate"
    ),
    "zero3_2021": (
        "DeepSpeed's ZeRO-3 without model parallelism, as the Megatron-LM paper ran it: the model hides each "
        "layer's weight gathers under the previous layer's compute, and the paper reports this setup falling "
        "behind its tensor-and-pipeline layouts as the number of GPUs grows"
    ),
    "network_at_scale": (
        "MegaScale's paper measures Megatron-LM's MFU falling from 53.0 % on 256 GPUs to "
        "41.2 % here, and attributes it to stragglers and network congestion, which the model does not have"
    ),
    "fp8_casts": (
        "Transformer Engine casts every matmul's inputs to fp8 and tracks their "
        "scales, elementwise work the model does not count, on a model whose matmuls are small (width 4096)"
    ),
    "unexplained": "no term of the model accounts for it; the source gives no breakdown",
    "deepseek_overlap": (
        "the model sends each token to its 8 experts' nodes and leaves the AllToAll exposed; DeepSeek routes a "
        "token to at most 4 nodes, dispatches in fp8 and hides the AllToAll under compute (DualPipe)"
    ),
})  # fmt: skip

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


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One published figure and the setup it was measured on.

    Attributes:
        name: the row's label ("PaLM 540B, 6,144 TPU v4").
        kind: what `published` is (`KINDS`): "mfu" (ratio), "flops_per_s" (FLOPs/s per chip, by
            `flops_formula`), "step_s" (s), "tokens_per_s_per_chip" (training), "gpu_hours" (chip-hours
            for `tokens`) or "tokens_per_s" (decode tokens/s at batch 1).
        published: the figure as printed (unit by kind).
        model: a preset name or a `TransformerConfig`.
        chip: a chip name or a `Chip` (the run's machine where it differs from the table's).
        layout: the published `Layout`; None for a training run without one (the planner's best).
        n_chips: chips of the run (count).
        batch_tokens, seq_len: a training step's tokens and sequence length (counts; 0 for decode).
        tokens: the tokens a "gpu_hours" run trained on (count), else 0.
        step_options: keywords for `training.step_time` (remat, matmul_dtype, virtual_stages, attention_kernel),
            or for `inference.decode_step_time` (weight_group_size).
        param_dtype: a decode run's weights ("bf16", "int8", "int4").
        flops_formula: how the source counted FLOPs for an "mfu" or "flops_per_s" figure (`FLOPS_FORMULAS`).
        source: the URL and the words that state the figure and the layout.
        assumed: what the row takes that the source does not print (a micro-batch size, a chip), or "".
        cause: for a row the model misses, the key of `CAUSES` that explains it, or "".
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
    flops_formula: str = "model"
    source: str
    assumed: str = ""
    cause: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCheck:
    """A published run against the cost models, as seconds for the same work (s).

    published_s: a training step at the published figure: the source's FLOPs (`source_flops`) over
    chips x MFU x C, or over chips x FLOP/s; the printed step time; tokens over chips x tokens/s per chip;
    hours 3600 / (N steps); or 1 / (tokens/s) for decode. roofline_s, expected_s: the models' bound and
    expected time for that work.

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

    @property
    def counted(self) -> bool:
        """Whether the row tests the expected time: its layout is published (a decode row's is its GPUs)."""
        return self.run.kind == "tokens_per_s" or self.run.layout is not None


def _gpt(
    name: str, *, layers: int, d_model: int, heads: int, vocab: int, source: str, **shape: Any
) -> TransformerConfig:
    """A GPT-3-style model: a plain (GELU) MLP of 4 D, heads of D / heads, tied embeddings unless said."""
    kw: dict[str, Any] = dict(d_ff=4 * d_model, head_dim=d_model // heads, gated_mlp=False, tied_embeddings=True)
    return TransformerConfig(n_layers=layers, d_model=d_model, n_heads=heads, n_kv_heads=shape.pop("kv_heads", heads),
                             vocab_size=vocab, name=name, source=source, **{**kw, **shape})  # fmt: skip


def _maxtext(scale: int) -> TransformerConfig:
    """MaxText's `global_parameter_scale` model: base.yml's 2048 wide, 16 heads of 128, MLP 7168 (SwiGLU),
    16 layers and 32,000 tokens, the heads and MLP, the width and the depth doubled in turn
    (`get_individual_scales`: scale 2^(3b + r) doubles heads b + (r > 0), width b + (r > 1), layers b times)."""
    b, r = divmod(scale.bit_length() - 1, 3)
    heads, width, layers = 2 ** (b + (r > 0)), 2 ** (b + (r > 1)), 2**b
    return TransformerConfig(
        n_layers=16 * layers, d_model=2048 * width, d_ff=7168 * heads, n_heads=16 * heads, n_kv_heads=16 * heads,
        head_dim=128, vocab_size=32_000, name=f"maxtext-{scale}b", source=_MAXTEXT_BASE,
    )  # fmt: skip


_NARAYANAN = "https://arxiv.org/abs/2104.04473"
_SC21 = "https://github.com/NVIDIA/Megatron-LM/blob/main/examples/sc21/run_table_1.sh"
_KORTHIKANTI = "https://arxiv.org/abs/2205.05198"
_MCORE = "https://github.com/NVIDIA/Megatron-LM/blob/f2e5db402c44ae309aa6448bcb4ae87e8ae0f5f4/README.md"
_BLOOM = "https://github.com/bigscience-workshop/bigscience/blob/master/train/tr11-176B-ml/README.md"
_GLM = "https://arxiv.org/abs/2210.02414"
_MEGASCALE = "https://arxiv.org/abs/2402.15627"
_NEMOTRON_15B = "https://arxiv.org/abs/2402.16819"
_NEMO = (
    "https://github.com/NVIDIA/NeMo/blob/070a0bb168d405d653b9734c0017cf5078e77c0d/docs/source/performance/"
    "performance_summary.md"
)
_FOUNDRY = (
    "https://github.com/mosaicml/llm-foundry/blob/061f2c7ce64e655100286584a7629e2a09f827ba/scripts/train/"
    "benchmarking/README.md"
)
_MAXTEXT = "https://github.com/AI-Hypercomputer/maxtext/blob/main/README.md"
_MAXTEXT_BASE = (
    "https://github.com/AI-Hypercomputer/maxtext (MaxText/configs/base.yml: base_emb_dim 2048, base_num_query_heads "
    "16, base_mlp_dim 7168, base_num_decoder_layers 16, head_dim 128, vocab_size 32000, silu/linear MLP; "
    "pyconfig.get_individual_scales)"
)
_V51200 = " ('All models use a vocabulary size (V) of 51,200 ... and a sequence length (s) of 2048')"
_MB_SCRIPT = f"the micro-batch size of the authors' script {_SC21}, which the table does not print"

# GPT-3-style models of the Megatron-LM papers: (layers, width, heads) from each paper's table.
_MEGATRON = {
    size: _gpt(f"megatron-{size}", layers=depth, d_model=d, heads=n, vocab=51_200, source=src + _V51200)
    for size, (depth, d, n), src in (
        ("1.7b", (24, 2304, 24), _NARAYANAN), ("7.5b", (36, 4096, 32), _NARAYANAN),
        ("39.1b", (48, 8192, 64), _NARAYANAN), ("145.6b", (80, 12288, 96), _NARAYANAN),
        ("529.6b", (105, 20480, 128), _NARAYANAN), ("1008b", (128, 25600, 160), _NARAYANAN),
        ("174.6b", (96, 12288, 96), _NARAYANAN), ("22b", (48, 6144, 64), _KORTHIKANTI),
    )
}  # fmt: skip
_MCORE_MODELS = {
    size: _gpt(f"megatron-core-{size}", layers=depth, d_model=d, heads=n, vocab=131_072, tied_embeddings=False,
               source=f"{_MCORE} (images/model_table.png; 'All models use a vocabulary size of 131,072 and a "
               "sequence length of 4096'; d_ff = 4 h and untied embeddings give the printed sizes)")
    for size, (depth, d, n) in (("1.7b", (24, 2048, 16)), ("70b", (84, 8192, 64)), ("177b", (96, 12288, 96)),
                            ("462b", (112, 18432, 144)))
}  # fmt: skip
_BLOOM_176B = _gpt("bloom-176b", layers=70, d_model=14336, heads=112, vocab=250_880,
                   source="https://huggingface.co/bigscience/bloom/blob/main/config.json")  # fmt: skip
_GLM_130B = _gpt(
    "glm-130b",
    layers=70,
    d_model=12288,
    heads=96,
    vocab=150_528,
    d_ff=32768,
    gated_mlp=True,
    source=f"{_GLM} (section 2: 70 layers, hidden 12,288, GeGLU MLP of 32,768, vocabulary 150,528)",
)
_MEGASCALE_175B = _gpt("megascale-175b", layers=96, d_model=12288, heads=128, vocab=64_000,
                       source=f"{_MEGASCALE} (Table 1: 128 heads, hidden 12,288, 96 layers; 'Sequence length is "
                       "2,048 and vocabulary size is 64,000')")  # fmt: skip
_NEMOTRON_15B_CFG = _gpt("nemotron-4-15b", layers=32, d_model=6144, heads=48, kv_heads=8, vocab=256_000,
                         tied_embeddings=False, source=f"{_NEMOTRON_15B} (Table 1: 32 layers, hidden 6144, 48 heads, "
                         "8 KV heads, sequence 4096, vocabulary 256,000; squared-ReLU MLP; d_ff 4 h from its 12.5B "
                         "non-embedding parameters)")  # fmt: skip
_NEMOTRON_340B = _gpt("nemotron-4-340b", layers=96, d_model=18432, heads=96, kv_heads=8, vocab=256_000,
                      tied_embeddings=False, source="https://arxiv.org/abs/2406.11704 (Table 1: 96 layers, hidden "
                      "18432, 96 heads, 8 KV heads, vocabulary 256,000; squared-ReLU MLP of 73,728)")  # fmt: skip
_MPT = {
    size: _gpt(f"mpt-{size}", layers=depth, d_model=d, heads=n, vocab=50_368, source=src)
    for size, (depth, d, n), src in (
        ("7b", (32, 4096, 32), "https://huggingface.co/mosaicml/mpt-7b/blob/main/config.json"),
        ("70b", (80, 8192, 64), f"{_FOUNDRY} (the 70b yaml: d_model 8192, n_heads 64, n_layers 80)"),
    )
}  # fmt: skip


def _decode(name: str, model: str, n: int, dtype: str, tokens_per_s: float, source: str, cause: str) -> PublishedRun:
    """A gpt-fast row; int4 weights carry a scale and a zero point per 32 ("4-bit (G=32)" in its README)."""
    return PublishedRun(
        name=name, kind="tokens_per_s", published=tokens_per_s, model=model, chip=GPT_FAST_A100, n_chips=n,
        param_dtype=dtype, step_options=(("weight_group_size", 32),) if dtype == "int4" else (), source=source,
        cause=cause,
    )  # fmt: skip


def _gpt_fast(model: str, label: str, rows: tuple[tuple[int, str, float], ...], source: str) -> list[PublishedRun]:
    """gpt-fast's rows of one model: (GPUs, dtype, tokens/s), batch 1, a 5-token prompt."""
    out = []
    for n, dtype, rate in rows:
        quoted = f"{source}: {n} GPU{'s' * (n > 1)}, {dtype}, {rate:g} tokens/s"
        out.append(_decode(f"{label}, {dtype}, {n} A100", model, n, dtype, rate, quoted,
                           "" if dtype == "bf16" else "dequantizing"))  # fmt: skip
    return out


def _run(
    name: str,
    kind: str,
    published: float,
    model: str | TransformerConfig,
    chip: str | Chip,
    layout: Layout,
    *,
    sequences: int,
    seq_len: int,
    source: str,
    **options: Any,
) -> PublishedRun:
    """A training row of `sequences` sequences of `seq_len` tokens per step; `options` holds the row's other
    fields (flops_formula, assumed, cause) and `training.step_time`'s keywords (remat, virtual_stages, ...)."""
    fields = {k: options.pop(k) for k in ("flops_formula", "assumed", "cause") if k in options}
    return PublishedRun(name=name, kind=kind, published=published, model=model, chip=chip, layout=layout,
                        n_chips=layout.n_chips, batch_tokens=sequences * seq_len, seq_len=seq_len,
                        step_options=tuple(options.items()), source=source, **fields)  # fmt: skip


_SCHEDULE = (
    "two virtual stages per GPU and one sequence per microbatch: the paper uses 'an interleaved schedule ... with V "
    "pipeline stages on one pipeline rank' (section 3.3.2) but prints no V; 2 is the fewest interleaving allows"
)
_TABLE4 = "Table 4: GPUs, TP, CP, PP, DP, seq. len., batch size/DP, tokens/batch, TFLOPs/GPU, BF16 MFU"
_MATERIALIZED = (("remat", "full"), ("attention_kernel", "materialized"))
# Software that reduced its data-parallel gradients only after the last backward pass of a step.
_MEGATRON_DDP = (
    "the data-parallel gradient reduction after the backward pass, as Megatron-LM ran it by default until its "
    "--overlap-grad-reduce of September 2023 (megatron/training.py, train_step: in 2021 'All-reduce if needed' "
    "after forward_backward_func, https://github.com/NVIDIA/Megatron-LM/blob/"
    "6fd781891c8ce903bf9163af0149eee2e40e8ed9/megatron/training.py; in 2022 optimizer.reduce_model_grads after "
    "it, https://github.com/NVIDIA/Megatron-LM/blob/de593298359ec4a08f31aaf29a2ccf8df0b393ae/megatron/training.py)"
)
_DEEPSPEED_PIPE = (
    "the data-parallel gradient reduction after the backward pass, as DeepSpeed's pipeline engine runs it "
    "(https://github.com/microsoft/DeepSpeed/blob/af8f25967a6fe14247fe6ae0abd3cc6d1caa6e30/deepspeed/runtime/"
    "pipe/schedule.py, TrainSchedule: '# Model step at the end of the batch' ReduceTiedGrads, ReduceGrads, "
    "OptimizerStep)"
)
_SELECTIVE = "sequence parallelism and selective recomputation"
_TRAINING = [
    PublishedRun(
        name="PaLM 540B, 6,144 TPU v4", kind="mfu", published=0.462, model=PALM_540B, chip=PALM_TPU_V4,
        layout=Layout(data=2, fsdp=256, tensor=12), n_chips=6144, batch_tokens=2048 * 2048, seq_len=2048,
        step_options=(("remat", "full"),), flops_formula="palm",
        source=f"{_PALM} (Table 3: 46.2% MFU; 12-way model parallelism, 256-way fully sharded data "
        "parallelism, two-way data parallelism across pods; batch 2048 x 2048 tokens; hardware FLOPs "
        "utilisation with rematerialisation 57.8%)",
        assumed="the whole forward pass recomputed, which the paper does only in part",
    ),
    PublishedRun(
        name="Llama 3 405B, 8,192 H100", kind="mfu", published=0.43, model="llama-3.1-405b", chip="h100",
        layout=Layout(tensor=8, pipeline=16, data=64, microbatches=32), n_chips=8192, batch_tokens=16 * 2**20,
        seq_len=8192, source=f"{_LLAMA3} ({_TABLE4}: 8,192 8 1 16 64 8,192 32 16M 430 43%)", assumed=_SCHEDULE,
        step_options=(("virtual_stages", 2),),
    ),
    PublishedRun(
        name="Llama 3 405B, 16,384 H100", kind="mfu", published=0.41, model="llama-3.1-405b", chip="h100",
        layout=Layout(tensor=8, pipeline=16, data=128, microbatches=16), n_chips=16384, batch_tokens=16 * 2**20,
        seq_len=8192, source=f"{_LLAMA3} ({_TABLE4}: 16,384 8 1 16 128 8,192 16 16M 400 41%)", assumed=_SCHEDULE,
        step_options=(("virtual_stages", 2),),
    ),
    PublishedRun(
        name="Llama 3 405B, 16,384 H100, 128K context", kind="mfu", published=0.38, model="llama-3.1-405b",
        chip="h100", layout=Layout(tensor=8, context=16, pipeline=16, data=8, microbatches=16), n_chips=16384,
        batch_tokens=128 * 131072, seq_len=131072, step_options=(("virtual_stages", 2),),
        source=f"{_LLAMA3} ({_TABLE4}: 16,384 8 16 16 8 131,072 16 16M 380 38%; DP 8 in the paper's v3)",
        assumed=f"context parallelism as an all-gather of keys and values, not Meta's; {_SCHEDULE}",
    ),
    PublishedRun(
        name="Llama 3 8B, 15T tokens (model card)", kind="gpu_hours", published=1.3e6, model="llama-3-8b",
        chip="h100", n_chips=2048, batch_tokens=4 * 2**20, seq_len=8192, tokens=15e12,
        source=f"{_LLAMA3_CARD} (Llama 3 8B: 1.3M H100-80GB GPU hours; 15T+ tokens)", cause="whole_run",
    ),
    PublishedRun(
        name="Llama 3 70B, 15T tokens (model card)", kind="gpu_hours", published=6.4e6, model="llama-3-70b",
        chip="h100", n_chips=4096, batch_tokens=8 * 2**20, seq_len=8192, tokens=15e12,
        source=f"{_LLAMA3_CARD} (Llama 3 70B: 6.4M H100-80GB GPU hours; 15T+ tokens)", cause="whole_run",
    ),
    PublishedRun(
        name="DeepSeek-V3, 14.8T tokens, 2,048 H800", kind="gpu_hours", published=2.664e6, model="deepseek-v3",
        chip="h800", layout=Layout(pipeline=16, expert=64, data=2, microbatches=120, zero=1), n_chips=2048,
        batch_tokens=15360 * 4096, seq_len=4096, tokens=14.8e12, step_options=(("matmul_dtype", "fp8"),),
        source=f"{_DEEPSEEK} (2.664M H800 GPU hours of pre-training on 14.8T tokens; 16-way pipeline, "
        "64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism; FP8 training; batch 15360 "
        "sequences of 4K)",
        cause="deepseek_overlap",
    ),
    *(
        _run(f"Megatron-LM 2021, {size.upper()}, {t * p * d:,} A100", "flops_per_s", tflops * 1e12, _MEGATRON[size],
             "a100", Layout(data=d, tensor=t, pipeline=p, microbatches=m), sequences=b, seq_len=2048,
             source=f"{_NARAYANAN} (Table 1: {size[:-1]}B, tensor {t}, pipeline {p}, {t * p * d} GPUs, batch {b}, "
             f"{tflops} teraFLOP/s per GPU)", flops_formula="megatron_hfu", assumed=f"{_MB_SCRIPT}; {_MEGATRON_DDP}",
             virtual_stages=v, overlap_grad_reduce=False, **dict(_MATERIALIZED))
        for size, t, p, d, b, m, v, tflops in (
            ("1.7b", 1, 1, 32, 512, 1, 1, 137), ("7.5b", 4, 1, 32, 512, 1, 1, 142),
            ("39.1b", 8, 2, 32, 1536, 12, 1, 138), ("145.6b", 8, 8, 24, 2304, 48, 2, 148),
            ("529.6b", 8, 35, 9, 2520, 280, 3, 163), ("1008b", 8, 64, 6, 3072, 512, 1, 163),
        )
    ),
    *(
        _run(f"Megatron-LM 2021, ZeRO-3, {size.upper()}, {n} A100", "flops_per_s", tflops * 1e12, _MEGATRON[size],
             "a100", Layout(fsdp=n, microbatches=b // (4 * n)), sequences=b, seq_len=2048,
             source=f"{_NARAYANAN} (Table 2, ZeRO-3 without model parallelism: {size[:-1]}B, batch {b}, {n} GPUs, "
             f"microbatch 4, {tflops} teraFLOP/s per GPU)", flops_formula="megatron_hfu", cause="zero3_2021",
             **dict(_MATERIALIZED))
        for size, n, b, tflops in (("174.6b", 384, 1536, 144), ("529.6b", 640, 2560, 138))
    ),
    *(
        _run(f"Korthikanti 2022, {label}, {t * p * d:,} A100", "step_s", seconds, model, "a100",
             Layout(data=d, tensor=t, pipeline=p, microbatches=b // d), sequences=b, seq_len=2048,
             source=f"{_KORTHIKANTI} (Table 3: tensor {t}, pipeline {p}, batch {b}, micro batch 1; Table 5 and "
             f"section 6.3: {seconds} s per iteration{', with ' + how if how else ''})",
             assumed=_MEGATRON_DDP, virtual_stages=v, remat=remat, attention_kernel="materialized",
             overlap_grad_reduce=False)
        for label, model, t, p, d, b, v, seconds, remat, how in (
            ("22B", _MEGATRON["22b"], 8, 1, 1, 4, 1, 1.10, "checkpoints", _SELECTIVE),
            ("175B", _MEGATRON["174.6b"], 8, 8, 1, 64, 3, 13.75, "checkpoints", _SELECTIVE),
            ("175B, full recomputation", _MEGATRON["174.6b"], 8, 8, 1, 64, 3, 18.13, "full", "full recomputation"),
            ("530B", _MEGATRON["529.6b"], 8, 35, 1, 280, 3, 37.83, "checkpoints", _SELECTIVE),
            ("530B, 8-way data parallel", _MEGATRON["529.6b"], 8, 35, 8, 2240, 3, 39.15, "checkpoints", _SELECTIVE),
            ("1T", _MEGATRON["1008b"], 8, 64, 1, 512, 1, 71.49, "checkpoints", _SELECTIVE),
        )
    ),
    *(
        _run(f"Megatron-Core 2024, {size.upper()}, {t * p * 48:,} H100", "mfu", mfu, _MCORE_MODELS[size], "h100",
             Layout(data=48, tensor=t, pipeline=p, microbatches=b // 48, zero=1), sequences=b, seq_len=4096,
             source=f"{_MCORE} (images/model_table.png: {size[:-1]}B, tensor {t}, pipeline {p}, data-parallel 48, "
             f"batch {b}, MFU {mfu:.0%}; --overlap-grad-reduce --overlap-param-gather)",
             flops_formula="megatron_mfu", assumed="micro-batch size 1, one virtual stage and no recomputation")
        for size, t, p, b, mfu in (("1.7b", 1, 1, 192, 0.41), ("70b", 8, 2, 384, 0.42), ("177b", 8, 6, 1152, 0.44),
                                   ("462b", 8, 16, 3072, 0.47))
    ),
    _run("BLOOM 176B, 384 A100", "step_s", 104.70, _BLOOM_176B, "a100",
         Layout(data=8, tensor=4, pipeline=12, microbatches=128, zero=1), sequences=2048, seq_len=2048,
         source=f"{_BLOOM} ('TP=4 PP=12 DP=8 MBS=2'; log at iteration 85376: 'elapsed time per iteration (s): "
         "104.70 ... global batch size: 2048'; --checkpoint-activations, ZeRO stage 1)", assumed=_DEEPSPEED_PIPE,
         overlap_grad_reduce=False, **dict(_MATERIALIZED)),
    _run("GLM-130B, 768 A100 40GB", "mfu", 0.325, _GLM_130B, "a100-40gb",
         Layout(data=24, tensor=4, pipeline=8, microbatches=176), sequences=4224, seq_len=2048,
         source=f"{_GLM} ('96 DGX-A100 GPU (8x40G) servers'; 'global batch size (4,224)'; '4-way tensor parallelism "
         "and 8-way pipeline parallelism'; 'model FLOPs utilization (MFU) of 32.5% due to re-materialization'; "
         "appendix B.4: m = 176)", flops_formula="palm", cause="unexplained", **dict(_MATERIALIZED)),
    *(
        _run(f"MegaScale's Megatron-LM baseline, 175B, {n:,} A100", "step_s", seconds, _MEGASCALE_175B, "a100",
             Layout(data=n // 64, tensor=8, pipeline=8, microbatches=b // (n // 64)), sequences=b, seq_len=2048,
             source=f"{_MEGASCALE} (Table 2: batch {b}, Megatron-LM, {n} GPUs, iteration time {seconds} s; Table 1: "
             "tensor 8, pipeline 8; 'six ... interleaving stages for the 175B')",
             assumed="A100s (the paper says 'NVIDIA Ampere GPUs'), micro-batch size 1, no recomputation",
             virtual_stages=6, cause="network_at_scale" if n > 256 else "")
        for n, b, seconds in ((256, 768, 40.0), (12288, 6144, 8.57))
    ),
    _run("Nemotron-4 15B, 768 H100", "step_s", 0.57, _NEMOTRON_15B_CFG, "h100",
         Layout(data=96, tensor=8, microbatches=4, zero=1), sequences=384, seq_len=4096,
         source=f"{_NEMOTRON_15B} (Table 2: data-parallel 96, 768 GPUs, iteration time 0.57 s, batch 384; '8-way "
         "tensor parallelism ... a distributed optimizer')", assumed="micro-batch size 1"),
    *(
        _run(f"NeMo 24.07, {label}, {lay.n_chips} H100, fp8", "tokens_per_s_per_chip", rate, model, "h100", lay,
             sequences=b, seq_len=s, source=f"{_NEMO} ('{row}': GPUs, GBS, MBS, sequence, TP, PP, CP, VP, "
             "tokens/s/GPU; 'pre-training performance ... at FP8 precision')",
             assumed="the distributed optimizer and no recomputation (NeMo's defaults, not printed)",
             matmul_dtype="fp8", virtual_stages=v, cause="fp8_casts" if label == "Llama 3 8B" else "")
        for label, model, lay, b, s, v, rate, row in (
            ("Nemotron-4 340B", _NEMOTRON_340B, Layout(data=2, tensor=8, pipeline=8, microbatches=16, zero=1), 32,
             4096, 12, 322, "Nemotron-340B | 128 | 32 | 1 | 4096 | 8 | 8 | 1 | 12 | 322"),
            ("Llama 3 70B", "llama-3-70b", Layout(data=2, tensor=4, pipeline=4, context=2, microbatches=64, zero=1),
             128, 8192, 5, 1533, "LLAMA3-70B | 64 | 128 | 1 | 8192 | 4 | 4 | 2 | 5 | 1533"),
            ("Llama 3 8B", "llama-3-8b", Layout(data=4, context=2, microbatches=32, zero=1), 128, 8192, 1, 12036,
             "LLAMA3-8B | 8 | 128 | 1 | 8192 | 1 | 1 | 2 | 1 | 12036"),
        )
    ),
    *(
        _run(f"llm-foundry MPT-{size.upper()}, {n} {chip.upper()}", "mfu", mfu, _MPT[size], chip,
             Layout(fsdp=n, microbatches=ga), sequences=b, seq_len=2048, flops_formula="palm", remat="full",
             source=f"{_FOUNDRY} ('{size} | 2048 | {n} | {label} | {mfu * 100:.2f}': MFU; micro batch {b // (n * ga)}, "
             f"grad accumulation {ga}, global batch {b}; FULL_SHARD; activation checkpointing)")
        for size, n, chip, label, mfu, ga, b in (
            ("70b", 64, "h100", "h100_80gb", 0.4257, 4, 2048), ("70b", 64, "a100", "a100_80gb", 0.5333, 4, 2048),
            ("7b", 128, "a100-40gb", "a100_40gb", 0.5014, 1, 2304),
        )
    ),
    *(
        _run(f"MaxText {scale}B, {n} TPU v5p", "mfu", mfu, _maxtext(scale), "tpu-v5p",
             Layout(fsdp=n // t, tensor=t), sequences=n * per_chip, seq_len=2048, remat=remat,
             source=f"{_MAXTEXT} (TPU v5p: {scale}B, v5p-{2 * n}, MFU {mfu:.2%}); MaxText/configs/v5p/{scale}b.sh "
             f"(per_device_batch_size={per_chip}, ici_fsdp_parallelism=-1, ici_tensor_parallelism={t}, "
             f"max_target_length=2048, remat_policy={'full' if remat == 'full' else 'minimal'})")
        for scale, n, t, per_chip, remat, mfu in (
            (32, 64, 4, 7, "checkpoints", 0.6776), (64, 64, 4, 3, "checkpoints", 0.7031),
            (128, 128, 8, 1, "checkpoints", 0.6868), (128, 256, 8, 1, "checkpoints", 0.6853),
            (256, 512, 8, 1, "checkpoints", 0.6882), (512, 512, 8, 2, "full", 0.6399),
        )
    ),
    *(
        _run(f"MaxText {scale}B, {slices} x 256 TPU v5e", "mfu", mfu, _maxtext(scale), "tpu-v5e",
             Layout(data=slices, fsdp=256), sequences=256 * slices * per_chip, seq_len=2048, remat="full",
             source=f"{_MAXTEXT} (TPU v5e: {slices}x v5e-256, {scale}B MFU {mfu:.2%}); MaxText/configs/v5e/{scale}b.sh "
             f"(per_device_batch_size={per_chip}, remat_policy=full, max_target_length=2048; FSDP over each slice, "
             "data parallelism across slices over DCN)",
             assumed="the per-device batch of the config file, which the README's table does not print")
        for scale, per_chip, rows in (
            (16, 6, ((1, 0.6110), (8, 0.5827), (32, 0.5465))),
            (32, 4, ((1, 0.6686), (8, 0.6367), (32, 0.6040))),
            (64, 2, ((1, 0.5990), (8, 0.5496), (32, 0.5018))),
        )
        for slices, mfu in rows
    ),
]  # fmt: skip
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


def source_flops(formula: str, cfg: TransformerConfig, *, batch_tokens: float, seq_len: int) -> float:
    """The FLOPs of one training step as a source counted them (`FLOPS_FORMULAS`), for B s = batch_tokens.

    "model": B s flops_per_token(s, training, causal); "megatron_hfu": 96 B s L h^2 (1 + s / (6 h) + V / (16 L h));
    "megatron_mfu": 72 B s L h^2 (1 + s / (6 h) + V / (12 L h)); "palm": B s (6 N + 12 L H Q s).

    Raises:
        ValueError: an unknown formula.
    """
    name = checks.one_of("flops_formula", formula, FLOPS_FORMULAS)
    L, h, V, s = cfg.n_layers, cfg.d_model, cfg.vocab_size, seq_len
    if name == "megatron_hfu":
        return 96 * batch_tokens * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    if name == "megatron_mfu":
        return 72 * batch_tokens * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))
    if name == "palm":
        return batch_tokens * (6 * cfg.param_count() + 12 * L * cfg.n_heads * cfg.head_dim * s)
    return batch_tokens * cfg.flops_per_token(s, training=True, causal=True)


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
    options: dict[str, Any] = dict(run.step_options)
    if kind == "tokens_per_s":
        decode = inference.decode_step_time(
            run.model,
            run.chip,
            run.n_chips,
            batch=1,
            context_len=5,
            param_dtype=run.param_dtype,
            **options,
        )
        return RunCheck(run=run, layout=None, published_s=1 / run.published, roofline_s=decode.roofline_s,
                        expected_s=decode.expected_s)  # fmt: skip
    cfg = get_model(run.model, arg="run.model")
    if run.layout is None:
        step = planner.plan_training(
            cfg, run.chip, run.n_chips, batch_tokens=run.batch_tokens, seq_len=run.seq_len
        ).best.step
    else:
        step = training.step_time(
            cfg, run.chip, run.layout, batch_tokens=run.batch_tokens, seq_len=run.seq_len, **options
        )
    work = source_flops(run.flops_formula, cfg, batch_tokens=run.batch_tokens, seq_len=run.seq_len) / run.n_chips
    published_s = {
        "mfu": lambda: work / (run.published * step.peak_flops_per_s),
        "flops_per_s": lambda: work / run.published,
        "step_s": lambda: run.published,
        "tokens_per_s_per_chip": lambda: run.batch_tokens / (run.n_chips * run.published),
        "gpu_hours": lambda: run.published * 3600 / run.n_chips / (run.tokens / run.batch_tokens),
    }[kind]()
    return RunCheck(run=run, layout=step.layout, published_s=published_s, roofline_s=step.roofline_s,
                    expected_s=step.expected_s)  # fmt: skip


def check_all() -> tuple[RunCheck, ...]:
    """`check_run` of every row of `PUBLISHED_RUNS`, in table order."""
    return tuple(check_run(run) for run in PUBLISHED_RUNS)
