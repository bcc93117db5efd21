"""Command line of book_lib: `python -m book_lib <command> ...`.

    python -m book_lib plan --model llama3-70b --chip tpu-v5p --chips 8960 --batch-tokens 4M --seq 4096
    python -m book_lib plan ... --json
    python -m book_lib serve --model llama3-70b --chip tpu-v5e --chips 8 --context 8192 --dtype int8
    python -m book_lib calibrate --output h100.json        (then: plan ... --calibration h100.json)

Each command is a function that adds its subparser and sets `run`, the function that carries it
out (`_add_plan` and `_plan`); a new command (`serve`, say) adds one more pair to `COMMANDS`. Bad
input prints one line, `error: ...`, to stderr and exits with status 2; nothing prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from book_lib import inference, parallelism, planner
from book_lib.efficiency import load_calibration
from book_lib.hardware import get_chip, with_calibration
from book_lib.models import get_model
from book_lib.numfmt import fmt

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
MODEL_HELP = "a preset of book_lib.models (models.model_names() lists them), e.g. llama3-70b"


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


def _check_scale(model: str, *, chips: int, tokens: int, arg: str, batch_tokens: int | None = None) -> None:
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
    plan.add_argument("--model", required=True, help=MODEL_HELP)
    plan.add_argument("--chip", required=True, help="a book_lib.hardware chip, e.g. tpu-v5p")
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


def _plan_json(plan: planner.TrainingPlan) -> str:
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
    return json.dumps({**head, "entries": [_entry_json(e) for e in plan.entries]}, indent=2)


def _nothing_fits(plan: planner.TrainingPlan) -> list[str]:
    """The headline when no layout fits in HBM, with what would make the leanest fit; else none."""
    if plan.best.memory.fits is not False:
        return []
    memory = min((e.memory for e in plan.entries), key=lambda m: m.total_bytes)
    short = memory.total_bytes / (memory.hbm_bytes or 1)
    return [
        f"NOTHING FITS: the leanest layout needs {fmt(memory.total_bytes, 'B')} per chip of "
        f"{fmt(memory.hbm_bytes or 0, 'B')}. Try about {math.ceil(short)}x the chips, or fewer tokens "
        "per step (--batch-tokens), or fewer checkpoints per layer (--checkpoints).",
        "",
    ]


def _rates_line(chip: str, calibration: str | None) -> list[str]:
    """Which rates the expected times use: the figures `calibrate` measured, or the cited ones."""
    if calibration is None:
        return ["rates: cited measurements (book_lib.efficiency); --calibration FILE uses your own"]
    cal = load_calibration(calibration)
    measured = ", ".join(name for name, _ in cal.figures) or "none (the profile holds rates only)"
    return [f"rates measured on {cal.device_kind}, {cal.date}, jax {cal.jax_version} ({calibration}): {measured}; "
            f"the rest cited for {chip}"]  # fmt: skip


def _plan_table(plan: planner.TrainingPlan, top: int, calibration: str | None = None) -> str:
    pods = f"{plan.pods} pods of " if plan.pods > 1 else "one slice "
    shape = "x".join(str(s) for s in plan.slice_shape)
    lines = [
        *_nothing_fits(plan),
        f"{plan.model} on {fmt(plan.n_chips)} {plan.chip} ({pods}{shape}), {fmt(plan.batch_tokens)} tokens per step "
        f"({fmt(plan.batch_tokens // plan.seq_len)} sequences of {fmt(plan.seq_len)})",
        f"text's FSDP degree for FSDP+TP: X_opt = sqrt(B M_X N / (F M_Y)) = {fmt(round(plan.text_fsdp_degree))} "
        "(M_X = 2, M_Y = 1); * marks the mesh closest to it",
        "",
        "step s: the expected step time, the roofline plus each term it leaves out at the chip's measured rates "
        "(--json lists them); MFU at that time; bound s: the book's roofline, max(math, comms), which no step beats",
        *_rates_line(plan.chip, calibration),
        "",
        f"{'#':>3}  {'scheme':<20} {'mesh':<40} {'step s':>8} {'MFU':>5} {'bound s':>8} {'math s':>8} "
        f"{'comms s':>8} {'bound by':<13} {'GB/chip':>8}  why",
    ]
    shown = plan.entries if top <= 0 else plan.entries[:top]
    for e in shown:
        mesh = " ".join(f"{k}={v}" for k, v in e.step.mesh.items()) + (" *" if e.near_text_fsdp_degree else "")
        lines.append(
            f"{e.rank:>3}  {e.scheme:<20} {mesh:<40} {e.expected_s:>8.3f} {e.mfu_expected:>5.0%} {e.roofline_s:>8.3f} "
            f"{e.step.t_math:>8.3f} {e.step.t_comms:>8.3f} {e.step.bound:<13} {e.memory.total_bytes / 1e9:>8.1f}  "
            f"{e.reason}"
        )
    if len(shown) < len(plan.entries):
        lines.append(f"... {len(plan.entries) - len(shown)} more (--top 0 shows all)")
    return "\n".join(lines)


def _plan(args: argparse.Namespace) -> str:
    _check_scale(args.model, chips=args.chips, tokens=args.seq, arg="--seq", batch_tokens=args.batch_tokens)
    plan = planner.plan_training(
        args.model,
        with_calibration(args.chip, args.calibration),
        args.chips,
        batch_tokens=args.batch_tokens,
        seq_len=args.seq,
        checkpoints_per_layer=args.checkpoints,
        whole_sequences=not args.partial_sequences,
    )
    return _plan_json(plan) if args.json else _plan_table(plan, args.top, args.calibration)


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
             "usd_per_million_tokens": usd, "memory_bytes": s.memory_bytes, "fits": s.fits,
             **_requests(args, s.batch)}
        )  # fmt: skip
    return rows


def _requests(args: argparse.Namespace, batch: int) -> dict[str, float]:
    """Prefill, latency per request and requests/s at `batch` (`inference.request_mix`); {} without --prompt."""
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
    mix = inference.request_mix(
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
    if args.json:
        return json.dumps(rows, indent=2)
    lines = [
        *_serve_nothing_fits(args, rows),
        f"{get_model(args.model).name} on {args.chips} {get_chip(args.chip).name}, "
        f"{fmt(args.context)}-token context, {args.dtype} weights and KV cache"
        + (
            f"; requests of {fmt(args.prompt)} prompt and {fmt(args.output)} output tokens"
            if "prefill_s" in rows[0]
            else ""
        ),
        "",
        "step ms: the expected decode step, at the chip's measured rates with each collective's and kernel's fixed "
        "cost; tok/s at that step; bound ms: the book's roofline, which no step beats"
        + ("; TTFT: time to first token, the expected prefill of one prompt" if "prefill_s" in rows[0] else ""),
        *_rates_line(get_chip(args.chip).name, args.calibration),
        "",
        f"{'batch':>6} {'step ms':>9} {'tok/s':>9} {'tok/s/chip':>10} {'bound ms':>9} {'bound by':<8} {'$/M tok':>8} "
        f"{'GB':>7}  fits" + ("  TTFT ms  request s  requests/s" if "prefill_s" in rows[0] else ""),
    ]
    for r in rows:
        usd = "-" if r["usd_per_million_tokens"] is None else f"{r['usd_per_million_tokens']:.2f}"
        fits = "yes" if r["fits"] else "NO "
        mix = (
            f"  {r['ttft_s'] * 1e3:>7.1f} {r['request_latency_s']:>10.2f} {r['requests_per_s']:>11.2f}"
            if "prefill_s" in r
            else ""
        )
        lines.append(
            f"{r['batch']:>6} {r['expected_s'] * 1e3:>9.2f} {r['tokens_per_s']:>9,.0f} "
            f"{r['tokens_per_s_per_chip']:>10,.0f} {r['roofline_s'] * 1e3:>9.2f} {r['bound']:<8} "
            f"{usd:>8} {r['memory_bytes'] / 1e9:>7.1f}  {fits}{mix}"
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
    """Run one command; returns the exit status (0, or 2 for bad input, with the message on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        print(args.run(args))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
