"""Command line of book_lib: `python -m book_lib <command> ...`.

    python -m book_lib plan --model llama3-70b --chip tpu-v5p --chips 8960 --batch-tokens 4M --seq 4096
    python -m book_lib plan --model llama-3.1-405b --chip h100 --chips 16K --batch-tokens 16M --seq 8192 \
        --layout tensor=8,pipeline=16,data=128 --microbatches 16 --virtual-stages 2 --tokens 15T
    python -m book_lib plan --model path/to/config.json ...  (or --model-args d_model=4096,n_layers=32,...)
    python -m book_lib plan ... --json
    python -m book_lib serve --model llama3-70b --chip tpu-v5e --chips 8 --context 8192 --dtype int8
    python -m book_lib calibrate --output h100.json        (then: plan ... --calibration h100.json)

Each command is a function that adds its subparser and sets `run`, the function that carries it
out (`_add_plan` and `_plan`); a new command (`serve`, say) adds one more pair to `COMMANDS`. Bad
input prints one line, `error: ...`, to stderr and exits with status 2; nothing prints a traceback.
A plan or a serving table in which nothing fits in memory is printed, and exits with status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from book_lib import checks, inference, parallelism, planner, runs, serving, training
from book_lib.efficiency import load_calibration
from book_lib.hardware import get_chip, with_calibration
from book_lib.models import from_hf_config, get_model, model_names
from book_lib.numfmt import fmt
from book_lib.parallelism import Layout
from book_lib.transformer import TransformerConfig

_SUFFIXES = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# What no machine or run has reached: beyond these the models answer with nonsense (a step of 1e30 tokens,
# 0 % MFU on millions of chips), so the commands refuse them. The largest accelerator clusters described
# in public hold a few hundred thousand chips, and the largest published batches tens of millions of tokens.
MAX_CHIPS = 2**20
MAX_BATCH_TOKENS = 2**30
# Each option's own examples, for its error message.
_EXAMPLES = {
    "--chips": "8960, 4K (4 * 2**10), 8.96e3",
    "--batch-tokens": "4194304, 4M (4 * 2**20), 4.2e6",
    "--seq": "4096, 8K",
    "--context": "8192, 32K",
    "--prompt": "2048, 2K",
    "--output": "512",
    "--batches": "1,8,64",
}


CALIBRATION_HELP = (
    "a profile written by `python -m book_lib calibrate`: its measured rates replace the cited ones in the "
    "expected times (the bound keeps the datasheet)"
)


# Where a model's name is looked up: a wrong one is answered with the closest names.
MODEL_HELP = (
    f"a preset ({', '.join(model_names())}), or a Hugging Face config.json (Llama, Mistral, Mixtral, Qwen, DeepSeek)"
)
MODEL_ARGS_HELP = (
    "TransformerConfig fields, e.g. d_model=4096,n_layers=32,d_ff=14336,n_heads=32,vocab_size=32000: a model "
    "of its own (n_kv_heads defaults to n_heads, head_dim to d_model / n_heads), or changes to --model"
)
# Decimal multiples for token counts ("15T" tokens is 15e12, as runs report them); --batch-tokens keeps the
# text's powers of 2.
_DECIMAL = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


class NothingFits(Exception):
    """A table printed in full in which nothing fits in memory: `main` prints it and exits with 1."""


def parse_count(text: str, arg: str = "count") -> int:
    """A count written as `4194304`, `4M` (K, M, G, T are powers of 2: 4M = 4 * 2**20, the text's
    1024 sequences of 4096) or `4.2e6`; it must come out a whole number >= 1. `arg` names it in errors.

    Raises:
        ValueError: text that is none of these, or not a whole number >= 1.
    """
    allowed = _EXAMPLES.get(arg, "4194304, 4M (4 * 2**20), 4.2e6")
    match = re.fullmatch(r"\s*(-?[0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)\s*", text.lower())
    if match is None:
        raise ValueError(f"{arg}={text!r}: not a number; allowed: {allowed}")
    value = float(match.group(1)) * _SUFFIXES[match.group(2)]
    if value != int(value) or value < 1:
        raise ValueError(f"{arg}={text!r}: not a whole number >= 1; allowed: {allowed}")
    return int(value)


def _count(arg: str) -> Callable[[str], int]:
    """An argparse type that parses `arg`'s count, with `arg`'s own message."""

    def parse(text: str) -> int:
        try:
            return parse_count(text, arg)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def parse_tokens(text: str, arg: str = "--tokens") -> float:
    """A token count written as `15T` (decimal: 15e12), `300B`, `2.5e12` or `1000000` (> 0).

    Raises:
        ValueError: text that is none of these, or not above 0.
    """
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"{arg}={text!r}: not a token count above 0; allowed: 15T (15e12), 300B, 2.5e12")
    return float(match.group(1)) * _DECIMAL[match.group(2)]


def _tokens(text: str) -> float:
    try:
        return parse_tokens(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_fields(text: str, arg: str, fields: dict[str, str]) -> dict[str, Any]:
    """`name=value,name=value` as a dict, each value read by its field's annotation in `fields` (an
    int, a bool as true/false, None as none where the field allows it, else the text).

    Raises:
        ValueError: a pair without `=`, an unknown name (the closest are listed), or a value of the wrong kind.
    """
    found: dict[str, Any] = {}
    for pair in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = pair.partition("=")
        if not eq:
            raise ValueError(f"{arg}={text!r}: {pair!r} is not name=value; allowed: e.g. {next(iter(fields))}=8")
        name, value = checks.one_of(arg, name.strip(), fields), value.strip()
        kind = fields[name]
        try:
            if value.lower() == "none" and "None" in kind:
                found[name] = None
            elif kind.startswith("bool"):
                found[name] = {"true": True, "false": False}[value.lower()]
            elif kind.startswith(("int", "float")):
                number = float(value)
                found[name] = int(number) if kind.startswith("int") and number == int(number) else number
            else:
                found[name] = value
        except (KeyError, ValueError):
            raise ValueError(f"{arg}={text!r}: {name}={value!r} is not a {kind}; allowed: a {kind}") from None
    return found


_CONFIG_FIELDS = {f.name: str(f.type) for f in dataclasses.fields(TransformerConfig) if f.name != "source"}
_LAYOUT_FIELDS = {f.name: str(f.type) for f in dataclasses.fields(Layout)}


def _model(args: argparse.Namespace) -> TransformerConfig:
    """--model (a preset, or a config.json path) with --model-args over it, or --model-args alone."""
    if args.model is None and args.model_args is None:
        raise ValueError("--model=None: no model given; allowed: a preset, a config.json path, or --model-args")
    fields = parse_fields(args.model_args, "--model-args", _CONFIG_FIELDS) if args.model_args else {}
    if args.model is None:
        fields.setdefault("n_kv_heads", fields.get("n_heads"))
        if "d_model" in fields and "n_heads" in fields:
            fields.setdefault("head_dim", fields["d_model"] // fields["n_heads"])
        needed = ("n_layers", "d_model", "d_ff", "n_heads", "vocab_size")
        missing = [name for name in needed if fields.get(name) is None]
        if missing:
            raise ValueError(
                f"--model-args={args.model_args!r}: {', '.join(missing)} missing; "
                f"allowed: every one of {', '.join(needed)}"
            )
        return TransformerConfig(**{"name": "custom", **fields})
    base = from_hf_config(args.model) if args.model.endswith(".json") or Path(args.model).is_file() else None
    base = base or get_model(args.model)
    return dataclasses.replace(base, **fields) if fields else base


def _check_scale(
    model: str | TransformerConfig, *, chips: int, tokens: int, arg: str, batch_tokens: int | None = None
) -> None:
    """Refuse what no machine or model can be: more chips than `MAX_CHIPS`, a batch over `MAX_BATCH_TOKENS`,
    a sequence or context longer than the model's positions (`TransformerConfig.check_positions`)."""
    if chips > MAX_CHIPS:
        raise ValueError(f"--chips={chips}: more chips than any system built; allowed: up to {MAX_CHIPS:,}")
    if batch_tokens is not None and batch_tokens > MAX_BATCH_TOKENS:
        raise ValueError(
            f"--batch-tokens={batch_tokens:.4g}: more tokens per step than any published run; "
            f"allowed: up to {MAX_BATCH_TOKENS:,} (1G)"
        )
    get_model(model).check_positions(arg, tokens)


