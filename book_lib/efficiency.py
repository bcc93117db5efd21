"""What a chip achieves, as fractions of its datasheet: the measured rates behind every expected time.

A roofline divides FLOPs by the peak and bytes by the datasheet bandwidth. No program reaches either:
a large bf16 GEMM runs at 78-86 % of a GPU's peak, a flash-attention kernel at 50-73 %, every kernel
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
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from book_lib import checks

__all__ = [
    "FIELDS",
    "Efficiency",
    "PEAK",
    "TPU",
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
_RATIOS = ("matmul", "matmul_fp8", "attention_forward", "attention_backward", "hbm", "ici", "dcn")

_MAMF = (
    "https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md "
    '("Maximum Achievable Matmul FLOPS comparison table", the mean of 100 iterations at the best of a sweep of '
    "GEMM shapes: "
)
_FA2 = (
    "https://arxiv.org/abs/2307.08691 (FlashAttention-2, Dao 2023, A100 80GB SXM4: 'reaches up to "
    "230 TFLOPs/s, 73% of the theoretical maximum TFLOPs/s on A100 GPUs'; abstract: '50-73% of the "
    "theoretical maximum FLOPs/s on A100'"
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
    f"{_NETWORK} (4 nodes of 8 B200, 4GiB all-reduce over 32 ranks: '36.52GBps per accelerator, or 73% of the "
    "50GBps of inter-node bandwidth each accelerator has')"
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

    def __post_init__(self) -> None:
        for name in _RATIOS:
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name}={value!r}: not a fraction of the datasheet; allowed: 0 < {name} <= 1")
        for name in ("kernel_s", "overlap_slowdown"):
            checks.non_negative(name, getattr(self, name))
        missing = set(FIELDS) - {name for name, _ in self.sources}
        if missing:
            raise ValueError(f"sources={self.sources!r}: no source for {sorted(missing)}; allowed: one per figure")

    def matmul_for(self, dtype: str) -> float:
        """The achieved fraction of the peak for matmuls in `dtype`: `matmul_fp8` for fp8, else `matmul`."""
        return self.matmul_fp8 if checks.dtype(dtype, "dtype") == "fp8" else self.matmul

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


# TPUs: XLA compiles a step into a few fused programs, so no per-kernel cost; JAX's Pallas guide measures
# XLA's bf16 matmul on a v5e, taken for every generation until `calibrate` measures one.
_TPU_MATMUL = (
    "https://docs.jax.dev/en/latest/pallas/tpu/matmul.html (JAX's Pallas TPU matmul guide, on a TPU v5e, "
    "timed with timeit around block_until_ready: 'XLA matmul ... 8192 x 8192 x 8192 ... FLOP/s utilization: "
    "92.2960%'); taken for the other TPU generations too, whose matmuls no source in ours measures"
)
_TPU_ATTENTION = (
    _TPU_MATMUL + "; a flash-attention kernel's two matmuls run on the same MXUs, so its rate is taken as the "
    "matmul's: no published measurement of a TPU attention kernel in our sources (an upper estimate)"
)
PEAK = _cited({"kernel_s": _FUSED, "overlap_slowdown": (
    "no published measurement in our sources: taken as 0, since a TPU's transfers are DMAs its compiler "
    "schedules beside the TensorCore's work (Part 2, Appendix C; Part 10, LLO 'schedule DMAs'), not "
    "kernels that take its compute units")})  # fmt: skip
TPU = _cited(
    {**dict(PEAK.sources), "matmul": _TPU_MATMUL, "attention_forward": _TPU_ATTENTION,
     "attention_backward": _TPU_ATTENTION},
    matmul=0.922960, attention_forward=0.922960, attention_backward=0.922960,
)  # fmt: skip
_GPU_COMMON = {"kernel_s": _LAUNCH, "overlap_slowdown": _OVERLAP, "ici": _NVLINK, "dcn": _NICS}
_GPU_FIXED = {"kernel_s": 70e-6 / 80, "overlap_slowdown": 0.189, "ici": 367.61 / 450, "dcn": 36.52 / 50}
_BACKWARD = (
    "; the paper counts the backward pass as 2.5 forward passes of FLOPs (five matmuls, with recomputation), "
    "this model as 2: per model FLOP the rate is 2 / 2.5 of the paper's"
)
A100 = _cited(
    {
        "matmul": _MAMF + "A100 SXM, bf16, 271.2 of 312 TFLOPS, 86.9%)",
        "attention_forward": _FA2 + "; taken at the range's top for the forward pass, whose rate the text names)",
        "attention_backward": _FA2 + "; taken at its bottom for the backward pass, whose rate only the figures "
        "give" + _BACKWARD + ")",
        **_GPU_COMMON,
    },
    matmul=271.2 / 312, attention_forward=0.73, attention_backward=0.50 * 2 / 2.5,
    **{**_GPU_FIXED, "ici": 234.89 / 300},
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
        "matmul": _MAMF + "H100 SXM, bf16, 794.5 of 989 TFLOPS, 80.3%, 'H200 is the same')",
        "matmul_fp8": _MAMF + "H100 SXM, float8_e4m3fn, 1402.6 of 1979 TFLOPS, 70.9%)",
        "attention_forward": _FA3 + "forward, causal, 602 TFLOPs/s of 989, 60.9%)",
        "attention_backward": _FA3 + "backward, 559 TFLOPs/s of 989, 56.5%" + _BACKWARD + ")",
        **_GPU_COMMON,
    },
    matmul=794.5 / 989, matmul_fp8=1402.6 / 1979, attention_forward=602 / 989,
    attention_backward=559 / 989 * 2 / 2.5, **_GPU_FIXED,
)  # fmt: skip
H200 = dataclasses.replace(
    HOPPER,
    matmul_fp8=1453.4 / 1979,
    sources=tuple(
        (n, _MAMF + "H200 SXM, float8_e4m3fn, 1453.4 of 1979 TFLOPS, 73.4%)" if n == "matmul_fp8" else s)
        for n, s in HOPPER.sources
    ),
)
B200 = dataclasses.replace(
    HOPPER,
    matmul=1745.0 / 2250,
    matmul_fp8=3432.5 / 4500,
    ici=682.2 / 900,
    sources=tuple(
        (n, _MAMF + "B200 SXM, bf16, 1745.0 of 2250 TFLOPS, 77.6%)" if n == "matmul" else
         _MAMF + "B200 SXM, float8_e4m3fn, 3432.5 of 4500 TFLOPS, 76.3%)" if n == "matmul_fp8" else
         f"{_NETWORK} (8x B200, nccl=2.27.7, 8GiB all-reduce with NVLS off, the ring: 682.2GBps busbw of "
         "NVLink 5's 900)" if n == "ici" else
         s + "; taken for the B200 too: no published B200 flash-attention benchmark in our sources"
         if n.startswith("attention") else s)
        for n, s in HOPPER.sources
    ),
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
    lists it, so a report can say which figures came from the reader's own device.
    """
    if calibration is None:
        return efficiency
    cal = load_calibration(calibration)
    figures = dict(cal.figures)
    words = f"measured by `calibrate` on {cal.device_kind} ({cal.chip}), {cal.date}, jax {cal.jax_version}"
    sources = tuple((n, words if n in figures else s) for n, s in efficiency.sources)
    return dataclasses.replace(
        efficiency, **figures, sources=sources, measured=tuple(n for n in FIELDS if n in figures)
    )
