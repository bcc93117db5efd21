"""Answer keys for the chapter 6 exercises (training LLaMA 3 on TPUs), computed with book_lib."""

from __future__ import annotations

import math
import random

from book_lib import bounds, hardware, models, training, transformer
from book_lib.parallelism import Layout
from exercises.keys import JaxCheck, Key, text_chip

# Dense models with a gated MLP, untied embeddings and two norms per layer, as a statement names them,
# and their book_lib presets: `_model` rebuilds each from its seven fields (checked below).
MODELS = {
    "Llama 2 7B": "llama-2-7b",
    "Llama 2 13B": "llama-2-13b",
    "Llama 2 70B": "llama-2-70b",
    "Llama 3 8B": "llama-3-8b",
    "LLaMA 3 70B": "llama-3-70b",
    "LLaMA 3.1 405B": "llama-3.1-405b",
    "Mistral 7B": "mistral-7b",
}
# Chips whose pods are 3-D tori (the text's FSDP floor uses three axes), and any TPU for memory.
POD_TPUS = hardware.chip_names(ici_topology="3d-torus")
TPUS = hardware.chip_names(family="tpu", since="tpu-v4")
V5P = hardware.get_chip("tpu-v5p")
SEQ_LEN, SEQUENCES = 4096, 1024  # the text's 4M-token batch: 1024 sequences of 4096 tokens


def _model(layers: int, d: int, f: int, n: int, k: int, h: int, v: int) -> transformer.TransformerConfig:
    """A LLaMA-shaped model: gated MLP, grouped-query attention, untied embeddings, two norms per layer."""
    return transformer.TransformerConfig(
        n_layers=layers, d_model=d, d_ff=f, n_heads=n, n_kv_heads=k, head_dim=h, vocab_size=v
    )


def _fields(preset: str) -> dict[str, int]:
    m = models.get_model(preset)
    return {
        "layers": m.n_layers,
        "d": m.d_model,
        "f": m.d_ff,
        "n": m.n_heads,
        "k": m.n_kv_heads,
        "h": m.head_dim,
        "v": m.vocab_size,
    }


for _preset in MODELS.values():
    assert _model(**_fields(_preset)).param_count() == models.get_model(_preset).param_count(), _preset


def _named(model: str, **_) -> transformer.TransformerConfig:
    return models.get_model(MODELS[model])


def _n_params(model: str) -> int:
    return models.get_model(MODELS[model]).param_count()


def _alpha(tpu: str) -> float:
    """C / W: the bf16 peak over one ICI axis' bandwidth (tokens per chip that pure DP needs)."""
    return bounds.compute_bound_batch_per_chip(tpu, strategy="dp")


# ---- Q1, Q9: parameters and FLOPs from a configuration -------------------------------------------


def _count(tokens_t: float, **fields) -> dict[str, float]:
    model = _model(**fields)
    run = training.training_run(model, V5P, 1, tokens=tokens_t * 1e12, mfu=1.0)  # FLOPs do not depend on the chip
    return {"params": model.param_count(), "flops_per_token": run.flops_per_token, "total_flops": run.flops}


def _count_q9(**values) -> dict[str, float]:
    return {f"{name}_q9": value for name, value in _count(**values).items()}


def _draw_count(r: random.Random) -> dict:
    return {**_fields(MODELS[r.choice(sorted(MODELS))]), "tokens_t": r.choice((2.0, 4.0, 9.0, 12.0, 18.0, 36.0))}


# ---- Q2, Q3: days on a pod, MFU for a deadline -----------------------------------------------------


def _days(model: str, n_params: int, tokens_t: float, tpu: str, mfu: float) -> dict[str, float]:
    chip = hardware.get_chip(tpu)
    pod = training.training_run(_named(model), chip, chip.chips_per_pod, tokens=tokens_t * 1e12, mfu=mfu)
    one = training.training_run(_named(model), chip, 1, tokens=tokens_t * 1e12, mfu=1.0)
    return {"days_on_pod": pod.days, "years_on_one_chip": one.days / 365.25}


def _model_choice(r: random.Random) -> dict:
    model = r.choice(sorted(MODELS))
    return {"model": model, "n_params": _n_params(model)}


def _draw_days(r: random.Random) -> dict:
    return {
        **_model_choice(r),
        "tokens_t": r.choice((2.0, 4.0, 9.0, 12.0, 18.0, 36.0)),
        "tpu": r.choice(POD_TPUS),
        "mfu": r.choice((0.3, 0.35, 0.45, 0.5, 0.55)),
    }


