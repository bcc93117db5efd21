"""What a chip achieves, as fractions of its datasheet: the measured rates behind every expected time.

A roofline divides FLOPs by the peak and bytes by the datasheet bandwidth. No program reaches either:
a bf16 GEMM sustains 63-71 % of a Blackwell's or Hopper's peak at its power limit, a flash-attention
kernel reaches 45-73 % per pass, every kernel
a GPU launches costs a few microseconds whatever it does, and NCCL's kernels take SMs from the matmuls
they overlap. `Efficiency` holds one chip's figures, each with the benchmark or paper that measured
it and the words that state it; `hardware.Chip.efficiency` carries it beside the chip's datasheet.
None of these figures comes from a published training or serving run: those are the models' test
(`published`), never their input. A reader's own measurements (`python -m book_lib calibrate`)
replace them through `calibrated`.

| figure             | what it scales                                    | unit             |
|--------------------|---------------------------------------------------|------------------|
| matmul             | weight matmuls: achieved / peak FLOP/s            | ratio            |
| matmul_fp8         | the same in fp8, against the fp8 peak             | ratio            |
| attention_forward  | a flash-attention kernel's forward pass           | ratio            |
| attention_backward | its backward pass                                 | ratio            |
| hbm                | elementwise work, weight reads: achieved / spec   | ratio            |
| kernel_s           | each kernel of a step run back to back            | s                |
| overlap_slowdown   | compute slowed while collectives overlap it       | ratio            |
| ici                | a ring collective's bus bandwidth / link spec     | ratio            |
| dcn                | the same across hosts (InfiniBand, EFA, DCN)      | ratio            |

Book: Part 1 ("Rooflines": a bound, not a prediction); Part 12 (GPUs).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from book_lib import checks

__all__ = [
    "FIELDS",
    "Efficiency",
    "PEAK",
    "TPU",
    "TPU_V5E",
    "IRONWOOD",
    "A100",
    "A100_PCIE",
    "HOPPER",
    "H200",
    "B200",
    "Calibration",
    "load_calibration",
    "calibrated",
]

FIELDS = (
    "matmul",
    "matmul_fp8",
    "attention_forward",
    "attention_backward",
    "hbm",
    "kernel_s",
    "overlap_slowdown",
    "ici",
    "dcn",
)
_SQUARE = re.compile(r"matmul_bf16_n(\d+)_flops_per_s")
_RATIOS = ("matmul", "matmul_fp8", "attention_forward", "attention_backward", "hbm", "ici", "dcn")

_MAMF = (
    "https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md "
    '("Maximum Achievable Matmul FLOPS comparison table", the mean of 100 iterations at the best of a sweep of '
    "GEMM shapes: "
)
# mamf-finder's sustained rates are published on the repository's branch fast-mamf only (2026-08-10).
_FAST_MAMF = (
    "https://github.com/stas00/ml-engineering/blob/082816f9be8aeb6b65b074c33cb354a7ca1e7087/compute/accelerator"
)
_MSMF = (
    f"{_FAST_MAMF}/benchmarks/README.md "
    "(mamf-finder's MSMF, 'the power-saturated, sustained rate that matches real training throughput', bf16, "
    "'All 8 GPUs × 5 rounds (n=40)', every GPU of the node computing at once: "
)
_MSMF_FP8 = (
    f"{_FAST_MAMF}/README.md ('FP8 (float8_e4m3fn)' table, mamf-finder's MSMF, 'the best a matmul holds once "
    "the GPU is saturated at ~TDP and the clock has settled', measured 'one GPU at a time with siblings idle', "
    "where all eight at once cost bf16 a further 0.6% on an H200 and 2.0% on a B200: "
)
# OpenXLA's GPU cost model measures GEMMs over shapes; its square bf16 rows (b = 1, m = n = k), TFLOP/s.
_XLA_TABLE = (
    "; its shapes from OpenXLA's measured GEMM table, xla/service/gpu/model/matmul_interpolator_data.h "
    "(ROCm/xla ea2c45f2ca, 2026-07-31, 'update matmul interpolator table'), key '{key}', bf16 x bf16 -> bf16, "
    "b = 1, m = n = k of 256 to 4096: {rates} TFLOP/s, read relative to the 4096 row"
)
_SM90_SQUARES = ((256, 6.72), (512, 43.6), (1024, 252.8), (2048, 641.0), (4096, 780.2))
_SM100_SQUARES = ((256, 6.77), (512, 48.5), (1024, 288.0), (2048, 985.8), (4096, 1416.9))


def _xla_shapes(key: str, squares: tuple[tuple[int, float], ...], peak_tflops: float) -> tuple[str, Any]:
    """The words citing OpenXLA's table for `key`, and its square rows as a `matmul_sweep` (ratios of peak)."""
    words = _XLA_TABLE.format(key=key, rates=", ".join(f"{r:g}" for _, r in squares))
    return words, tuple((side, tflops / peak_tflops) for side, tflops in squares)


