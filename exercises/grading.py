"""Autograding that a submission cannot game: the kernel records answers, the grader judges them.

`nbgrader autograde` stays the instructor's one command; `exercises/course.py` puts these pieces
in its pipeline:

1. `RecordAnswers` (before execution) appends to every graded test cell a recorder for its
   question, with a fresh nonce and, for a function, inputs drawn now. Nothing secret goes into the
   kernel: no expected value, no tolerance, no key.
2. `BookExecute` runs the submission in a throwaway copy of its folder, with a scrubbed
   environment, inside bubblewrap where the machine has it (the course folder, gradebook and keys
   hidden, the rest of the file system read-only, every process of the submission killed with it),
   under a time limit per cell and per notebook. A cell that times out and ignores the interrupt
   costs its own points: the kernel is restarted and the cells before it are replayed.
3. `CompareAnswers` (after execution) reads each test cell's record, judges it against the keys in
   this process, and rewrites the cell: its visible source, the student's printed output, and an
   error naming what is wrong (never the expected value) or nothing. It refuses to go on if the
   gradebook changed while the submission ran.

Book: none; this is course infrastructure. Threat model: README, "Grading".
"""

from __future__ import annotations

import base64
import functools
import hashlib
import math
import os
import random
import re
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from time import monotonic

import numpy as np
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.converters.base import NbGraderException
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from traitlets import Integer, Unicode

from exercises import variants
from exercises.keys import JaxCheck, Key, keys_for

__all__ = [
    "sandbox_works",
    "RestoreCells",
    "RecordAnswers",
    "BookExecute",
    "CompareAnswers",
    "MIME",
    "MARKER",
    "N_DEVICES",
    "judge",
]

MIME = "application/vnd.book-grader.record+json"
MARKER = "# ---- recorded for the grader at grading time ----"
N_DEVICES = 8  # the mesh the JAX questions are graded on: devices.setup() always provides 8
KEPT_ENV = ("PATH", "LANG", "LC_ALL", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS")

# Runs in the student's kernel. Whatever it reports is taken as the student's answer, so it needs no
# protection from the student's code: rebinding anything it uses can only change or lose the record.
RECORDER = """
def __book_grader_record(spec):
    import base64, json
    import numpy
    from IPython.display import display

    def array(a):
        a = numpy.ascontiguousarray(numpy.asarray(a, dtype=numpy.float32))
        return {"shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode()}

    def unarray(d):
        return numpy.frombuffer(base64.b64decode(d["b64"]), dtype=numpy.float32).reshape(d["shape"])

    def plain(v):
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if isinstance(v, str):
            return {"str": str.__str__(v)}
        try:
            return {"num": float(v)}
        except Exception as err:
            return {"bad": type(v).__name__ + ": " + str(err)[:80]}

    space, record = globals(), {"nonce": spec["nonce"]}
    try:
        if spec["kind"] in ("value", "choice"):
            record["values"] = {n: plain(space[n]) if n in space else {"missing": n} for n in spec["names"]}
        elif spec["kind"] == "function":
            fn, outputs = space.get(spec["names"][0]), []
            for args in spec["probes"]:
                try:
                    outputs.append(plain(fn(*args)))
                except Exception as err:
                    outputs.append({"raised": type(err).__name__})
            record["outputs"] = outputs
        else:
            import jax
            fn, runs = space.get(spec["names"][0]), []
            with jax.default_matmul_precision("highest"):  # judged against float64 NumPy on any device
                for probe in spec["probes"]:
                    arrays = [unarray(a) for a in probe["arrays"]]
                    statics = probe["statics"]
                    call = lambda *xs: fn(*xs, *statics)
                    run = {}
                    if spec["recorder"] == "traced":
                        closed = jax.make_jaxpr(call)(*arrays)
                        run["jaxpr"] = str(closed)
                        run["out"] = array(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *arrays)[0])
                    else:
                        import book_lib.devices
                        devices = book_lib.devices.mesh_devices()[: spec["n_devices"]]
                        explicit = (jax.sharding.AxisType.Explicit,)
                        mesh = jax.make_mesh((len(devices),), ("X",), explicit, devices=devices)
                        with jax.set_mesh(mesh):
                            placed = [jax.device_put(a, jax.P(*s)) for a, s in zip(arrays, probe["specs"])]
                            run["jaxpr"] = str(jax.make_jaxpr(call)(*placed))
                            compiled = jax.jit(call).lower(*placed).compile()
                            out = compiled(*placed)
                        run["n_devices"] = len(devices)
                        run["hlo"] = compiled.as_text()
                        run["out"] = array(out)
                        run["shards"] = [array(s.data) for s in out.addressable_shards]
                    runs.append(run)
            record["runs"] = runs
    except Exception as err:
        record["failed"] = type(err).__name__ + ": " + str(err)[:200]
    display({"@MIME@": record}, raw=True)
""".replace("@MIME@", MIME)


def _array(a) -> dict:
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    return {"shape": list(a.shape), "b64": base64.b64encode(a.tobytes()).decode()}


def _unarray(d: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["b64"]), dtype=np.float32).reshape(d["shape"])


