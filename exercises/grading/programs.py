"""JAX answers judged on programs the grader runs itself.

The kernel hands over only a serialised `jax.export` program per probe (`recorder.export_program`).
Here, in a worker process of the grader's (`Worker`, started with 8 CPU devices and its own limits),
each program is deserialised and checked before anything runs: it targets the CPU and the grading
mesh, takes exactly the asked input types and shardings, has no side effects, calls no custom call
outside a short list of JAX's own sharding markers (so no host callback) and sends nothing to the
host (no infeed, outfeed, send or recv). Its StableHLO is read for the operations the question asks
(`JaxCheck.needs_primitives`, under their StableHLO names), the largest array (`max_elements`) and a
kernel's blocks (`kernel_blocks`). Then it is compiled here, the compiled HLO read for collectives,
and run on inputs drawn here, long after the kernel has exited, from a seed the kernel never sees
(`pipeline.probe_seed`); its values and each device's block are compared with the key's float64 reference.

Every text read (StableHLO, HLO) is the grader's own print of the program, with every quoted string
blanked first: names and source locations are the only text a student chooses, and they sit in
quotes.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import select
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from time import monotonic

import numpy as np

from book_lib import collectives
from book_lib.hlo_arrays import tensor_shapes
from exercises.keys import JaxCheck, keys_for

__all__ = ["N_DEVICES", "ALLOWED_CUSTOM_CALLS", "OPS", "Op", "stablehlo_ops", "judge_programs", "Worker", "WORKER"]

N_DEVICES = 8  # the mesh the JAX questions are graded on: devices.setup() always provides 8
MESH_AXIS = "X"
# Custom calls JAX itself emits to mark shardings and shard_map's manual regions; anything else
# (a host callback above all) is refused before the program runs.
ALLOWED_CUSTOM_CALLS = frozenset(
    {
        "Sharding",
        "SPMDFullToShardShape",
        "SPMDShardToFullShape",
        "xla.sdy.GlobalToLocalShape",
        "xla.sdy.LocalToGlobalShape",
        "xla.sdy.FuncResultSharding",
    }
)
# Operations that talk to the host: they would block the worker or carry data past the grader.
HOST_OPS = frozenset({"stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv"})
# A key's `needs_primitives` names (JAX primitives) -> the StableHLO operations that implement them.
OPS = {
    "shard_map": (
        "sdy.manual_computation",
        "custom_call:SPMDFullToShardShape",
        "custom_call:xla.sdy.GlobalToLocalShape",
    ),
    **{names.primitive: (names.stablehlo,) for names in collectives.NAMES.values()},
    "dynamic_update_slice": ("stablehlo.dynamic_update_slice",),
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_OP_NAME = re.compile(r'^(?:%[\w#:.]+(?:\s*,\s*%[\w#:.]+)*\s*=\s*)?"?([a-z_]+\.[a-z_.]+)"?')


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a StableHLO module: its name, a custom call's target, and its line with strings blanked."""

    name: str
    target: str
    text: str


def stablehlo_ops(module: str) -> list[Op]:
    """Every operation of a printed StableHLO module, one per line that starts one (locations skipped)."""
    ops = []
    for line in module.splitlines():
        stripped = line.strip()
        if stripped.startswith("#loc"):
            continue
        match = _OP_NAME.match(stripped)
        if not match:
            continue
        target = ""
        if match.group(1) == "stablehlo.custom_call":
            named = re.search(r"custom_call\s+@([\w.$-]+)", stripped) or re.search(
                r'call_target_name\s*=\s*"([^"]*)"', stripped
            )
            target = named.group(1) if named else "?"
        ops.append(Op(match.group(1), target, _STRING.sub('""', stripped)))
    return ops


def _has(ops: list[Op], primitive: str) -> bool:
    for wanted in OPS.get(primitive, (primitive,)):
        kind, _, target = wanted.partition(":")
        if any(
            op.name == kind or (target and op.name == "stablehlo.custom_call" and op.target == target) for op in ops
        ):
            return True
    return False