_SM90_WORDS, _SM90_SWEEP = _xla_shapes("sm_90", _SM90_SQUARES, 989)
_SM100_WORDS, _SM100_SWEEP = _xla_shapes("sm_100_B200", _SM100_SQUARES, 2250)
_H200_MSMF = _MSMF + "H200, 698.6 of 989 TFLOPS, 70.6%, where the burst MAMF was 823.9)"
_H200_MSMF_FP8 = _MSMF_FP8 + "H200 SXM, 1288.7 of 1979 TFLOPS, 65.1%, where the burst MAMF was 1491.9)"
_FA2 = (
    "https://arxiv.org/abs/2307.08691 (FlashAttention-2, Dao 2023, A100 80GB SXM4, head dim 64 and 128, "
    "sequences 512 to 16k: 'reaching up to 73% of the theoretical max throughput in the forward pass, and up "
    "to 63% of the theoretical max throughput in the backward pass'"
)
_FA3 = (
    "https://arxiv.org/abs/2407.08608 (FlashAttention-3, Shah et al. 2024, H100 80GB SXM5, head dim 128, "
    "sequence 8k, bf16: "
)
_OVERLAP = (
    "https://arxiv.org/abs/2507.03114 (Lee et al. 2025, 'Characterizing Compute-Communication Overlap in "
    "GPU-Accelerated Distributed Deep Learning', on A100, H100, MI250 and MI210: 'overlapping computation "
    "and communication can result in an average computational slowdown of 18.9%, with a maximum of 40.0%')"
)
_LAUNCH = (
    "https://cuda.juliagpu.org/dev/usage/graphs/ (CUDA.jl's measurement: 'Integrating a small ODE for 10 "
    "steps with RK4 (80 broadcast kernels) goes from 260 us to 70 us' as a CUDA graph: 260 / 80 = 3.25 us "
    "per kernel launched from the host, 70 / 80 = 0.875 us per kernel of a graph)"
)
_NETWORK = "https://github.com/stas00/ml-engineering/blob/master/network/README.md"
_NVLINK = (
    f"{_NETWORK} (nccl-tests, 16GiB payload, busbw over the unidirectional spec: 'A100, NVLink 3 | 234.89GBps | "
    "300 | 78%'; 'H200, NVLink 4, ring | 367.61GBps | 450 | 82%', the H100's NVLink 4 too; on 8 H200 all-gather "
    "361.4 and reduce-scatter 362.9 GBps, 80-81%: the ring NCCL falls back to without NVLink SHARP)"
)
_NICS = (
    f"{_NETWORK} (4 nodes of 8 B200 over AWS EFA, 4GiB all-reduce over 32 ranks: '36.52GBps per accelerator, "
    "or 73% of the 50GBps of inter-node bandwidth each accelerator has'; measured on that system only)"
)
_NICS_DGX = (
    f"{_NETWORK.replace('README.md', 'benchmarks/README.md')} (NVIDIA GTC24 session S62129's slide, 'NCCL Tests "
    "Allreduce Bus Bandwidth in GB/s' across nodes over InfiniBand RDMA, the NICs' total per node: "
)
_UNMEASURED = "no published measurement in our sources: the datasheet's figure until `calibrate` measures it"
_FUSED = "XLA fuses a layer's elementwise work into its matmuls' kernels and launches one program per step"


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """The rates one chip achieves, against its datasheet (see the module's table).

    Attributes:
        matmul: a large weight matmul's achieved FLOP/s over the peak (ratio in (0, 1]).
        matmul_fp8: the same for an fp8 matmul, over the fp8 peak (ratio in (0, 1]).
        attention_forward, attention_backward: a flash-attention kernel's achieved FLOP/s over the peak,
            per pass (ratio in (0, 1]).
        hbm: achieved copy bandwidth over the datasheet's (ratio in (0, 1]).
        kernel_s: the fixed cost of one kernel of a step run back to back, whatever its work (s, >= 0);
            0 where a compiler fuses a layer into a few kernels of one program (XLA on TPUs).
        overlap_slowdown: how much slower compute runs while collectives overlap it (ratio >= 0).
        ici: a ring collective's bus bandwidth over the in-domain link spec (ICI, NVLink) (ratio in (0, 1]).
        dcn: the same for the links between hosts or pods (ratio in (0, 1]).
        sources: (figure, where it was measured and the words that state it), one per figure.
        measured: the figures a `Calibration` replaced, measured on the reader's device.
        matmul_sweep: (side, achieved / peak) of square bf16 matmuls of that side, from a cited sweep
            (sides increasing, the source in `matmul`'s); empty where no sweep of the chip is published,
            and every matmul then runs at `matmul` (see `shape_factor`).
    """

    matmul: float = 1.0
    matmul_fp8: float = 1.0
    attention_forward: float = 1.0
    attention_backward: float = 1.0
    hbm: float = 1.0
    kernel_s: float = 0.0
    overlap_slowdown: float = 0.0
    ici: float = 1.0
    dcn: float = 1.0
    sources: tuple[tuple[str, str], ...] = tuple((name, _UNMEASURED) for name in FIELDS)
    measured: tuple[str, ...] = ()
    matmul_sweep: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        for name in _RATIOS:
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name}={value!r}: not a fraction of the datasheet; allowed: 0 < {name} <= 1")
        for name in ("kernel_s", "overlap_slowdown"):
            checks.non_negative(name, getattr(self, name))
        sides = [side for side, _ in self.matmul_sweep]
        if sides != sorted(set(sides)) or not all(side > 0 and 0 < r <= 1 for side, r in self.matmul_sweep):
            raise ValueError(
                f"matmul_sweep={self.matmul_sweep!r}: not (side, ratio) pairs; allowed: sides > 0 increasing, "
                "0 < ratio <= 1"
            )
        missing = set(FIELDS) - {name for name, _ in self.sources}
        if missing:
            raise ValueError(f"sources={self.sources!r}: no source for {sorted(missing)}; allowed: one per figure")

    def matmul_for(self, dtype: str) -> float:
        """The achieved fraction of the peak for matmuls in `dtype`: `matmul_fp8` for fp8, else `matmul`."""
        return self.matmul_fp8 if checks.dtype(dtype, "dtype") == "fp8" else self.matmul

    def shape_factor(self, m: float, n: float, k: float) -> float:
        """How much slower an [m, k] @ [k, n] matmul runs than the best shape's `matmul` rate (ratio in (0, 1]).

        The sweep measured square matmuls; the matmul is read at the side s of the square with its
        arithmetic intensity (FLOPs per element moved, 2 m n k / 2 (m k + k n + m n) = s / 3):

            s = 3 m n k / (m k + k n + m n),   factor = sweep(s) / max(sweep)

        with sweep(s) interpolated in log2(s) between the measured sides and held at the ends. 1 with no
        sweep. Example: Ironwood's sweep gives a 2048-cubed matmul 679.3 / 956.4 = 0.71.

        Raises:
            ValueError: a dimension not positive.
        """
        dims = [checks.positive(name, value) for name, value in (("m", m), ("n", n), ("k", k))]
        if not self.matmul_sweep:
            return 1.0
        side = 3 * dims[0] * dims[1] * dims[2] / (dims[0] * dims[2] + dims[2] * dims[1] + dims[0] * dims[1])
        sides = [math.log2(s) for s, _ in self.matmul_sweep]
        ratios = [r for _, r in self.matmul_sweep]
        x = min(max(math.log2(side), sides[0]), sides[-1])
        i = max(j for j in range(len(sides)) if sides[j] <= x)
        if i == len(sides) - 1:
            return ratios[-1] / max(ratios)
        w = (x - sides[i]) / (sides[i + 1] - sides[i])
        return (ratios[i] + w * (ratios[i + 1] - ratios[i])) / max(ratios)

    def source(self, name: str) -> str:
        """Where figure `name` comes from, in words.

        Raises:
            ValueError: a name not in `FIELDS`.
        """
        checks.one_of("name", name, FIELDS)
        return dict(self.sources)[name]


