"""JAX answers judged on programs the grader runs itself.

The kernel hands over only a serialised `jax.export` program per probe (`book_lib.answer_check.export_program`).
Here, in a worker process of the grader's (`Worker`, started with 8 CPU devices and its own limits),
each program is deserialised and checked before anything runs: it targets the CPU and the grading
mesh, takes exactly the asked input types and shardings, has no side effects, calls no custom call
outside a short list of JAX's own sharding markers (so no host callback) and sends nothing to the
host (no infeed, outfeed, send or recv). Its StableHLO is read for the operations the question asks
(`JaxCheck.needs_primitives`, under their StableHLO names), the largest array (`max_elements`) and a
kernel's blocks (`kernel_blocks`). Then it is compiled here, the compiled HLO read for collectives,
by the rules of `book_lib.program_rules` (`JaxCheck.rules`: the same a student's `check` applies),
and run on inputs drawn here, long after the kernel has exited, from a seed the kernel never sees
(`pipeline.probe_seed`); its values and each device's block are compared with the key's float64 reference.

Every text read (StableHLO, HLO) is the grader's own print of the program, with every quoted string
blanked first: names and source locations are the only text a student chooses, and they sit in
quotes.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path
from time import monotonic

import numpy as np

from book_lib import program_rules
from exercises.keys import JaxCheck, keys_for

__all__ = ["N_DEVICES", "judge_programs", "Worker", "WORKER"]

N_DEVICES = 8  # the mesh the JAX questions are graded on: devices.setup() always provides 8
MESH_AXIS = "X"


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
        ops = program_rules.stablehlo_ops(exported.mlir_module())
    except Exception:  # noqa: BLE001 (bytecode this jax cannot read: nothing is run)
        return f"{name}: the program's StableHLO could not be read"
    rules = check.rules(sizes, N_DEVICES)
    message = program_rules.program_problem(rules, name, ops)
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
        message = _judge_sharded(check, name, sizes, want, shards, bound)
        return message or program_rules.compiled_problem(
            rules, name, program_rules.blank(hlo.hlo_text(compiled)), N_DEVICES
        )
    return None


def _judge_sharded(check: JaxCheck, name: str, sizes, want, shards, bound: float) -> str | None:
    """Each device's block of the output: all of it where the result is replicated, the asked shape."""
    if len(shards) != N_DEVICES:
        return f"{name}: expected one block per device"
    if check.per_device and not all(
        s.shape == want.shape and float(np.max(np.abs(s - want), initial=0.0)) <= bound for s in shards
    ):
        return f"{name}: not every device holds the whole result"
    if check.block is not None and tuple(shards[0].shape) != tuple(check.block(sizes, N_DEVICES)):
        return f"{name}: device 0 holds a block of shape {tuple(shards[0].shape)}, not the asked one"
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
