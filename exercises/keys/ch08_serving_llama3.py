"""Answer keys for the chapter 8 exercises (serving LLaMA 3 70B on TPUs), computed with book_lib."""

from __future__ import annotations

import math
import random

from book_lib import bounds, hardware, inference, models, roofline, serving, topology, transformer
from exercises.keys import pick, preset_sizes, program, value
from exercises.keys.arrays import normal
from exercises.keys.ch07_inference import critical_batches
from exercises.keys.chips import TPUS, text_chip

# Dense models with a gated MLP, untied embeddings and two norms per layer, as a statement names them,
# and their book_lib presets (each statement prints the preset's sizes: `_fields`).
MODELS = {
    "LLaMA 3 8B": "llama-3-8b",
    "LLaMA 2 70B": "llama-2-70b",
    "LLaMA 3 70B": "llama-3-70b",
    "LLaMA 3.1 405B": "llama-3.1-405b",
    "Mistral 7B": "mistral-7b",
}
MEDIAN_DECODE = 512  # the text's median generation length (tokens)
INT8 = {"param_dtype": "int8", "kv_dtype": "int8"}


def _fields(model: str) -> dict:
    return {"model": model, **preset_sizes(MODELS[model])}


def _named(model: str, **sizes) -> transformer.TransformerConfig:
    """The preset a statement names; the statement prints exactly its sizes."""
    assert sizes == preset_sizes(MODELS[model]), "the statement prints the preset"
    return models.get_model(MODELS[model])


def _models(*names: str):
    """A draw of one of the models `names` (any by default), with the sizes its statement prints."""
    return lambda r: _fields(r.choice(sorted(names or MODELS)))


LLAMA70 = _fields("LLaMA 3 70B")


# ---- the chip, the KV cache and the smallest slice --------------------------------------------------


def _flops_per_usd(usd_h100: float, usd_v5p: float, usd_v5e: float) -> tuple[float, float, float]:
    prices = {"h100": usd_h100, "tpu-v5p": usd_v5p, "tpu-v5e": usd_v5e}
    # bf16 peak over the price per second, as the chapter's table computes it
    return tuple(hardware.get_chip(name).peak_ops_per_s("bf16") / (usd / 3600) for name, usd in prices.items())


TEXT_PRICES = {f"usd_{k.removeprefix('tpu-')}": v for k, v in hardware.PRICES_USD_PER_CHIP_HOUR.items()}


def _draw_prices(r: random.Random) -> dict:
    return {name: round(price * r.choice((0.5, 0.6, 0.75, 1.4, 1.6, 2.0)), 2) for name, price in TEXT_PRICES.items()}


def _kv_sizes(context: int, batch: int, kib_as_kb: bool = False, **m) -> tuple[float, float, float]:
    # the text writes LLaMA 3 70B's 163,840 bytes (160 KiB) as "160 kB": that reading is accepted too
    per_token = _named(**m).kv_cache_bytes_per_token("int8") * (1000 / 1024 if kib_as_kb else 1)
    return (per_token, per_token * context, per_token * context * batch)


def _batch_memory(tpu: str, batch: int, context: int, **m) -> tuple[float, int]:
    model = _named(**m)
    return (
        inference.memory_bytes(model, batch=batch, context_len=context, **INT8),
        inference.min_chips(model, tpu, batch=batch, context_len=context, **INT8),
    )


# ---- decode steps with the text's estimate (no collectives) -----------------------------------------


def _step(model: transformer.TransformerConfig, chip, n_chips: int, batch: int, context: int, w: str):
    """Equation (4) of Part 7: t_kv + max(t_weights, t_math), weights and caches in dtype w."""
    return inference.decode_step_time_from_sizes(
        param_count=model.param_count(),
        kv_bytes_per_token=model.kv_cache_bytes_per_token(w),
        chip=chip,
        n_chips=n_chips,
        batch=batch,
        context_len=context,
        param_dtype=w,
    )