# ----- plan ------------------------------------------------------------------------------------------


def _add_plan(commands: Any) -> None:
    plan = commands.add_parser(
        "plan",
        help="rank the ways to shard a training step",
        description="Rank data, FSDP, tensor, mixed and pipeline parallelism for one training step "
        "(book_lib.planner.plan_training).",
    )
    plan.add_argument("--model", help=MODEL_HELP)
    plan.add_argument("--model-args", help=MODEL_ARGS_HELP)
    plan.add_argument("--chip", required=True, help="a book_lib.hardware chip, e.g. tpu-v5p, h100-sxm")
    plan.add_argument("--chips", required=True, type=_count("--chips"), help="number of chips: a slice, or whole pods")
    plan.add_argument(
        "--batch-tokens", required=True, type=_count("--batch-tokens"), help="tokens per step, e.g. 4M (4 * 2**20)"
    )
    plan.add_argument("--seq", required=True, type=_count("--seq"), help="tokens per sequence, e.g. 4096")
    plan.add_argument("--checkpoints", type=float, default=4, help="D-wide activations saved per layer (default 4)")
    plan.add_argument(
        "--partial-sequences",
        action="store_true",
        help="let a chip hold a fraction of a sequence at no cost, as the text does (default: cut sequences "
        "only by a whole, costed context-parallel degree)",
    )
    plan.add_argument(
        "--layout",
        help="your own layout, shown beside the planner's best: Layout fields, e.g. tensor=8,pipeline=16,data=128 "
        f"({', '.join(_LAYOUT_FIELDS)})",
    )
    plan.add_argument("--microbatches", type=_count("--microbatches"), help="microbatches of your --layout")
    plan.add_argument("--zero", type=int, choices=(0, 1, 2), help="ZeRO stage of your --layout's data replicas")
    plan.add_argument(
        "--remat", choices=tuple(training.REMAT_FORWARD_PASSES), default="checkpoints", help="your --layout's remat"
    )
    plan.add_argument(
        "--optimizer", choices=tuple(training.OPTIMIZERS), default="adam", help="your --layout's optimizer"
    )
    plan.add_argument("--matmul-dtype", choices=("bf16", "fp8"), default="bf16", help="your --layout's matmuls")
    plan.add_argument(
        "--virtual-stages", type=_count("--virtual-stages"), default=1, help="your pipeline's interleaved chunks"
    )
    plan.add_argument(
        "--overlap-grad-reduce",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="whether your --layout's data-parallel gradient reduction runs under the backward pass "
        "(--no-overlap-grad-reduce: after it, as Megatron-LM before 2023 and DeepSpeed's pipeline do)",
    )
    plan.add_argument(
        "--tokens", type=_tokens, help="tokens to train on, e.g. 15T (decimal): days, chip-hours and cost"
    )
    plan.add_argument("--price", type=float, help="US dollars per chip-hour for --tokens (default: the cited price)")
    plan.add_argument("--top", type=int, default=10, help="rows of the table to print (default 10; 0: all)")
    plan.add_argument("--calibration", help=CALIBRATION_HELP)
    plan.add_argument("--json", action="store_true", help="print every scheme as JSON instead of a table")
    plan.set_defaults(run=_plan)


