"""book_lib.hardware: the figures against their sources, the name lookup, bad input."""

import dataclasses
import math

import pytest

from book_lib import hardware
from book_lib.hardware import CHIPS, Chip, chip_from_device_kind, get_chip

CANONICAL = ("tpu-v2", "tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x", "a100", "h100", "h200", "b200")


def test_every_canonical_chip_is_there_in_order():
    assert hardware.chip_names() == CANONICAL


def test_chip_names_filters_keep_table_order():
    # prefixes: a chip added after the newest of its family (CONTRIBUTING) joins the end of each list
    assert hardware.chip_names(family="tpu", since="v4")[:5] == ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-7x")
    assert hardware.chip_names(ici_topology="2d-torus")[:4] == ("tpu-v2", "tpu-v3", "tpu-v5e", "tpu-v6e")
    assert hardware.chip_names(ici_topology="3d-torus")[:3] == ("tpu-v4", "tpu-v5p", "tpu-7x")
    assert hardware.chip_names(family="gpu")[:4] == ("a100", "h100", "h200", "b200")
    assert hardware.chip_names(family="gpu", ici_topology="3d-torus") == ()
    assert hardware.chip_names(since=get_chip("h200"))[:2] == ("h200", "b200")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "tp"}, r"^family='tp': unknown; closest: tpu"),
        ({"ici_topology": "torus"}, r"^ici_topology='torus': unknown;"),
        ({"since": "v9"}, r"^since='v9': unknown chip;"),
        ({"since": "h100-pcie"}, r"^since='h100-pcie': unknown; .*allowed: tpu-v2"),
    ],
)
def test_chip_names_refuses_unknown_filters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hardware.chip_names(**kwargs)


@pytest.mark.parametrize(
    ("name", "bf16", "int8", "hbm_bw", "ici"),
    [
        # the reference book's Part 2 tables (FLOPs/s, OPs/s, bytes/s, one-way bytes/s per link)
        ("tpu-v3", 1.4e14, 1.4e14, 9.0e11, 1e11),
        ("tpu-v4", 2.75e14, 2.75e14, 1.2e12, 4.5e10),
        ("tpu-v5p", 4.59e14, 9.18e14, 2.8e12, 9e10),
        ("tpu-v5e", 1.97e14, 3.94e14, 8.1e11, 4.5e10),
        ("tpu-v6e", 9.2e14, 1.84e15, 1.6e12, 9e10),
        # NVIDIA spec sheets, dense (half the with-sparsity figure)
        ("h100", 9.89e14, 1.979e15, 3.35e12, 2.5e10),
        ("h200", 9.89e14, 1.979e15, 4.8e12, 2.5e10),
        ("a100", 3.12e14, 6.24e14, 2.039e12, 2.5e10),
    ],
)
def test_figures_match_their_sources(name, bf16, int8, hbm_bw, ici):
    chip = CHIPS[name]
    assert (chip.bf16_flops_per_s, chip.int8_ops_per_s, chip.hbm_bytes_per_s, chip.ici_bytes_per_s) == (
        bf16,
        int8,
        hbm_bw,
        ici,
    )


def test_pod_and_host_shapes_from_the_book():
    assert CHIPS["tpu-v5e"].chips_per_pod == 256 and CHIPS["tpu-v5e"].chips_per_host == 8
    assert CHIPS["tpu-v5p"].chips_per_pod == 8960 and CHIPS["tpu-v5p"].chips_per_host == 4
    assert CHIPS["tpu-v4"].pod_shape == (16, 16, 16)
    assert CHIPS["tpu-v5e"].vmem_bytes == 128 * 2**20
    assert CHIPS["tpu-v6e"].mxu_size == 256 and CHIPS["tpu-v5e"].mxu_size == 128


def test_every_chip_cites_a_source_and_is_frozen():
    for chip in CHIPS.values():
        assert "http" in chip.source or "How to Scale" in chip.source, chip.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            chip.bf16_flops_per_s = 1.0  # type: ignore[misc]


def test_table_is_read_only():
    with pytest.raises(TypeError):
        CHIPS["new"] = CHIPS["h100"]  # type: ignore[index]


@pytest.mark.parametrize("spelling", ["v5e", "TPU v5e", "tpu-v5e", "tpu_v5e", "TPUv5e", " V5E "])
def test_lookup_ignores_case_spaces_dashes_underscores(spelling):
    assert get_chip(spelling) is CHIPS["tpu-v5e"]


def test_lookup_passes_a_chip_through():
    assert get_chip(CHIPS["h100"]) is CHIPS["h100"]


def test_unknown_chip_lists_close_matches():
    with pytest.raises(ValueError, match=r"chip='v5x'.*closest: .*tpu-v5") as err:
        get_chip("v5x")
    assert "allowed:" in str(err.value)