def _small_slices(chips_small: int, chips_big: int, batch: int, context: int, **m) -> tuple[float, float, float]:
    model, chip = _named(**m), hardware.get_chip("tpu-v5e")
    small = _step(model, chip, chips_small, batch, context, "int8")
    return (small.t_lower, small.tokens_per_s_per_chip, _step(model, chip, chips_big, batch, context, "int8").t_lower)


def _small_slice_holds(chips_small: int, batch: int, context: int, **m) -> bool:
    """Q0d's premises: its smaller slice holds the weights and caches (int8), and the batch is below the
    critical batch of int8 weights with bf16 FLOPs, so that the weight read sets the step (its solution)."""
    model = _named(**m)
    fits = inference.min_chips(model, "tpu-v5e", batch=batch, context_len=context, **INT8) <= chips_small
    return fits and batch < roofline.critical_intensity("tpu-v5e") / 2


def _draw_small_slices(r: random.Random) -> dict:
    small = r.choice((4, 8, 16, 32))
    return {
        **_models("LLaMA 2 70B", "LLaMA 3 70B", "LLaMA 3.1 405B")(r),
        "chips_small": small,
        "chips_big": 2 * small,
        "batch": r.choice((8, 16, 64, 128)),
        "context": r.choice((2048, 4096, 16384)),
    }


def _critical(tpu: str, d: int, f: int) -> tuple[float, float, float]:
    """The exact critical batches: bf16 weights, int8 weights with bf16 FLOPs, int8 both."""
    chip = hardware.get_chip(tpu)
    return tuple(
        roofline.critical_batch_size(d, f, chip.peak_ops_per_s(dtype), chip.hbm_bytes_per_s, w_bytes=w_bytes)
        for w_bytes, dtype in ((2, "bf16"), (1, "bf16"), (1, "int8"))
    )


def _draw_critical(r: random.Random) -> dict:
    m = models.get_model(MODELS[r.choice(sorted(MODELS))])
    return {"tpu": r.choice(TPUS), "d": m.d_model, "f": m.d_ff}


# ---- filling a slice's HBM with caches ---------------------------------------------------------------


def _fill(model, chip, n_chips: int, context: int, w: str) -> dict[str, float]:
    batch = inference.max_batch(model, chip, n_chips, context_len=context, param_dtype=w, kv_dtype=w)
    weights = inference.memory_bytes(model, batch=0, context_len=context, param_dtype=w, kv_dtype=w)
    free = n_chips * chip.hbm_bytes - weights
    step = _step(model, chip, n_chips, batch, context, w)
    return {"free": free, "batch": batch, "step": step.t_lower, "qps": step.tokens_per_s_per_chip / MEDIAN_DECODE}


def _smallest(model, chip, context: int, w: str) -> int:
    # weights only: the text takes the caches as negligible here
    return inference.min_chips(model, chip, batch=0, context_len=context, param_dtype=w, kv_dtype=w)


def _filled(*wanted: str, times: int = 1):
    """(**params) -> the `wanted` figures ("chips", "free", "batch", "step", "qps") of the smallest slice of v5e
    chips with `hbm` bytes of HBM each, `times` over, filled with caches (`_fill`)."""

    def figures(dtype: str, hbm: float, context: int, **m) -> tuple:
        model, chip = _named(**m), text_chip("tpu-v5e", hbm)
        n = times * _smallest(model, chip, context, dtype)
        full = {"chips": n, **_fill(model, chip, n, context, dtype)}
        return tuple(full[name] for name in wanted)

    return figures


def _fill_fits(v: dict) -> bool:
    """A slice of 4 to 128 chips holds the weights and one cache (a doubled slice is offered too);
    `_fill` refuses (ValueError) where not one cache fits beside the weights."""
    return 4 <= _filled("chips")(**v)[0] <= 128


FILL = {
    "params": {**LLAMA70, "dtype": "bf16", "hbm": 16e9, "context": 8192},
    "draw": pick(
        _models("LLaMA 3 8B", "LLaMA 2 70B", "LLaMA 3 70B", "Mistral 7B"),
        dtype=("bf16", "int4", "int8"),  # the text's, in the order every class drew them from
        hbm=(16e9, float(2**34)),
        context=(2048, 4096, 16384, 32768),
    ),
    "accept": _fill_fits,
}
# Q0g and Q0h: the model, dtype, chips and context of Q0f, its smallest slice filled with caches.
FILLED = {"params": FILL["params"], "follows": "ch08_q0f_min_slice"}