def _entry_json(entry: planner.PlanEntry) -> dict[str, Any]:
    step, memory = entry.step, entry.memory
    return {
        "rank": entry.rank,
        "scheme": entry.scheme,
        "layout": {name: getattr(step.layout, name) for name in (*parallelism.DEGREES, "microbatches", "zero")},
        "mesh": step.mesh,
        "remat": step.remat,
        "expected_s": entry.expected_s,
        "mfu_expected": entry.mfu_expected,
        "roofline_s": entry.roofline_s,
        "terms": [{"name": t.name, "seconds": t.seconds, "how": t.how} for t in step.terms],
        "t_lower_s": step.t_lower,
        "t_upper_s": step.t_upper,
        "t_math_s": step.t_math,
        "roofline_math_s": step.roofline_math_s,
        "t_bubble_s": step.t_bubble,
        "t_comms_s": step.t_comms,
        "bound": step.bound,
        "tokens_per_chip": step.tokens_per_chip,
        "context_parallel": step.context_parallel,
        "memory_bytes_per_chip": {
            "params": memory.params_bytes,
            "grads": memory.grads_bytes,
            "optimizer": memory.optimizer_bytes,
            "activations": memory.activations_bytes,
            "total": memory.total_bytes,
            "hbm": memory.hbm_bytes,
        },
        "fits": memory.fits,
        "near_text_fsdp_degree": entry.near_text_fsdp_degree,
        "collectives": [
            {
                "name": c.name,
                "op": c.op,
                "phase": c.phase,
                "axes": list(c.axes),
                "link": c.link,
                "array_bytes": c.array_bytes,
                "calls": c.calls,
                "total_s": c.total_s,
            }
            for c in step.collectives
        ],  # fmt: skip
        "reason": entry.reason,
    }