def _cited(sources: Mapping[str, str], **figures: Any) -> Efficiency:
    """An `Efficiency` whose unnamed figures keep the datasheet's, each with its reason."""
    return Efficiency(**figures, sources=tuple((name, sources.get(name, _UNMEASURED)) for name in FIELDS))


# TPUs: XLA compiles a step into a few fused programs, so no per-kernel cost. Each generation takes the
# figures a microbenchmark measured on it; where none did, the v5e's stand in, and its sources say so.
_V5E_MATMUL = (
    "https://docs.jax.dev/en/latest/pallas/tpu/matmul.html (JAX's Pallas TPU matmul guide, on a TPU v5e, "
    "timed with timeit around block_until_ready: 'XLA matmul ... 8192 x 8192 x 8192 ... FLOP/s utilization: "
    "92.2960%')"
)
_V5E_ICI = (
    "How to Scale Your Model, Part 3, answer to the AllGather problem on a TPU v5e: an AllGather along an "
    "axis of 4 chips with no wraparound, 3 hops of 8.4e6 bytes at 4.5e10 bytes/s, 'in theory ... 560us', "
    "and 'an actual profile from the authors shows 680us': 560 / 680 of the link's rate"
)
_STAND_IN = "; no source in ours measures this generation, so the v5e's figure stands in"
_TPU_ATTENTION = (
    "no published measurement of a TPU flash-attention kernel in our sources: the matmul figure stands in "
    "(its two matmuls run on the same MXUs; an upper estimate, since the softmax's exponentials and "
    "rescaling are VPU work the matmuls do not have)"
)
_FIXED = {"kernel_s": _FUSED, "overlap_slowdown": (
    "no published measurement in our sources: taken as 0, since a TPU's transfers are DMAs its compiler "
    "schedules beside the TensorCore's work (Part 2, Appendix C; Part 10, LLO 'schedule DMAs'), not "
    "kernels that take its compute units")}  # fmt: skip
