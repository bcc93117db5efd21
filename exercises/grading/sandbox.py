"""The box a submission's kernel runs in: namespaces, a file system of its own, an unprivileged user, limits.

`bwrap` mode (the default) starts the kernel under bubblewrap with:

- a file system built from nothing: the system's `/usr` and `/etc`, the Python it runs on, the
  project's virtual environment and `book_lib`, all read-only; a private `/tmp`; its own throwaway
  folder (the submission's copy, its home, the kernel's sockets) writable. The repository's
  `exercises/` (keys, grader), the course folder, other courses, the host's `/tmp`, `/run` and
  Jupyter runtime folders are simply not there.
- no network at all (a namespace of its own: not even the host's loopback), its own IPC, UTS and
  PID namespaces, a new session (no terminal to inject into); the kernel talks to the grader over
  Unix sockets in its folder (ZeroMQ's `ipc` transport).
- when the grader runs as root, a user id of its own (random, above any real account), with no
  capabilities and `no_new_privs`; otherwise an unprivileged user namespace.
- limits: memory and processes per submission in a cgroup of its own where the machine lets the
  grader make one (v2, else v1 `memory` and `pids`), and per process always (`prlimit`: processes
  of its user, address space where no memory cgroup holds, file size, open files, no core dumps).
- every process it started ended with it: the kernel is PID 1 of its namespace (the grader kills
  it with its process group, and the namespace goes with it), its cgroup is emptied, and the
  grader, a child subreaper, kills whatever else is left among its children (`reap_children`).

`none` mode runs the kernel without namespaces: as a user of its own where the grader is root and
that user can run the Python (`unboxed_user_works`), else as the grader's own user; with the
per-process limits and the cgroup where available; every process it leaves is reaped the same way,
and the grader checks its own files around it (`integrity.py`). Each such run prints what the
submission can do (`unboxed_exposure`). The course configuration must ask
for it by name: without a working bubblewrap, grading refuses to run.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MODES",
    "Limits",
    "Box",
    "Cgroup",
    "book_lib_folder",
    "python_paths",
    "sandbox_problem",
    "sandbox_works",
    "unboxed_exposure",
    "unboxed_user_works",
    "become_subreaper",
    "reap_children",
]

MODES = ("bwrap", "none")
FIRST_UID = 1_000_000_000  # sandbox users are drawn above this: no real account's id
PR_SET_CHILD_SUBREAPER = 36
# Address space a JAX kernel reserves but never touches (thread stacks, XLA's arenas): about 1.9 GB
# of a kernel that compiles for 8 devices is reserved, 0.4 GB resident.
RESERVED_BYTES = 2 << 30


@dataclass(frozen=True, slots=True)
class Limits:
    """What one submission may use.

    Attributes:
        memory_bytes: resident memory of all its processes together (a cgroup), or, where no
            memory cgroup can be made, the address space of each process less `RESERVED_BYTES`.
        processes: processes and threads together (a cgroup's `pids.max`, and `RLIMIT_NPROC` of
            the sandbox's own user).
        file_bytes: the largest file it may write (`RLIMIT_FSIZE`).
        open_files: file descriptors per process (`RLIMIT_NOFILE`).
    """

    memory_bytes: int = 2 << 30
    processes: int = 256
    file_bytes: int = 256 << 20
    open_files: int = 4096

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "processes", "file_bytes", "open_files"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}={value!r}: allowed: a positive int")


class Cgroup:
    """A cgroup of its own for one submission (v2, else v1 `memory` and `pids`), or nothing where none can be made."""

    def __init__(self, dirs: list[Path], controllers: set[str]):
        self.dirs = dirs
        self.controllers = controllers

    @classmethod
    def create(cls, name: str, limits: Limits) -> Cgroup | None:
        """Make the cgroup `name` below the grader's own, with `limits`; None if the machine does not allow it."""
        for make in (cls._v2, cls._v1):
            try:
                group = make(name, limits)
            except OSError:
                group = None
            if group is not None:
                return group
        return None

    @staticmethod
    def _own_paths() -> dict[str, str]:
        """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
        paths = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
        return paths

    @classmethod
    def _v2(cls, name: str, limits: Limits) -> Cgroup | None:
        own = cls._own_paths().get("")
        mounts = [Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")]
        root = next((m for m in mounts if (m / "cgroup.controllers").exists()), None)
        if own is None or root is None:
            return None
        parent = root / own.lstrip("/")
        if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
            return None
        group = parent / name
        group.mkdir()
        made = cls([group], {"memory", "pids"})
        try:
            (group / "memory.max").write_text(str(limits.memory_bytes))
            (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(str(limits.processes))
        except OSError:
            made.remove()
            return None
        return made

    @classmethod
    def _v1(cls, name: str, limits: Limits) -> Cgroup | None:
        own = cls._own_paths()
        dirs = []
        try:
            for controller, files in (
                ("memory", {"memory.limit_in_bytes": limits.memory_bytes}),
                ("pids", {"pids.max": limits.processes}),
            ):
                mount = Path("/sys/fs/cgroup") / controller
                if controller not in own or not (mount / "cgroup.procs").exists():
                    raise OSError(f"no {controller} cgroup")
                group = mount / own[controller].lstrip("/") / name
                group.mkdir()
                dirs.append(group)
                for file, value in files.items():
                    (group / file).write_text(str(value))
            swap = dirs[0] / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(limits.memory_bytes))
        except OSError:
            cls(dirs, set()).remove()
            return None
        return cls(dirs, {"memory", "pids"})

    def join_command(self) -> list[str]:
        """A prefix that moves the command into this cgroup before it runs (so its children start there)."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        script = 'for f; do [ "$f" = -- ] && break; echo $$ > "$f" || exit 111; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *procs, "--"]

    def pids(self) -> set[int]:
        found = set()
        for d in self.dirs:
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def remove(self) -> None:
        """Kill every process left in the cgroup, then remove it."""
        for _ in range(100):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def book_lib_folder() -> Path | None:
    """The folder of the `book_lib` this grader imports (its package folder), None if it has none.

    It is the one the kernel gets: bound into the box and first on the kernel's `PYTHONPATH`
    (`Box.env`), whichever `book_lib` the environment's editable install points to (a worker may grade
    with a copy of the course's code).
    """
    spec = importlib.util.find_spec("book_lib")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def python_paths() -> list[Path]:
    """What the kernel's Python reads: its installation, the environment's packages and `book_lib`'s folder."""
    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(sysconfig.get_paths()["purelib"])}
    library = book_lib_folder()
    if library is not None:
        paths.add(library)
    resolved = {p.resolve() for p in paths if p.exists()}
    # a folder inside another one needs no bind of its own
    return sorted(p for p in resolved if not any(q != p and q in p.parents for q in resolved))