def _run_json(run: runs.TrainingRun) -> dict[str, Any]:
    return {"tokens": run.tokens, "seconds": run.seconds, "days": run.days, "chip_hours": run.chip_hours,
            "price_usd_per_chip_hour": run.price_usd_per_chip_hour, "cost_usd": run.cost_usd}  # fmt: skip


def _plan_json(plan: planner.TrainingPlan, yours: planner.PlanEntry | None, whole_runs: dict[str, Any]) -> str:
    head = {
        "model": plan.model,
        "chip": plan.chip,
        "n_chips": plan.n_chips,
        "batch_tokens": plan.batch_tokens,
        "seq_len": plan.seq_len,
        "pods": plan.pods,
        "slice_shape": list(plan.slice_shape),
        "text_fsdp_degree": plan.text_fsdp_degree,
    }
    extra = {"yours": _entry_json(yours)} if yours is not None else {}
    extra |= {"runs": {who: _run_json(run) for who, run in whole_runs.items()}} if whole_runs else {}
    return json.dumps({**head, **extra, "entries": [_entry_json(e) for e in plan.entries]}, indent=2)


def _nothing_fits(plan: planner.TrainingPlan, yours: planner.PlanEntry | None) -> list[str]:
    """The headline when no layout fits in HBM (or yours does not), with what would make it fit; else none."""
    lines = []
    if yours is not None and not yours.fits:
        lines.append(
            f"YOUR LAYOUT DOES NOT FIT: {fmt(yours.memory.total_bytes, 'B')} per chip of "
            f"{fmt(yours.memory.hbm_bytes or 0, 'B')}; more microbatches, --zero, --remat full or more model "
            "parallelism would shrink it."
        )
    if plan.best.memory.fits is False:
        memory = min((e.memory for e in plan.entries), key=lambda m: m.total_bytes)
        short = memory.total_bytes / (memory.hbm_bytes or 1)
        lines.append(
            f"NOTHING FITS: the leanest layout needs {fmt(memory.total_bytes, 'B')} per chip of "
            f"{fmt(memory.hbm_bytes or 0, 'B')}. Try about {math.ceil(short)}x the chips, or fewer tokens "
            "per step (--batch-tokens), or fewer checkpoints per layer (--checkpoints)."
        )
    return [*lines, ""] if lines else []


def _rates_line(chip: str, calibration: str | None) -> list[str]:
    """Which rates the expected times use: the figures `calibrate` measured, or the cited ones."""
    if calibration is None:
        return ["rates: cited measurements (book_lib.efficiency); --calibration FILE uses your own"]
    cal = load_calibration(calibration)
    measured = ", ".join(name for name, _ in cal.figures) or "none (the profile holds rates only)"
    return [f"rates measured on {cal.device_kind}, {cal.date}, jax {cal.jax_version} ({calibration}): {measured}; "
            f"the rest cited for {chip}"]  # fmt: skip