def _grade_cells(nb):
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            yield meta["grade_id"], cell


def _digest(paths: list[Path]) -> str:
    """One hash of the bytes of every file under `paths` (absent files count as empty)."""
    h = hashlib.sha256()
    for root in paths:
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for f in files:
            if f.is_file():
                h.update(str(f).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def _guarded(resources) -> list[Path]:
    """What a submission must not change: the gradebook, the class's values and the course's sources."""
    root = variants.course_root(resources)
    paths = [root / "gradebook.db", root / variants.VALUES_FILE]
    if (root / "source").exists():
        paths.append(root / "source")
    return paths


def draw_spec(gid: str, key: Key, rng: random.Random) -> dict:
    """What the kernel is asked to record for one question; the grader keeps the same spec."""
    spec = {"grade_id": gid, "nonce": secrets.token_hex(16), "kind": key.kind, "names": list(key.names)}
    if key.kind == "function":
        spec["probes"] = key.probes(rng)
    elif key.kind == "jax":
        check = key.check
        spec["recorder"], spec["n_devices"], spec["probes"] = check.recorder, N_DEVICES, []
        for sizes in check.cases:
            arrays, statics = check.inputs(sizes, N_DEVICES, rng.randrange(2**31))
            spec["probes"].append(
                {
                    "sizes": list(sizes),
                    "arrays": [_array(a) for a in arrays],
                    "statics": list(statics),
                    "specs": [list(s) for s in check.in_specs],
                }
            )
    return spec


class RestoreCells(OverwriteCells):
    """nbgrader's OverwriteCells, putting back every graded cell a submission deleted.

    nbgrader's own restore looks for the cell just before the missing one among graded cells
    only, and fails when that neighbour is a locked cell; this one uses the nearest earlier cell
    of the source that the submission still has.
    """

    def add_missing_grade_cells(self, nb, resources):
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source.source_cells]
        graded = {cell.name: cell for cell in source.grade_cells}
        solutions = {cell.name for cell in source.solution_cells}
        for index, gid in enumerate(order):
            present = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)}
            if gid not in graded or gid in present:
                continue
            before = [present[name] for name in order[:index] if name in present]
            cell = self.missing_cell_transform(
                source.source_cells[index], graded[gid].max_score, is_solution=gid in solutions
            )
            nb.cells.insert(max(before) + 1 if before else 0, cell)
        return nb, resources


class RecordAnswers(NbGraderPreprocessor):
    """Append a recorder to every graded test cell; keep its spec (nonce, probes) in this process."""

    def preprocess(self, nb, resources):
        assignment = resources["nbgrader"]["assignment"]
        keys = keys_for(assignment)
        params = variants.load(variants.course_root(resources), assignment)
        rng = random.Random(secrets.randbits(64))
        specs = {}
        for gid, cell in _grade_cells(nb):
            if gid not in keys:
                continue
            spec = draw_spec(gid, keys[gid], rng)
            kernel_spec = {k: v for k, v in spec.items() if k != "grade_id"}
            specs[gid] = {**spec, "params": params.get(gid, {})}
            cell.source = f"{cell.source}\n{MARKER}\n{RECORDER}\n__book_grader_record({kernel_spec!r})\n"
        resources["book_grading"] = {"specs": specs, "guarded": _digest(_guarded(resources))}
        return nb, resources


