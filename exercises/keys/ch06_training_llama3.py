"""Answer keys for the chapter 6 exercises (training LLaMA 3 on TPUs), computed with book_lib."""

from __future__ import annotations

import math
import random

from book_lib import bounds, hardware, models, runs, training, transformer
from book_lib.hardware import get_chip
from book_lib.parallelism import Layout
from exercises.keys import choice, pick, preset_sizes, program, sized_model, value
from exercises.keys.arrays import FSDP_GATHERS, normal, relu_mlp
from exercises.keys.chips import TPUS, TPUS_3D, text_chip

# Dense models with a gated MLP, untied embeddings and two norms per layer, as a statement names them,
# and their book_lib presets: `sized_model` rebuilds each from its seven sizes (checked below).
MODELS = {
    "Llama 2 7B": "llama-2-7b",
    "Llama 2 13B": "llama-2-13b",
    "Llama 2 70B": "llama-2-70b",
    "Llama 3 8B": "llama-3-8b",
    "LLaMA 3 70B": "llama-3-70b",
    "LLaMA 3.1 405B": "llama-3.1-405b",
    "Mistral 7B": "mistral-7b",
}
for _preset in MODELS.values():
    assert sized_model(**preset_sizes(_preset)).param_count() == models.get_model(_preset).param_count(), _preset
SEQ_LEN, SEQUENCES = 4096, 1024  # the text's 4M-token batch: 1024 sequences of 4096 tokens
WIDTHS = tuple(models.get_model(MODELS[name]).d_ff for name in sorted(MODELS))  # the F a class may draw


def _named(model: str, **_) -> transformer.TransformerConfig:
    return models.get_model(MODELS[model])


def _alpha(tpu: str) -> float:
    """C / W: the bf16 peak over one ICI axis' bandwidth (tokens per chip that pure DP needs)."""
    return bounds.compute_bound_batch_per_chip(tpu, strategy="dp")


def _run(model: str, chip: str | hardware.Chip, n_chips: int, tokens_t: float, mfu: float) -> runs.TrainingRun:
    return runs.training_run(_named(model), chip, n_chips, tokens=tokens_t * 1e12, mfu=mfu)


# ---- Q1, Q9: parameters and FLOPs from a configuration -------------------------------------------


def _count(tokens_t: float, **sizes) -> tuple[float, float, float]:
    model = sized_model(**sizes)
    run = runs.training_run(model, "tpu-v5p", 1, tokens=tokens_t * 1e12, mfu=1.0)  # FLOPs do not depend on it
    return (model.param_count(), run.flops_per_token, run.flops)


def _draw_count(r: random.Random) -> dict:
    return {**preset_sizes(MODELS[r.choice(sorted(MODELS))]), "tokens_t": r.choice((2.0, 4.0, 9.0, 12.0, 18.0, 36.0))}


def _draw_named_count(r: random.Random) -> dict:
    """A named model's sizes (problem 6.2's, whose name Q9b takes up with its parameter count)."""
    model = _model_choice(r)
    return {**model, **preset_sizes(MODELS[model["model"]]), "tokens_t": r.choice((2.0, 4.0, 9.0, 12.0, 18.0, 36.0))}


# ---- Q2, Q3: days on a pod, MFU for a deadline -----------------------------------------------------


def _days(model: str, n_params: int, tokens_t: float, tpu: str, mfu: float) -> tuple[float, float]:
    one = _run(model, tpu, 1, tokens_t, 1.0)
    return (_run(model, tpu, get_chip(tpu).chips_per_pod, tokens_t, mfu).days, one.days / 365.25)


def _model_choice(r: random.Random) -> dict:
    model = r.choice(sorted(MODELS))
    return {"model": model, "n_params": _named(model).param_count()}


def _needed_mfu(model: str, n_params: int, tokens_t: float, tpu: str, pods: int, days: float) -> float:
    return _run(model, tpu, pods * get_chip(tpu).chips_per_pod, tokens_t, 1.0).days / days  # days scale as 1 / MFU


# ---- Q4: memory -------------------------------------------------------------------------------------


def _whole(model: str, batch_m: float, ckpt: int, **_) -> training.MemoryPerChip:
    return training.memory_per_chip(
        _named(model), "tpu-v5p", Layout(), batch_tokens=batch_m * 1e6, checkpoints_per_layer=ckpt
    )