def _mesh(e: planner.PlanEntry) -> str:
    """A layout's mesh as the table writes it, "*" marking the one nearest the text's FSDP degree."""
    return " ".join(f"{k}={v}" for k, v in e.step.mesh.items()) + (" *" if e.near_text_fsdp_degree else "")


def _row(e: planner.PlanEntry, rank: str, widths: tuple[int, int] = (20, 40)) -> str:
    """One layout's line of the table, its scheme and mesh padded to `widths`."""
    step, memory = e.step, e.memory
    mesh = _mesh(e)
    parts = (memory.params_bytes, memory.grads_bytes, memory.optimizer_bytes, memory.activations_bytes)
    gigabytes = " ".join(f"{fmt(b, 'B'):>8}" for b in (*parts, memory.total_bytes))
    times = " ".join(f"{fmt(t, 's'):>8}" for t in (step.roofline_s, step.roofline_math_s, step.t_comms))
    mfu = fmt(100 * e.mfu_expected, "%", digits=2)
    return (
        f"{rank:>3}  {e.scheme:<{widths[0]}} {mesh:<{widths[1]}} {fmt(e.expected_s, 's'):>8} {mfu:>5} {times} "
        f"{step.bound:<13} "
        f"{gigabytes}  {e.reason}"
    )


def _runs_lines(whole_runs: dict[str, runs.TrainingRun]) -> list[str]:
    """Days, chip-hours and cost of training on --tokens at each layout's expected step time."""
    lines = []
    for who, run in whole_runs.items():
        cost = (
            f"${fmt(run.cost_usd)} at ${fmt(run.price_usd_per_chip_hour or 0)} per chip-hour"
            if run.cost_usd is not None
            else "no price cited for this chip (--price)"
        )
        lines.append(
            f"{who}: {fmt(run.tokens)} tokens in {fmt(run.days, digits=3)} days, {fmt(run.chip_hours)} chip-hours, "
            f"{cost}"
        )
    return [*lines, ""] if lines else []


def _plan_table(
    plan: planner.TrainingPlan,
    top: int,
    calibration: str | None = None,
    yours: planner.PlanEntry | None = None,
    whole_runs: dict[str, runs.TrainingRun] | None = None,
) -> str:
    unit = "nodes" if get_chip(plan.chip).family == "gpu" else "pods"
    pods = f"{fmt(plan.pods)} {unit} of " if plan.pods > 1 else "one slice "
    shape = "x".join(str(s) for s in plan.slice_shape)
    shown = plan.entries if top <= 0 else plan.entries[:top]
    rows = [*([yours] if yours is not None else []), *shown]
    widths = (max([20, *(len(e.scheme) for e in rows)]), max([40, *(len(_mesh(e)) for e in rows)]))
    lines = [
        *_nothing_fits(plan, yours),
        f"{plan.model} on {fmt(plan.n_chips)} {plan.chip} ({pods}{shape}), {fmt(plan.batch_tokens)} tokens per step "
        f"({fmt(plan.batch_tokens // plan.seq_len)} sequences of {fmt(plan.seq_len)})",
        f"text's FSDP degree for FSDP+TP: X_opt = sqrt(B M_X N / (F M_Y)) = {fmt(round(plan.text_fsdp_degree))} "
        "(M_X = 2, M_Y = 1); * marks the mesh closest to it",
        "",
        "step: the expected step time, the roofline plus each term it leaves out at the chip's measured rates "
        "(--json lists them); MFU at that time; bound: the book's roofline, max(math, comms), which no step beats; "
        "math: the model's FLOPs per chip at the peak; per chip: parameters, gradients, optimizer state, "
        "activations, total",
        *_rates_line(plan.chip, calibration),
        "",
        *_runs_lines(whole_runs or {}),
        f"{'#':>3}  {'scheme':<{widths[0]}} {'mesh':<{widths[1]}} {'step':>8} {'MFU':>5} {'bound':>8} {'math':>8} "
        f"{'comms':>8} {'bound by':<13} {'params':>8} {'grads':>8} {'optim':>8} {'acts':>8} {'total':>8}  why",
    ]
    if yours is not None:
        lines.append(_row(yours, "you", widths))
    lines += [_row(e, str(e.rank), widths) for e in shown]
    if len(shown) < len(plan.entries):
        lines.append(f"... {len(plan.entries) - len(shown)} more (--top 0 shows all)")
    return "\n".join(lines)