class BookExecute(Execute):
    """nbgrader's Execute, sandboxed and bounded for the whole notebook as well as per cell."""

    notebook_timeout = Integer(600, help="Seconds one submitted notebook may run in all.").tag(config=True)
    sandbox = Unicode("auto", help="'bwrap', 'none', or 'auto' (bwrap when it is installed).").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        self._deadline = monotonic() + self.notebook_timeout
        self._cell_timeout = self.timeout
        self._ran: list[str] = []
        self._workdir = Path(tempfile.mkdtemp(prefix="book-grading-"))
        source_dir = Path(resources.get("metadata", {}).get("path") or ".")
        shutil.copytree(source_dir, self._workdir / "work", dirs_exist_ok=True)
        (self._workdir / "home").mkdir()
        (self._workdir / "tmp").mkdir()
        resources.setdefault("metadata", {})["path"] = str(self._workdir / "work")
        use_bwrap = self.sandbox == "bwrap" or (self.sandbox == "auto" and sandbox_works())
        course = variants.course_root(resources)
        self.kernel_manager_class = (
            _sandboxed_manager(self._workdir, course) if use_bwrap else self.kernel_manager_class
        )
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            self.timeout = self._cell_timeout
            resources["metadata"]["path"] = str(source_dir)
            shutil.rmtree(self._workdir, ignore_errors=True)

    async def async_start_new_kernel(self, **kwargs):
        env = {name: os.environ[name] for name in KEPT_ENV if name in os.environ}
        home = str(self._workdir / "home")
        env.update(HOME=home, IPYTHONDIR=f"{home}/.ipython", MPLCONFIGDIR=f"{home}/.matplotlib")
        env.update(XDG_CACHE_HOME=f"{home}/.cache", XDG_CONFIG_HOME=f"{home}/.config")
        env["TMPDIR"] = str(self._workdir / "tmp")
        env["NBGRADER_EXECUTION"] = "autograde"
        kwargs.setdefault("env", env)
        await super().async_start_new_kernel(**kwargs)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        remaining = self._deadline - monotonic()
        if remaining <= 1:
            cell.outputs = [_error("NotebookTimeLimit", f"not run: the notebook used its {self.notebook_timeout} s")]
            return cell
        self.timeout = max(1, int(min(self._cell_timeout, remaining)))
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except (CellTimeoutError, DeadKernelError) as err:
            cell.outputs.append(_error("CellTimeoutError", f"stopped after {self.timeout} s ({type(err).__name__})"))
            await self._restart_and_replay()
            return cell
        if not any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            self._ran.append(cell.source)
        return cell

    # nbclient binds its synchronous wrappers to its own coroutines: bind them to these overrides.
    start_new_kernel = run_sync(async_start_new_kernel)
    execute_cell = run_sync(async_execute_cell)

    async def _restart_and_replay(self) -> None:
        """A kernel that ignored the interrupt: kill it, start a fresh one, rerun what ran before."""
        await self.km.restart_kernel(now=True)
        await self.kc.wait_for_ready(timeout=60)
        for source in self._ran:
            remaining = self._deadline - monotonic()
            if remaining <= 1:
                return
            try:
                await self.kc.execute_interactive(source, silent=True, store_history=False, timeout=remaining)
            except TimeoutError:
                return


@functools.cache
def sandbox_works() -> bool:
    """True when bubblewrap is installed and may create the namespaces `BookExecute` uses here."""
    if shutil.which("bwrap") is None:
        return False
    probe = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--as-pid-1", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _sandboxed_manager(workdir: Path, course: Path):
    """A kernel manager class whose kernels run under bubblewrap."""
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            # Everything read-only (the Python and book_lib may live anywhere, /tmp included), the
            # course folder hidden, the throwaway copy (with the kernel's HOME and TMPDIR) writable.
            wrap = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
            wrap += ["--tmpfs", str(course)]  # the gradebook, the course's sources and any private keys
            wrap += ["--bind", str(workdir), str(workdir), "--ro-bind", self.connection_file, self.connection_file]
            # The kernel is PID 1 of its own namespace: when it ends, every process it started ends too.
            wrap += ["--chdir", str(workdir / "work"), "--unshare-pid", "--as-pid-1", "--die-with-parent", "--"]
            return wrap + cmd

    return SandboxedKernelManager


