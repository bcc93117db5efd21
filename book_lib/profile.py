"""Profile a JAX program: its trace, its compiled HLO and its memory, read without TensorBoard.

`capture` runs a function a few times under `jax.profiler.trace`, then reads the Chrome-trace file
the profiler writes (`plugins/profile/<run>/<host>.trace.json.gz`) into one `OpEvent` per XLA op
execution. Which events are XLA ops differs by backend: the CPU and GPU runtimes tag each with
its HLO instruction (`args.hlo_op`), while a TPU's "XLA Ops" line is named by the instruction
itself. Both are matched against the compiled program's own instructions (`hlo_ops`), so the
op of every event, and whether it is communication, comes from the HLO rather than from a guess.

Book: Part 9 (How to Profile TPU Programs): "The JAX Profiler", "Trace Viewer", "How to Read an
XLA Op", "Memory Profile".
"""

from __future__ import annotations

import gzip
import json
import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from book_lib import checks, collectives, hlo, hlo_arrays

if TYPE_CHECKING:
    import jax

__all__ = [
    "HloOp",
    "hlo_ops",
    "dot_flops",
    "matmul_ops",
    "category",
    "OpEvent",
    "OpTime",
    "Profile",
    "parse_trace",
    "op_table",
    "capture",
    "MemoryReport",
    "memory_report",
]

# "ROOT %name = shape op(operands), attributes": the shape may be a tuple with spaces inside.
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+(?P<op>[a-z][\w\-]*)\((?P<args>[^)]*)\)"
)
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
# Collective spellings in op, kernel and computation names (`collectives.NAMES`: HLO, jax.lax, NCCL),
# compared lowercased without - and _, and any NCCL kernel.
_COMM_WORDS = tuple(dict.fromkeys(("nccl", *(
    getattr(names, field).lower().replace("-", "").replace("_", "")
    for names in collectives.NAMES.values() for field in ("hlo", "lax", "primitive", "nccl")
))))  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class HloOp:
    """One instruction of a compiled HLO program.

    Attributes:
        name: its unique name in the module (`dot.4`, `fusion.3`).
        opcode: the HLO op (`dot`, `fusion`, `all-reduce-start`, `custom-call`).
        dtype: element type of the result (`f32`, `bf16`), or `""` when the result is a tuple.
        shape: dimensions of the result (elements), `()` for a scalar or a tuple.
        operands: names of the instructions it reads.
        calls: the computation it calls (a fusion's body), or `""`.
        computation: the computation it belongs to (`main...` for the entry).
        line: the instruction as printed, without its metadata.
    """

    name: str
    opcode: str
    dtype: str
    shape: tuple[int, ...]
    operands: tuple[str, ...]
    calls: str
    computation: str
    line: str

    @property
    def category(self) -> str:
        """ "communication" for a collective (or a fusion that calls one), else "compute"."""
        return category(f"{self.opcode} {self.calls}")


def category(name: str) -> str:
    """ "communication" when `name` (an HLO op, kernel or event name) spells a collective, else "compute".

    Tolerant of every backend's spelling: `all-reduce-start`, `all_gather`, `psum`,
    `ncclDevKernel_AllReduce`, `all-reduce-scatter` fusions; compared lowercased without - and _.
    """
    if not isinstance(name, str):
        raise ValueError(f"name={name!r}: not a string; allowed: an op or event name")
    flat = name.lower().replace("-", "").replace("_", "")
    return "communication" if any(word in flat for word in _COMM_WORDS) else "compute"


def _parse_instruction(line: str, computation: str) -> HloOp | None:
    match = _INSTRUCTION.match(line)
    if not match:
        return None
    arrays = hlo_arrays.find_arrays(match["shape"]) if not match["shape"].startswith("(") else []
    operands = tuple(re.findall(r"%([\w.\-]+)", match["args"]))
    calls = _CALLS.search(line)
    return HloOp(
        name=match["name"],
        opcode=match["op"],
        dtype=arrays[0].dtype if arrays else "",
        shape=arrays[0].shape if arrays else (),
        operands=operands,
        calls=calls.group(1) if calls else "",
        computation=computation,
        line=re.sub(r",\s*metadata=\{[^}]*\}", "", line.strip()),
    )