def _yours(args: argparse.Namespace, model: TransformerConfig, chip: Any, best: planner.PlanEntry) -> Any:
    """Your --layout, evaluated as the planner's rows are; None without one."""
    if args.layout is None:
        return None
    fields = parse_fields(args.layout, "--layout", _LAYOUT_FIELDS)
    fields |= {k: v for k, v in (("microbatches", args.microbatches), ("zero", args.zero)) if v is not None}
    layout = Layout(**fields)
    if layout.n_chips != args.chips:
        raise ValueError(
            f"--layout={args.layout!r}: {layout.n_chips:,} chips, but --chips={args.chips:,}; "
            "allowed: degrees whose product is --chips"
        )
    return planner.evaluate(
        model, chip, layout, batch_tokens=args.batch_tokens, seq_len=args.seq, checkpoints_per_layer=args.checkpoints,
        remat=args.remat, optimizer=args.optimizer, matmul_dtype=args.matmul_dtype,
        virtual_stages=args.virtual_stages, overlap_grad_reduce=args.overlap_grad_reduce, best=best,
    )  # fmt: skip


def _plan(args: argparse.Namespace) -> str:
    model = _model(args)
    _check_scale(model, chips=args.chips, tokens=args.seq, arg="--seq", batch_tokens=args.batch_tokens)
    chip = with_calibration(args.chip, args.calibration)
    plan = planner.plan_training(
        model,
        chip,
        args.chips,
        batch_tokens=args.batch_tokens,
        seq_len=args.seq,
        checkpoints_per_layer=args.checkpoints,
        whole_sequences=not args.partial_sequences,
    )
    yours = _yours(args, model, chip, plan.best)
    whole_runs = {}
    if args.tokens is not None:
        for who, entry in (("your layout", yours), ("the best layout", plan.best)):
            if entry is not None:
                whole_runs[who] = runs.run_of_step(
                    model, step=entry.step, tokens=args.tokens, price_usd_per_chip_hour=args.price
                )
    if args.json:
        text = _plan_json(plan, yours, whole_runs)
    else:
        text = _plan_table(plan, args.top, args.calibration, yours, whole_runs)
    if plan.best.memory.fits is False or (yours is not None and not yours.fits):
        raise NothingFits(text)
    return text


# ----- serve -----------------------------------------------------------------------------------------


def _add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="decode latency and throughput against batch size",
        description="Decode step time, throughput and cost per batch size (book_lib.inference.decode_step_time).",
    )
    serve.add_argument("--model", required=True, help=MODEL_HELP)
    serve.add_argument("--chip", required=True, help="a book_lib.hardware chip, e.g. tpu-v5e")
    serve.add_argument("--chips", required=True, type=_count("--chips"), help="chips of one slice, e.g. 8 (a 2x4)")
    serve.add_argument("--context", required=True, type=_count("--context"), help="tokens in each KV cache, e.g. 8192")
    serve.add_argument(
        "--prompt", type=_count("--prompt"), help="prompt tokens per request: adds prefill and requests/s"
    )
    serve.add_argument("--output", type=_count("--output"), help="generated tokens per request (with --prompt)")
    serve.add_argument("--dtype", choices=inference.SERVING_DTYPES, default="bf16", help="weights and KV cache")
    serve.add_argument("--batches", help="comma-separated batch sizes (default: powers of 2 up to the largest fit)")
    serve.add_argument("--calibration", help=CALIBRATION_HELP)
    serve.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    serve.set_defaults(run=_serve)


