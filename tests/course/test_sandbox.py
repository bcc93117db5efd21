"""The submission's box (`exercises/grading/sandbox.py`), attacked directly with plain Python inside it.

`tests/course/test_hostile.py` attacks it through nbgrader and checks the scores; these tests check each wall
itself, in about a second each: no network (not even the host's loopback), none of the host's
temporary or runtime folders, no course folder, no keys, another user, memory and process limits,
and no process that outlives the box. Without a sandbox: every process a submission leaves is reaped,
and a change to the grader's files is seen.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from exercises.grading import integrity, sandbox
from exercises.grading.sandbox import Box, Limits, python_paths, sandbox_works
from tests.course.attacks import MEMORY_BOMB, PROCESS_BOMB

SANDBOXED = pytest.mark.skipif(not sandbox_works(), reason="needs a working bubblewrap (make test installs it)")


def _run(box: Box, code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    box.prepare()
    cmd = box.wrap([sys.executable, "-c", textwrap.dedent(code)])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=box.env(), cwd=box.work)


@pytest.fixture
def box(tmp_path):
    made = Box(tmp_path / "box", "bwrap", Limits(memory_bytes=1 << 30, processes=64))
    yield made
    made.close()


ESCAPE = """
import glob, json, os, pathlib, socket
found = {"uid": os.getuid()}
def attempt(name, how):
    try:
        found[name] = repr(how())[:200]
    except Exception as err:
        found[name] = "denied: " + type(err).__name__
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2))
attempt("host_file", lambda: open(HOST_FILE).read())
attempt("course_values", lambda: open(COURSE_VALUES).read())
attempt("keys", lambda: __import__("exercises.keys"))
attempt("marker", lambda: pathlib.Path(MARKER).write_text("escaped"))
found["runtime"] = glob.glob("/root/.local/share/jupyter/runtime/*") + glob.glob("/tmp/**", recursive=True)
attempt("book_lib", lambda: __import__("book_lib").__name__)
print(json.dumps(found))
"""


@SANDBOXED
def test_a_box_reaches_no_network_no_host_file_no_course_and_no_key(box, tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    # like a Jupyter connection file in the host's /tmp (the tests' own folders may be elsewhere)
    host_dir = Path(tempfile.mkdtemp(prefix="book-host-", dir=tempfile.gettempdir()))
    host_file = host_dir / "kernel-host.json"
    host_file.write_text('{"key": "secret"}')
    course = tmp_path / "another-course"
    course.mkdir()
    (course / "key").mkdir()
    (course / "key" / "ch01_rooflines.json").write_text('{"seed": 1}')
    values = {
        "PORT": listener.getsockname()[1],
        "HOST_FILE": str(host_file),
        "COURSE_VALUES": str(course / "key" / "ch01_rooflines.json"),
        "MARKER": str(tmp_path / "marker"),
    }
    code = ESCAPE
    for name, value in values.items():
        code = code.replace(name, repr(value))
    try:
        done = _run(box, code)
    finally:
        shutil.rmtree(host_dir)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert found["uid"] != 0, found
    for name in ("tcp", "host_file", "course_values", "keys", "marker"):
        assert found[name].startswith("denied"), (name, found[name])
    # of the host's /tmp, only the box's own folder and what the kernel runs on (where they live there)
    # are there, with the folders down to them, in the box's own empty /tmp
    mounted = [box.workdir, *python_paths()]
    seen = {Path(p) for p in found["runtime"]} - {Path("/tmp")}
    assert all(any(p == m or p in m.parents or m in p.parents for m in mounted) for p in seen), seen
    assert found["book_lib"] == "'book_lib'", found
    assert not (tmp_path / "marker").exists()


@SANDBOXED
def test_the_kernel_imports_the_book_lib_the_grader_binds_and_the_probe_names_a_failed_import(tmp_path):
    """A grader whose `book_lib` is a copy (as a worker on another machine has), not the one the editable
    install points to: the box's kernel imports that copy. A copy that cannot be imported is named."""
    repo = Path(__file__).resolve().parents[2]
    copy = tmp_path / "copy"
    shutil.copytree(repo / "book_lib", copy / "book_lib", ignore=shutil.ignore_patterns("__pycache__"))
    broken = tmp_path / "broken" / "book_lib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('a broken copy')\n")
    probe = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom exercises.grading import sandbox\n"
    probe += "print(sandbox.sandbox_problem())"
    said = {}
    for folder in (copy, broken.parent):
        done = subprocess.run([sys.executable, "-c", probe, str(folder)], capture_output=True, text=True, cwd=repo)
        said[folder.name] = done.stdout.strip()
    assert said["copy"] == "None", said
    assert said["broken"].startswith("import book_lib failed: a broken copy"), said
    assert str(broken) in said["broken"], said


@SANDBOXED
def test_a_box_ends_every_process_it_started(box):
    tag = f"book-sandbox-test-{os.getpid()}-{time.monotonic_ns()}"
    started = _run(
        box,
        f"""
        import subprocess, sys
        for _ in range(5):  # detached: a new session each, outliving their parent
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{tag}"], start_new_session=True)
        print("started")
        """,
    )
    assert started.stdout.strip() == "started", started.stderr
    box.close()
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert not left, left