PEAK = _cited(_FIXED)
TPU_V5E = _cited(
    {**_FIXED, "matmul": _V5E_MATMUL, "attention_forward": _TPU_ATTENTION, "attention_backward": _TPU_ATTENTION,
     "ici": _V5E_ICI},
    matmul=0.922960, attention_forward=0.922960, attention_backward=0.922960, ici=560 / 680,
)  # fmt: skip
TPU = _cited(
    {**_FIXED, "matmul": _V5E_MATMUL + _STAND_IN, "attention_forward": _TPU_ATTENTION,
     "attention_backward": _TPU_ATTENTION},
    matmul=0.922960, attention_forward=0.922960, attention_backward=0.922960,
)  # fmt: skip
# Ironwood: AI-Hypercomputer's sweep of square bf16 matmuls, TFLOP/s per device (one of a chip's two
# TensorCores, half the chip's 2307 TFLOP/s peak).
_IRONWOOD_SWEEP_TFLOPS = (
    (128, 2.589961271), (256, 18.28645367), (512, 105.0783466), (1024, 349.7270639), (2048, 679.284728),
    (4096, 892.9445127), (16384, 950.1286983), (32768, 956.3824592),
)  # fmt: skip
_IRONWOOD_PEAK_TFLOPS = 2307 / 2
_IRONWOOD_MATMUL = (
    "https://github.com/AI-Hypercomputer/accelerator-microbenchmarks/blob/main/Ironwood/"
    "Ironwood_Microbenchmarks_readme.md ('GEMM Results': gemm_multiple_run, bf16 inputs, fp32 accumulation, "
    "m = n = k from 128 to 32768, TFLOP/s per device; best 956.4 at 32768, of 1153.5 per device, 82.9%)"
)
IRONWOOD = _cited(
    {**_FIXED, "matmul": _IRONWOOD_MATMUL, "attention_forward": _TPU_ATTENTION,
     "attention_backward": _TPU_ATTENTION},
    matmul=956.3824592 / _IRONWOOD_PEAK_TFLOPS, attention_forward=956.3824592 / _IRONWOOD_PEAK_TFLOPS,
    attention_backward=956.3824592 / _IRONWOOD_PEAK_TFLOPS,
    matmul_sweep=tuple((side, tflops / _IRONWOOD_PEAK_TFLOPS) for side, tflops in _IRONWOOD_SWEEP_TFLOPS),
)  # fmt: skip
_GPU_COMMON = {"kernel_s": _LAUNCH, "overlap_slowdown": _OVERLAP, "ici": _NVLINK, "dcn": _NICS}
_GPU_FIXED = {"kernel_s": 70e-6 / 80, "overlap_slowdown": 0.189, "ici": 367.61 / 450, "dcn": 36.52 / 50}
_BACKWARD = (
    "; the paper counts the backward pass as 2.5 forward passes of FLOPs (five matmuls, with recomputation), "
    "this model as 2: per model FLOP the rate is 2 / 2.5 of the paper's"
)
A100 = _cited(
    {
        "matmul": _MAMF + "A100 SXM, bf16, 271.2 of 312 TFLOPS, 86.9%; a burst: no sustained A100 rate, the "
        "MSMF the Hopper and Blackwell figures are, is published in our sources)",
        "attention_forward": _FA2 + ")",
        "attention_backward": _FA2 + _BACKWARD + ")",
        **_GPU_COMMON,
        "dcn": _NICS_DGX + "'NVL3 + 8x 200Gb RDMA' (DGX A100) 192 of 8 x 25 GB/s, 96%)",
    },
    matmul=271.2 / 312, attention_forward=0.73, attention_backward=0.63 * 2 / 2.5,
    **{**_GPU_FIXED, "ici": 234.89 / 300, "dcn": 192 / 200},
)  # fmt: skip
A100_PCIE = dataclasses.replace(
    A100,
    matmul=252.9 / 312,
    sources=tuple(
        (n, _MAMF + "A100 PCIe, bf16, 252.9 of 312 TFLOPS, 81.1%)" if n == "matmul" else s) for n, s in A100.sources
    ),
)
HOPPER = _cited(
    {
        "matmul": _H200_MSMF + "; on the H100 the H200's stands in, as MAMF's table lists the H200 as the same: "
        "the same GH100 chip at the same 700 W" + _SM90_WORDS,
        "matmul_fp8": _H200_MSMF_FP8 + "; on the H100 the H200's stands in, as for bf16",
        "attention_forward": _FA3 + "forward, causal, 602 TFLOPs/s of 989, 60.9%)",
        "attention_backward": _FA3 + "backward, 559 TFLOPs/s of 989, 56.5%" + _BACKWARD + ")",
        **_GPU_COMMON,
        "dcn": _NICS_DGX + "'NVL4 + 8x 400Gb RDMA' (DGX H100) 380 of 8 x 50 GB/s, 95%)",
    },
    matmul=698.6 / 989, matmul_fp8=1288.7 / 1979, attention_forward=602 / 989,
    attention_backward=559 / 989 * 2 / 2.5, **{**_GPU_FIXED, "dcn": 380 / 400}, matmul_sweep=_SM90_SWEEP,
)  # fmt: skip
_H200_OWN = {
    "matmul": _H200_MSMF + _SM90_WORDS,
    "matmul_fp8": _H200_MSMF_FP8,
}
H200 = dataclasses.replace(HOPPER, sources=tuple((n, _H200_OWN.get(n, s)) for n, s in HOPPER.sources))
_FA4 = (
    "https://arxiv.org/abs/2603.05451 (FlashAttention-4, B200, BF16, head dims 64 and 128, sequences 1k to 32k: "
    "'FlashAttention-4 reaches up to 1613 TFLOPs/s, approximately 71% of the theoretical maximum TFLOPs/s on "
    "B200 GPUs', the forward pass, causal or not unstated)"
)
_FA4_BACKWARD = (
    "https://research.colfax-intl.com/optimization-diaries-improving-flashattention-4-backward-for-head-"
    "dimension-64/ (Colfax, FA4's co-authors: 'For head dimension 128, FA4 backward is highly performant, "
    "achieving 1237 TFLOP/s, or about 55% of peak compute throughput on a B200 GPU'; causal or not and the "
    "sequence unstated" + _BACKWARD + ")"
)
B200 = _cited(
    {
        "matmul": _MSMF + "B200, 1426.4 of 2250 TFLOPS, 63.4%, where the burst MAMF was 1751.2)" + _SM100_WORDS,
        "matmul_fp8": _MSMF_FP8 + "B200 SXM, 2795.7 of 4500 TFLOPS, 62.1%, where the burst MAMF was 3435.2)",
        "attention_forward": _FA4,
        "attention_backward": _FA4_BACKWARD,
        **_GPU_COMMON,
        "ici": f"{_NETWORK} (8x B200, nccl=2.27.7, 8GiB all-reduce with NVLS off, the ring: 682.2GBps busbw of "
        "NVLink 5's 900)",
    },
    matmul=1426.4 / 2250, matmul_fp8=2795.7 / 4500, attention_forward=1613 / 2250,
    attention_backward=1237 / 2250 * 2 / 2.5, **{**_GPU_FIXED, "ici": 682.2 / 900}, matmul_sweep=_SM100_SWEEP,
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """Rates measured on one device by `python -m book_lib calibrate` (a profile file's contents).

    Attributes:
        chip: the chip's name in `hardware` ("h100"), or the device kind JAX reported where no chip matches.
        device_kind: `jax.Device.device_kind` of the device measured.
        date: when it was measured (ISO 8601).
        jax_version: the jax that measured it.
        figures: the `Efficiency` figures measured, by name (a subset of `FIELDS`).
        rates: the raw measurements behind them, for the reader (name -> value, units in the name).
    """

    chip: str
    device_kind: str
    date: str
    jax_version: str
    figures: tuple[tuple[str, float], ...]
    rates: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        for name, _ in self.figures:
            checks.one_of("figures", name, FIELDS)

    def to_json(self) -> str:
        """The profile file's text (JSON)."""
        data = dataclasses.asdict(self)
        data["figures"], data["rates"] = dict(self.figures), dict(self.rates)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Calibration:
        """A `Calibration` from a profile's parsed JSON.

        Raises:
            ValueError: a key missing, or a figure not in `FIELDS`.
        """
        keys = ("chip", "device_kind", "date", "jax_version", "figures")
        missing = [k for k in keys if k not in data]
        if missing:
            raise ValueError(f"calibration={dict(data)!r}: missing {missing}; allowed: a profile of `calibrate`")
        return cls(
            chip=str(data["chip"]), device_kind=str(data["device_kind"]), date=str(data["date"]),
            jax_version=str(data["jax_version"]),
            figures=tuple((str(k), float(v)) for k, v in dict(data["figures"]).items()),
            rates=tuple((str(k), float(v)) for k, v in dict(data.get("rates", {})).items()),
        )  # fmt: skip

    @staticmethod
    def today() -> str:
        """Today's date, as a profile records it (ISO 8601, UTC)."""
        return datetime.datetime.now(datetime.UTC).date().isoformat()


def load_calibration(calibration: Calibration | str | pathlib.Path) -> Calibration:
    """A `Calibration`, from itself or from a profile file written by `calibrate`.

    Raises:
        ValueError: a path that does not exist or does not hold a profile.
    """
    if isinstance(calibration, Calibration):
        return calibration
    path = pathlib.Path(calibration)
    if not path.is_file():
        raise ValueError(f"calibration={str(calibration)!r}: no such file; allowed: a profile written by calibrate")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"calibration={str(calibration)!r}: not JSON ({err}); allowed: a calibrate profile") from err
    return Calibration.from_mapping(data)