def _serve_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    _check_scale(args.model, chips=args.chips, tokens=args.context, arg="--context")
    dtypes = {"param_dtype": args.dtype, "kv_dtype": args.dtype}
    if args.batches:
        batches = [parse_count(b, "--batches") for b in args.batches.split(",")]
    else:
        largest = inference.max_batch(args.model, args.chip, args.chips, context_len=args.context, **dtypes)
        batches = [2**i for i in range(max(largest, 1).bit_length())]
    chip = with_calibration(args.chip, args.calibration)
    steps = [
        inference.decode_step_time(args.model, chip, args.chips, batch=b, context_len=args.context, **dtypes)
        for b in batches
    ]
    rows = []
    for s in steps:
        try:
            usd = inference.cost_per_million_tokens(
                args.chip, tokens_per_s_per_chip=s.batch / s.expected_s / args.chips
            )
        except ValueError:
            usd = None
        rows.append(
            {"batch": s.batch, "roofline_s": s.roofline_s, "expected_s": s.expected_s,
             "t_ici_latency_s": s.t_ici_latency, "t_lower_s": s.t_lower, "t_upper_s": s.t_upper, "bound": s.bound,
             "t_kv_s": s.t_kv, "t_weights_s": s.t_weights, "t_math_s": s.t_math, "t_ici_s": s.t_ici,
             "tokens_per_s": s.batch / s.expected_s, "tokens_per_s_per_chip": s.batch / s.expected_s / args.chips,
             "tokens_per_s_bound": s.tokens_per_s,
             "usd_per_million_tokens": usd, "memory_bytes": s.memory_bytes, "fits": s.fits, "stages": s.stages,
             "t_send_s": s.t_send,
             **_requests(args, s.batch)}
        )  # fmt: skip
    return rows


def _requests(args: argparse.Namespace, batch: int) -> dict[str, float]:
    """Prefill, latency per request and requests/s at `batch` (`serving.request_mix`); {} without --prompt."""
    if args.prompt is None and args.output is None:
        return {}
    if args.prompt is None or args.output is None:
        missing = "--prompt" if args.prompt is None else "--output"
        raise ValueError(f"{missing}=None: a request mix needs both --prompt and --output; allowed: two counts")
    if args.prompt + args.output > args.context:
        raise ValueError(
            f"--output={args.output}: with --prompt={args.prompt} more than the --context={args.context} cache holds; "
            f"allowed: a --context of at least {args.prompt + args.output}"
        )
    dtypes = {"param_dtype": args.dtype, "kv_dtype": args.dtype}
    mix = serving.request_mix(
        args.model, args.chip, args.chips, batch=batch, prompt_len=args.prompt, output_len=args.output, **dtypes
    )
    prefill = inference.prefill_step(
        args.model, with_calibration(args.chip, args.calibration), args.chips, prompt_len=args.prompt,
        param_dtype=args.dtype,
    )  # fmt: skip
    return {"ttft_s": prefill.expected_s, "prefill_bound_s": prefill.roofline_s, "prefill_s": mix.prefill_s,
            "request_latency_s": mix.latency_s, "requests_per_s": mix.requests_per_s}  # fmt: skip


def _serve_nothing_fits(args: argparse.Namespace, rows: list[dict[str, Any]]) -> list[str]:
    """The headline when no batch fits in HBM, with the slice that would hold one sequence; else none."""
    if any(r["fits"] for r in rows):
        return []
    dtypes = {"param_dtype": args.dtype, "kv_dtype": args.dtype}
    try:
        chips = inference.min_chips(args.model, args.chip, batch=1, context_len=args.context, **dtypes)
        need = f"a slice of {chips} chips"
    except ValueError:
        need = "more than a whole pod"
    return [
        f"NOTHING FITS: one sequence of {fmt(args.context)} tokens needs {need} in {args.dtype}; "
        "try more --chips, a smaller --dtype or a shorter --context.",
        "",
    ]


def _serve(args: argparse.Namespace) -> str:
    rows = _serve_rows(args)
    text = json.dumps(rows, indent=2) if args.json else _serve_table(args, rows)
    if not any(r["fits"] for r in rows):
        raise NothingFits(text)
    return text