def test_non_string_name_is_rejected():
    with pytest.raises(ValueError, match="^chip=5"):
        get_chip(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("TPU v2", "tpu-v2"),
        ("TPU v3", "tpu-v3"),
        ("TPU v4", "tpu-v4"),
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5", "tpu-v5p"),
        ("TPU v5p", "tpu-v5p"),
        ("TPU v6 lite", "tpu-v6e"),
        ("TPU7x", "tpu-7x"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
    ],
)
def test_device_kind_maps_to_chip(kind, name):
    assert chip_from_device_kind(kind) is get_chip(name)


@pytest.mark.parametrize("kind", ["cpu", "Tesla T4", "NVIDIA L4", "NVIDIA H100 NVL", "NVIDIA GeForce RTX 4090"])
def test_unknown_device_kind_is_no_chip_rather_than_a_near_miss(kind):
    assert chip_from_device_kind(kind) is None


def test_variants_differ_where_the_boards_differ():
    a100_40, a100_80 = get_chip("a100-40gb"), CHIPS["a100"]
    assert a100_40.hbm_bytes_per_s == 1.555e12 < a100_80.hbm_bytes_per_s == 2.039e12
    assert get_chip("h100 pcie").bf16_flops_per_s == 7.56e14 < CHIPS["h100"].bf16_flops_per_s
    assert get_chip("h100-pcie").hbm_bytes_per_s == 2.0e12 and get_chip("h100-pcie").cores_per_chip == 114
    assert not set(hardware.VARIANTS) & set(CHIPS), "variants stay out of the book's table"


def test_per_device_figures_halve_where_a_device_is_one_core():
    for name in ("tpu-v2", "tpu-v3", "tpu-7x"):
        chip, device = CHIPS[name], CHIPS[name].per_device()
        assert chip.devices_per_chip == 2 and device.name == f"{name}/core"
        assert (
            device.bf16_flops_per_s == chip.bf16_flops_per_s / 2 and device.hbm_bytes_per_s == chip.hbm_bytes_per_s / 2
        )
        assert device.hbm_bytes == chip.hbm_bytes / 2
    assert CHIPS["tpu-v2"].per_device().bf16_flops_per_s == 2.3e13, "Part 9: 23e12 FLOPs/s per v2 core"
    for name in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "h100"):
        assert CHIPS[name].per_device() is CHIPS[name], "one device is the whole chip"


def test_bad_fields_raise_naming_the_field():
    good = dataclasses.asdict(CHIPS["tpu-v5e"])
    with pytest.raises(ValueError, match="hbm_bytes_per_s=0"):
        Chip(**{**good, "hbm_bytes_per_s": 0})
    with pytest.raises(ValueError, match="family='npu'"):
        Chip(**{**good, "family": "npu"})
    with pytest.raises(ValueError, match="ici_topology='ring'"):
        Chip(**{**good, "ici_topology": "ring"})
    with pytest.raises(ValueError, match="pod_shape=\\(0, 16\\)"):
        Chip(**{**good, "pod_shape": (0, 16)})


# ---- TensorCore internals (Part 2, "What is a TPU?" and Appendices B and C) ----


def test_mxu_passes_reproduce_the_v5e_peak_at_the_stated_clock():
    v5e = CHIPS["tpu-v5e"]
    size = v5e.mxu_size
    # one pass: bf16[8, size] @ bf16[size, size], 8 * size * size multiply-adds, every 8 cycles
    flops_per_cycle_per_mxu = 2 * hardware.MXU_PASS_ROWS * size * size / hardware.MXU_PASS_CYCLES
    assert flops_per_cycle_per_mxu == 2 * size**2
    per_mxu = flops_per_cycle_per_mxu * v5e.clock_hz
    assert abs(per_mxu - 5e13) / 5e13 < 0.02, "the text: about 5e13 bf16 FLOPs/s per MXU at 1.5 GHz"
    chip_peak = per_mxu * v5e.mxus_per_core * v5e.cores_per_chip
    assert abs(chip_peak - v5e.bf16_flops_per_s) / v5e.bf16_flops_per_s < 0.01, "4 MXUs give the table's 1.97e14"


def test_stated_clock_agrees_with_the_clock_the_peak_implies():
    from book_lib import systolic

    v5e = CHIPS["tpu-v5e"]
    assert abs(systolic.implied_clock_hz(v5e) - v5e.clock_hz) / v5e.clock_hz < 0.01
    assert all(c.clock_hz is None for c in CHIPS.values() if c.name != "tpu-v5e"), "only v5e's clock is stated"


def test_int8_per_mxu_is_a_quarter_of_the_chip_not_the_texts_4e14():
    v5e = CHIPS["tpu-v5e"]
    per_mxu = v5e.int8_ops_per_s / (v5e.mxus_per_core * v5e.cores_per_chip)
    assert abs(per_mxu - 1e14) / 1e14 < 0.02, "twice the 5e13 bf16 FLOPs/s of one MXU"
    assert abs(v5e.int8_ops_per_s - 4e14) / 4e14 < 0.02, "the text's per-MXU 4e14 is the whole chip's rate"