def _memory(model: str, n_params: int, layers: int, d: int, batch_m: float, ckpt: int, grads: bool = True) -> float:
    """The step's memory; without `grads`, the text's count: weights, optimizer state and checkpoints."""
    whole = _whole(model, batch_m, ckpt)
    return whole.total_bytes - (0 if grads else whole.grads_bytes)


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


def _fewest(tpu: str | hardware.Chip, tokens_t: float, mfu: float, grads: bool = True, **memory) -> tuple[int, float]:
    chips = math.ceil(_memory(**memory, grads=grads) / get_chip(tpu).hbm_bytes)
    return (chips, _run(memory["model"], tpu, chips, tokens_t, mfu).days)


def _pod_memory(tpu: str, grads: bool = True, **memory) -> float:
    pod = Layout(fsdp=get_chip(tpu).chips_per_pod)
    m = training.memory_per_chip(
        _named(memory["model"]), tpu, pod, batch_tokens=memory["batch_m"] * 1e6, checkpoints_per_layer=memory["ckpt"]
    )
    return m.total_bytes - (0 if grads else m.grads_bytes)


# ---- Q5 to Q8: sharding on one pod and across pods ----------------------------------------------------


def _fsdp_alone(tpu: str, alpha: float, sequences: int, seq_len: int) -> tuple[float, float]:
    chip = get_chip(tpu)
    floor = bounds.compute_bound_batch_per_chip(chip, strategy="fsdp", n_axes=len(chip.pod_shape))
    return (sequences * seq_len / chip.chips_per_pod, floor)


def _draw_tpu_batch(r: random.Random) -> dict:
    tpu = r.choice(TPUS_3D)
    return {
        "tpu": tpu,
        "alpha": _alpha(tpu),
        "sequences": r.choice((256, 512, 2048, 4096)),
        "seq_len": r.choice((2048, 4096, 8192)),
    }


def _mixed_floor(chip: hardware.Chip, f: int) -> float:
    """Tokens per chip mixed FSDP and tensor parallelism need to stay compute-bound, for an MLP of width F."""
    return bounds.compute_bound_batch_per_chip(chip, strategy="fsdp+tp", d_ff=f)


def _fsdp_tp(tpu: str, alpha: float, sequences: int, seq_len: int, f: int) -> tuple[float, float]:
    chip = get_chip(tpu)
    window = bounds.fsdp_degree_range(chip, chip.chips_per_pod, batch_tokens=sequences * seq_len, d_ff=f)
    if window is None:
        raise ValueError(f"f={f}: no compute-bound FSDP degree for this batch; allowed: a larger batch")
    return (_mixed_floor(chip, f), window[1])


def _pods(
    model: str, n_params: int, f: int, tpu: str, pods: int, sequences: int, seq_len: int, tokens_t: float, mfu: float
):
    """Exercise 6.1's tokens per chip and days; `f`, the model's MLP width, is Q8b's (`_bound`)."""
    n_chips = pods * get_chip(tpu).chips_per_pod
    return (sequences * seq_len / n_chips, _run(model, tpu, n_chips, tokens_t, mfu).days)


BOUNDS = ("compute", "ici", "dcn")


def _bound(tpu: str, pods: int, sequences: int, seq_len: int, f: int) -> str:
    """The text's rules: ICI-bound inside a pod below 2 alpha^2 / F tokens per chip, else DCN-bound
    between pods below the pod's FLOPs over its DCN bandwidth, else compute-bound."""
    chip = get_chip(tpu)
    batch = sequences * seq_len
    if batch / (pods * chip.chips_per_pod) < _mixed_floor(chip, f):
        return "ici"
    if batch / pods < bounds.dcn_compute_bound_batch(chip, chips_per_pod=chip.chips_per_pod):
        return "dcn"
    return "compute"


def _big_pods(
    model: str, n_params: int, f: int, tpu: str, alpha: float, pods: int, tokens_t: float, mfu: float
) -> tuple[float, float]:
    chip = get_chip(tpu)
    n_chips = pods * chip.chips_per_pod
    return (_run(model, chip, n_chips, tokens_t, mfu).days, _mixed_floor(chip, f) * n_chips)