def _serve_table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> str:
    lines = [
        *_serve_nothing_fits(args, rows),
        f"{get_model(args.model).name} on {args.chips} {get_chip(args.chip).name}"
        + (f" ({rows[0]['stages']} nodes, the layers pipelined over them)" if rows[0]["stages"] > 1 else "")
        + f", {fmt(args.context)}-token context, {args.dtype} weights and KV cache"
        + (
            f"; requests of {fmt(args.prompt)} prompt and {fmt(args.output)} output tokens"
            if "prefill_s" in rows[0]
            else ""
        ),
        "",
        "step: the expected decode step, at the chip's measured rates with each collective's and kernel's fixed "
        "cost; tok/s at that step; bound: the book's roofline, which no step beats; bound by: its largest part "
        "(kv: reading the KV caches; weights; math; ici; sends between nodes)"
        + ("; TTFT: time to first token, the expected prefill of one prompt" if "prefill_s" in rows[0] else ""),
        *_rates_line(get_chip(args.chip).name, args.calibration),
        "",
        f"{'batch':>6} {'step':>9} {'tok/s':>9} {'tok/s/chip':>10} {'bound':>9} {'bound by':<8} {'$/M tok':>8} "
        f"{'memory':>8}  fits" + ("      TTFT    request  requests/s" if "prefill_s" in rows[0] else ""),
    ]
    for r in rows:
        usd = "-" if r["usd_per_million_tokens"] is None else fmt(r["usd_per_million_tokens"])
        fits = "yes" if r["fits"] else "NO "
        mix = (
            f"  {fmt(r['ttft_s'], 's'):>8} {fmt(r['request_latency_s'], 's'):>10} {fmt(r['requests_per_s']):>11}"
            if "prefill_s" in r
            else ""
        )
        lines.append(
            f"{r['batch']:>6} {fmt(r['expected_s'], 's'):>9} {fmt(r['tokens_per_s']):>9} "
            f"{fmt(r['tokens_per_s_per_chip']):>10} {fmt(r['roofline_s'], 's'):>9} {r['bound']:<8} "
            f"{usd:>8} {fmt(r['memory_bytes'], 'B'):>8}  {fits}{mix}"
        )
    return "\n".join(lines)


# ----- calibrate -------------------------------------------------------------------------------------


def _add_calibrate(commands: Any) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="measure the achieved rates the expected times use, on this machine's device",
        description="Time matmuls, a copy, flash attention, a chain of tiny kernels and (on 2+ devices) the "
        "collectives with JAX, print each rate beside the cited one, and write a profile for --calibration "
        "(book_lib.calibrate).",
    )
    calibrate.add_argument(
        "--chip", help="the chip whose datasheet the rates are divided by (default: the device's own)"
    )
    calibrate.add_argument("--output", default="calibration.json", help="the profile to write (default %(default)s)")
    calibrate.add_argument("--quick", action="store_true", help="small sizes: seconds on a CPU (for CI)")
    calibrate.set_defaults(run=_calibrate)


def _calibrate(args: argparse.Namespace) -> str:
    from book_lib import calibrate, devices

    chip = None if args.chip is None else get_chip(args.chip)
    devices.setup()
    profile = calibrate.measure(chip=chip, mode="quick" if args.quick else "full")
    with open(args.output, "w") as out:
        out.write(profile.to_json())
    return calibrate.report(profile) + f"\n\nwrote {args.output}: pass it as --calibration to plan and serve"


# ----- entry point -----------------------------------------------------------------------------------

COMMANDS: tuple[Callable[[Any], None], ...] = (_add_plan, _add_serve, _add_calibrate)


def build_parser() -> argparse.ArgumentParser:
    """The parser with one subcommand per entry of `COMMANDS`."""
    parser = argparse.ArgumentParser(prog="python -m book_lib", description="book_lib's cost models from a shell.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    for add in COMMANDS:
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0; 1 when nothing fits, the table printed; 2 for bad input,
    with the message on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        print(args.run(args))
    except NothingFits as refused:
        print(refused)
        return 1
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
