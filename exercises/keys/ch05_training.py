"""Answer keys for the chapter 5 exercises (parallelising a Transformer for training), computed with book_lib."""

from __future__ import annotations

import random

from book_lib import bounds, hardware, models, runs, training, transformer
from book_lib.hardware import get_chip
from book_lib.parallelism import Layout
from exercises.keys import choice, function, pick, program, value
from exercises.keys.arrays import FSDP_GATHERS, normal, product
from exercises.keys.chips import TPUS, TPUS_3D, text_chip

# The worked problems' model (problems 5.1 to 5.4): LLaMA-2 13B, as book_lib's preset.
L13 = models.get_model("llama-2-13b")
MODELS = ("llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-405b", "gemma-2-27b")
WIDTHS = tuple(models.get_model(m).d_ff for m in MODELS)  # the F a class may draw
SCHEMES = ("neither", "FSDP only", "FSDP+TP only", "both")
WHY_NOT = ("yes", "no, memory", "no, communication")


def _c_checkpoints(model: transformer.TransformerConfig) -> float:
    """Problem 5.2 keeps the outputs of the three big matmuls per layer: two of width F, one of D, in widths of D."""
    return 1 + 2 * model.d_ff / model.d_model


def _dp_max_params(tpu: str | hardware.Chip) -> float:
    # bf16 weights (2 bytes) and Adam's two fp32 moments (8 bytes), no gradients: the text's 10 bytes
    per_param = training.zero_memory_per_chip(param_count=1, n_data=1, stage=0, grad_dtype=None, master_dtype=None)
    return get_chip(tpu).hbm_bytes / per_param.total_bytes


def _dp_batches(tpu: str, pod_chips: int) -> tuple[float, float, float]:
    one, three = (bounds.compute_bound_batch_per_chip(tpu, strategy="dp", n_axes=n) for n in (1, 3))
    return (one, three, three * pod_chips)


def _fsdp_floor(tpu: str) -> float:
    """Tokens per chip pure FSDP over a pod's three axes needs to stay compute-bound."""
    return bounds.compute_bound_batch_per_chip(tpu, strategy="fsdp", n_axes=3)


def _mixed_floor(tpu: str, f: int) -> float:
    """Tokens per chip mixed FSDP and tensor parallelism need to stay compute-bound, for an MLP of width F."""
    return bounds.compute_bound_batch_per_chip(tpu, strategy="fsdp+tp", d_ff=f)