# ---- model parallelism, prefill, disaggregation ------------------------------------------------------


def _model_parallelism(tpu: str, w_ici: float, f: int, n_axes: int, batch: int) -> tuple[float, float]:
    assert w_ici == bounds.ici_axis_bytes_per_s(tpu), "the statement prints the chip's W_ici"
    return (
        bounds.max_tensor_parallelism(tpu, d_ff=f, n_axes=n_axes),
        inference.memory_bound_model_parallelism(tpu, d_ff=f, batch=batch),
    )


def _model_parallelism_text(tpu: str, w_ici: float, f: int, n_axes: int, batch: int) -> tuple[float, float]:
    """The text's own figures for its v5e case: it divides by the v5p's alpha (C / W_ici = 2550) and takes
    beta = W_hbm / W_ici = 8, so 22 and 56 for LLaMA 3 70B; other chips have no such slip."""
    if tpu != "tpu-v5e":
        return _model_parallelism(tpu, w_ici, f, n_axes, batch)
    return (bounds.max_tensor_parallelism("tpu-v5p", d_ff=f, n_axes=n_axes), f / (batch * 8))


def _draw_model_parallelism(r: random.Random) -> dict:
    tpu = r.choice(TPUS)
    return {
        "tpu": tpu,
        "w_ici": bounds.ici_axis_bytes_per_s(tpu),
        "f": r.choice((11008, 14336, 53248)),
        "n_axes": r.choice((1, 2)),
        "batch": r.choice((16, 32, 128, 256)),
    }


def _prefill_linears_only(chips: int, prompt: int, mfu: float, **m) -> float:
    """The text's count, 2 P T FLOPs with P every parameter (as the chapter's `linears_only`)."""
    chip = hardware.get_chip("tpu-v5e")
    return 2 * _named(**m).param_count() * prompt / (chips * chip.peak_ops_per_s("bf16") * mfu)


def _turnover(batch: int, prompt: int, generated: int) -> tuple[float, float]:
    # about B / G sequences end each step, each freeing P + G cache entries (the chapter's arithmetic)
    finished = batch / generated
    return (finished, finished * (prompt + generated))


# ---- worked problems 8.1 to 8.3 ------------------------------------------------------------------


def _bounds_81(tpu: str, chips: int, **m) -> tuple[float, float, float]:
    model, chip = _named(**m), hardware.get_chip(tpu)
    flops = model.flops_per_token(0, training=False)  # 2 per matmul weight; attention's dot products left out
    times = roofline.roofline_time(
        flops, model.param_count() * 2, chips * chip.bf16_flops_per_s, chips * chip.hbm_bytes_per_s
    )
    return (flops, times.t_math, times.t_comms)


def _serving_82(tpu: str, batch: int, context: int, **m) -> tuple[float, float, int]:
    model = _named(**m)
    weights = inference.memory_bytes(model, batch=0, context_len=context, **INT8)
    return (
        weights,
        inference.memory_bytes(model, batch=batch, context_len=context, **INT8) - weights,
        inference.min_chips(model, tpu, batch=batch, context_len=context, **INT8),
    )


def _latency_83(tpu: str, limit_ms: float, context: int, **m) -> tuple[float, int, int, float]:
    model, chip = _named(**m), hardware.get_chip(tpu)

    def step(n: int, batch: int) -> inference.DecodeStep:
        return _step(model, chip, n, batch, context, "int8")

    pod = topology.pod(chip).n_chips
    limit = limit_ms / 1e3
    sizes = sorted({math.prod(shape) for shape in topology.slice_shapes(chip)})
    n = next((n for n in sizes if step(n, 1).fits and step(n, 1).t_lower <= limit), None)
    if n is None:
        raise ValueError(f"limit_ms={limit_ms}: no slice of {tpu} meets it; allowed: a longer limit")
    batch = 1
    while step(n, batch + 1).fits and step(n, batch + 1).t_lower <= limit:
        batch += 1
    return (step(pod, 1).t_weights, n, batch, step(n, batch).tokens_per_s_per_chip)