def _needed_mfu(model: str, n_params: int, tokens_t: float, tpu: str, pods: int, days: float) -> dict[str, float]:
    chip = hardware.get_chip(tpu)
    at_peak = training.training_run(_named(model), chip, pods * chip.chips_per_pod, tokens=tokens_t * 1e12, mfu=1.0)
    return {"needed_mfu": at_peak.days / days}  # days scale as 1 / MFU


def _draw_needed_mfu(r: random.Random) -> dict:
    return {
        **_model_choice(r),
        "tokens_t": r.choice((2.0, 4.0, 9.0, 15.0, 18.0)),
        "tpu": r.choice(POD_TPUS),
        "pods": r.choice((1, 2, 4, 8, 16)),
        "days": r.choice((7.0, 14.0, 21.0, 30.0, 60.0, 90.0)),
    }


# ---- Q4: memory -------------------------------------------------------------------------------------


def _whole(model: str, batch_m: float, ckpt: int, **_) -> training.MemoryPerChip:
    return training.memory_per_chip(
        _named(model), V5P, Layout(), batch_tokens=batch_m * 1e6, checkpoints_per_layer=ckpt
    )


def _memory(model: str, n_params: int, layers: int, d: int, batch_m: float, ckpt: int) -> dict[str, float]:
    return {"step_memory_bytes": _whole(model, batch_m, ckpt).total_bytes}


def _memory_no_grads(model: str, n_params: int, layers: int, d: int, batch_m: float, ckpt: int) -> dict[str, float]:
    """The text's count: weights, optimizer state and checkpoints, no gradients."""
    whole = _whole(model, batch_m, ckpt)
    return {"step_memory_bytes": whole.total_bytes - whole.grads_bytes}


def _draw_memory(r: random.Random) -> dict:
    model = _model_choice(r)
    m = _named(model["model"])
    return {
        **model,
        "layers": m.n_layers,
        "d": m.d_model,
        "batch_m": r.choice((1.0, 2.0, 8.0, 16.0)),
        "ckpt": r.choice((1, 2, 4, 8, 12)),
    }


def _fewest(
    tpu: str, tokens_t: float, mfu: float, grads: bool = True, text_hbm: bool = False, **memory
) -> dict[str, float]:
    whole = _whole(**memory)
    total = whole.total_bytes - (0 if grads else whole.grads_bytes)
    chip = text_chip(tpu) if text_hbm else hardware.get_chip(tpu)
    chips = math.ceil(total / chip.hbm_bytes)
    run = training.training_run(_named(memory["model"]), chip, chips, tokens=tokens_t * 1e12, mfu=mfu)
    return {"fewest_chips": chips, "days_on_fewest": run.days}


def _draw_fewest(r: random.Random) -> dict:
    return {
        **_draw_memory(r),
        "tpu": r.choice(TPUS),
        "tokens_t": r.choice((2.0, 4.0, 9.0, 18.0)),
        "mfu": r.choice((0.3, 0.5, 0.6)),
    }


def _pod_memory(tpu: str, grads: bool = True, **memory) -> dict[str, float]:
    pod = Layout(fsdp=hardware.get_chip(tpu).chips_per_pod)
    m = training.memory_per_chip(
        _named(memory["model"]), tpu, pod, batch_tokens=memory["batch_m"] * 1e6, checkpoints_per_layer=memory["ckpt"]
    )
    return {"pod_memory_per_chip_bytes": m.total_bytes - (0 if grads else m.grads_bytes)}


def _draw_pod_memory(r: random.Random) -> dict:
    return {**_draw_memory(r), "tpu": r.choice(POD_TPUS)}


# ---- Q5 to Q8: sharding on one pod and across pods ----------------------------------------------------


def _fsdp_alone(tpu: str, alpha: float, sequences: int, seq_len: int) -> dict[str, float]:
    chip = hardware.get_chip(tpu)
    return {
        "tokens_per_chip": sequences * seq_len / chip.chips_per_pod,
        "fsdp_floor_tokens": bounds.compute_bound_batch_per_chip(chip, strategy="fsdp", n_axes=len(chip.pod_shape)),
    }


def _draw_tpu_batch(r: random.Random) -> dict:
    tpu = r.choice(POD_TPUS)
    return {
        "tpu": tpu,
        "alpha": _alpha(tpu),
        "sequences": r.choice((256, 512, 2048, 4096)),
        "seq_len": r.choice((2048, 4096, 8192)),
    }