def _draw_big_pods(r: random.Random) -> dict:
    """The chips of exercise 6.2(b); the model and its tokens are Q9a's."""
    tpu = r.choice(TPUS_3D)
    return {"tpu": tpu, "alpha": _alpha(tpu), "pods": r.choice((2, 4, 16)), "mfu": r.choice((0.3, 0.5))}


def _draw_four_pods(r: random.Random) -> dict:
    """Exercise 6.1: a model (its MLP width for Q8b too), its pods and its batch."""
    model = _model_choice(r)
    return {
        **model,
        "f": _named(model["model"]).d_ff,
        **pick(
            tpu=TPUS_3D,
            pods=(2, 3, 6, 8, 16),
            sequences=(512, 2048, 4096, 8192),
            seq_len=(2048, 4096, 8192),
            tokens_t=(2.0, 9.0, 18.0),
            mfu=(0.3, 0.5),
        )(r),
    }


LLAMA70 = preset_sizes("llama-3-70b")
LLAMA405 = preset_sizes("llama-3.1-405b")
TEXT_RUN = {"model": "LLaMA 3 70B", "n_params": _named("LLaMA 3 70B").param_count(), "tokens_t": 15.0}
TEXT_MEMORY = {"model": "LLaMA 3 70B", "n_params": TEXT_RUN["n_params"], "layers": 80, "d": 8192, "batch_m": 4.0}
TEXT_MEMORY = {**TEXT_MEMORY, "ckpt": 4}
TEXT_POD = {"tpu": "tpu-v5p", "alpha": _alpha("tpu-v5p"), "sequences": SEQUENCES, "seq_len": SEQ_LEN}
COUNT = ("params", "flops_per_token", "total_flops")