def _error(name: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


def _close(got: float, want: float, rel_tol: float) -> bool:
    return math.isfinite(got) and abs(got - want) <= rel_tol * abs(want) + 1e-300


def _numbers(recorded, want) -> bool:
    """A recorded plain value (from the kernel) against an expected number or tuple, exactly typed."""
    if isinstance(want, (tuple, list)):
        return (
            isinstance(recorded, list)
            and len(recorded) == len(want)
            and all(
                _numbers(
                    r,
                    w,
                )
                for r, w in zip(recorded, want, strict=True)
            )
        )
    return isinstance(recorded, dict) and set(recorded) == {"num"} and isinstance(recorded["num"], (int, float))


def _judge_numbers(recorded, want, rel_tol: float) -> bool:
    if not _numbers(recorded, want):
        return False
    if isinstance(want, (tuple, list)):
        return all(_judge_numbers(r, w, rel_tol) for r, w in zip(recorded, want, strict=True))
    return _close(float(recorded["num"]), float(want), rel_tol)


def _judge_values(values: dict, wants: dict, rel_tol: float) -> str | None:
    """None when every recorded name matches `wants`, else what is wrong (no expected value named)."""
    wrong = []
    for name, want in wants.items():
        got = values.get(name)
        if isinstance(got, dict) and "missing" in got:
            wrong.append(f"{name} is not defined")
        elif not _judge_numbers(got, want, rel_tol):
            wrong.append(f"{name} is not within {rel_tol:g} (relative)")
    return "; ".join(wrong) or None


def judge(key: Key, spec: dict, record: dict) -> str | None:
    """None when the recorded answer is right, else a message that names no expected value."""
    if "failed" in record:
        return f"recording the answer failed: {record['failed']}"
    if key.kind in ("value", "choice"):
        values = record.get("values", {})
        if key.kind == "choice":
            name = key.names[0]
            got = values.get(name)
            if not (isinstance(got, dict) and "str" in got):
                return f"{name} is not a string"
            if got["str"] not in key.choices:
                return f"{name} = {got['str']!r} is not one of {key.choices}"
            return (
                None
                if got["str"] == key.answer(spec.get("params"))
                else f"{name} = {got['str']!r} is not the right choice"
            )
        verdicts = [_judge_values(values, wants, key.tolerance) for wants in key.answers(spec.get("params"))]
        return None if None in verdicts else verdicts[0]
    if key.kind == "function":
        outputs = record.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != len(spec["probes"]):
            return f"{key.names[0]} could not be called"
        for args, got in zip(spec["probes"], outputs, strict=True):
            if isinstance(got, dict) and "raised" in got:
                return f"{key.names[0]}{tuple(args)} raised {got['raised']}"
            if not _judge_numbers(got, key.reference(*args), key.tolerance):
                return f"{key.names[0]}{tuple(args)} is not within {key.tolerance:g} (relative)"
        return None
    return _judge_jax(key.check, key.names[0], spec, record)


def _judge_jax(check: JaxCheck, name: str, spec: dict, record: dict) -> str | None:
    from book_lib import hlo

    runs = record.get("runs")
    if not isinstance(runs, list) or len(runs) != len(spec["probes"]):
        return f"{name} could not be run on the grading inputs"
    for probe, run in zip(spec["probes"], runs, strict=True):
        sizes = tuple(probe["sizes"])
        arrays = [_unarray(a) for a in probe["arrays"]]
        want = np.asarray(check.reference(arrays, spec.get("n_devices", N_DEVICES), *probe["statics"]))
        bound = check.atol * (1.0 + float(np.max(np.abs(want)))) if want.size else 0.0
        try:
            out = _unarray(run["out"])
        except (KeyError, TypeError, ValueError):
            return f"{name} returned no array"
        if out.shape != want.shape or not float(np.max(np.abs(out - want), initial=0.0)) <= bound:
            return f"{name}: wrong values for sizes {sizes}"
        jaxpr = re.sub(r"\x1b\[[0-9;]*m", "", str(run.get("jaxpr", "")))  # a kernel may print jaxprs in colour
        for primitive in check.needs_in_jaxpr:
            if primitive not in jaxpr:
                return f"{name}: the traced program has no {primitive}"
        if check.max_elements is not None:
            largest = max((math.prod(map(int, s.split(","))) for s in _shapes(jaxpr) if s), default=0)
            if largest >= check.max_elements(sizes):
                return f"{name}: the program holds an array of {largest} values, as large as the full score matrix"
        if check.kernel_blocks:
            message = _judge_kernel(check, name, jaxpr)
            if message:
                return message
        if check.recorder == "sharded":
            message = _judge_sharded(check, name, sizes, want, run, bound, hlo)
            if message:
                return message
    return None


def _shapes(text: str) -> list[str]:
    """Every array shape written in a jaxpr or HLO text (`f32[8,16]` -> "8,16"; `f32[8@X,16]` too)."""
    shapes = re.findall(r"\b(?:f|bf|s|u|i|pred|c)\d*\[([\d,@\w()]*)\]", text)
    return [re.sub(r"@(?:\([^)]*\)|\w+)", "", s) for s in shapes]  # explicit sharding: global sizes


def _judge_kernel(check: JaxCheck, name: str, jaxpr: str) -> str | None:
    """A `pallas_call` whose kernel sees the asked blocks, and no matmul anywhere larger than an output block."""
    if "pallas_call" not in jaxpr:
        return f"{name}: the traced program has no pallas_call"
    refs = {tuple(int(d) for d in s.split(",")) for s in re.findall(r"Ref[^{\s]*\{\w+\[([\d,]+)\]\}", jaxpr)}
    missing = [b for b in check.kernel_blocks if tuple(b) not in refs]
    if missing:
        return f"{name}: the kernel does not work on blocks of shape {missing[0]}"
    block = math.prod(check.kernel_blocks[-1])  # the output's block
    for dims in re.findall(r":\w+\[([\d,]*)\] = dot_general", jaxpr):
        if math.prod(int(d) for d in dims.split(",") if d) > block:
            return f"{name}: a matmul outside the kernel's blocks produces an array of shape ({dims})"
    return None


def _judge_sharded(check, name, sizes, want, run, bound, hlo) -> str | None:
    if run.get("n_devices") != N_DEVICES:
        return f"{name} did not run on the {N_DEVICES}-device mesh"
    shards = [_unarray(s) for s in run.get("shards", [])]
    if len(shards) != N_DEVICES:
        return f"{name}: expected one block per device"
    if check.per_device and not all(
        s.shape == want.shape and float(np.max(np.abs(s - want), initial=0.0)) <= bound for s in shards
    ):
        return f"{name}: not every device holds the whole result"
    if check.block is not None and tuple(shards[0].shape) != tuple(check.block(sizes, N_DEVICES)):
        return f"{name}: device 0 holds a block of shape {tuple(shards[0].shape)}, not the asked one"
    text = run.get("hlo", "")
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


class CompareAnswers(NbGraderPreprocessor):
    """Judge every recorded answer here, then leave each test cell as the student may see it."""

    def preprocess(self, nb, resources):
        grading = resources.get("book_grading", {})
        if grading and _digest(_guarded(resources)) != grading["guarded"]:
            raise NbGraderException("the gradebook or the course sources changed while a submission ran: not graded")
        keys = keys_for(resources["nbgrader"]["assignment"])
        for gid, cell in _grade_cells(nb):
            spec = grading.get("specs", {}).get(gid)
            if spec is None:
                continue
            cell.source = cell.source.split(f"\n{MARKER}\n")[0]
            records = [o for o in cell.outputs if MIME in o.get("data", {})]
            mine = [o.data[MIME] for o in records if isinstance(o.data[MIME], dict)]
            mine = [r for r in mine if r.get("nonce") == spec["nonce"]]
            failures = [o for o in cell.outputs if o.output_type == "error"]
            printed = [o for o in cell.outputs if o.output_type == "stream" and o.get("name") == "stdout"]
            if failures:
                message = f"the visible check failed ({failures[0].get('ename', 'error')})"
            elif len(mine) != 1:
                message = "no answer was recorded" if not mine else "more than one answer was recorded"
            else:
                message = judge(keys[gid], spec, mine[0])
            cell.outputs = printed + ([_error("Incorrect", message)] if message else [])
        return nb, resources
