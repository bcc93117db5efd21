"""Answer keys for the chapter 1 exercises (rooflines), computed with book_lib."""

from __future__ import annotations

from book_lib import hardware, roofline
from book_lib.hardware import get_chip
from exercises.keys import Key

H100 = get_chip("h100")
V5E = get_chip("tpu-v5e")
V6E = get_chip("tpu-v6e")

# The rates the function problems state, as their statements print them, with the book_lib value each
# must match (tests/course/test_exercises.py checks every one appears in a statement and agrees within 0.5 %).
GIVENS = [
    ("1.97 \\times 10^{14}", V5E.bf16_flops_per_s),
    ("8.1 \\times 10^{11}", V5E.hbm_bytes_per_s),
    ("3.94 \\times 10^{14}", V5E.int8_ops_per_s),
]
V5E_HBM_BYTES_PER_S = V5E.hbm_bytes_per_s
V5E_INT8_OPS_PER_S = V5E.int8_ops_per_s
V5E_BF16_FLOPS_PER_S = V5E.bf16_flops_per_s

# What a class's variant may draw: chips with the rates a question needs.
GPUS = hardware.chip_names(family="gpu")
TPUS = hardware.chip_names(family="tpu", since="tpu-v4")
TPUS_WITH_INT8 = tuple(t for t in TPUS if get_chip(t).int8_ops_per_s != get_chip(t).bf16_flops_per_s)


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
    return roofline.batched_weights_matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1).intensity


KEYS = {
    "ch01_q0a_t_math_s": Key(
        names=("t_math_gpu_s", "t_math_tpu_s"),
        kind="value",
        rel_tol=0.02,  # the text rounds the v6e's 1.09 ms to "1.1ms" (its peak there: 9.1e14; Part 2: 9.2e14)
        expected=lambda flops, gpu, tpu: {
            "t_math_gpu_s": flops / get_chip(gpu).bf16_flops_per_s,
            "t_math_tpu_s": flops / get_chip(tpu).bf16_flops_per_s,
        },
        params={"flops": 1e12, "gpu": "h100", "tpu": "tpu-v6e"},
        draw=lambda r: {"flops": r.choice((2e11, 5e11, 2e12, 5e12)), "gpu": r.choice(GPUS), "tpu": r.choice(TPUS)},
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
        names=("d_crit",),
        kind="value",
        expected=lambda tpu: {"d_crit": 2 * get_chip(tpu).bf16_flops_per_s / get_chip(tpu).ici_bytes_per_s},
        params={"tpu": "tpu-v6e"},
        draw=lambda r: {"tpu": r.choice(TPUS)},
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
        rel_tol=0.02,  # the text's 8.2e11 bytes/s: its ridge of 240 where 8.1e11 gives 243
        expected=lambda tpu: {"b_crit_int8_tokens": get_chip(tpu).int8_ops_per_s / get_chip(tpu).hbm_bytes_per_s / 2},
        params={"tpu": "tpu-v5e"},
        draw=lambda r: {"tpu": r.choice(TPUS_WITH_INT8)},
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
        rel_tol=0.02,
        expected=lambda tpu: {
            "b_crit_int8_weights_tokens": get_chip(tpu).bf16_flops_per_s / get_chip(tpu).hbm_bytes_per_s / 2
        },
        params={"tpu": "tpu-v5e"},
        draw=lambda r: {"tpu": r.choice(TPUS)},
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
        names=("b_crit_gpu_tokens",),
        kind="value",
        rel_tol=0.02,
        expected=lambda gpu: {"b_crit_gpu_tokens": roofline.critical_intensity(get_chip(gpu))},
        params={"gpu": "h100"},
        draw=lambda r: {"gpu": r.choice(GPUS)},
    ),
}

# The text's printed answers: the grader accepts each (tests/course/test_exercises.py).
PRINTED = {
    "ch01_q0a_t_math_s": {"t_math_gpu_s": 1.01e-3, "t_math_tpu_s": 1.1e-3},
    "ch01_q1c_int8_batch": {"b_crit_int8_tokens": 240},  # 243 in the February 2025 text (8.1e11 bytes/s)
    "ch01_q2_int8_weights": {"b_crit_int8_weights_tokens": 120},
    "ch01_q5_h100_batch": {"b_crit_gpu_tokens": 298},  # the current text: 9.89e14 / 3.35e12 = 295
}

# Why the text's answer to each other question is not in PRINTED.
UNPRINTED: dict[str, str] = {
    "ch01_q0b_dot_intensity": "a function question: graded on its inputs; the text prints (2N - 1) / (4N + 2), "
    "no table of outputs",
    "ch01_q0c_dot_bound": "a choice question: PRINTED holds numbers only (the text's answer, bandwidth-bound, "
    "is the key's)",
    "ch01_q0d_critical_batch": "a function question: graded on its inputs, and the text prints only the B << D, F "
    "approximation",
    "ch01_q0e_network_d": "the text's D > 8755 is for a v5e's 1.97e14 FLOPs/s and 4.5e10 bytes/s; it prints no "
    "threshold for the v6e this question asks about",
    "ch01_q1a_int8_bytes": "a function question: graded on its inputs; the text prints BD + DF and BF, no table "
    "of outputs",
    "ch01_q1b_int8_intensity": "a function question: graded on its inputs; the text prints 2BDF / (BD + DF + BF), "
    "no table of outputs",
    "ch01_q1d_int8_bounds": "a function question: graded on its inputs; the text prints the max and the sum, no "
    "table of outputs",
    "ch01_q3_throughput": "a function question: graded on its inputs; the text answers with a plot, not numbers",
    "ch01_q4_batched_weights": "a function question: graded on its inputs; the text prints 2BDF / (BD + BDF + BF), "
    "no table of outputs",
}