def _judge_kernel(check: JaxCheck, name: str, ops: list[Op]) -> str | None:
    """A grid of steps, each loading the asked blocks and multiplying them; no matmul larger than a block."""
    *inputs, out_block = (tuple(b) for b in check.kernel_blocks)
    if not any(op.name == "stablehlo.while" for op in ops):
        return f"{name}: the program has no grid of steps (no loop)"
    loaded = {
        tensor_shapes(op.text)[-1] for op in ops if op.name == "stablehlo.dynamic_slice" and tensor_shapes(op.text)
    }
    missing = [b for b in inputs if b not in loaded]
    if missing:
        return f"{name}: no step loads a block of shape {missing[0]}"
    dots = [tensor_shapes(op.text) for op in ops if op.name == "stablehlo.dot_general"]
    for shapes in dots:
        if shapes and math.prod(shapes[-1]) > math.prod(out_block):
            return f"{name}: a matmul outside the kernel's blocks produces an array of shape {shapes[-1]}"
    if not any(shapes[-3:] == [*inputs, out_block] for shapes in dots):
        return f"{name}: no matmul multiplies a {inputs[0]} block by a {inputs[1]} block"
    return None


def _blank(hlo_text: str) -> str:
    """Compiled HLO with every quoted string blanked (op names and source files are the student's text)."""
    return _STRING.sub('""', hlo_text)


def _read_program(text: object):
    from jax import export

    if not isinstance(text, str):
        raise ValueError("no program")
    return export.deserialize(bytearray(base64.b64decode(text.encode(), validate=True)))


def _check_interface(exported, check: JaxCheck, name: str, arrays: list, mesh) -> str | None:
    """The exported program's platform, devices, effects, input types and shardings, before it runs."""
    import jax

    n_devices = N_DEVICES if check.recorder == "sharded" else 1
    if tuple(exported.platforms) != ("cpu",):
        return f"{name}: the program was exported for {exported.platforms}, not for the grader's CPU"
    if exported.nr_devices != n_devices:
        return f"{name}: the program is for {exported.nr_devices} devices, not {n_devices}"
    if exported.ordered_effects or exported.unordered_effects:
        return f"{name}: the program has side effects (a host callback?): not graded"
    if len(exported.in_avals) != len(arrays) or len(exported.out_avals) != 1:
        return f"{name}: the program takes {len(exported.in_avals)} arrays and returns {len(exported.out_avals)}"
    for i, (aval, array) in enumerate(zip(exported.in_avals, arrays, strict=True)):
        if tuple(aval.shape) != array.shape or aval.dtype != array.dtype:
            return f"{name}: input {i} is {aval.str_short()}, not {array.dtype}{list(array.shape)}"
    if mesh is not None:
        for i, (got, spec) in enumerate(zip(exported.in_shardings_jax(mesh), check.in_specs, strict=True)):
            want = jax.NamedSharding(mesh, jax.P(*spec))
            if got is None or not got.is_equivalent_to(want, arrays[i].ndim):
                return f"{name}: input {i} is not sharded as P{tuple(spec)}"
    return None