def hlo_ops(compiled: jax.stages.Compiled | str) -> dict[str, HloOp]:
    """Every instruction of a compiled program, by name, with its op, result shape and operands.

    Reads `compiled.as_text()` (`book_lib.hlo.hlo_text`), the optimised HLO that the profiler's
    op names refer to. Instructions inside fusion bodies are included (their `computation`
    names the body); names are unique in an HLO module.

    Args:
        compiled: a `jax.stages.Compiled` or its `as_text()`.

    Raises:
        ValueError: the text holds no HLO instruction.
    """
    ops: dict[str, HloOp] = {}
    computation = ""
    for line in hlo.hlo_text(compiled).splitlines():
        if "=" not in line.split("(")[0] and (header := _COMPUTATION.match(line)):
            computation = header["name"]
            continue
        op = _parse_instruction(line, computation)
        if op is not None:
            ops[op.name] = op
    if not ops:
        raise ValueError("compiled=<text>: no HLO instruction found; allowed: the as_text() of a compiled program")
    return ops


def dot_flops(op: HloOp, ops: Mapping[str, HloOp]) -> int:
    """FLOPs of one `dot` instruction: 2 x (elements of its result) x (length of its contraction).

    flops = 2 * prod(result shape) * prod(lhs dims named in lhs_contracting_dims), a multiply and
    an add per term; the contracting sizes come from the shape of its first operand in `ops`.
    Book: Part 1 (Rooflines), matmul FLOPs; Part 9, "How to Read an XLA Op".

    Raises:
        ValueError: `op` is not a dot, or its first operand is not in `ops`.
    """
    if op.opcode != "dot":
        raise ValueError(f"op={op.name!r}: a {op.opcode!r}, not a dot; allowed: an HloOp with opcode 'dot'")
    lhs = ops.get(op.operands[0]) if op.operands else None
    if lhs is None:
        raise ValueError(
            f"ops=<{len(ops)} ops>: no operand {op.operands[:1]} of {op.name!r}; allowed: hlo_ops of its program"
        )
    found = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", op.line)
    contracted = [lhs.shape[int(d)] for d in found.group(1).split(",") if d] if found else []
    return 2 * math.prod(op.shape) * math.prod(contracted)