def _fsdp_days(model: str, p: int, tpu: str, batch_m: int, tokens_t: int, mfu: float) -> float:
    # p (the preset's parameter count) is printed in the statement; training_run counts it from the model
    chips = int(batch_m * 1e6 // _fsdp_floor(tpu))
    return runs.training_run(model, tpu, chips, tokens=tokens_t * 1e12, mfu=mfu).days


def _draw_fsdp_days(r: random.Random) -> dict:
    model = r.choice(MODELS)
    return {
        "model": model,
        "p": models.get_model(model).param_count(),
        "tpu": r.choice(TPUS_3D),
        "batch_m": r.choice((4, 8, 16, 32)),
        "tokens_t": r.choice((2, 8, 15, 30)),
        "mfu": r.choice((0.3, 0.4, 0.5, 0.6)),
    }


def _zero(p_b: float, n: int) -> tuple[float, ...]:
    """Bytes per chip at each ZeRO stage, 0 to 3."""
    return tuple(
        training.zero_memory_per_chip(param_count=p_b * 1e9, n_data=n, stage=stage).total_bytes for stage in range(4)
    )


def _memory(model: str, batch_m: int, fsdp: int = 1) -> training.MemoryPerChip:
    """Problems 5.2 and 5.3's memory per v5p, `fsdp` ways, with problem 5.2's checkpoints."""
    cfg = models.get_model(model)
    layout, c = Layout(fsdp=fsdp), _c_checkpoints(cfg)
    return training.memory_per_chip(cfg, "tpu-v5p", layout, batch_tokens=batch_m * 1e6, checkpoints_per_layer=c)


def _memory_5_2(model: str, batch_m: int) -> tuple[float, float]:
    mem = _memory(model, batch_m)
    return (mem.params_bytes + mem.optimizer_bytes, mem.activations_bytes)


def _fsdp_5_3(model: str, batch_m: int, side: int) -> tuple[float, float]:
    mem = _memory(model, batch_m, side**3)
    # no gradients, as 5.2
    return (mem.params_bytes + mem.optimizer_bytes + mem.activations_bytes, _fsdp_floor("tpu-v5p") * side**3)


def _mixed_5_3(model: str, batch_m: int, side: int) -> tuple[float, float, float]:
    n, cfg = side**3, models.get_model(model)
    # the text's 6 P B FLOPs of one step of B tokens: a run of B tokens
    step_flops = runs.training_run(cfg, "tpu-v5p", 1, tokens=batch_m * 1e6, mfu=1.0).flops
    return (
        _mixed_floor("tpu-v5p", cfg.d_ff),
        bounds.optimal_fsdp_degree(n, batch_tokens=batch_m * 1e6, d_ff=cfg.d_ff),
        step_flops / (n * get_chip("tpu-v5p").peak_ops_per_s()),
    )


def _schemes(batch_m: int, side: int) -> str:
    """Which of pure FSDP and mixed FSDP + TP stay compute-bound on a v5p cube of side^3 chips."""
    per_chip = batch_m * 1e6 / side**3
    fsdp = per_chip > _fsdp_floor("tpu-v5p")
    mixed = per_chip > _mixed_floor("tpu-v5p", L13.d_ff)
    return SCHEMES[fsdp + 2 * mixed]


def _text_params(layers: int, d: int, f: int, v: int) -> float:
    """Problem 5.1's count, 3LDF + 4DNHL + 2VD (N H = D, untied embeddings, no norms), from book_lib's breakdown."""
    model = transformer.TransformerConfig(
        n_layers=layers, d_model=d, d_ff=f, n_heads=d // 128, n_kv_heads=d // 128, head_dim=128, vocab_size=v
    )
    parts = model.param_breakdown()
    return parts.mlp + parts.attention + parts.embedding + parts.output


def _fsdp_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """x: f32[n b, D] (rows over "X"), w_in: f32[D, F] (rows over "X"), w_out: f32[F, D] (columns over "X"), D = n d."""
    b, d, f = sizes
    return normal(((n * b, n * d), (n * d, f), (f, n * d)), seed), ()


P53 = {
    "params": {"model": "llama-2-13b", "batch_m": 3, "side": 16},
    "draw": pick(model=MODELS, batch_m=(1, 2, 4, 6, 8, 12), side=(8, 12, 16)),
}

KEYS = {
    "ch05_q0a_dp_max_params": value(
        "dp_max_params",
        _dp_max_params,
        # the text divides its 96 GB (96e9 bytes), the chip has 96 GiB: both are accepted
        also=(lambda tpu: _dp_max_params(text_chip(tpu)),),
        params={"tpu": "tpu-v5p"},
        draw=pick(tpu=TPUS),
    ),
    "ch05_q0b_dp_batch": value(
        ("dp_batch_one_axis", "dp_batch_three_axes", "dp_pod_batch_tokens"),
        _dp_batches,
        params={"tpu": "tpu-v5p", "pod_chips": 8960},
        draw=pick(tpu=TPUS_3D, pod_chips=(1024, 4096, 6144, 8192, 9216)),
    ),
    "ch05_q0c_fsdp_chips": value(
        "fsdp_max_chips",
        lambda tpu, batch_m: batch_m * 1e6 / _fsdp_floor(tpu),
        params={"tpu": "tpu-v5p", "batch_m": 40},
        draw=pick(tpu=TPUS_3D, batch_m=(4, 8, 16, 60, 100)),
    ),
    "ch05_q0d_fsdp_days": value(
        "fsdp_training_days",
        _fsdp_days,
        params={
            "model": "llama-3-70b",
            "p": models.get_model("llama-3-70b").param_count(),
            "tpu": "tpu-v5p",
            "batch_m": 16,
            "tokens_t": 15,
            "mfu": 0.5,
        },
        draw=_draw_fsdp_days,
    ),
    "ch05_q0e_max_tp": value(
        "max_tp_degree",
        lambda tpu, f, n_axes: bounds.max_tensor_parallelism(tpu, d_ff=f, n_axes=n_axes),
        rel_tol=0,
        params={"tpu": "tpu-v5p", "f": 28672, "n_axes": 1},
        draw=pick(tpu=TPUS_3D, f=WIDTHS, n_axes=(1, 2, 3)),
    ),
    "ch05_q0f_optimal_fsdp": value(
        "x_opt",
        lambda b, f, n: bounds.optimal_fsdp_degree(n, batch_tokens=b, d_ff=f),
        params={"b": 48000, "f": 32768, "n": 64},
        draw=pick(b=(16000, 32000, 100000, 250000), f=WIDTHS, n=(64, 256, 512)),
    ),
    "ch05_q0g_mixed_bound": value(
        ("mixed_batch_per_chip", "mixed_batch_slice_tokens"),
        lambda tpu, f, n: (_mixed_floor(tpu, f), _mixed_floor(tpu, f) * n),
        params={"tpu": "tpu-v5p", "f": 32768, "n": 4096},
        draw=pick(tpu=TPUS_3D, f=WIDTHS, n=(512, 1024, 2048, 8192)),
    ),
    "ch05_q0h_dcn_batch": value(
        "dcn_batch_per_pod",
        lambda tpu, pod_chips: bounds.dcn_compute_bound_batch(tpu, chips_per_pod=pod_chips),
        rel_tol=0.04,
        params={"tpu": "tpu-v5p", "pod_chips": 8960},
        draw=pick(tpu=TPUS, pod_chips=(256, 1024, 4096, 9216)),
    ),
    "ch05_q0i_zero_memory": value(
        ("zero0_bytes", "zero1_bytes", "zero2_bytes", "zero3_bytes"),
        _zero,
        rel_tol=0.02,
        params={"p_b": 7.5, "n": 64},
        draw=pick(p_b=(1.5, 3.0, 13.0, 30.0, 70.0), n=(8, 16, 32, 256)),
    ),
    "ch05_q0j_bubble": function(
        "bubble_fraction",
        lambda stages, microbatches: bounds.pipeline_bubble_fraction(stages=stages, microbatches=microbatches),
        ((4, 16), (8, 8), (2, 1), (16, 64)),
    ),
    "ch05_q1_params": value(
        "params_q1",
        _text_params,
        params={"layers": L13.n_layers, "d": L13.d_model, "f": L13.d_ff, "v": L13.vocab_size},
        draw=pick(
            layers=(24, 32, 48, 60, 80),
            d=(2048, 4096, 6144, 8192),
            f=(11008, 14336, 22016, 28672),
            v=(32000, 50304, 128256),
        ),
    ),
    "ch05_q2_memory": value(
        ("weights_optimizer_bytes", "activation_bytes"),
        _memory_5_2,
        params={"model": "llama-2-13b", "batch_m": 16},
        draw=pick(model=MODELS, batch_m=(1, 2, 4, 8, 32)),
    ),
    "ch05_q3a_pure_dp": choice("pure_dp", "no, memory", WHY_NOT),
    "ch05_q3b_fsdp": value(("fsdp_bytes_per_chip", "fsdp_min_batch_tokens"), _fsdp_5_3, **P53),
    "ch05_q3c_pure_fsdp": choice("pure_fsdp", "no, communication", WHY_NOT),
    "ch05_q3d_mixed": value(  # the model, batch and slice of Q3b
        ("mixed_batch_per_chip_q3d", "mixed_fsdp_degree", "step_seconds"),
        _mixed_5_3,
        params=P53["params"],
        follows="ch05_q3b_fsdp",
    ),
    "ch05_q4a_one_million": choice("compute_bound_1m", _schemes(1, 16), SCHEMES),
    "ch05_q4b_ten_million": choice("compute_bound_10m", _schemes(10, 16), SCHEMES),
    "ch05_q5_fsdp_forward": program(
        "fsdp_forward",
        cases=((2, 4, 24), (3, 2, 40)),
        inputs=_fsdp_inputs,
        in_specs=(("X", None), ("X", None), (None, "X")),
        reference=product,
        atol=1e-3,
        **FSDP_GATHERS,
    ),
}


# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py).
PLAUSIBLE = {
    "ch05_q5_fsdp_forward": """
def fsdp_forward(x, w_in, w_out):
    # right values, but W_in is assembled by summing zero-padded blocks over "X": an AllReduce, not a gather
    def local(x_rows, w_in_rows, w_out_cols):
        d, f = w_in_rows.shape
        padded = jnp.zeros((jax.lax.axis_size("X") * d, f), w_in_rows.dtype)
        padded = jax.lax.dynamic_update_slice_in_dim(padded, w_in_rows, jax.lax.axis_index("X") * d, axis=0)
        w_in_full = jax.lax.psum(padded, "X")
        w_out_full = jax.lax.all_gather(w_out_cols, "X", axis=1, tiled=True)
        return (x_rows @ w_in_full) @ w_out_full

    specs = (jax.P("X", None), jax.P("X", None), jax.P(None, "X"))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P("X", None))(x, w_in, w_out)
""",
}

# The text's printed answers, each accepted (tests/course/test_exercises.py); UNPRINTED says why the rest are not.
PRINTED = {
    "ch05_q0a_dp_max_params": {"dp_max_params": 9.6e9},  # 96 GB / 10 bytes, with the text's 96e9 bytes
    "ch05_q0b_dp_batch": {"dp_batch_one_axis": 2550, "dp_batch_three_axes": 850, "dp_pod_batch_tokens": 7.6e6},
    "ch05_q0c_fsdp_chips": {"fsdp_max_chips": 47000},
    "ch05_q0d_fsdp_days": {"fsdp_training_days": 17},
    "ch05_q0e_max_tp": {"max_tp_degree": 11},  # "Y > n_axes * F / 2550 ~ n_axes * 11" for LLaMA-3 70B, one axis
    "ch05_q0h_dcn_batch": {"dcn_batch_per_pod": 76000},
    "ch05_q0i_zero_memory": {"zero0_bytes": 120e9, "zero1_bytes": 31.4e9, "zero2_bytes": 16.6e9, "zero3_bytes": 1.9e9},
    "ch05_q1_params": {"params_q1": 13.1e9},
    "ch05_q2_memory": {"weights_optimizer_bytes": 130e9, "activation_bytes": 42e12},
    "ch05_q3a_pure_dp": {"pure_dp": "no, memory"},
    # its "almost exactly 8e12 = 8TB" over the 16x16x16 slice's 4096 chips, and its "850 * 4096 = 3.48M" tokens
    "ch05_q3b_fsdp": {"fsdp_bytes_per_chip": 8e12 / 4096, "fsdp_min_batch_tokens": 3.48e6},
    "ch05_q3c_pure_fsdp": {"pure_fsdp": "no, communication"},
}
UNPRINTED = {
    "ch05_q0f_optimal_fsdp": "the text's printed 13.9 is a slip for its own formula's 13.7: the chapter notes it",
    "ch05_q0g_mixed_bound": (
        "the text prints roughly 400 per chip, but its slice bound 1.6e10 is a typo for its own expression's "
        "1.6e6 tokens: an erratum in the chapter"
    ),
    "ch05_q3d_mixed": "the text prints only the batch bound per chip (940), not the FSDP degree or the step time",
    "ch05_q4a_one_million": "the text prints no answer to its Question 4",
    "ch05_q4b_ten_million": "the text prints no answer to its Question 4",
}