def test_v4_vector_unit_matches_appendix_c():
    v4 = CHIPS["tpu-v4"]
    assert v4.vpu_shape == (8, 128) and v4.vregs_per_core == 32
    assert v4.vpu_alus_per_core == 2048, "8 x 128 slots of 2 ALUs"
    mxu_flops_per_cycle = 2 * v4.mxu_size**2 * v4.mxus_per_core
    assert mxu_flops_per_cycle / v4.vpu_alus_per_core == 64, "the MXUs do 64 FLOPs per VPU operation"
    assert v4.vregs_per_core * math.prod(v4.vpu_shape) * 4 == 128 * 2**10, "32 f32 VREGs hold 128 KiB"
    assert all(c.vpu_shape == (8, 128) for c in CHIPS.values() if c.is_tpu)
    assert all(c.vpu_alus_per_core is None for c in CHIPS.values() if not c.is_tpu)
    assert CHIPS["tpu-v5e"].vpu_alus_per_core is None, "no ALU count per slot is given for v5e"


def test_v6e_pcie_is_about_twice_v5e_not_four_times():
    ratio = CHIPS["tpu-v6e"].pcie_bytes_per_s / CHIPS["tpu-v5e"].pcie_bytes_per_s
    assert 2.0 < ratio < 2.2, "the footnote says about 4x; the figures give about 2x (chapter 2's erratum)"


def test_h100_cuda_cores_match_nvidia_not_the_texts_1024_per_sm():
    h100 = CHIPS["h100"]
    assert h100.cores_per_chip * h100.cuda_cores_per_sm == 16_896
    fp32_flops_per_s = 2 * h100.cores_per_chip * h100.cuda_cores_per_sm * 1.98e9  # FMA at the 1.98 GHz boost clock
    assert abs(fp32_flops_per_s - 6.7e13) / 6.7e13 < 0.01, "NVIDIA's 67 TFLOP/s FP32 (SXM)"
    assert 1024 / h100.cuda_cores_per_sm == 8
    assert all(c.cuda_cores_per_sm is None for c in CHIPS.values() if c.is_tpu)


def test_v3_host_is_four_chips_eight_cores():
    v3 = CHIPS["tpu-v3"]
    assert v3.chips_per_host == 4 and v3.chips_per_host * v3.cores_per_chip == 8, "the text's table prints 4x2"


def test_problem_2_6_matrix_exactly_fills_a_v5e():
    assert (128 * 1024) ** 2 == 2**34 == CHIPS["tpu-v5e"].hbm_bytes


def test_internal_constants_from_the_text():
    assert (hardware.MXU_PASS_ROWS, hardware.MXU_PASS_CYCLES) == (8, 8)
    assert hardware.VMEM_OVER_HBM_BANDWIDTH_RATIO == 22 and hardware.INT4_OVER_BF16_RATIO == 4


def test_bad_internal_fields_raise_naming_the_field():
    good = dataclasses.asdict(CHIPS["tpu-v4"])
    with pytest.raises(ValueError, match=r"vpu_shape=\(8,\).*allowed"):
        Chip(**{**good, "vpu_shape": (8,)})
    with pytest.raises(ValueError, match="vregs_per_core=0.*allowed"):
        Chip(**{**good, "vregs_per_core": 0})
    with pytest.raises(ValueError, match="clock_hz=-1.*allowed"):
        Chip(**{**good, "clock_hz": -1.0})


# ----- the vendors' current figures ------------------------------------------------------------------


def test_vendor_figures_are_what_differs_from_the_texts_table_with_their_sources():
    assert hardware.VENDOR_FIGURES and set(hardware.VENDOR_FIGURES) <= set(hardware.CHIPS)
    fields = {f.name for f in dataclasses.fields(hardware.Chip)}
    for name, figures in hardware.VENDOR_FIGURES.items():
        chip, vendor = hardware.get_chip(name), hardware.vendor_chip(name)
        for figure in figures:
            assert figure.field in fields and figure.source.startswith("https://cloud.google.com/tpu/docs/")
            assert getattr(chip, figure.field) != figure.value, (name, figure.field)  # only what differs
            assert getattr(vendor, figure.field) == figure.value
        assert vendor.name == f"{name} (vendor)" and figure.source in vendor.source
    # TPU 7x's HBM: Google's page says GiB, the text's table 192e9 bytes
    assert hardware.vendor_chip("tpu-7x").hbm_bytes == 192 * 2**30 and hardware.get_chip("tpu-7x").hbm_bytes == 192e9
    # per link and direction: 1,200 GB/s both ways per v5p chip over 6 ports
    assert hardware.vendor_chip("v5p").ici_bytes_per_s == 1200e9 / 2 / 6
    assert hardware.vendor_chip("h100") is hardware.get_chip("h100")  # NVIDIA's figures already