def _judge_one(check: JaxCheck, name: str, sizes: tuple, statics: tuple, program: object, seed: int) -> str | None:
    import jax

    from book_lib import hlo

    try:
        exported = _read_program(program)
    except Exception:  # noqa: BLE001 (anything unreadable scores 0)
        return f"{name}: the recorded program could not be read"
    arrays, drawn_statics = check.inputs(sizes, N_DEVICES, seed)
    arrays = [np.asarray(a, dtype=np.float32) for a in arrays]  # every JAX question takes float32 arrays
    if tuple(drawn_statics) != tuple(statics):
        return f"{name}: the program was exported for other arguments"
    devices = jax.devices()[:N_DEVICES]
    mesh = None
    if check.recorder == "sharded":
        mesh = jax.make_mesh((N_DEVICES,), (MESH_AXIS,), (jax.sharding.AxisType.Explicit,), devices=devices)
    message = _check_interface(exported, check, name, arrays, mesh)
    if message:
        return message
    try:
        ops = stablehlo_ops(exported.mlir_module())
    except Exception:  # noqa: BLE001 (bytecode this jax cannot read: nothing is run)
        return f"{name}: the program's StableHLO could not be read"
    calls = sorted({op.target for op in ops if op.name == "stablehlo.custom_call"} - ALLOWED_CUSTOM_CALLS)
    if calls:
        what = f"{calls[0]!r} (a host callback or another custom call)"
        return f"{name}: the program calls {what}, which the grader does not run"
    talks = sorted({op.name for op in ops} & HOST_OPS)
    if talks:
        return f"{name}: the program talks to the host ({talks[0]}), which the grader does not run"
    for primitive in check.needs_primitives:
        if not _has(ops, primitive):
            return f"{name}: the program has no {primitive}"
    if check.max_elements is not None:
        largest = max((math.prod(s) for op in ops for s in tensor_shapes(op.text)), default=0)
        if largest >= check.max_elements(sizes):
            return f"{name}: the program holds an array of {largest} values, as large as the full score matrix"
    if check.kernel_blocks:
        message = _judge_kernel(check, name, ops)
        if message:
            return message
    if mesh is not None:
        with jax.set_mesh(mesh):
            placed = [jax.device_put(a, jax.P(*s)) for a, s in zip(arrays, check.in_specs, strict=True)]
            compiled = jax.jit(exported.call).lower(*placed).compile()
            out = compiled(*placed)
    else:
        placed = [jax.device_put(a, devices[0]) for a in arrays]
        compiled = jax.jit(exported.call).lower(*placed).compile()
        out = compiled(*placed)
    want = np.asarray(check.reference(arrays, N_DEVICES, *statics))
    bound = check.atol * (1.0 + float(np.max(np.abs(want)))) if want.size else 0.0
    got = np.asarray(out, dtype=np.float64)
    if got.shape != want.shape or not float(np.max(np.abs(got - want), initial=0.0)) <= bound:
        return f"{name}: wrong values for sizes {sizes}"
    if check.recorder == "sharded":
        shards = [np.asarray(s.data, dtype=np.float64) for s in out.addressable_shards]
        return _judge_sharded(check, name, sizes, want, shards, bound, _blank(hlo.hlo_text(compiled)))
    return None


def _judge_sharded(check: JaxCheck, name: str, sizes, want, shards, bound: float, text: str) -> str | None:
    from book_lib import hlo

    if len(shards) != N_DEVICES:
        return f"{name}: expected one block per device"
    if check.per_device and not all(
        s.shape == want.shape and float(np.max(np.abs(s - want), initial=0.0)) <= bound for s in shards
    ):
        return f"{name}: not every device holds the whole result"
    if check.block is not None and tuple(shards[0].shape) != tuple(check.block(sizes, N_DEVICES)):
        return f"{name}: device 0 holds a block of shape {tuple(shards[0].shape)}, not the asked one"
    counts = hlo.collective_counts(text)
    for op, (least, most) in check.collectives.items():
        if not least <= counts[op] <= most:
            return f"{name}: the compiled program has {counts[op]} {op}"
    if check.max_collective_elements is not None:
        limit = check.max_collective_elements(sizes, N_DEVICES)
        for op, values in hlo.collective_elements(text):
            if values > limit:
                return f"{name}: one {op} moves an array of {values} values, more than the pieces the question asks for"
    traffic = hlo.permute_traffic(text, N_DEVICES)
    for shift in check.permute_shifts:
        # each asked direction carries a real share of the data, not a token permute beside the rest
        if traffic.get(shift % N_DEVICES, 0) * 4 < sum(traffic.values()):
            side = "right (to device i + 1)" if shift > 0 else "left (to device i - 1)"
            return f"{name}: the collective-permutes send less than a quarter of their data to the {side}"
    return None


