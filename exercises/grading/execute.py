"""Run one submission: nbgrader's Execute, inside the sandbox, bounded per cell, per notebook and in output.

The submission runs in a throwaway copy of its folder (`sandbox.Box`), in a kernel the grader starts
with a scrubbed environment and talks to over Unix sockets. A cell that times out and ignores the
interrupt costs its own points: the kernel is restarted and the cells before it are replayed. A
cell's output past `max_output_bytes` is dropped. When the notebook is done, every process the
submission started is ended; without a sandbox the grader's files are checked for changes too.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from time import monotonic

from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.converters.base import NbGraderException
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Unicode

from exercises import variants
from exercises.grading import integrity, programs
from exercises.grading.sandbox import (
    MODES,
    Box,
    Limits,
    become_subreaper,
    reap_children,
    sandbox_problem,
    unboxed_exposure,
)

__all__ = ["BookExecute", "error_output"]

# Without a sandbox: what a submission changed among the grader's own files that could not be put
# back. Once set, this process grades nothing more (it may import what was changed).
_TAINTED: list[str] = []


def error_output(name: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


def _links(folder: Path) -> list[str]:
    """Every symbolic link under `folder` (not followed), as paths relative to it."""
    found = []
    for parent, dirs, files in os.walk(folder):
        found += [
            os.path.relpath(os.path.join(parent, n), folder)
            for n in dirs + files
            if os.path.islink(os.path.join(parent, n))
        ]
    return sorted(found)


def _boxed_manager(box: Box) -> type[AsyncKernelManager]:
    """A kernel manager whose kernels start inside `box` and listen on Unix sockets in its folder.

    Interrupts go as a message on the control channel (the kernel then signals itself): a signal to
    the process group would reach bubblewrap, not the kernel inside its PID namespace. Killing the
    kernel signals the whole process group, sandboxed kernel included.
    """

    class BoxedKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.transport = "ipc"
            self.connection_file = str(box.sockets / "kernel.json")
            self.ip = str(box.sockets / "kernel")

        @property
        def kernel_spec(self):
            spec = super().kernel_spec
            if spec is not None:
                spec.interrupt_mode = "message"
            return spec

        def write_connection_file(self, **kwargs):
            super().write_connection_file(**kwargs)
            box.give(Path(self.connection_file))

        def format_kernel_cmd(self, extra_arguments=None):
            return box.wrap(super().format_kernel_cmd(extra_arguments))

    return BoxedKernelManager


class BookExecute(Execute):
    """nbgrader's Execute in a sandbox, bounded for the whole notebook as well as per cell."""

    notebook_timeout = Integer(600, help="Seconds one submitted notebook may run in all.").tag(config=True)
    sandbox = Unicode(
        "bwrap", help="'bwrap' (refuse to grade where it does not work) or 'none' (no isolation: say so explicitly)."
    ).tag(config=True)
    memory_bytes = Integer(Limits().memory_bytes, help="Memory of one submission, all processes.").tag(config=True)
    max_processes = Integer(Limits().processes, help="Processes and threads of one submission.").tag(config=True)
    own_user = Bool(
        True,
        help="sandbox='none', as root: run the kernel as a user of its own where it can (else the grader's).",
    ).tag(config=True)
    max_output_bytes = Integer(1 << 20, help="Output one cell may show; the rest is dropped.").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        course, meta = variants.course_root(resources), resources["nbgrader"]
        links = _links(course / "submitted" / meta["student"] / meta["assignment"])
        if links:
            raise NbGraderException(
                f"the submission holds a symbolic link ({links[0]}): nbgrader copies what it points to, so it "
                "is not graded; ask for the files themselves"
            )
        if self.sandbox not in MODES:
            raise NbGraderException(f"sandbox={self.sandbox!r}: unknown; allowed: {', '.join(MODES)}")
        problem = sandbox_problem() if self.sandbox == "bwrap" else None
        if problem is not None:
            raise NbGraderException(
                f"sandbox='bwrap': bubblewrap cannot run a kernel here ({problem}; install it: apt-get install "
                "bubblewrap; it needs prlimit and setpriv from util-linux), so nothing is graded. To grade without "
                "isolation, knowing a submission can then reach this machine, set sandbox='none' in the "
                "course's nbgrader_config.py."
            )
        if _TAINTED:
            raise NbGraderException(
                f"an earlier submission changed the grader's own files ({', '.join(_TAINTED[:5])}): "
                "nothing more is graded until the instructor has checked them"
            )
        self._deadline = monotonic() + self.notebook_timeout
        self._cell_timeout = self.timeout
        self._ran: list[str] = []
        source_dir = Path(resources.get("metadata", {}).get("path") or ".")
        limits = Limits(memory_bytes=self.memory_bytes, processes=self.max_processes)
        box = Box(Path(tempfile.mkdtemp(prefix="book-grading-")), self.sandbox, limits, own_user=self.own_user)
        shutil.copytree(source_dir, box.work, symlinks=True, dirs_exist_ok=True)
        box.prepare()
        self._box = box
        self.kernel_manager_class = _boxed_manager(box)
        resources.setdefault("metadata", {})["path"] = str(box.work)
        become_subreaper()  # whatever a submission leaves behind is this process's to end
        unboxed = self.sandbox == "none"
        if unboxed:
            self.log.warning(unboxed_exposure(box.uid))
            guarded = integrity.guarded_paths(course)
            writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
            backup = integrity.Backup(course)
            before = integrity.snapshot(guarded)
        try:
            return super().preprocess(nb, resources, km=km)
        finally:
            self.timeout = self._cell_timeout
            resources["metadata"]["path"] = str(source_dir)
            box.close()
            # every child left is the submission's, but the grader's JAX worker
            reap_children(keep={pid for pid in [programs.WORKER.pid] if pid is not None})
            shutil.rmtree(box.workdir, ignore_errors=True)
            if unboxed:
                sys.dont_write_bytecode = writes_bytecode
                changed = integrity.changes(before, integrity.snapshot(guarded))
                if changed:
                    backup.restore()
                    lost = [path for path in changed if not backup.covers(path)]
                    _TAINTED.extend(lost)
                    raise NbGraderException(
                        f"the gradebook, the course or the grader's own files changed while a submission ran "
                        f"({', '.join(changed[:8])}): not graded (sandbox='none' gives no isolation); "
                        + (
                            f"{', '.join(lost[:8])} cannot be put back, so nothing more is graded until the "
                            "instructor has checked them"
                            if lost
                            else "every one of them was put back as it was"
                        )
                    )

    async def async_start_new_kernel(self, **kwargs):
        kwargs.setdefault("env", self._box.env())
        await super().async_start_new_kernel(**kwargs)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        remaining = self._deadline - monotonic()
        if remaining <= 1:
            cell.outputs = [
                error_output("NotebookTimeLimit", f"not run: the notebook used its {self.notebook_timeout} s")
            ]
            return cell
        self.timeout = max(1, int(min(self._cell_timeout, remaining)))
        self._output_bytes, self._output_cut = 0, False
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except (CellTimeoutError, DeadKernelError) as err:
            cell.outputs.append(
                error_output("CellTimeoutError", f"stopped after {self.timeout} s ({type(err).__name__})")
            )
            await self._restart_and_replay()
            return cell
        if not any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            self._ran.append(cell.source)
        return cell

    # nbclient binds its synchronous wrappers to its own coroutines: bind them to these overrides.
    start_new_kernel = run_sync(async_start_new_kernel)
    execute_cell = run_sync(async_execute_cell)

    def output(self, outs, msg, display_id, cell_index):
        """nbclient's output handler, dropping what a cell shows past `max_output_bytes`."""
        self._output_bytes += len(json.dumps(msg.get("content", {}), default=str))
        if self._output_bytes > self.max_output_bytes:
            if not self._output_cut:
                self._output_cut = True
                note = f"[the grader dropped this cell's output past {self.max_output_bytes} bytes]\n"
                outs.append(NotebookNode(output_type="stream", name="stderr", text=note))
            return None
        return super().output(outs, msg, display_id, cell_index)

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