def _mkdirs(target: Path, made: set[Path]) -> list[str]:
    """bwrap arguments that create `target`'s missing ancestors, readable by anyone."""
    args = []
    for parent in reversed(target.parents):
        if parent != Path("/") and parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


class Box:
    """One submission's sandbox: its folder, user and limits, and the command that starts a process in it.

    Args:
        workdir: a new, empty folder for this submission (the grader's; removed by the caller).
        mode: "bwrap" or "none".
        limits: what the submission may use.
        own_user: in "none" mode, as root, run the kernel as a user of its own where that user can run
            the Python (`unboxed_user_works`); False: as the grader's own user. "bwrap" always does.
    """

    def __init__(self, workdir: Path, mode: str, limits: Limits, *, own_user: bool = True):
        if mode not in MODES:
            raise ValueError(f"sandbox={mode!r}: unknown; allowed: {', '.join(map(repr, MODES))}")
        self.workdir = Path(workdir).resolve()
        self.mode = mode
        self.limits = limits
        self.work = self.workdir / "work"
        self.home = self.workdir / "home"
        self.sockets = self.workdir / "sockets"
        for d in (self.work, self.home, self.sockets):
            d.mkdir(parents=True, exist_ok=True)
        if mode == "none":
            (self.workdir / "tmp").mkdir(exist_ok=True)
        own_user = os.geteuid() == 0 and (mode == "bwrap" or (own_user and unboxed_user_works()))
        self.uid = FIRST_UID + secrets.randbelow(1 << 30) if own_user else None
        self.cgroup = Cgroup.create(f"book-grading-{secrets.token_hex(6)}", limits)

    def env(self) -> dict[str, str]:
        """The kernel's whole environment: no variable of the grader's but a few that select devices."""
        kept = ("LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS")
        env = {name: os.environ[name] for name in kept if name in os.environ}
        home = str(self.home)
        env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin", HOME=home, TMPDIR="/tmp")
        env.update(IPYTHONDIR=f"{home}/.ipython", MPLCONFIGDIR=f"{home}/.matplotlib", XDG_CACHE_HOME=f"{home}/.cache")
        env.update(
            XDG_CONFIG_HOME=f"{home}/.config", XDG_RUNTIME_DIR=f"{home}/.runtime", JUPYTER_RUNTIME_DIR=str(self.sockets)
        )
        env.update(PYTHONDONTWRITEBYTECODE="1", JAX_PLATFORMS="cpu", NBGRADER_EXECUTION="autograde")
        library = book_lib_folder()
        if library is not None:  # the grader's own book_lib, before any the environment points to
            env["PYTHONPATH"] = str(library.parent)
        if self.mode == "none":
            env["TMPDIR"] = str(self.workdir / "tmp")
        return env

    def prepare(self) -> None:
        """Hand the folder to the sandbox's user (after the submission was copied into `work`)."""
        if self.uid is None:
            return
        (self.workdir / "passwd").write_text(
            f"root:x:0:0::/root:/usr/sbin/nologin\nstudent:x:{self.uid}:{self.uid}::{self.home}:/bin/sh\n"
        )
        (self.workdir / "group").write_text(f"root:x:0:\nstudent:x:{self.uid}:\n")
        for root, dirs, files in os.walk(self.workdir):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), self.uid, self.uid)
        os.chown(self.workdir, self.uid, self.uid)
        for name in ("passwd", "group"):
            os.chown(self.workdir / name, 0, 0)

    def give(self, path: Path) -> None:
        """Hand a file the grader wrote (the kernel's connection file) to the sandbox's user."""
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)

    def _limits_command(self) -> list[str]:
        if shutil.which("prlimit") is None:  # only without a sandbox: `sandbox_works` asks for prlimit
            return []
        lim = self.limits
        args = ["prlimit", "--core=0", f"--fsize={lim.file_bytes}", f"--nofile={lim.open_files}"]
        if self.cgroup is None:
            args.append(f"--as={lim.memory_bytes + RESERVED_BYTES}")
        if self.uid is not None:
            args.append(f"--nproc={lim.processes}")
        return [*args, "--"]

    def wrap(self, cmd: list[str]) -> list[str]:
        """`cmd` (the kernel's command line) as it starts inside this box."""
        prefix = self.cgroup.join_command() if self.cgroup is not None else []
        if self.mode == "none":
            return prefix + self._user() + self._limits_command() + cmd
        return prefix + self._bwrap() + self._user() + self._limits_command() + cmd

    def _user(self) -> list[str]:
        return [] if self.uid is None else _as_user(self.uid)

    def _bwrap(self) -> list[str]:
        args = ["bwrap", "--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / name
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--ro-bind", "/etc", "/etc"]
        if self.uid is not None:
            args += ["--ro-bind", str(self.workdir / "passwd"), "/etc/passwd"]
            args += ["--ro-bind", str(self.workdir / "group"), "/etc/group"]
        # a private /tmp first: the Python, the project and this folder may all live under the host's
        args += ["--dev", "/dev", "--proc", "/proc", "--perms", "1777", "--tmpfs", "/tmp"]
        made = {Path("/usr"), Path("/etc"), Path("/tmp")}
        for path in python_paths():
            args += _mkdirs(path, made) + ["--ro-bind", str(path), str(path)]
            made.add(path)
        args += _mkdirs(self.workdir, made) + ["--bind", str(self.workdir), str(self.workdir)]
        args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if self.uid is None:
            args += ["--unshare-user"]
        args += ["--hostname", "grading", "--die-with-parent", "--as-pid-1"]
        return args + ["--chdir", str(self.work), "--"]

    def close(self) -> None:
        """End every process of the submission and remove its cgroup (the caller removes the folder)."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None


# What the probe runs in a box: the kernel's imports, and where its book_lib came from.
_PROBE = """
import socket
try:
    import book_lib
except ImportError as err:
    print("import book_lib failed:", err)
else:
    print(book_lib.__path__[0])
"""


@functools.cache
def sandbox_problem() -> str | None:
    """Why a `bwrap` box cannot run a grading kernel here (a missing tool, bubblewrap's own error, or a
    `book_lib` import that fails or finds another copy than the grader's), or None when it can."""
    missing = [tool for tool in ("bwrap", "prlimit", "setpriv") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH"
    import tempfile

    expected = book_lib_folder()
    with tempfile.TemporaryDirectory(prefix="book-sandbox-probe-") as tmp:
        box = Box(Path(tmp), "bwrap", Limits())
        try:
            box.prepare()
            cmd = box.wrap([sys.executable, "-c", _PROBE])
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=box.env())
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"the box did not start: {err}"
        finally:
            box.close()
    said = done.stdout.strip()
    if done.returncode != 0:
        return f"the box's Python exited with {done.returncode}: {(done.stderr or said).strip()[-500:]}"
    if said.startswith("import book_lib failed"):
        return f"{said} (the grader binds {expected} into the box, on the kernel's PYTHONPATH)"
    if expected is not None and Path(said) != expected:
        return f"the kernel imported book_lib from {said}, not the grader's {expected}"
    return None


def sandbox_works() -> bool:
    """True when a `bwrap` box can run this Python here (`sandbox_problem` finds nothing)."""
    return sandbox_problem() is None


def _as_user(uid: int) -> list[str]:
    """A prefix that runs a command as `uid` (its own group, no other), with no capability, now or later."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"] + [
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


@functools.cache
def unboxed_user_works() -> bool:
    """Without a sandbox, as root: whether a user of its own (no capabilities, as in the box) can run the
    kernel's Python and import `book_lib` here, that is, whether every folder on their way lets anyone
    in (a Python under a private home does not)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    library = book_lib_folder()
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "PYTHONDONTWRITEBYTECODE": "1"}
    if library is not None:
        env["PYTHONPATH"] = str(library.parent)
    try:
        done = subprocess.run(
            # the user's own exec of the Python (setpriv still holds root's capabilities when it execs)
            [*_as_user(FIRST_UID), "/bin/sh", "-c", 'exec "$0" -c "import ipykernel, book_lib"', sys.executable],
            capture_output=True,
            timeout=60,
            env=env,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def unboxed_exposure(uid: int | None) -> str:
    """What a submission graded without a sandbox can do, kernel run as `uid` (None: the grader's own user);
    every unsandboxed run prints it."""
    common = (
        "use this machine's network (any service listening on it or reachable from it: another Jupyter "
        "kernel's ports, a database that trusts local connections, a Dask scheduler, which runs what it is "
        "sent on every worker) and read every file anyone may read; the grader reaps every process it "
        "leaves and reads the saved scores back"
    )
    if uid is not None:
        return (
            f"sandbox='none': no isolation. The submission's kernel runs as a user of its own ({uid}), so it "
            "cannot write the grader's files or read those only their owner may (Jupyter's connection files, "
            f"a course folder of mode 0700, as `make course` makes it); it can {common}."
        )
    who = "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"
    return (
        f"sandbox='none': no isolation. The submission's kernel runs as the grader's own user ({who}): it can "
        "read and write whatever that user can (the class's values, other courses, the connection files of "
        "that user's other Jupyter kernels, and so run code in them) and "
        f"{common}. The grader sees a change to its own files (gradebook, values, configuration, code, Python) "
        "and stops grading, but not what another program the submission reached does after grading: "
        "grade this way only submissions you trust, or install bubblewrap."
    )


def become_subreaper() -> bool:
    """Make this process adopt every orphan among its descendants (Linux `PR_SET_CHILD_SUBREAPER`)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (read from every /proc/<pid>/stat)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def reap_children(keep: set[int]) -> int:
    """Kill (and wait for) every child of this process but those in `keep`, until none is left; how many.

    With `become_subreaper`, every process a submission left behind (detached, double-forked, in a
    new session) is a child of this process once its parents have died.
    """
    killed = 0
    for _ in range(200):
        left = _children(os.getpid()) - keep
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
    return killed