def _gated_mlp(arrays, n_devices: int):
    """silu(x W_gate) * (x W_up), then W_down, in float64."""
    import numpy as np

    x, w_gate, w_up, w_down = (a.astype(np.float64) for a in arrays)
    gate = x @ w_gate
    return (gate / (1 + np.exp(-gate)) * (x @ w_up)) @ w_down


KEYS = {
    "ch08_q0a_flops_per_dollar": value(
        ("flops_per_usd_h100", "flops_per_usd_v5p", "flops_per_usd_v5e"),
        _flops_per_usd,
        rel_tol=0.02,
        params=TEXT_PRICES,
        draw=_draw_prices,
    ),
    "ch08_q0b_kv_cache": value(
        ("kv_bytes_per_token_int8", "kv_bytes_per_sequence", "kv_bytes_batch"),
        _kv_sizes,
        also=(lambda **v: _kv_sizes(**v, kib_as_kb=True),),
        rel_tol=0.02,
        params={**LLAMA70, "context": 32768, "batch": 240},
        draw=pick(_models(), context=(4096, 8192, 16384, 65536), batch=(64, 128, 512)),
    ),
    "ch08_q0c_batch_memory": value(
        ("memory_bytes_int8", "smallest_slice_chips"),
        _batch_memory,
        rel_tol=0.02,
        params={**LLAMA70, "tpu": "tpu-v5e", "batch": 32, "context": 8192},
        draw=pick(_models(), tpu=("tpu-v5e", "tpu-v6e"), batch=(8, 16, 64, 128), context=(2048, 4096, 16384)),
        accept=lambda v: bool(_batch_memory(**v)),  # a ValueError (not even a whole pod holds it) refuses
    ),
    "ch08_q0d_step_time": value(
        ("step_time_small_s", "tokens_per_s_per_chip_small", "step_time_big_s"),
        _small_slices,
        rel_tol=0.04,
        params={**LLAMA70, "chips_small": 8, "chips_big": 16, "batch": 32, "context": 8192},
        draw=_draw_small_slices,
        accept=lambda v: _small_slice_holds(**{k: v[k] for k in v if k != "chips_big"}),
        follows="ch08_q0c_batch_memory",  # Q0c's model, batch and context
    ),
    "ch08_q0e_critical_batch": value(
        ("critical_batch_bf16", "critical_batch_int8_weights", "critical_batch_int8"),
        _critical,
        also=(lambda tpu, d, f: critical_batches(tpu),),  # the text's B << D, F limit
        rel_tol=0.02,
        params={"tpu": "tpu-v5e", "d": LLAMA70["d"], "f": LLAMA70["f"]},
        draw=_draw_critical,
    ),
    "ch08_q0f_min_slice": value(
        ("min_slice_chips", "free_hbm_bytes", "max_batch"), _filled("chips", "free", "batch"), rel_tol=0.04, **FILL
    ),
    "ch08_q0g_full_step": value(
        ("step_time_full_s", "requests_per_s_per_chip"),
        _filled("step", "qps"),
        rel_tol=0.04,
        **FILLED,
    ),
    "ch08_q0h_doubled": value(
        ("free_hbm_doubled_bytes", "max_batch_doubled", "requests_per_s_per_chip_doubled"),
        _filled("free", "batch", "qps", times=2),
        **FILLED,
    ),
    "ch08_q0i_model_parallelism": value(
        ("max_y_compute_bound", "max_y_memory_bound"),
        _model_parallelism,
        also=(_model_parallelism_text,),
        params={
            "tpu": "tpu-v5e",
            "w_ici": bounds.ici_axis_bytes_per_s("tpu-v5e"),
            "f": LLAMA70["f"],
            "n_axes": 2,
            "batch": 64,
        },
        draw=_draw_model_parallelism,
        accept=lambda v: _model_parallelism(**v)[0] >= 2,  # some model parallelism hides
    ),
    "ch08_q0j_prefill": value(
        "prefill_s",
        lambda chips, prompt, mfu, **m: inference.prefill_time(
            _named(**m), "tpu-v5e", chips, prompt_len=prompt, mfu=mfu
        ),
        also=(_prefill_linears_only,),
        params={**LLAMA70, "chips": 16, "prompt": 8192, "mfu": 0.4},
        draw=pick(_models(), chips=(4, 8, 32, 64), prompt=(2048, 4096, 32768), mfu=(0.3, 0.5, 0.6)),
    ),
    "ch08_q0k_cache_turnover": value(
        ("finished_per_step", "evicted_tokens_per_step"),
        _turnover,
        params={"batch": 32, "prompt": 8192, "generated": 4096},
        draw=pick(batch=(16, 64, 128, 256), prompt=(1024, 2048, 32768), generated=(256, 512, 1024, 2048)),
    ),
    "ch08_q0l_disaggregation": value(
        "prefill_per_generate",
        lambda prefill_s, step_ms, batch, generated: serving.prefill_servers_per_generate_server(
            prefill_s=prefill_s, decode_step_s=step_ms / 1e3, decode_batch=batch, decode_len=generated
        ),
        params={"prefill_s": 0.91, "step_ms": 19.0, "batch": 32, "generated": MEDIAN_DECODE},
        draw=pick(
            prefill_s=(0.25, 0.5, 1.5, 2.0),
            step_ms=(10.0, 25.0, 40.0),
            batch=(16, 64, 128),
            generated=(256, 1024, 2048),
        ),
    ),
    "ch08_q1_forward_bounds": value(
        ("flops_per_token_81", "t_flops_bound_s", "t_hbm_bound_s"),
        _bounds_81,
        params={**_fields("LLaMA 3.1 405B"), "tpu": "tpu-v5e", "chips": 1},
        draw=pick(_models(), tpu=TPUS, chips=(4, 16, 64)),
    ),
    "ch08_q2_serving_8b": value(
        ("params_bytes_82", "kv_bytes_82", "smallest_slice_chips_82"),
        _serving_82,
        params={**_fields("LLaMA 3 8B"), "tpu": "tpu-v5e", "batch": 240, "context": 8192},
        draw=pick(
            _models("LLaMA 3 8B", "Mistral 7B", "LLaMA 2 70B", "LLaMA 3 70B"),
            tpu=("tpu-v5e", "tpu-v6e"),
            batch=(32, 64, 128, 480),
            context=(2048, 4096, 16384),
        ),
        # a large batch, as the problem has it: its caches outweigh the weights (a ValueError refuses)
        accept=lambda v: _serving_82(**v)[1] > _serving_82(**v)[0],
    ),
    "ch08_q3_latency_limit": value(
        ("min_step_time_s", "smallest_slice_chips_83", "max_batch_83", "tokens_per_s_per_chip_83"),
        _latency_83,
        params={**_fields("LLaMA 3.1 405B"), "tpu": "tpu-v5e", "limit_ms": 15.0, "context": 8192},
        draw=pick(
            _models("LLaMA 2 70B", "LLaMA 3 70B", "LLaMA 3.1 405B"),
            tpu=("tpu-v5e", "tpu-v6e"),
            limit_ms=(10.0, 20.0, 30.0),
            context=(2048, 4096, 16384),
        ),
        accept=lambda v: _latency_83(**v)[2] < 2000,  # a ValueError (no slice meets the limit) refuses
    ),
    "ch08_q4_model_parallel_mlp": program(
        "model_parallel_mlp",
        cases=((4, 2, 4), (3, 1, 5)),
        # x: f32[B, D]; w_gate, w_up: f32[D, F]; w_down: f32[F, D]; D and F multiples of n
        inputs=lambda sizes, n, seed: (
            normal(((sizes[0], n * sizes[1]), *[(n * sizes[1], n * sizes[2])] * 2, (n * sizes[2], n * sizes[1])), seed),
            (),
        ),
        in_specs=((None, "X"), (None, "X"), (None, "X"), ("X", None)),
        reference=_gated_mlp,
        atol=1e-4,
        block=lambda sizes, n: (sizes[0], sizes[1]),
        collectives={"all-gather": (1, 1), "reduce-scatter": (1, 1), "all-reduce": (0, 0), "all-to-all": (0, 0)},
        needs_primitives=("shard_map", "all_gather", "reduce_scatter"),
    ),
}


# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py).
PLAUSIBLE = {
    "ch08_q4_model_parallel_mlp": """
def model_parallel_mlp(x, w_gate, w_up, w_down):
    def local(x_cols, w_gate_cols, w_up_cols, w_down_rows):
        x_all = jax.lax.all_gather(x_cols, "X", axis=1, tiled=True)
        partial = (jax.nn.silu(x_all @ w_gate_cols) * (x_all @ w_up_cols)) @ w_down_rows
        summed = jax.lax.psum(partial, "X")  # right values, but an AllReduce moves twice a ReduceScatter's bytes
        width = x_cols.shape[1]
        return jax.lax.dynamic_slice_in_dim(summed, jax.lax.axis_index("X") * width, width, axis=1)

    specs = (jax.P(None, "X"), jax.P(None, "X"), jax.P(None, "X"), jax.P("X", None))
    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, "X"))(x, w_gate, w_up, w_down)
""",
}

# The text's printed answers: the grader accepts each (tests/course/test_exercises.py); UNPRINTED says why the rest are
# not. The model-parallel bounds (Q0i: the text divides by the v5p's C / W_ici and takes beta = 8) are accepted
# through `also`.
PRINTED = {
    "ch08_q0a_flops_per_dollar": {
        "flops_per_usd_h100": 3.3e17,
        "flops_per_usd_v5p": 3.9e17,
        "flops_per_usd_v5e": 5.8e17,  # a slip for 5.9e17 (an erratum), inside the 2 % tolerance
    },
    # it writes 160 kB per token, then computes with 162e3 bytes; both are accepted
    "ch08_q0b_kv_cache": {"kv_bytes_per_token_int8": 162e3, "kv_bytes_per_sequence": 5.3e9, "kv_bytes_batch": 1.3e12},
    "ch08_q0c_batch_memory": {"memory_bytes_int8": 112e9, "smallest_slice_chips": 8},
    "ch08_q0d_step_time": {"step_time_small_s": 17e-3, "tokens_per_s_per_chip_small": 235, "step_time_big_s": 8.5e-3},
    "ch08_q0i_model_parallelism": {"max_y_compute_bound": 22, "max_y_memory_bound": 56},
    "ch08_q0e_critical_batch": {
        "critical_batch_bf16": 240,
        "critical_batch_int8_weights": 120,
        "critical_batch_int8": 240,
    },
    # the bf16 row of its table (the int8 and int4 rows are errata)
    "ch08_q0f_min_slice": {"min_slice_chips": 16, "free_hbm_bytes": 116e9, "max_batch": 43},
    "ch08_q0g_full_step": {"step_time_full_s": 19e-3, "requests_per_s_per_chip": 0.27},
    "ch08_q0j_prefill": {"prefill_s": 0.91},
    "ch08_q0k_cache_turnover": {"finished_per_step": 32 / 4096, "evicted_tokens_per_step": 96},
    "ch08_q0l_disaggregation": {"prefill_per_generate": 3},
}
UNPRINTED = {
    "ch08_q0h_doubled": (
        "the text's doubled table (186 GB free, a batch of 161, 0.51 requests/s/chip in bf16) is a slip for its "
        "own model's 371 GB and 138 caches: an erratum in the chapter"
    ),
    "ch08_q1_forward_bounds": "the text prints no answer to its worked problem 8.1",
    "ch08_q2_serving_8b": "the text prints no answer to its worked problem 8.2",
    "ch08_q3_latency_limit": "the text prints no answer to its worked problem 8.3",
}