def calibrated(efficiency: Efficiency, calibration: Calibration | str | pathlib.Path | None) -> Efficiency:
    """`efficiency` with the figures `calibration` measured in place of the cited ones (None: unchanged).

    Each replaced figure's source names the device, date and jax version, and `Efficiency.measured`
    lists it, so a report can say which figures came from the reader's own device. Where the profile
    holds square bf16 matmuls of two sides or more (`calibrate`'s grid) and a measured `matmul`, they
    become `Efficiency.matmul_sweep`: each side's rate over the best, times `matmul`.
    """
    if calibration is None:
        return efficiency
    cal = load_calibration(calibration)
    figures = dict(cal.figures)
    words = f"measured by `calibrate` on {cal.device_kind} ({cal.chip}), {cal.date}, jax {cal.jax_version}"
    sources = tuple((n, words if n in figures else s) for n, s in efficiency.sources)
    squares = sorted((int(m[1]), rate) for name, rate in cal.rates if (m := _SQUARE.fullmatch(name)))
    sweep = efficiency.matmul_sweep
    if "matmul" in figures and len(squares) > 1:
        best = max(rate for _, rate in squares)
        sweep = tuple((side, rate / best * figures["matmul"]) for side, rate in squares)
    return dataclasses.replace(
        efficiency, **figures, sources=sources, measured=tuple(n for n in FIELDS if n in figures), matmul_sweep=sweep
    )