def _fsdp_tp(tpu: str, alpha: float, sequences: int, seq_len: int, f: int) -> dict[str, float]:
    chip = hardware.get_chip(tpu)
    window = bounds.fsdp_degree_range(chip, chip.chips_per_pod, batch_tokens=sequences * seq_len, d_ff=f)
    if window is None:
        raise ValueError(f"f={f}: no compute-bound FSDP degree for this batch; allowed: a larger batch")
    return {
        "mixed_floor_tokens": bounds.compute_bound_batch_per_chip(chip, strategy="fsdp+tp", d_ff=f),
        "fsdp_degree_high": window[1],
    }


def _draw_fsdp_tp(r: random.Random) -> dict:
    return {**_draw_tpu_batch(r), "f": _named(r.choice(sorted(MODELS))).d_ff}


def _draw_dcn(r: random.Random) -> dict:
    return {"tpu": r.choice(("tpu-v4", "tpu-v5e", "tpu-v6e", "tpu-7x"))}


def _pods(model: str, n_params: int, tpu: str, pods: int, sequences: int, seq_len: int, tokens_t: float, mfu: float):
    chip = hardware.get_chip(tpu)
    n_chips = pods * chip.chips_per_pod
    run = training.training_run(_named(model), chip, n_chips, tokens=tokens_t * 1e12, mfu=mfu)
    return {"chip_batch_tokens": sequences * seq_len / n_chips, "days_on_pods": run.days}


def _draw_pods(r: random.Random) -> dict:
    return {
        **_model_choice(r),
        "tpu": r.choice(POD_TPUS),
        "pods": r.choice((2, 3, 6, 8, 16)),
        "sequences": r.choice((512, 2048, 4096, 8192)),
        "seq_len": r.choice((2048, 4096, 8192)),
        "tokens_t": r.choice((2.0, 9.0, 18.0)),
        "mfu": r.choice((0.3, 0.5)),
    }


BOUNDS = ("compute", "ici", "dcn")


def _bound(tpu: str, pods: int, sequences: int, seq_len: int, f: int) -> str:
    """The text's rules: ICI-bound inside a pod below 2 alpha^2 / F tokens per chip, else DCN-bound
    between pods below the pod's FLOPs over its DCN bandwidth, else compute-bound."""
    chip = hardware.get_chip(tpu)
    batch = sequences * seq_len
    if batch / (pods * chip.chips_per_pod) < bounds.compute_bound_batch_per_chip(chip, strategy="fsdp+tp", d_ff=f):
        return "ici"
    if batch / pods < bounds.dcn_compute_bound_batch(chip, chips_per_pod=chip.chips_per_pod):
        return "dcn"
    return "compute"


def _draw_bound(r: random.Random) -> dict:
    return {
        "tpu": r.choice(POD_TPUS),
        "pods": r.choice((2, 4, 8, 16, 64)),
        "sequences": r.choice((256, 1024, 4096, 16384)),
        "seq_len": r.choice((2048, 4096, 8192)),
        "f": _named(r.choice(sorted(MODELS))).d_ff,
    }


def _big_pods(
    model: str, n_params: int, f: int, tpu: str, alpha: float, pods: int, tokens_t: float, mfu: float
) -> dict:
    chip = hardware.get_chip(tpu)
    n_chips = pods * chip.chips_per_pod
    run = training.training_run(_named(model), chip, n_chips, tokens=tokens_t * 1e12, mfu=mfu)
    floor = bounds.compute_bound_batch_per_chip(chip, strategy="fsdp+tp", d_ff=f)
    return {"days_on_pods_big": run.days, "batch_needed_tokens": floor * n_chips}


def _draw_big_pods(r: random.Random) -> dict:
    model = _model_choice(r)
    return {
        **model,
        "f": _named(model["model"]).d_ff,
        **{"tpu": (tpu := r.choice(POD_TPUS)), "alpha": _alpha(tpu)},
        "pods": r.choice((2, 4, 16)),
        "tokens_t": r.choice((2.0, 9.0, 18.0)),
        "mfu": r.choice((0.3, 0.5)),
    }


# ---- Q10: an FSDP forward pass in JAX -------------------------------------------------------------------


def _mlp_inputs(sizes: tuple[int, int, int], n: int, seed: int):
    """x: f32[n b, D] (b rows per device), w_in: f32[D, F], w_out: f32[F, D]; D and F multiples of n."""
    import numpy as np

    b, d, f = sizes
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n * b, n * d)).astype(np.float32)
    w_in = (rng.standard_normal((n * d, n * f)) / np.sqrt(n * d)).astype(np.float32)
    w_out = (rng.standard_normal((n * f, n * d)) / np.sqrt(n * f)).astype(np.float32)
    return (x, w_in, w_out), ()


