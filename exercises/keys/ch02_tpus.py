"""Answer keys for the chapter 2 exercises (TPUs), computed with book_lib."""

from __future__ import annotations

from book_lib import hardware, roofline, topology
from exercises.keys import Key

V4 = hardware.get_chip("tpu-v4")
V5E = hardware.get_chip("tpu-v5e")
V5P = hardware.get_chip("tpu-v5p")
V6E = hardware.get_chip("tpu-v6e")
PCIE_GIVEN_BYTES_PER_S = 1.5e10  # problems 2.3 and 2.6 state this rate (the v5e's; a v6e has more)
VMEM_OVER_HBM = 22  # problem 2.4 states VMEM feeds the MXU 22 times faster than HBM
HOP_LATENCY_S = 1e-6  # problem 2.5

GIVENS = [
    ("1.2 \\times 10^{12}", V4.hbm_bytes_per_s),
    ("9.2 \\times 10^{14}", V6E.bf16_flops_per_s),
    ("1.5 \\times 10^{10}", V5E.pcie_bytes_per_s),
    ("3.94 \\times 10^{14}", V5E.int8_ops_per_s),
    ("8.1 \\times 10^{11}", V5E.hbm_bytes_per_s),
    ("4.5 \\times 10^{10}", V5E.ici_bytes_per_s),
    ("1.97 \\times 10^{14}", V5E.bf16_flops_per_s),
    ("4.59 \\times 10^{14}", V5P.bf16_flops_per_s),
    ("16 GiB", V5E.hbm_bytes),
    ("96 GiB", V5P.hbm_bytes),
]

W_SHAPE = (16384, 4096)  # problem 2.4: int8[F, D] weights times int8[B, D] activations
ARRAY_2_6_BYTES = (128 * 1024) ** 2  # problem 2.6: int8[128 * 1024, 128 * 1024]


def _pod(chip: hardware.Chip) -> dict[str, float]:
    pod = topology.pod(chip)
    prefix = chip.name.removeprefix("tpu-")
    return {
        f"{prefix}_pod_hosts": pod.n_hosts,
        f"{prefix}_pod_cores": pod.n_cores,
        f"{prefix}_pod_flops_per_s": pod.flops_per_s,
        f"{prefix}_pod_hbm_bytes": pod.hbm_bytes,
    }


def _int8_time(B: int) -> float:
    F, D = W_SHAPE
    cost = roofline.matmul_cost(B, D, F, x_bytes=1, w_bytes=1, out_bytes=1)
    return roofline.roofline_time(cost.flops, cost.bytes, V5E.int8_ops_per_s, V5E.hbm_bytes_per_s).t_lower


def _critical(bytes_per_s: float) -> float:
    F, D = W_SHAPE
    return roofline.critical_batch_size(D, F, V5E.int8_ops_per_s, bytes_per_s, x_bytes=1, w_bytes=1, out_bytes=1)


def _transfer() -> dict[str, float]:
    grid = topology.Slice.of(V5E, "4x4")
    size = 2 * 8 * 128 * 8192  # bf16[8, 128, 8192]
    corner_links = sum(1 for wraps in grid.wraparound if not wraps)  # one outgoing link per axis at a corner
    return {
        "first_byte_s": grid.hop_count((0, 0), (3, 3)) * HOP_LATENCY_S,
        "transfer_s": size / (corner_links * V5E.ici_bytes_per_s),
    }


def _pipeline() -> dict[str, float]:
    grid = topology.Slice.of(V5E, "4x4")
    per_host = ARRAY_2_6_BYTES / grid.n_hosts
    received = ARRAY_2_6_BYTES * (grid.n_chips - 1) / grid.n_chips
    matmul = roofline.matmul_cost(8, 128 * 1024, 128 * 1024)
    return {
        "pcie_load_s": per_host / (grid.chips_per_host * PCIE_GIVEN_BYTES_PER_S),
        "ici_gather_s": received / (2 * V5E.ici_bytes_per_s),
        "hbm_load_s": ARRAY_2_6_BYTES / V5E.hbm_bytes_per_s,
        "matmul_s": matmul.flops / V5E.bf16_flops_per_s,
    }


KEYS = {
    "ch02_q1_load_time": Key(
        names=("load_time_s",),
        kind="value",
        expected=lambda: {"load_time_s": 2 * 200e9 / 32 / V4.hbm_bytes_per_s},
    ),
    "ch02_q2a_v5e_pod": Key(names=tuple(_pod(V5E)), kind="value", expected=lambda: _pod(V5E)),
    "ch02_q2b_v5p_pod": Key(names=tuple(_pod(V5P)), kind="value", expected=lambda: _pod(V5P)),
    "ch02_q3_pcie_batch": Key(
        names=("pcie_batch_tokens",),
        kind="value",
        expected=lambda: {"pcie_batch_tokens": V6E.bf16_flops_per_s / PCIE_GIVEN_BYTES_PER_S},
    ),
    "ch02_q4a_matmul_time": Key(
        names=("int8_matmul_time_s",),
        kind="function",
        expected=lambda: [((B,), _int8_time(B)) for B in (1, 64, 271, 1024, 8192)],
    ),
    "ch02_q4b_hbm_batch": Key(
        names=("hbm_batch_tokens",), kind="value", expected=lambda: {"hbm_batch_tokens": _critical(V5E.hbm_bytes_per_s)}
    ),
    "ch02_q4c_vmem_batch": Key(
        names=("vmem_batch_tokens",),
        kind="value",
        expected=lambda: {"vmem_batch_tokens": _critical(VMEM_OVER_HBM * V5E.hbm_bytes_per_s)},
    ),
    "ch02_q5_ici_transfer": Key(names=("first_byte_s", "transfer_s"), kind="value", expected=_transfer),
    "ch02_q6_pipeline": Key(names=tuple(_pipeline()), kind="value", expected=_pipeline),
    "ch02_q7_shift_right": Key(names=("shift_right",), kind="jax", expected=lambda: [(4, 8), (2, 16)]),
}

# Right values by the wrong route: gather every block, then slice (tests/test_grading.py).
PLAUSIBLE = {
    "ch02_q7_shift_right": """
def shift_right(x, n_devices):
    def body(block):
        everything = jax.lax.all_gather(block, "X", tiled=True)
        source = (jax.lax.axis_index("X") - 1) % n_devices
        return jax.lax.dynamic_slice_in_dim(everything, source * block.shape[0], block.shape[0])

    return jax.shard_map(body, in_specs=jax.P("X"), out_specs=jax.P("X"))(x)
""",
}