def matmul_ops(ops: Mapping[str, HloOp]) -> frozenset[str]:
    """Names of the instructions that multiply matrices: a `dot` or `convolution`, a fusion whose
    body holds one, or a custom call into a GEMM library (cuBLAS on GPU)."""
    bodies = {o.computation for o in ops.values() if o.opcode in ("dot", "convolution")}
    return frozenset(
        o.name
        for o in ops.values()
        if o.opcode in ("dot", "convolution")
        or (o.opcode == "fusion" and o.calls in bodies)
        or (o.opcode == "custom-call" and "gemm" in o.line.lower())
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OpEvent:
    """One execution of one XLA op in a trace.

    Attributes:
        name: the HLO instruction (`fusion.3`); for a GPU kernel, the instruction that launched it.
        opcode: its HLO op when the program's HLO was given (`dot`, `all-reduce`), else `""`.
        category: "compute" or "communication" (from the HLO when known, else from the name).
        start_s: start, seconds after the first op of the trace began.
        duration_s: how long it ran (s).
        lane: where it ran: `device 3`, or the trace's thread or line name.
    """

    name: str
    opcode: str
    category: str
    start_s: float
    duration_s: float
    lane: str


def _load_events(path: Path) -> tuple[list[dict[str, Any]], dict[Any, str], dict[Any, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        events = json.load(f).get("traceEvents", [])
    processes = {e.get("pid"): e["args"]["name"] for e in events if e.get("name") == "process_name"}
    threads = {(e.get("pid"), e.get("tid")): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    return [e for e in events if e.get("ph") == "X" and "dur" in e], processes, threads


def _op_name(event: dict[str, Any], tagged: bool, ops: Mapping[str, HloOp], on_device: bool, module: str) -> str:
    """The HLO instruction an event ran, or "" when the event is not an XLA op of `module`."""
    args = event.get("args") or {}
    if tagged:  # CPU and GPU runtimes: the instruction is an argument of the event
        if module and args.get("hlo_module", module) != module:
            return ""
        return str(args.get("hlo_op", ""))
    name = str(event.get("name", ""))  # TPU: device lines named after the instruction itself
    return name if on_device and name in ops else ""


def parse_trace(path: str | Path, *, ops: Mapping[str, HloOp] | None = None, module: str = "") -> tuple[OpEvent, ...]:
    """The XLA op executions in a Chrome-trace file written by `jax.profiler.trace`, in time order.

    An event is an op when the runtime tagged it with an HLO instruction (`args.hlo_op`, CPU and
    GPU) or, in a trace without such tags (TPU), when it ran on a `/device:` line and is named
    after an instruction of `ops`. An op is communication when it, or the computation it calls (an
    `async-start` or a fusion body), runs a collective. Times: Chrome-trace microseconds, in seconds.

    Args:
        path: the `.trace.json.gz` (or plain `.json`) file.
        ops: the program's instructions (`hlo_ops`), for each event's op and category.
        module: keep only ops of this HLO module (`jit_step`); "" keeps all.

    Raises:
        ValueError: no such file.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path={str(path)!r}: no such file; allowed: a .trace.json.gz that jax.profiler.trace wrote")
    ops = ops or {}
    events, processes, threads = _load_events(path)
    tagged = any("hlo_op" in (e.get("args") or {}) for e in events)
    comm_bodies = {o.computation for o in ops.values() if o.category == "communication"}  # async and fusion bodies
    found = []
    for e in events:
        on_device = processes.get(e.get("pid"), "").startswith("/device:")
        name = _op_name(e, tagged, ops, on_device, module)
        if not name:
            continue
        args = e.get("args") or {}
        lane = (
            f"device {args['device_ordinal']}"
            if "device_ordinal" in args
            else threads.get((e.get("pid"), e.get("tid")), "")
        )
        op = ops.get(name)
        kind = category(f"{name} {e.get('name', '')}") if op is None else op.category
        kind = "communication" if op is not None and op.calls in comm_bodies else kind
        found.append((float(e["ts"]), float(e["dur"]), name, op.opcode if op else "", kind, lane))
    t0 = min((f[0] for f in found), default=0.0)
    return tuple(
        OpEvent(name=n, opcode=o, category=k, start_s=(ts - t0) * 1e-6, duration_s=dur * 1e-6, lane=lane)
        for ts, dur, n, o, k, lane in sorted(found)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTime:
    """One row of an op table: every execution of one HLO instruction in a trace.

    Attributes:
        name: the instruction; opcode, category: as in `OpEvent`.
        count: executions (over all runs and devices).
        total_s: their summed duration (s); mean_s = total_s / count (s).
        share: total_s over the summed duration of every op in the trace (fraction).
    """

    name: str
    opcode: str
    category: str
    count: int
    total_s: float
    mean_s: float
    share: float


def op_table(events: Sequence[OpEvent]) -> tuple[OpTime, ...]:
    """Events grouped by instruction, longest total first: count, total, mean = total / count, share.

    share = total_s / sum of every op's duration, so the shares add up to 1.

    Raises:
        ValueError: no events.
    """
    if not events:
        raise ValueError("events=(): no op events; allowed: the non-empty result of parse_trace or capture")
    groups: dict[str, list[OpEvent]] = {}
    for e in events:
        groups.setdefault(e.name, []).append(e)
    everything = sum(e.duration_s for e in events) or 1.0
    rows = []
    for name, group in groups.items():
        total = sum(e.duration_s for e in group)
        first = group[0]
        rows.append(
            OpTime(name=name, opcode=first.opcode, category=first.category, count=len(group), total_s=total,
                   mean_s=total / len(group), share=total / everything)
        )  # fmt: skip
    return tuple(sorted(rows, key=lambda r: (-r.total_s, r.name)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What `capture` measured and read.

    Attributes:
        events: every op execution, in time order (`OpEvent`).
        ops: the op table (`op_table(events)`), longest total first.
        hlo: the program's instructions by name (`hlo_ops`).
        collectives: collectives of the compiled program (`book_lib.hlo.collective_counts`).
        n_runs: traced calls of the function.
        compute_s, communication_s: summed op time of each category over all runs and devices (s).
    """

    events: tuple[OpEvent, ...]
    ops: tuple[OpTime, ...]
    hlo: Mapping[str, HloOp]
    collectives: Mapping[str, int]
    n_runs: int
    compute_s: float
    communication_s: float

    @property
    def communication_fraction(self) -> float:
        """communication_s / (compute_s + communication_s): the share of op time spent communicating."""
        return self.communication_s / ((self.compute_s + self.communication_s) or 1.0)


def _compile(
    fn: Callable[..., Any] | jax.stages.Compiled, args: tuple[Any, ...], *, op_by_op: bool = False
) -> jax.stages.Compiled:
    """`fn` compiled for `args`; with `op_by_op`, on a GPU without command buffers.

    XLA's GPU backend replays a step's kernels as one CUDA graph (a "command buffer"), which a trace
    shows as a single event; turned off, every op is its own event, as on a TPU or a CPU.
    """
    import jax

    if isinstance(fn, jax.stages.Compiled):
        return fn
    if not callable(fn):
        raise ValueError(f"fn={fn!r}: not callable; allowed: a function, a jax.jit function or a Compiled")
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    lowered = jitted.lower(*args)
    if op_by_op and jax.default_backend() == "gpu":
        return lowered.compile(compiler_options={"xla_gpu_enable_command_buffer": ""})
    return lowered.compile()


def capture(fn: Callable[..., Any], *args: Any, n_runs: int = 3, n_warmup: int = 1) -> Profile:
    """Trace `n_runs` calls of `jax.jit(fn)(*args)` after `n_warmup` untraced ones, and read the trace.

    The function is compiled once (on a GPU without command buffers, so that each op is its own
    event: `_compile`); the compiled program runs (and is waited for) under
    `jax.profiler.trace` into a temporary directory, whose `.trace.json.gz` is parsed with
    `parse_trace` against the program's own HLO. communication_s sums the ops whose HLO op is a
    collective; compute_s the rest.

    Args:
        fn: a function, a `jax.jit` function, or a `jax.stages.Compiled`.
        *args: its arguments (arrays placed, and sharded, as they should run).
        n_runs: traced calls (count >= 1); n_warmup: untraced calls first (count >= 0).

    Raises:
        ValueError: bad counts, a non-callable `fn`; RuntimeError: the profiler wrote no trace.
    """
    import jax

    checks.count("n_runs", n_runs)
    checks.count("n_warmup", n_warmup, minimum=0)
    compiled = _compile(fn, args, op_by_op=True)
    for _ in range(n_warmup):
        jax.block_until_ready(compiled(*args))
    ops = hlo_ops(compiled)
    module = re.search(r"HloModule\s+([\w.\-]+)", hlo.hlo_text(compiled))
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder):
            for _ in range(n_runs):
                jax.block_until_ready(compiled(*args))
        files = sorted(Path(folder).rglob("*.trace.json.gz"))
        if not files:
            raise RuntimeError(f"jax.profiler.trace wrote no .trace.json.gz under {folder}")
        events = parse_trace(files[-1], ops=ops, module=module.group(1) if module else "")
    comm = sum(e.duration_s for e in events if e.category == "communication")
    return Profile(
        events=events, ops=op_table(events) if events else (), hlo=ops, collectives=hlo.collective_counts(compiled),
        n_runs=n_runs, compute_s=sum(e.duration_s for e in events) - comm, communication_s=comm,
    )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryReport:
    """Device memory a compiled program needs, as XLA planned it (bytes, per device).

    Attributes:
        argument_bytes: its inputs; output_bytes: its results; temp_bytes: scratch buffers;
        alias_bytes: outputs written into donated inputs (counted in both);
        generated_code_bytes: the program itself (0 on CPU, where code lives in host memory).
    """

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int
    generated_code_bytes: int

    @property
    def total_bytes(self) -> int:
        """argument + output + temp + generated code - alias: the peak the program may hold (bytes)."""
        return self.argument_bytes + self.output_bytes + self.temp_bytes + self.generated_code_bytes - self.alias_bytes


def memory_report(fn: Callable[..., Any] | jax.stages.Compiled, *args: Any) -> MemoryReport:
    """`compiled.memory_analysis()` of `jax.jit(fn)` on `args` (or of a Compiled) as a `MemoryReport`.

    Book: Part 9, "Memory Profile" (what the profiler's memory viewer draws over time, in one number each).

    Raises:
        ValueError: a non-callable `fn`; RuntimeError: the backend gives no memory analysis.
    """
    stats = _compile(fn, args).memory_analysis()
    if stats is None:
        raise RuntimeError("this backend gives no memory_analysis() for compiled programs")
    return MemoryReport(
        argument_bytes=int(stats.argument_size_in_bytes),
        output_bytes=int(stats.output_size_in_bytes),
        temp_bytes=int(stats.temp_size_in_bytes),
        alias_bytes=int(stats.alias_size_in_bytes),
        generated_code_bytes=int(stats.generated_code_size_in_bytes),
    )