def judge_programs(check: JaxCheck, name: str, probes: list[dict], record: dict, seed: int) -> str | None:
    """None when every recorded program passes `check`, else what is wrong (no expected value named).

    Args:
        check: the question's key.
        name: the function's name, for messages.
        probes: the probes the kernel was asked to export for (`sizes`, `statics`).
        record: the kernel's record (`programs`: one {"program": base64} or {"failed": why} per probe).
        seed: the inputs' seed (the grader's own, never the kernel's: `pipeline.probe_seed`); probe i
            draws its arrays from `seed + i`.
    """
    programs = record.get("programs")
    if not isinstance(programs, list) or len(programs) != len(probes):
        return f"{name} could not be exported for the grading inputs"
    for i, (probe, entry) in enumerate(zip(probes, programs, strict=True)):
        if not isinstance(entry, dict) or "program" not in entry:
            why = entry.get("failed") if isinstance(entry, dict) else None
            return f"{name} could not be exported: {str(why)[:200]}"
        try:
            sizes, statics = tuple(probe["sizes"]), tuple(probe["statics"])
            message = _judge_one(check, name, sizes, statics, entry["program"], seed + i)
        except Exception as err:  # noqa: BLE001 (a program that fails to compile or run scores 0)
            message = f"{name} failed on the grader's mesh: {type(err).__name__}: {str(err)[:200]}"
        if message:
            return message
    return None


def serve() -> None:
    """The worker's loop: one JSON request per line on stdin, one JSON verdict per line on stdout."""
    import jax  # noqa: F401 (loaded before the first request, while the grader waits for the notebook)

    from book_lib import hlo  # noqa: F401

    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed must not corrupt the replies
    for line in sys.stdin:
        request = json.loads(line)
        key = keys_for(request["assignment"])[request["grade_id"]]
        message = judge_programs(key.check, key.names[0], request["probes"], request["record"], request["seed"])
        out.write(json.dumps({"message": message}) + "\n")
        out.flush()


class Worker:
    """The grader's JAX worker: a process with 8 CPU devices, started once and reused, killed on a timeout.

    Args:
        timeout_s: the longest one question's programs may take to compile and run.
        memory_bytes: the worker's address-space limit.
    """

    def __init__(self, timeout_s: float = 120.0, memory_bytes: int = 8 << 30):
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _start(self) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={N_DEVICES}")
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # the grader's own files stay as they were (integrity.py)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
        limits = ["prlimit", f"--as={self.memory_bytes}", "--core=0", "--"] if shutil.which("prlimit") else []
        serve = "from exercises.grading.programs import serve; serve()"
        return subprocess.Popen(
            [*limits, sys.executable, "-c", serve], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def start(self) -> None:
        """Start the worker now, if it is not running, so that it loads JAX while a notebook runs."""
        if self.pid is None:
            self._proc = self._start()

    def judge(self, assignment: str, grade_id: str, probes: list[dict], record: dict, seed: int) -> str | None:
        """The verdict of `judge_programs` for one question, from the worker (restarted when needed)."""
        self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        request = {"assignment": assignment, "grade_id": grade_id, "probes": probes, "record": record, "seed": seed}
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            self.close()
            return "the grader's JAX worker stopped: not graded"
        deadline = monotonic() + self.timeout_s
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - monotonic()))
            if ready:
                line = proc.stdout.readline()
                if not line:
                    self.close()
                    return "the program stopped the grader's JAX worker (out of memory?)"
                return json.loads(line)["message"]
            if monotonic() >= deadline:
                self.close()
                return f"the program did not finish on the grader's mesh within {self.timeout_s:g} s"

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


WORKER = Worker()  # the grader process's one worker, started at its first JAX question
