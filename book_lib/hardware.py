"""Accelerator specifications: one frozen `Chip` per chip, every number per chip, with its source.

All figures are peak, dense (no structured sparsity) and per chip. Bandwidths are in bytes per
second; `ici_bytes_per_s` is ONE link in ONE direction (NVLink for GPUs). TPU figures follow the
tables of the reference book (Part 2, "Key Takeaways") wherever it gives them; the rest come from
the vendor pages named in `source`.

Book: Part 2 (All About TPUs), "Key Takeaways"; Part 2 Appendix A (GPUs).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from book_lib import checks
from book_lib.efficiency import (
    A100,
    A100_PCIE,
    B200,
    H200,
    HOPPER,
    IRONWOOD,
    PEAK,
    TPU,
    TPU_V5E,
    Calibration,
    Efficiency,
    calibrated,
    load_calibration,
)

__all__ = [
    "Chip",
    "CHIPS",
    "VARIANTS",
    "get_chip",
    "chip_names",
    "FAMILIES",
    "ICI_TOPOLOGIES",
    "chip_from_device_kind",
    "MXU_PASS_ROWS",
    "MXU_PASS_CYCLES",
    "VMEM_OVER_HBM_BANDWIDTH_RATIO",
    "INT4_OVER_BF16_RATIO",
    "PRICES_USD_PER_CHIP_HOUR",
    "price_usd_per_chip_hour",
    "VendorFigure",
    "VENDOR_FIGURES",
    "vendor_chip",
]

GiB = 2**30
# What `Chip.family` and `Chip.ici_topology` may be (and what `chip_names` filters on).
FAMILIES = ("tpu", "gpu")
ICI_TOPOLOGIES = ("2d-torus", "3d-torus", "nvswitch")
BOOK = "How to Scale Your Model, Part 2, 'Key Takeaways' tables"
INTERNALS = "How to Scale Your Model, Part 2, Appendix C ('TPU internals')"
PALLAS_TPU = "https://docs.jax.dev/en/latest/pallas/tpu/pipelining.html (memory spaces, VREGs, scalar unit)"

# One MXU pass: bf16[MXU_PASS_ROWS, size] @ bf16[size, size] -> f32[MXU_PASS_ROWS, size] every
# MXU_PASS_CYCLES clock cycles, so size**2 multiply-adds (2 * size**2 FLOPs) per cycle per MXU.
# Book: Part 2, "What is a TPU?" and Appendix B ("How does a systolic array work?"): "8 cycles" for an
# 8x128 by 128x128 product on most generations (v6e: 8x256 by 256x256).
MXU_PASS_ROWS = 8
MXU_PASS_CYCLES = 8

# VMEM feeds the MXU about this many times faster than HBM feeds VMEM (ratio of bytes/s). Book: Part 2,
# "VMEM and arithmetic intensity" ("around 22x higher than HBM bandwidth"); no generation's VMEM rate is published.
VMEM_OVER_HBM_BANDWIDTH_RATIO = 22

# int4 matmuls run "roughly 4x" faster than bf16 on generations that support them (int8 roughly 2x). Book:
# Part 2, "Key Takeaways". The text names no generation, so no chip records an int4 peak: this is a rule of thumb.
INT4_OVER_BF16_RATIO = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Chip:
    """One accelerator chip; every number is per chip unless its name says otherwise.

    Attributes:
        name: canonical name (`"tpu-v5e"`, `"h100"`).
        family: `"tpu"` or `"gpu"`.
        bf16_flops_per_s: dense bfloat16 matmul peak (FLOPs/s), without the sparsity factor.
        int8_ops_per_s: dense int8 matmul peak (OPs/s); equals bf16 where int8 is not faster.
        fp8_flops_per_s: dense fp8 matmul peak (FLOPs/s), None where the chip has no faster fp8 path.
        hbm_bytes: HBM capacity (bytes).
        hbm_bytes_per_s: HBM bandwidth (bytes/s).
        ici_bytes_per_s: one inter-chip link, one direction (bytes/s); NVLink for GPUs.
        ici_links: links per chip (4 for a 2D torus, 6 for a 3D torus, NVLink count for GPUs).
        ici_topology: `"2d-torus"`, `"3d-torus"` or `"nvswitch"`.
        cores_per_chip: TensorCores per chip (TPU) or streaming multiprocessors (GPU).
        host_shape: chips attached to one host, as an ICI shape (GPUs: chips per node).
        pod_shape: largest ICI-connected slice (GPUs: the NVLink domain of one node).
        pcie_bytes_per_s: host <-> chip PCIe bandwidth per chip, one direction (bytes/s).
        dcn_bytes_per_s: data-centre network egress per HOST (bytes/s).
        vmem_bytes: TPU on-chip vector memory (bytes), None where unpublished or for GPUs.
        mxu_size: side of one systolic array (TPU), None for GPUs.
        mxus_per_core: systolic arrays per TensorCore (TPU), None for GPUs.
        vpu_shape: (sublanes, lanes) of the vector unit and of one vector register (TPU), None for GPUs;
            (8, 128) on every TPU: an f32 VREG is 8 x 128 words.
        vregs_per_core: vector registers per TensorCore (count), None where the text gives none.
        vpu_alus_per_lane: ALUs in each (sublane, lane) slot of the VPU (count), None where unpublished.
        clock_hz: clock rate (Hz) where the text states one; `systolic.implied_clock_hz` derives it
            for any TPU from the peak, and a test checks the two agree.
        cuda_cores_per_sm: FP32 CUDA cores per streaming multiprocessor (GPU), None for TPUs.
        shared_memory_bytes_per_sm: shared memory (with L1) one SM can give its thread blocks (bytes, GPU),
            None for TPUs; a Pallas (Triton) kernel's tiles are staged there.
        tensor_cores_per_sm: tensor cores (the matrix units) in one streaming multiprocessor (count, GPU),
            None for TPUs and where the vendor publishes none.
        register_bytes_per_sm: the register file of one streaming multiprocessor (bytes, GPU), None for TPUs.
        l2_bytes: the L2 cache all SMs share, managed by the hardware (bytes, GPU), None for TPUs and where
            the vendor publishes none. NVIDIA's cache "MB" are 2^20 bytes (the A100's 40 MB is 40,960 KB).
        devices_per_chip: JAX devices one chip shows as (count): 2 on TPU v2, v3 and 7x, whose
            TensorCores (7x: chiplets) are separate devices, each with its own half of the HBM.
        device_kinds: regular expressions; a lowercased `jax.Device.device_kind` that matches one
            whole means this chip.
        efficiency: the rates the chip achieves against these figures, each measured and cited
            (`efficiency.Efficiency`): what expected times use where rooflines use the datasheet.
        source: where the figures come from (URLs).
    """

    name: str
    family: str
    bf16_flops_per_s: float
    int8_ops_per_s: float
    hbm_bytes: float
    hbm_bytes_per_s: float
    ici_bytes_per_s: float
    ici_links: int
    ici_topology: str
    cores_per_chip: int
    host_shape: tuple[int, ...]
    pod_shape: tuple[int, ...]
    pcie_bytes_per_s: float
    dcn_bytes_per_s: float
    fp8_flops_per_s: float | None = None
    vmem_bytes: float | None = None
    mxu_size: int | None = None
    mxus_per_core: int | None = None
    vpu_shape: tuple[int, int] | None = None
    vregs_per_core: int | None = None
    vpu_alus_per_lane: int | None = None
    clock_hz: float | None = None
    cuda_cores_per_sm: int | None = None
    shared_memory_bytes_per_sm: int | None = None
    tensor_cores_per_sm: int | None = None
    register_bytes_per_sm: int | None = None
    l2_bytes: int | None = None
    devices_per_chip: int = 1
    device_kinds: tuple[str, ...] = ()
    efficiency: Efficiency = PEAK
    source: str

    def __post_init__(self) -> None:
        positive = (
            "bf16_flops_per_s",
            "int8_ops_per_s",
            "hbm_bytes",
            "hbm_bytes_per_s",
            "ici_bytes_per_s",
            "ici_links",
            "cores_per_chip",
            "devices_per_chip",
            "pcie_bytes_per_s",
            "dcn_bytes_per_s",
        )
        for attr in positive:
            value = getattr(self, attr)
            if not value > 0:
                raise ValueError(f"{attr}={value!r}: not positive for chip {self.name!r}; allowed: > 0")
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r}: unknown for chip {self.name!r}; allowed: {', '.join(FAMILIES)}")
        if self.ici_topology not in ICI_TOPOLOGIES:
            raise ValueError(
                f"ici_topology={self.ici_topology!r}: unknown for chip {self.name!r}; "
                f"allowed: {', '.join(ICI_TOPOLOGIES)}"
            )
        for attr in ("host_shape", "pod_shape"):
            shape = getattr(self, attr)
            if not shape or any(int(s) != s or s < 1 for s in shape):
                raise ValueError(f"{attr}={shape!r}: not a shape for chip {self.name!r}; allowed: positive ints")
        optional = (
            "fp8_flops_per_s",
            "mxu_size",
            "mxus_per_core",
            "vregs_per_core",
            "vpu_alus_per_lane",
            "clock_hz",
            "cuda_cores_per_sm",
            "shared_memory_bytes_per_sm",
            "tensor_cores_per_sm",
            "register_bytes_per_sm",
            "l2_bytes",
        )
        for attr in optional:
            value = getattr(self, attr)
            if value is not None and not value > 0:
                raise ValueError(f"{attr}={value!r}: not positive for chip {self.name!r}; allowed: > 0 or None")
        if self.vpu_shape is not None and (len(self.vpu_shape) != 2 or min(self.vpu_shape) < 1):
            raise ValueError(
                f"vpu_shape={self.vpu_shape!r}: not (sublanes, lanes) for chip {self.name!r}; "
                "allowed: two positive ints"
            )

    @property
    def vpu_alus_per_core(self) -> int | None:
        """ALUs in one TensorCore's vector unit (count): sublanes * lanes * vpu_alus_per_lane.

        v4: 8 * 128 * 2 = 2048. None where the text gives no ALU count per slot.
        Book: Part 2, Appendix C ("TPU internals", VPU).
        """
        if self.vpu_shape is None or self.vpu_alus_per_lane is None:
            return None
        return math.prod(self.vpu_shape) * self.vpu_alus_per_lane

    @property
    def chips_per_host(self) -> int:
        """Chips attached to one host (count)."""
        return math.prod(self.host_shape)

    @property
    def chips_per_pod(self) -> int:
        """Chips in the largest ICI-connected slice (count)."""
        return math.prod(self.pod_shape)

    @property
    def dcn_bytes_per_s_per_chip(self) -> float:
        """A host's DCN egress shared by its chips (bytes/s): dcn_bytes_per_s / chips_per_host.

        What each chip gets when every chip of a host sends over DCN at once (data parallelism
        across slices). Book: Part 2 (All About TPUs), "TPU Networking".
        """
        return self.dcn_bytes_per_s / self.chips_per_host

    def peak_ops_per_s(self, dtype: str = "bf16") -> float:
        """Dense matmul peak for `dtype` (FLOPs/s or OPs/s): bf16_flops_per_s, int8_ops_per_s or fp8_flops_per_s.

        `dtype` may be spelled any common way ("bf16", "BF16", "bfloat16", "int8", "i8", "fp8", "e4m3").

        Raises:
            ValueError: a dtype with no peak in this table (fp32, say), or fp8 on a chip without an fp8 peak.
        """
        name = checks.dtype(dtype, allowed=("bf16", "int8", "fp8"))
        if name == "fp8":
            if self.fp8_flops_per_s is None:
                with_fp8 = ", ".join(c.name for c in _ALL if c.fp8_flops_per_s)
                raise ValueError(
                    f"dtype={dtype!r}: {self.name} has no fp8 matmul peak; allowed: bf16, int8 (fp8 on {with_fp8})"
                )
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s if name == "bf16" else self.int8_ops_per_s

    @property
    def is_tpu(self) -> bool:
        """True for TPUs, False for GPUs."""
        return self.family == "tpu"

    def per_device(self) -> Chip:
        """The figures of one JAX device: this chip, or one core's share where a device is a core.

        per-device rate = per-chip rate / devices_per_chip (FLOPs/s, HBM bytes and HBM bytes/s).
        Links and hosts stay per chip.
        """
        n = self.devices_per_chip
        if n == 1:
            return self
        return dataclasses.replace(
            self,
            name=f"{self.name}/core",
            bf16_flops_per_s=self.bf16_flops_per_s / n,
            int8_ops_per_s=self.int8_ops_per_s / n,
            hbm_bytes=self.hbm_bytes / n,
            hbm_bytes_per_s=self.hbm_bytes_per_s / n,
            cores_per_chip=max(1, self.cores_per_chip // n),
            devices_per_chip=1,
        )


def _tpu(**kw: Any) -> Chip:
    return Chip(family="tpu", **{"efficiency": TPU, **kw})


def _gpu(**kw: Any) -> Chip:
    return Chip(family="gpu", ici_topology="nvswitch", **kw)


_ALL = (
    _tpu(
        name="tpu-v2",
        bf16_flops_per_s=4.6e13,  # 2 cores x 2.3e13 (book, Part 9: "8 TPUv2 cores ... 23e12")
        int8_ops_per_s=4.6e13,  # no faster int8 path
        hbm_bytes=16 * GiB,
        hbm_bytes_per_s=7.0e11,
        ici_bytes_per_s=6.0e10,  # book, Part 9: 1.2e11 bytes/s bidirectional on a v2 4x2
        ici_links=4,
        ici_topology="2d-torus",
        cores_per_chip=2,
        host_shape=(2, 2),
        pod_shape=(16, 16),
        pcie_bytes_per_s=1.5e10,
        dcn_bytes_per_s=2.5e10,
        mxu_size=128,
        mxus_per_core=1,
        vpu_shape=(8, 128),
        devices_per_chip=2,
        device_kinds=("tpu v2",),
        source=(
            "https://cloud.google.com/tpu/docs/v2; "
            "https://dl.acm.org/doi/10.1145/3360307 (Ten Lessons From Three Generations, HBM 700 GB/s); "
            "How to Scale Your Model, Part 9 (per-core FLOPs/s and ICI on v2)"
        ),
    ),
    _tpu(
        name="tpu-v3",
        bf16_flops_per_s=1.4e14,
        int8_ops_per_s=1.4e14,
        hbm_bytes=32 * GiB,
        hbm_bytes_per_s=9.0e11,
        ici_bytes_per_s=1.0e11,
        ici_links=4,
        ici_topology="2d-torus",
        cores_per_chip=2,
        # The book's table prints a 4x2 host for v3, 8 chips. Its own prose puts 4 chips (8 cores) on a
        # host for two-core training chips, and only inference chips (v5e, v6e) get two trays of 4; a
        # Cloud TPU v3-8 is 4 chips on one host. 4x2 counts cores, so we use 2x2 (erratum, flagged in chapter 2).
        host_shape=(2, 2),
        pod_shape=(32, 32),
        pcie_bytes_per_s=1.5e10,
        dcn_bytes_per_s=2.5e10,
        mxu_size=128,
        mxus_per_core=2,
        vpu_shape=(8, 128),
        devices_per_chip=2,
        device_kinds=("tpu v3",),
        source=f"{BOOK}; https://cloud.google.com/tpu/docs/v3",
    ),
    _tpu(
        name="tpu-v4",
        bf16_flops_per_s=2.75e14,
        int8_ops_per_s=2.75e14,
        hbm_bytes=32 * GiB,
        hbm_bytes_per_s=1.2e12,
        ici_bytes_per_s=4.5e10,
        ici_links=6,
        ici_topology="3d-torus",
        cores_per_chip=2,
        host_shape=(2, 2, 1),
        pod_shape=(16, 16, 16),
        pcie_bytes_per_s=1.6e10,  # book, Part 2: "16GB / second each way" for v4
        dcn_bytes_per_s=2.5e10,
        mxu_size=128,
        mxus_per_core=4,
        vpu_shape=(8, 128),
        vregs_per_core=32,  # Appendix C: "TPU v4 has 32 VREGs of size (8, 128)"
        vpu_alus_per_lane=2,  # Appendix C: 2 ALUs per (lane, sublane) on v4, 2048 in all
        device_kinds=("tpu v4",),
        source=f"{BOOK}; {INTERNALS}; {PALLAS_TPU}; https://cloud.google.com/tpu/docs/v4",
    ),
    _tpu(
        name="tpu-v5e",
        bf16_flops_per_s=1.97e14,
        # Part 2 says "each TPU v5e MXU can do 4e14 int8 OPs/s": that is the whole chip's figure. With
        # 4 MXUs of about 5e13 bf16 FLOPs/s each (its own numbers), one MXU does about 1e14 (erratum).
        int8_ops_per_s=3.94e14,
        hbm_bytes=16 * GiB,
        hbm_bytes_per_s=8.1e11,  # table; Part 1 uses 8.2e11 (chapter 1 shows the effect)
        ici_bytes_per_s=4.5e10,
        ici_links=4,
        ici_topology="2d-torus",
        cores_per_chip=1,
        host_shape=(4, 2),
        pod_shape=(16, 16),
        pcie_bytes_per_s=1.5e10,
        dcn_bytes_per_s=2.5e10,
        vmem_bytes=128 * 2**20,  # Part 2, "What is a TPU?": 128 MiB
        mxu_size=128,
        mxus_per_core=4,
        vpu_shape=(8, 128),
        clock_hz=1.5e9,  # Part 2, "What is a TPU?": the v5e runs at 1.5 GHz, about 5e13 FLOPs/s per MXU
        device_kinds=(r"tpu v5 ?lite", "tpu v5e"),
        efficiency=TPU_V5E,
        source=f"{BOOK}; {INTERNALS}; https://cloud.google.com/tpu/docs/v5e",
    ),
    _tpu(
        name="tpu-v5p",
        bf16_flops_per_s=4.59e14,
        int8_ops_per_s=9.18e14,
        hbm_bytes=96 * GiB,
        hbm_bytes_per_s=2.8e12,  # table; Part 2's prose rounds it to 2.5e12
        ici_bytes_per_s=9.0e10,
        ici_links=6,
        ici_topology="3d-torus",
        cores_per_chip=2,
        host_shape=(2, 2, 1),
        pod_shape=(16, 20, 28),
        pcie_bytes_per_s=1.5e10,
        dcn_bytes_per_s=2.5e10,
        mxu_size=128,
        mxus_per_core=4,
        vpu_shape=(8, 128),
        device_kinds=("tpu v5p?",),
        source=f"{BOOK}; https://cloud.google.com/tpu/docs/v5p",
    ),
    _tpu(
        name="tpu-v6e",
        bf16_flops_per_s=9.2e14,  # table; Part 1's prose says 9.1e14
        int8_ops_per_s=1.84e15,
        hbm_bytes=32 * GiB,
        hbm_bytes_per_s=1.6e12,
        ici_bytes_per_s=9.0e10,
        ici_links=4,
        ici_topology="2d-torus",
        cores_per_chip=1,
        host_shape=(4, 2),
        pod_shape=(16, 16),
        # Book, Part 2 footnote: "Trillium (TPU v6e) has 32GB/s, about 4x higher than v5". Against the
        # 1.5e10 bytes/s the same page gives v5e, 3.2e10 is 2.1x, not 4x (erratum, flagged in chapter 2).
        pcie_bytes_per_s=3.2e10,
        dcn_bytes_per_s=2.5e10,
        mxu_size=256,
        mxus_per_core=4,
        vpu_shape=(8, 128),
        device_kinds=(r"tpu v6 ?lite", "tpu v6e"),
        source=f"{BOOK}; https://cloud.google.com/tpu/docs/v6e",
    ),
    _tpu(
        name="tpu-7x",
        bf16_flops_per_s=2.307e15,
        int8_ops_per_s=4.614e15,  # Google quotes FP8; Ironwood has no separate int8 figure
        fp8_flops_per_s=4.614e15,  # cloud.google.com/tpu/docs/tpu7x: "FP8 4614" TFLOPs
        hbm_bytes=192e9,
        hbm_bytes_per_s=7.37e12,
        ici_bytes_per_s=1.0e11,  # 1.2e12 bytes/s bidirectional per chip over 6 links
        ici_links=6,
        ici_topology="3d-torus",
        cores_per_chip=2,
        host_shape=(2, 2, 1),
        pod_shape=(16, 24, 24),  # 9,216 chips; the 16x24x24 arrangement is our assumption
        pcie_bytes_per_s=3.2e10,
        dcn_bytes_per_s=2.5e10,
        mxu_size=256,
        mxus_per_core=4,
        vpu_shape=(8, 128),
        devices_per_chip=2,
        device_kinds=(r"tpu ?7x", "tpu v7x?"),
        efficiency=IRONWOOD,
        source="https://cloud.google.com/tpu/docs/tpu7x; https://blog.google/products/google-cloud/ironwood-tpu-age-of-inference/",
    ),
    _gpu(
        name="a100",
        efficiency=A100,
        bf16_flops_per_s=3.12e14,
        int8_ops_per_s=6.24e14,
        hbm_bytes=80e9,
        hbm_bytes_per_s=2.039e12,
        ici_bytes_per_s=2.5e10,  # NVLink 3: 600 GB/s bidirectional over 12 links
        ici_links=12,
        cores_per_chip=108,
        cuda_cores_per_sm=64,  # 6,912 FP32 CUDA cores on 108 SMs
        shared_memory_bytes_per_sm=164 * 1024,  # Ampere tuning guide: up to 164 KB per SM
        tensor_cores_per_sm=4,  # Ampere architecture blog: four third-generation tensor cores per SM
        register_bytes_per_sm=64 * 1024 * 4,  # Ampere tuning guide: 64K 32-bit registers per SM
        l2_bytes=40 * 2**20,  # Ampere architecture blog: 40 MB (40,960 KB) of L2
        host_shape=(8,),
        pod_shape=(8,),
        pcie_bytes_per_s=3.2e10,  # PCIe gen4 x16, one direction
        dcn_bytes_per_s=2.0e11,  # DGX A100: eight 200 Gb/s ConnectX-6 NICs for the compute fabric, one per GPU
        device_kinds=(r"nvidia a100-sxm4?-80gb",),
        source=(
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (SXM 80GB); "
            "https://docs.nvidia.com/cuda/ampere-tuning-guide/ (shared memory and registers per SM); "
            "https://developer.nvidia.com/blog/nvidia-ampere-architecture-in-depth/ (tensor cores per SM, L2); "
            "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html (network cards per node)"
        ),
    ),
    _gpu(
        name="h100",
        efficiency=HOPPER,
        bf16_flops_per_s=9.89e14,  # spec sheet 1,979 TFLOPS is with sparsity; dense is half
        int8_ops_per_s=1.979e15,
        fp8_flops_per_s=1.979e15,  # spec sheet 3,958 TFLOPS FP8 with sparsity
        hbm_bytes=80e9,
        hbm_bytes_per_s=3.35e12,
        ici_bytes_per_s=2.5e10,  # NVLink 4: 900 GB/s bidirectional over 18 links
        ici_links=18,
        # Part 2, Appendix A: "an H100 has about 140" SMs (132 on the SXM board, a rounding) and "about
        # 1024 CUDA Cores" per SM. NVIDIA lists 16,896 FP32 CUDA cores, 128 per SM: 1024 is 8x too many,
        # and would put the FP32 rate 8x above the 67 TFLOP/s NVIDIA quotes (erratum, flagged in chapter 2).
        cores_per_chip=132,
        cuda_cores_per_sm=128,
        shared_memory_bytes_per_sm=228 * 1024,  # Hopper tuning guide: up to 228 KB per SM
        tensor_cores_per_sm=4,  # Hopper architecture blog: four fourth-generation tensor cores per SM
        register_bytes_per_sm=64 * 1024 * 4,  # Hopper tuning guide: 64K 32-bit registers per SM
        l2_bytes=50 * 2**20,  # Hopper architecture blog: 50 MB of L2 on the H100 SXM5
        host_shape=(8,),
        pod_shape=(8,),
        pcie_bytes_per_s=6.4e10,  # PCIe gen5 x16, one direction
        dcn_bytes_per_s=4.0e11,  # DGX H100: eight 400 Gb/s ConnectX-7 NICs for the compute fabric, one per GPU
        device_kinds=(r"nvidia h100( 80gb hbm3|-sxm5?-80gb)?",),
        source=(
            "https://www.nvidia.com/en-us/data-center/h100/ (SXM); "
            "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/ (SMs, CUDA cores per SM); "
            "https://docs.nvidia.com/cuda/hopper-tuning-guide/ (shared memory and registers per SM); "
            "Hopper blog above (tensor cores per SM, L2); "
            "https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html (network cards per node)"
        ),
    ),
    _gpu(
        name="h200",
        efficiency=H200,
        bf16_flops_per_s=9.89e14,
        int8_ops_per_s=1.979e15,
        fp8_flops_per_s=1.979e15,  # spec sheet 3,958 TFLOPS FP8 with sparsity
        hbm_bytes=141e9,
        hbm_bytes_per_s=4.8e12,
        ici_bytes_per_s=2.5e10,
        ici_links=18,
        cores_per_chip=132,
        cuda_cores_per_sm=128,  # same GH100 SM as the H100
        shared_memory_bytes_per_sm=228 * 1024,  # same SM as the H100
        tensor_cores_per_sm=4,  # same SM as the H100
        register_bytes_per_sm=64 * 1024 * 4,  # same SM as the H100
        l2_bytes=50 * 2**20,  # same GH100 die as the H100 SXM5, with more and faster HBM
        host_shape=(8,),
        pod_shape=(8,),
        pcie_bytes_per_s=6.4e10,
        dcn_bytes_per_s=4.0e11,  # as the H100 (HGX H200: eight 400 Gb/s NICs)
        device_kinds=(r"nvidia h200( 141gb hbm3e|-sxm5?-141gb)?",),
        source=(
            "https://www.nvidia.com/en-us/data-center/h200/ (SXM); "
            "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/ (the H100's GH100 SM and L2); "
            "https://docs.nvidia.com/cuda/hopper-tuning-guide/ (shared memory and registers per SM)"
        ),
    ),
    _gpu(
        name="b200",
        efficiency=B200,
        bf16_flops_per_s=2.25e15,
        int8_ops_per_s=4.5e15,
        fp8_flops_per_s=4.5e15,  # HGX B200: 9 PFLOPS FP8 per GPU with sparsity
        hbm_bytes=180e9,
        hbm_bytes_per_s=7.7e12,
        ici_bytes_per_s=5.0e10,  # NVLink 5: 1.8 TB/s bidirectional over 18 links
        ici_links=18,
        cores_per_chip=148,
        shared_memory_bytes_per_sm=228 * 1024,  # Blackwell tuning guide: up to 228 KB per SM
        register_bytes_per_sm=64 * 1024 * 4,  # Blackwell tuning guide: 64K 32-bit registers per SM
        # tensor_cores_per_sm and l2_bytes stay None: NVIDIA's B200 pages give neither.
        host_shape=(8,),
        pod_shape=(8,),
        pcie_bytes_per_s=6.4e10,
        dcn_bytes_per_s=4.0e11,  # DGX B200: eight 400 Gb/s ConnectX-7 NICs for the compute fabric, one per GPU
        device_kinds=(r"nvidia b200( .*)?",),
        source=(
            "https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, per GPU); "
            "https://docs.nvidia.com/cuda/blackwell-tuning-guide/ (shared memory and registers per SM); "
            "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html (network cards per node)"
        ),
    ),
)

CHIPS: MappingProxyType[str, Chip] = MappingProxyType({chip.name: chip for chip in _ALL})

# Boards that JAX can report but the book's table does not list: same architecture, other memory
# or power. Found by `get_chip` and `chip_from_device_kind`, left out of `CHIPS` and the book's tables.
_BY_NAME = {chip.name: chip for chip in _ALL}
_VARIANTS = (
    dataclasses.replace(
        _BY_NAME["a100"],
        name="a100-40gb",
        hbm_bytes=40e9,
        hbm_bytes_per_s=1.555e12,
        device_kinds=(r"nvidia a100(-sxm4?|-pcie)?-40gb", "nvidia a100"),
        source=(
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (40GB, SXM and PCIe; NVLink figures are SXM's)"
        ),
    ),
    dataclasses.replace(
        _BY_NAME["a100"],
        name="a100-80gb-pcie",
        efficiency=A100_PCIE,
        hbm_bytes_per_s=1.935e12,
        pod_shape=(2,),  # an NVLink bridge joins pairs of PCIe cards
        device_kinds=(r"nvidia a100 80gb pcie", r"nvidia a100-pcie-80gb"),
        source=(
            "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (80GB PCIe)"
        ),
    ),
    dataclasses.replace(
        _BY_NAME["h100"],
        name="h100-pcie",
        bf16_flops_per_s=7.56e14,  # 1,513 TFLOPS with sparsity; dense is half
        int8_ops_per_s=1.513e15,
        hbm_bytes_per_s=2.0e12,
        ici_links=12,  # NVLink bridge: 600 GB/s bidirectional between a pair
        cores_per_chip=114,
        pod_shape=(2,),
        device_kinds=(r"nvidia h100 pcie", r"nvidia h100-pcie(-80gb)?"),
        source="https://www.nvidia.com/en-us/data-center/h100/ (PCIe)",
    ),
    # The H100 sold in China until late 2023: the same compute and HBM, NVLink cut to 400 GB/s
    # bidirectional (8 links). DeepSeek-V3 trained on 2048 of them; its report measures NVLink at
    # 160 GB/s and InfiniBand at 50 GB/s per GPU, which is the per-node figure here.
    dataclasses.replace(
        _BY_NAME["h100"],
        name="h800",
        ici_links=8,
        dcn_bytes_per_s=4.0e11,
        device_kinds=(r"nvidia h800( .*)?",),
        source=(
            "https://arxiv.org/abs/2412.19437 (DeepSeek-V3 technical report, section 3.2.2: 'NVLink offers a "
            "bandwidth of 160 GB/s, roughly 3.2 times that of IB (50 GB/s)'); "
            "https://www.nvidia.com/en-us/data-center/h100/ (the H100 SXM's compute and HBM)"
        ),
    ),
)
VARIANTS: MappingProxyType[str, Chip] = MappingProxyType({chip.name: chip for chip in _VARIANTS})

# On-demand Google Cloud price of one chip for one hour (US dollars), the figures the text quotes.
# Book: Part 8 (Serving LLaMA 3-70B on TPUs), "What's the LLaMA Serving Story?" (Google Cloud pricing,
# February 2025). Other chips have no price here: the text gives none.
PRICES_USD_PER_CHIP_HOUR: MappingProxyType[str, float] = MappingProxyType(
    {"h100": 10.8, "tpu-v5p": 4.20, "tpu-v5e": 1.20}
)


def _key(name: str) -> str:
    """Lowercase, drop spaces, dashes and underscores, and a leading 'tpu'."""
    key = re.sub(r"[\s\-_]+", "", name.lower())
    return key[3:] if key.startswith("tpu") and len(key) > 3 else key


_BY_NAME_ALL = {chip.name: chip for chip in (*_ALL, *_VARIANTS)}
# The names vendors and clouds sell the table's SXM parts under (the table's a100 is the 80 GB SXM).
_ALIASES = {
    "a100-80gb": "a100", "a100-sxm": "a100", "a100-sxm4-80gb": "a100", "h100-sxm": "h100", "h100-sxm5": "h100",
    "h100-80gb": "h100", "h200-sxm": "h200", "b200-sxm": "b200",
}  # fmt: skip


def chip_names(
    *, family: str | None = None, ici_topology: str | None = None, since: str | Chip | None = None
) -> tuple[str, ...]:
    """Canonical names of the chips in `CHIPS` that match every filter given, in table order.

    The table lists each family oldest generation first, so `chip_names(family="tpu", since="v4")`
    is ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x") and
    `chip_names(ici_topology="3d-torus")` is ("tpu-v4", "tpu-v5p", "tpu-7x").

    Args:
        family: `"tpu"` or `"gpu"`; None for both.
        ici_topology: `"2d-torus"`, `"3d-torus"` or `"nvswitch"`; None for any.
        since: a chip of `CHIPS` (any spelling `get_chip` takes): it and the chips after it in the table.

    Raises:
        ValueError: an unknown family or topology, or a `since` that is not in `CHIPS`.
    """
    if family is not None:
        checks.one_of("family", family, FAMILIES)
    if ici_topology is not None:
        checks.one_of("ici_topology", ici_topology, ICI_TOPOLOGIES)
    names = tuple(CHIPS)
    if since is not None:
        first = get_chip(since, arg="since").name
        names = names[names.index(checks.one_of("since", first, names)) :]
    return tuple(
        name
        for name in names
        if family in (None, CHIPS[name].family) and ici_topology in (None, CHIPS[name].ici_topology)
    )


def get_chip(chip: str | Chip, *, arg: str = "chip") -> Chip:
    """The `Chip` called `chip`, in `CHIPS` or `VARIANTS`; case, spaces, dashes, underscores and 'TPU' are ignored.

    `get_chip("v5e") == get_chip("TPU v5e") == get_chip("tpu_v5e")`. A `Chip` is returned as is.

    Args:
        chip: a chip name, or a `Chip`.
        arg: the argument name an error message gives (a caller's own, such as `"since"`).

    Raises:
        ValueError: unknown name; the message lists the closest known names.
    """
    if isinstance(chip, Chip):
        return chip
    table = {**_BY_NAME_ALL, **{alias: _BY_NAME_ALL[name] for alias, name in _ALIASES.items()}}
    return checks.lookup(arg, chip, table, what="chip", key=_key, offered=_BY_NAME_ALL)


def with_calibration(chip: str | Chip, calibration: Calibration | str | pathlib.Path | None) -> Chip:
    """`chip` with the rates a `calibrate` profile measured in place of its cited `Chip.efficiency`.

    None returns the chip unchanged. The datasheet figures stay: the roofline is still the bound.

    Raises:
        ValueError: an unknown chip, a path that holds no profile, or a profile of another chip or
            measured on another device (a CPU under a chip's name).
    """
    hw = get_chip(chip)
    if calibration is None:
        return hw
    profile = load_calibration(calibration)
    measured_on = chip_from_device_kind(profile.device_kind)
    elsewhere = measured_on.name != hw.name if measured_on is not None else profile.device_kind.lower() == "cpu"
    if profile.chip != hw.name or elsewhere:
        raise ValueError(
            f"calibration={profile.chip!r}: a profile measured on {profile.device_kind} against {profile.chip}'s "
            f"datasheet, not on a {hw.name}; allowed: a profile measured on a {hw.name} "
            "(run python -m book_lib calibrate there)"
        )
    return dataclasses.replace(hw, efficiency=calibrated(hw.efficiency, profile))


def price_usd_per_chip_hour(chip: Chip | str) -> float | None:
    """What one chip costs for one hour (US dollars), from `PRICES_USD_PER_CHIP_HOUR`; None when the text
    quotes no price for it. cost = chips * hours * price. Book: Part 8, "What's the LLaMA Serving Story?".

    Raises:
        ValueError: unknown chip name (the closest names are listed).
    """
    return PRICES_USD_PER_CHIP_HOUR.get(get_chip(chip).name)


def chip_from_device_kind(device_kind: str) -> Chip | None:
    """The chip a `jax.Device.device_kind` names (`"TPU v5 lite"` -> tpu-v5e), or None when unknown.

    The lowercased kind must match one of a chip's `device_kinds` patterns whole, so
    `"NVIDIA A100-SXM4-40GB"` is the 40 GB board, `"NVIDIA H100 PCIe"` the PCIe card, and a T4,
    an L4 or a CPU is None rather than a near miss.
    """
    kind = " ".join(device_kind.lower().split())
    for chip in (*_ALL, *_VARIANTS):
        if any(re.fullmatch(pattern, kind) for pattern in chip.device_kinds):
            return chip
    return None


# ----- the vendors' current figures ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class VendorFigure:
    """A vendor's current figure for one field of a chip, where it differs from the table's.

    The table keeps the text's figures: its model is what the chapters and the keys teach. These are what
    the vendor's own page says today, checked against it, for planning with `vendor_chip`.

    Attributes:
        field: the `Chip` field ("ici_bytes_per_s", ...).
        value: the figure in the field's unit (bytes, bytes/s, FLOPs/s).
        as_written: the vendor's words and units.
        source: the vendor page (URL).
    """

    field: str
    value: float
    as_written: str
    source: str


_CLOUD = "https://cloud.google.com/tpu/docs/{}"
# Google gives ICI as "bidirectional bandwidth per chip" over its ports: per link, one direction, it is
# that / 2 / ports (4 on v5e and v6e, 6 on the 3D tori); DCN per host as Gb/s per chip times its chips.
_VENDOR = {
    "tpu-v3": (VendorFigure(field="bf16_flops_per_s", value=1.23e14, as_written="123 teraflops (bf16)",
                            source=_CLOUD.format("v3")),),
    "tpu-v5e": (
        VendorFigure(field="ici_bytes_per_s", value=5.0e10, as_written="ICI bandwidth per chip 400 GBps, 4 ports",
                     source=_CLOUD.format("v5e")),
        VendorFigure(field="hbm_bytes_per_s", value=8.19e11, as_written="HBM2 bandwidth 819 GBps",
                     source=_CLOUD.format("v5e")),
        VendorFigure(field="int8_ops_per_s", value=3.93e14, as_written="int8 393 TOPs", source=_CLOUD.format("v5e")),
    ),
    "tpu-v5p": (
        VendorFigure(field="ici_bytes_per_s", value=1.0e11, as_written="ICI bandwidth per chip 1200 GBps, 3D torus",
                     source=_CLOUD.format("v5p")),
        VendorFigure(field="hbm_bytes_per_s", value=2.765e12, as_written="HBM2e bandwidth 2765 GBps",
                     source=_CLOUD.format("v5p")),
    ),
    "tpu-v6e": (
        VendorFigure(field="bf16_flops_per_s", value=9.18e14, as_written="918 TFLOPs (bf16)",
                     source=_CLOUD.format("v6e")),
        VendorFigure(field="int8_ops_per_s", value=1.836e15, as_written="1836 TOPs (int8)",
                     source=_CLOUD.format("v6e")),
        VendorFigure(field="ici_bytes_per_s", value=1.0e11, as_written="ICI bandwidth per chip 800 GBps, 4 ports",
                     source=_CLOUD.format("v6e")),
        VendorFigure(field="hbm_bytes_per_s", value=1.638e12, as_written="HBM bandwidth 1638 GBps",
                     source=_CLOUD.format("v6e")),
        VendorFigure(field="dcn_bytes_per_s", value=1.0e11, as_written="DCN 100 Gbps per chip, 8 chips per host",
                     source=_CLOUD.format("v6e")),
    ),
    "tpu-7x": (
        VendorFigure(field="hbm_bytes", value=192 * GiB, as_written="HBM capacity per chip (GiB): 192",
                     source=_CLOUD.format("tpu7x")),
        VendorFigure(field="hbm_bytes_per_s", value=7.38e12, as_written="HBM bandwidth 7380 GBps",
                     source=_CLOUD.format("tpu7x")),
        VendorFigure(field="dcn_bytes_per_s", value=5.0e10, as_written="DCN 100 Gbps per chip, 4 chips per host",
                     source=_CLOUD.format("tpu7x")),
    ),
}  # fmt: skip
VENDOR_FIGURES: MappingProxyType[str, tuple[VendorFigure, ...]] = MappingProxyType(_VENDOR)


def vendor_chip(chip: Chip | str) -> Chip:
    """`chip` with the vendor's current figures (`VENDOR_FIGURES`) in place of the text's; itself when they agree.

    The GPUs' rows already are NVIDIA's figures (dense, without the sparsity factor). Planning a real run
    may want these; the chapters and keys use the table's, the figures the text teaches.
    Book: Part 2, "Key Takeaways" (the text's table these differ from).

    Raises:
        ValueError: an unknown chip name (the closest names are listed).
    """
    base = get_chip(chip)
    figures = VENDOR_FIGURES.get(base.name, ())
    if not figures:
        return base
    sources = "; ".join(dict.fromkeys(f.source for f in figures))
    values: dict[str, Any] = {f.field: f.value for f in figures}
    return dataclasses.replace(base, name=f"{base.name} (vendor)", source=f"{sources}; {base.source}", **values)
