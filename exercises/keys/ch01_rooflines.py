"""Answer keys for the chapter 1 exercises (rooflines), computed with book_lib."""

from __future__ import annotations

from book_lib import hardware, roofline
from exercises.keys import Key

H100 = hardware.get_chip("h100")
V5E = hardware.get_chip("tpu-v5e")
V6E = hardware.get_chip("tpu-v6e")

# The rates the problems state, as their statements print them, with the book_lib value each must match
# (tests/test_exercises.py checks every one appears in a statement and agrees within 0.5 %).
GIVENS = [
    ("9.89 \\times 10^{14}", H100.bf16_flops_per_s),
    ("9.2 \\times 10^{14}", V6E.bf16_flops_per_s),
    ("1.97 \\times 10^{14}", V5E.bf16_flops_per_s),
    ("8.1 \\times 10^{11}", V5E.hbm_bytes_per_s),
    ("3.94 \\times 10^{14}", V5E.int8_ops_per_s),
    ("9 \\times 10^{10}", V6E.ici_bytes_per_s),
    ("3.35 TB/s", H100.hbm_bytes_per_s),
]
V5E_HBM_BYTES_PER_S = V5E.hbm_bytes_per_s
V5E_INT8_OPS_PER_S = V5E.int8_ops_per_s
V5E_BF16_FLOPS_PER_S = V5E.bf16_flops_per_s

SHAPES = ((1, 4096, 16384), (256, 8192, 8192), (4096, 2048, 8192), (37, 1000, 3000))


def _int8_bytes(B: int, D: int, F: int) -> tuple[float, float]:
    cost = roofline.matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1)
    return (cost.bytes_in, cost.bytes_out)


def _int8_intensity(B: int, D: int, F: int) -> float:
    return roofline.matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1).intensity


def _int8_bounds(B: int, D: int, F: int) -> tuple[float, float]:
    cost = roofline.matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1)
    t = roofline.roofline_time(cost.flops, cost.bytes, V5E_INT8_OPS_PER_S, V5E_HBM_BYTES_PER_S)
    return (t.t_lower, t.t_upper)


def _int8_weight_throughput(B: int, D: int, F: int) -> float:
    cost = roofline.matmul_cost(B, D, F, x_bytes=2, w_bytes=1, out_bytes=2)
    return roofline.attainable_flops_per_s(cost.intensity, V5E_BF16_FLOPS_PER_S, V5E_HBM_BYTES_PER_S)


def _batched_weights_intensity(B: int, D: int, F: int) -> float:
    # int8[B, D] x int8[B, D, F] -> int8[B, F]: the weights are read once per batch element.
    flops = roofline.matmul_cost(B, D, F).flops
    return flops / (B * D + B * D * F + B * F)


KEYS = {
    "ch01_q0a_t_math_s": Key(
        names=("t_math_h100_s", "t_math_v6e_s"),
        kind="value",
        expected=lambda: {
            "t_math_h100_s": 1e12 / H100.bf16_flops_per_s,
            "t_math_v6e_s": 1e12 / V6E.bf16_flops_per_s,
        },
    ),
    "ch01_q0b_dot_intensity": Key(
        names=("dot_product_intensity",),
        kind="function",
        reference=lambda n, b: roofline.dot_product_cost(n, b).intensity,
        cases=((1, 2), (10, 2), (1000, 4), (12345, 1)),
    ),
    "ch01_q0c_dot_bound": Key(
        names=("dot_product_bound",),
        kind="choice",
        choices=("compute", "bandwidth"),
        expected=lambda: (
            roofline.roofline_time(
                roofline.dot_product_cost(10**6).flops,
                roofline.dot_product_cost(10**6).bytes,
                V5E.bf16_flops_per_s,
                V5E.hbm_bytes_per_s,
            ).bound
        ),
    ),
    "ch01_q0d_critical_batch": Key(
        names=("critical_batch_tokens",),
        kind="function",
        reference=roofline.critical_batch_size,
        cases=((8192, 32768, 1.97e14, 8.1e11), (2048, 2048, 1.97e14, 8.1e11), (4096, 14336, 9.89e14, 3.35e12)),
    ),
    "ch01_q0e_network_d": Key(
        names=("d_crit_v6e",),
        kind="value",
        expected=lambda: {"d_crit_v6e": 2 * V6E.bf16_flops_per_s / V6E.ici_bytes_per_s},
    ),
    "ch01_q1a_int8_bytes": Key(
        names=("int8_matmul_bytes",),
        kind="function",
        reference=_int8_bytes,
        cases=SHAPES,
    ),
    "ch01_q1b_int8_intensity": Key(
        names=("int8_matmul_intensity",),
        kind="function",
        reference=_int8_intensity,
        cases=SHAPES,
    ),
    "ch01_q1c_int8_batch": Key(
        names=("b_crit_int8_tokens",),
        kind="value",
        expected=lambda: {"b_crit_int8_tokens": V5E_INT8_OPS_PER_S / V5E_HBM_BYTES_PER_S / 2},
    ),
    "ch01_q1d_int8_bounds": Key(
        names=("int8_matmul_bounds_s",),
        kind="function",
        reference=_int8_bounds,
        cases=SHAPES,
    ),
    "ch01_q2_int8_weights": Key(
        names=("b_crit_int8_weights_tokens",),
        kind="value",
        expected=lambda: {"b_crit_int8_weights_tokens": V5E_BF16_FLOPS_PER_S / V5E_HBM_BYTES_PER_S / 2},
    ),
    "ch01_q3_throughput": Key(
        names=("int8_weight_matmul_flops_per_s",),
        kind="function",
        reference=_int8_weight_throughput,
        cases=SHAPES,
    ),
    "ch01_q4_batched_weights": Key(
        names=("batched_weights_intensity",),
        kind="function",
        reference=_batched_weights_intensity,
        cases=SHAPES,
    ),
    "ch01_q5_h100_batch": Key(
        names=("b_crit_h100_tokens",),
        kind="value",
        expected=lambda: {"b_crit_h100_tokens": roofline.critical_intensity(H100)},
    ),
}