def _mlp_reference(arrays, n: int):
    import numpy as np

    x, w_in, w_out = (a.astype(np.float64) for a in arrays)
    return np.maximum(x @ w_in, 0.0) @ w_out


LLAMA70 = _fields("llama-3-70b")
LLAMA405 = _fields("llama-3.1-405b")
TEXT_RUN = {"model": "LLaMA 3 70B", "n_params": _n_params("LLaMA 3 70B"), "tokens_t": 15.0}
TEXT_MEMORY = {"model": "LLaMA 3 70B", "n_params": _n_params("LLaMA 3 70B"), "layers": 80, "d": 8192}
TEXT_MEMORY = {**TEXT_MEMORY, "batch_m": 4.0, "ckpt": 4}
TEXT_POD = {"tpu": "tpu-v5p", "alpha": _alpha("tpu-v5p"), "sequences": SEQUENCES, "seq_len": SEQ_LEN}

KEYS = {
    "ch06_q1_count": Key(
        names=("params", "flops_per_token", "total_flops"),
        kind="value",
        expected=_count,
        params={**LLAMA70, "tokens_t": 15.0},
        draw=_draw_count,
    ),
    "ch06_q2_days": Key(
        names=("days_on_pod", "years_on_one_chip"),
        kind="value",
        rel_tol=0.02,
        expected=_days,
        params={**TEXT_RUN, "tpu": "tpu-v5p", "mfu": 0.4},
        draw=_draw_days,
    ),
    "ch06_q3_needed_mfu": Key(
        names=("needed_mfu",),
        kind="value",
        expected=_needed_mfu,
        params={**TEXT_RUN, "tpu": "tpu-v5p", "pods": 10, "days": 2.0},
        draw=_draw_needed_mfu,
        accept=lambda v: 0.2 <= _needed_mfu(**v)["needed_mfu"] <= 0.9,
    ),
    "ch06_q4a_memory": Key(
        names=("step_memory_bytes",),
        kind="value",
        expected=_memory,
        also=(_memory_no_grads,),
        params=TEXT_MEMORY,
        draw=_draw_memory,
    ),
    "ch06_q4b_fewest_chips": Key(
        names=("fewest_chips", "days_on_fewest"),
        kind="value",
        expected=_fewest,
        also=(lambda **p: _fewest(grads=False, **p), lambda **p: _fewest(grads=False, text_hbm=True, **p)),
        rel_tol=0.02,  # the text rounds N to 70e9 (0.8 %) before its 1,752 days
        params={**TEXT_MEMORY, "tpu": "tpu-v5p", "tokens_t": 15.0, "mfu": 0.4},
        draw=_draw_fewest,
    ),
    "ch06_q4c_pod_memory": Key(
        names=("pod_memory_per_chip_bytes",),
        kind="value",
        expected=_pod_memory,
        also=(lambda **p: _pod_memory(grads=False, **p),),
        params={**TEXT_MEMORY, "tpu": "tpu-v5p"},
        draw=_draw_pod_memory,
    ),
    "ch06_q5_fsdp_alone": Key(
        names=("tokens_per_chip", "fsdp_floor_tokens"),
        kind="value",
        expected=_fsdp_alone,
        params=TEXT_POD,
        draw=_draw_tpu_batch,
    ),
    "ch06_q6_fsdp_tp": Key(
        names=("mixed_floor_tokens", "fsdp_degree_high"),
        kind="value",
        expected=_fsdp_tp,
        params={**TEXT_POD, "f": LLAMA70["f"]},
        draw=_draw_fsdp_tp,
        accept=lambda v: bool(_fsdp_tp(**v)),  # a ValueError (no compute-bound FSDP degree) refuses
    ),
    "ch06_q7_dcn": Key(
        names=("dcn_floor_tokens_per_pod",),
        kind="value",
        expected=lambda tpu: {
            "dcn_floor_tokens_per_pod": bounds.dcn_compute_bound_batch(
                tpu, chips_per_pod=hardware.get_chip(tpu).chips_per_pod
            )
        },
        rel_tol=0.04,  # as ch05_q0h: the text rounds its pod to 8k chips on 2,000 hosts
        params={"tpu": "tpu-v5p"},
        draw=_draw_dcn,
    ),
    "ch06_q8a_four_pods": Key(
        names=("chip_batch_tokens", "days_on_pods"),
        kind="value",
        expected=_pods,
        params={
            **TEXT_RUN,
            "tpu": "tpu-v5p",
            "pods": 4,
            "sequences": SEQUENCES,
            "seq_len": SEQ_LEN,
            "mfu": 0.4,
        },
        draw=_draw_pods,
    ),
    "ch06_q8b_four_pods_bound": Key(
        names=("bound",),
        kind="choice",
        choices=BOUNDS,
        expected=_bound,
        params={"tpu": "tpu-v5p", "pods": 4, "sequences": SEQUENCES, "seq_len": SEQ_LEN, "f": LLAMA70["f"]},
        draw=_draw_bound,
    ),
    "ch06_q9a_405b_count": Key(
        names=("params_q9", "flops_per_token_q9", "total_flops_q9"),
        kind="value",
        expected=_count_q9,
        params={**LLAMA405, "tokens_t": 15.0},
        draw=_draw_count,
    ),
    "ch06_q9b_405b_pods": Key(
        names=("days_on_pods_big", "batch_needed_tokens"),
        kind="value",
        expected=_big_pods,
        params={
            "model": "LLaMA 3.1 405B",
            "n_params": _n_params("LLaMA 3.1 405B"),
            "f": LLAMA405["f"],
            "tpu": "tpu-v5p",
            "alpha": _alpha("tpu-v5p"),
            "pods": 8,
            "tokens_t": 15.0,
            "mfu": 0.4,
        },
        draw=_draw_big_pods,
    ),
    "ch06_q10_fsdp_mlp": Key(
        names=("fsdp_mlp",),
        kind="jax",
        check=JaxCheck(
            recorder="sharded",
            cases=((4, 16, 32), (2, 3, 5)),
            inputs=_mlp_inputs,
            in_specs=(("X",), ("X",), ("X",)),
            reference=_mlp_reference,
            atol=1e-4,
            block=lambda sizes, n: (sizes[0], n * sizes[1]),
            collectives={"all-gather": (1, 2), "all-reduce": (0, 0), "reduce-scatter": (0, 0)},
            needs_primitives=("shard_map", "all_gather"),
        ),
    ),
}