KEYS = {
    "ch06_q1_count": value(COUNT, _count, params={**LLAMA70, "tokens_t": 15.0}, draw=_draw_count),
    "ch06_q2_days": value(
        ("days_on_pod", "years_on_one_chip"),
        _days,
        rel_tol=0.02,
        params={**TEXT_RUN, "tpu": "tpu-v5p", "mfu": 0.4},
        draw=pick(
            _model_choice, tokens_t=(2.0, 4.0, 9.0, 12.0, 18.0, 36.0), tpu=TPUS_3D, mfu=(0.3, 0.35, 0.45, 0.5, 0.55)
        ),
    ),
    "ch06_q3_needed_mfu": value(
        "needed_mfu",
        _needed_mfu,
        params={**TEXT_RUN, "tpu": "tpu-v5p", "pods": 10, "days": 2.0},
        draw=pick(
            _model_choice,
            tokens_t=(2.0, 4.0, 9.0, 15.0, 18.0),
            tpu=TPUS_3D,
            pods=(1, 2, 4, 8, 16),
            days=(7.0, 14.0, 21.0, 30.0, 60.0, 90.0),
        ),
        accept=lambda v: 0.2 <= _needed_mfu(**v) <= 0.9,
    ),
    "ch06_q4a_memory": value(
        "step_memory_bytes",
        _memory,
        also=(lambda **p: _memory(**p, grads=False),),
        params=TEXT_MEMORY,
        draw=_draw_memory,
    ),
    "ch06_q4b_fewest_chips": value(  # the step of Q4a, on chips of its own
        ("fewest_chips", "days_on_fewest"),
        _fewest,
        also=(lambda **p: _fewest(grads=False, **p), lambda tpu, **p: _fewest(text_chip(tpu), grads=False, **p)),
        rel_tol=0.02,  # the text rounds N to 70e9 (0.8 %) before its 1,752 days
        params={**TEXT_MEMORY, "tpu": "tpu-v5p", "tokens_t": 15.0, "mfu": 0.4},
        draw=pick(tpu=TPUS, tokens_t=(2.0, 4.0, 9.0, 18.0), mfu=(0.3, 0.5, 0.6)),
        follows="ch06_q4a_memory",
    ),
    "ch06_q4c_pod_memory": value(  # the step of Q4a, on a pod of its own
        "pod_memory_per_chip_bytes",
        _pod_memory,
        also=(lambda **p: _pod_memory(grads=False, **p),),
        params={**TEXT_MEMORY, "tpu": "tpu-v5p"},
        draw=pick(tpu=TPUS_3D),
        follows="ch06_q4a_memory",
    ),
    "ch06_q5_fsdp_alone": value(
        ("tokens_per_chip", "fsdp_floor_tokens"), _fsdp_alone, params=TEXT_POD, draw=_draw_tpu_batch
    ),
    "ch06_q6_fsdp_tp": value(
        ("mixed_floor_tokens", "fsdp_degree_high"),
        _fsdp_tp,
        params={**TEXT_POD, "f": LLAMA70["f"]},
        draw=pick(f=WIDTHS),
        accept=lambda v: bool(_fsdp_tp(**v)),  # a ValueError (no compute-bound FSDP degree) refuses
        follows="ch06_q5_fsdp_alone",  # the pod and batch of Q5
    ),
    "ch06_q7_dcn": value(
        "dcn_floor_tokens_per_pod",
        lambda tpu: bounds.dcn_compute_bound_batch(tpu, chips_per_pod=get_chip(tpu).chips_per_pod),
        rel_tol=0.04,  # as ch05_q0h: the text rounds its pod to 8k chips on 2,000 hosts
        params={"tpu": "tpu-v5p"},
        draw=pick(tpu=("tpu-v4", "tpu-v5e", "tpu-v6e", "tpu-7x")),
    ),
    "ch06_q8a_four_pods": value(
        ("chip_batch_tokens", "days_on_pods"),
        _pods,
        params={
            **TEXT_RUN,
            "f": LLAMA70["f"],
            "tpu": "tpu-v5p",
            "pods": 4,
            "sequences": SEQUENCES,
            "seq_len": SEQ_LEN,
            "mfu": 0.4,
        },
        draw=_draw_four_pods,
    ),
    "ch06_q8b_four_pods_bound": choice(  # exercise 6.1 again: Q8a's pods, batch and model's F
        "bound",
        _bound,
        BOUNDS,
        params={"tpu": "tpu-v5p", "pods": 4, "sequences": SEQUENCES, "seq_len": SEQ_LEN, "f": LLAMA70["f"]},
        follows="ch06_q8a_four_pods",
    ),
    "ch06_q9a_405b_count": value(  # counted as Q1's model is (its method, not its numbers)
        tuple(f"{name}_q9" for name in COUNT),
        lambda model, n_params, tokens_t, **sizes: _count(tokens_t, **sizes),
        params={
            "model": "LLaMA 3.1 405B",
            "n_params": _named("LLaMA 3.1 405B").param_count(),
            **LLAMA405,
            "tokens_t": 15.0,
        },
        draw=_draw_named_count,
        follows="ch06_q1_count",
        shares=(),
    ),
    "ch06_q9b_405b_pods": value(
        ("days_on_pods_big", "batch_needed_tokens"),
        _big_pods,
        params={
            "model": "LLaMA 3.1 405B",
            "n_params": _named("LLaMA 3.1 405B").param_count(),
            "f": LLAMA405["f"],
            "tpu": "tpu-v5p",
            "alpha": _alpha("tpu-v5p"),
            "pods": 8,
            "tokens_t": 15.0,
            "mfu": 0.4,
        },
        draw=_draw_big_pods,
        follows="ch06_q9a_405b_count",  # exercise 6.2 again: Q9a's model and tokens
        shares=("model", "n_params", "f", "tokens_t"),
    ),
    "ch06_q10_fsdp_mlp": program(
        "fsdp_mlp",
        cases=((4, 16, 32), (2, 3, 5)),
        # x: f32[n b, D] (b rows per device), w_in: f32[D, F], w_out: f32[F, D]; D and F multiples of n
        inputs=lambda sizes, n, seed: (
            normal(((n * sizes[0], n * sizes[1]), (n * sizes[1], n * sizes[2]), (n * sizes[2], n * sizes[1])), seed),
            (),
        ),
        in_specs=(("X",), ("X",), ("X",)),
        reference=relu_mlp,
        atol=1e-4,
        **FSDP_GATHERS,
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
    "ch06_q8b_four_pods_bound": "the text leaves its worked problem 1 unanswered",
    "ch06_q9a_405b_count": "the text prints no answer to its worked problem 2(a)",
    "ch06_q9b_405b_pods": "the text prints no answer to its worked problem 2(b)",
}