@SANDBOXED
def test_a_box_bounds_memory_and_processes(box):
    memory = _run(box, MEMORY_BOMB)
    assert memory.returncode != 0 and "ALLOCATED" not in memory.stdout, memory.stdout
    forks = _run(box, PROCESS_BOMB)
    assert int(forks.stdout.split()[-1]) < 64, forks.stdout


def test_without_a_sandbox_every_process_left_is_reaped(tmp_path):
    """The grader becomes a child subreaper: a double-forked daemon in a new session still comes back to it."""
    tag = f"book-reaper-test-{os.getpid()}-{time.monotonic_ns()}"
    script = f"""
        import os, subprocess, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from exercises.grading.sandbox import become_subreaper, reap_children
        assert become_subreaper()
        sleeper = "[sys.executable, '-c', 'import time; time.sleep(600)', '{tag}']"
        daemon = "import subprocess, sys; subprocess.Popen(" + sleeper + ", start_new_session=True)"
        subprocess.run([sys.executable, "-c", daemon])  # its parent has exited: the sleeper is an orphan
        time.sleep(0.5)
        assert subprocess.run(["pgrep", "-f", "{tag}"], capture_output=True).returncode == 0, "no orphan to reap"
        print(reap_children(keep=set()))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "1", done.stdout + done.stderr
    assert not subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()


def test_a_change_to_a_guarded_file_is_seen_named_and_put_back(tmp_path):
    """Rewritten with the same bytes, made where nothing was, added beside the gradebook: each seen."""
    import sqlite3

    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    with sqlite3.connect(course / "gradebook.db") as db:
        db.execute("CREATE TABLE grade (score REAL)")
        db.execute("INSERT INTO grade VALUES (0)")
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    paths = ([course / "gradebook.db", course / "nbgrader_config.py", tmp_path / "absent" / "site-packages"], [course])
    backup = integrity.Backup(course)
    before = integrity.snapshot(paths)
    assert integrity.changes(before, integrity.snapshot(paths)) == []
    (course / "nbgrader_config.py").write_text("c = get_config()\n")  # the same bytes: its change time moves
    (tmp_path / "absent" / "site-packages").mkdir(parents=True)
    (course / "nbgrader_config.json").write_text("{}")
    with sqlite3.connect(course / "gradebook.db") as db:
        db.execute("UPDATE grade SET score = 99")
    changed = integrity.changes(before, integrity.snapshot(paths))
    assert changed == sorted(
        str(p)
        for p in (
            course / "gradebook.db",
            course / "nbgrader_config.json",
            course / "nbgrader_config.py",
            tmp_path / "absent" / "site-packages",
        )
    )
    assert [p for p in changed if not backup.covers(p)] == [str(tmp_path / "absent" / "site-packages")]
    backup.restore()
    assert not (course / "nbgrader_config.json").exists()
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("SELECT score FROM grade").fetchall() == [(0.0,)]


@pytest.mark.skipif(os.geteuid() != 0, reason="a user of its own needs a grader running as root")
def test_without_a_sandbox_a_user_of_its_own_reads_no_private_file_and_writes_none(tmp_path, monkeypatch):
    """As root, an unsandboxed kernel runs as a user of its own where that user can run the Python
    (`unboxed_user_works`; not where the Python lives under a private home): a shell stands in for it
    here. It is another uid, and reads no Jupyter connection file and no course folder of mode 0700."""
    monkeypatch.setattr(sandbox, "unboxed_user_works", lambda: True)
    runtime = tmp_path / "runtime"  # as ~/.local/share/jupyter/runtime, private to the grader
    runtime.mkdir(mode=0o700)
    (runtime / "kernel-1.json").write_text('{"key": "secret"}')
    box = Box(Path(tempfile.mkdtemp(prefix="book-test-unboxed-")), "none", Limits())
    try:
        box.prepare()
        script = f"id -u; cat {runtime}/kernel-1.json || echo unread; echo x > {runtime}/marker || echo unwritten"
        cmd = box.wrap(["/bin/sh", "-c", script])
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=box.env(), cwd=box.work)
    finally:
        box.close()
        shutil.rmtree(box.workdir, ignore_errors=True)
    uid, *said = done.stdout.split()
    assert int(uid) == box.uid >= sandbox.FIRST_UID, done
    assert said == ["unread", "unwritten"] and not (runtime / "marker").exists(), done
    assert "runs as a user of its own" in sandbox.unboxed_exposure(box.uid)
    assert "runs as the grader's own user" in sandbox.unboxed_exposure(None)


def test_an_unknown_sandbox_mode_is_refused_with_the_allowed_ones(tmp_path):
    with pytest.raises(ValueError, match="sandbox='auto'.*'bwrap', 'none'"):
        Box(tmp_path, "auto", Limits())
    with pytest.raises(ValueError, match="memory_bytes=0"):
        Limits(memory_bytes=0)