# Answers a student might plausibly write that must still lose their points (tests/course/test_grading.py).
PLAUSIBLE = {
    "ch06_q10_fsdp_mlp": """
def fsdp_mlp(x, w_in, w_out):
    return jnp.maximum(x @ w_in, 0.0) @ w_out  # right values, but XLA picks the collectives
""",
}

# The text's printed answers, each accepted (tests/course/test_exercises.py); UNPRINTED says why the rest are not.
PRINTED = {
    "ch06_q1_count": {"params": 70.4e9, "flops_per_token": 4.2e11, "total_flops": 6.3e24},
    "ch06_q2_days": {"days_on_pod": 44, "years_on_one_chip": 435},
    "ch06_q4a_memory": {"step_memory_bytes": 21.6e12},
    "ch06_q4c_pod_memory": {"pod_memory_per_chip_bytes": 2.4e9},
    "ch06_q5_fsdp_alone": {"tokens_per_chip": 468, "fsdp_floor_tokens": 850},
    # 1927 is the first edition's root "X ~ 1643 + 284" (the post of 2025-02-03); the later edition prints instead
    # the optimum sqrt(2BN/F) = 1618, not this question's largest compute-bound X
    "ch06_q6_fsdp_tp": {"mixed_floor_tokens": 453, "fsdp_degree_high": 1927},
    "ch06_q4b_fewest_chips": {"fewest_chips": 225, "days_on_fewest": 1752},  # its 96 GB, no gradients
    "ch06_q7_dcn": {"dcn_floor_tokens_per_pod": 76000},  # its 8k chips on 2,000 hosts
}
UNPRINTED = {
    "ch06_q3_needed_mfu": "Part 5 says ten pods take about 2 days but prints no MFU for it",
    "ch06_q8a_four_pods": "the text prints no answer to its worked problem 1",
    "ch06_q8b_four_pods_bound": "a choice question the text leaves unanswered (its worked problem 1)",
    "ch06_q9a_405b_count": "the text prints no answer to its worked problem 2(a)",
    "ch06_q9b_405b_pods": "the text prints no answer to its worked problem 2(b)",
    "ch06_q10_fsdp_mlp": "a JAX program, judged by running it",
}
