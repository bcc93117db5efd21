"""Attacks on the grader, as the source a submission runs, and the helpers that build hostile submissions:
shared by `test_hostile.py`, `test_unsandboxed.py` and `test_cheats.py` (through nbgrader) and
`test_sandbox.py` (in the box directly). An attack that reaches for something prints what it got.
"""

import textwrap

import nbformat
import pytest

from exercises import build
from exercises.grading.sandbox import sandbox_works
from exercises.keys import keys_for
from tests.course.course_kit import reference_answers, wrong_answer

CH01 = "ch01_rooflines"
SANDBOXED = pytest.mark.skipif(not sandbox_works(), reason="needs a working bubblewrap (make test installs it)")


def wrong_answers(assignment: str, values: dict | None = None) -> dict[str, str]:
    """Every answer of `assignment` made wrong (`course_kit.wrong_answer`), for a class's `values`."""
    keys, reference = keys_for(assignment), reference_answers(assignment, values)
    return {g + "_answer": wrong_answer(keys[g], g, reference[g + "_answer"], (values or {}).get(g)) for g in keys}


def with_attack(answers: dict[str, str], attack: str, assignment: str = CH01) -> dict[str, str]:
    """The answers with `attack` run first, at the top of the first answer cell."""
    order = [build.grade_id(c) for c in nbformat.read(build.source_path(assignment), as_version=4).cells]
    first = min(answers, key=order.index)
    return {**answers, first: textwrap.dedent(attack) + "\n" + answers[first]}


def delete_test_cells(nb) -> None:
    """Drop every graded test cell of a submission (the grader must put them back)."""
    nb.cells = [
        c
        for c in nb.cells
        if not (c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))
    ]


def total(scores: dict, student: str) -> float:
    """A student's points over every question."""
    return sum(score for score, _ in scores[student].values())


# 3 GB, every page touched: more than a submission's memory.
MEMORY_BOMB = """
import numpy
_block = numpy.ones(3 * 10**9 // 8)
print("ALLOCATED", _block.sum())
"""

# As many processes as it can make, up to 2,000 (each sleeps; the box ends them).
PROCESS_BOMB = """
import os, time
_made = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        _made += 1
except OSError:
    pass
print("FORKED", _made)
"""

SHADOW_BUILTINS = """
import builtins
float = lambda *a: 0.0
abs = lambda *a: 0.0
builtins.float, builtins.abs, builtins.isinstance = (lambda *a: 0.0), (lambda *a: 0.0), (lambda *a: True)
"""

ANY_STRING = """
class _Anything(str):
    __eq__ = lambda self, other: True
    __ne__ = lambda self, other: False
    __hash__ = str.__hash__
"""

READS_EXPECTED = """
import sys
class _Spy:
    def __float__(self):
        for frame in sys._current_frames().values():
            while frame is not None:
                for space in (frame.f_locals, frame.f_globals):
                    for name in ("expected", "want", "key", "keys"):
                        if name in space and isinstance(space[name], (int, float)):
                            return float(space[name])
                frame = frame.f_back
        return 0.0
"""

BLANKS_LATER_CELLS = """
get_ipython().input_transformers_post.append(lambda lines: ["pass\\n"])
"""

SWALLOWS_ERRORS = """
get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)
"""

DETACHED_WRITER = """
import subprocess, sys
script = '''
import sqlite3, time
time.sleep(4)
db = sqlite3.connect({db!r})
db.execute("UPDATE grade SET auto_score = 99")
db.commit()
'''
subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""

REWRITES_TESTS = """
import sqlite3
for statement in ("UPDATE source_cell SET source = 'pass'", "UPDATE grade_cells SET max_score = 0"):
    try:
        db = sqlite3.connect({db!r})
        db.execute(statement)
        db.commit()
    except Exception:
        pass
"""

HOLDS_LOCK = """
import subprocess, sys
script = '''
import sqlite3, time
db = sqlite3.connect({db!r}, isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
time.sleep(120)
'''
subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
import time
time.sleep(1)
"""

# Answers the chapter 1 GPU question from the class's private values, if the kernel can read them.
READS_CLASS_VALUES = """
import json, pathlib
_mine = json.loads(pathlib.Path({path!r}).read_text())["class"]["ch01_q5_h100_batch"]
from book_lib import hardware
b_crit_gpu_tokens = hardware.get_chip(_mine["gpu"]).bf16_flops_per_s / hardware.get_chip(_mine["gpu"]).hbm_bytes_per_s
"""

IGNORES_SIGINT = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""

# An endless loop that catches the interrupt the grader sends when the cell's time is up.
CATCHES_INTERRUPT = """
import time
while True:
    try:
        time.sleep(0.1)
    except KeyboardInterrupt:
        pass
"""

# From inside the box: Jupyter connection files and the host's loopback (a kernel outside the box
# would run anything), another class's values, a file on the host. Prints what it reached.
# The start of a probe a submission runs: `_attempt(name, how)` records what `how()` returned, or that it
# was denied; a probe ends by printing `_reached`. A `str.format` template (its braces doubled).
ATTEMPT = """
import glob, json, os, pathlib, socket
_reached = {{}}
def _attempt(name, how):
    try:
        _reached[name] = repr(how())[:100]
    except Exception as err:
        _reached[name] = "denied: " + type(err).__name__
"""
ESCAPES = (
    ATTEMPT
    + """
_attempt("connection_files", lambda: glob.glob("/root/.local/share/jupyter/runtime/*.json") or 1 / 0)
_attempt("host_file", lambda: open({host_file!r}).read())
_attempt("loopback", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
_attempt("other_class", lambda: open({other_values!r}).read())
_attempt("marker", lambda: pathlib.Path({marker!r}).write_text("escaped"))
print("REACHED", json.dumps(_reached))
"""
)

# 20 MB printed in one cell, for the grader to hold in memory and write into the notebook.
FLOODS_OUTPUT = """
for _ in range(40):
    print("x" * 500_000)
"""

# 30 processes in new sessions, meant to outlive grading.
DETACHES = """
import subprocess, sys
for _ in range(30):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", {tag!r}], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""

# Without a sandbox: the grader's own files, each changed so that a later run would believe anything.
POISONS = """
import pathlib
_config = pathlib.Path({config!r})
_poison = "import exercises.grading.judge as _j; _j.judge_record = lambda *a: None"
_config.write_text(_config.read_text() + "\\n" + _poison + "\\n")
pathlib.Path({library!r}).parent.mkdir(exist_ok=True)
pathlib.Path({library!r}).write_bytes(b"poisoned bytecode")
"""

# Rebinds the book_lib helpers a key might call, so that any check run in the kernel would agree.
REBINDS_HELPERS = """
import book_lib, importlib
for _name in ("roofline", "collectives", "gpu", "inference", "training", "hardware"):
    _module = importlib.import_module(f"book_lib.{_name}")
    for _attr in dir(_module):
        if callable(getattr(_module, _attr)) and not _attr.startswith("_"):
            setattr(_module, _attr, lambda *a, **k: 0.0)
"""

# What the old grader believed from the kernel: the compiled text and the traced text, made to show
# every collective and primitive any question asks for.
FORGES_TEXT = """
import jax, jax.stages
_hlo = ("%p = f32[4,2]{1,0} collective-permute(f32[4,2]{1,0} %x), channel_id=1, "
        "source_target_pairs={{0,1},{1,2},{2,3},{3,4},{4,5},{5,6},{6,7},{7,0}}")
jax.stages.Compiled.as_text = lambda self, *args, **kwargs: _hlo
_make_jaxpr = jax.make_jaxpr
class _Shown:
    def __init__(self, real):
        self.real = real
    def __str__(self):
        return "shard_map ppermute psum pallas_call Ref{f32[8,128]} " + str(self.real)
    def __getattr__(self, name):
        return getattr(self.real, name)
jax.make_jaxpr = lambda f, *a, **k: (lambda *xs, **kw: _Shown(_make_jaxpr(f, *a, **k)(*xs, **kw)))
"""

# The record itself, rewritten on its way out (the display function and the display publisher): the
# old recorder's evidence of a perfect program added, the nonce kept.
FORGES_RECORD = """
import IPython.display
_MIME = "application/vnd.book-grader.record+json"
_perfect = {"jaxpr": "shard_map ppermute pallas_call", "hlo": "collective-permute", "n_devices": 8}
def _forge(data):
    if isinstance(data, dict) and _MIME in data:
        record = dict(data[_MIME])
        record.pop("failed", None)
        record["runs"] = [_perfect] * 3
        data = {**data, _MIME: record}
    return data
_display = IPython.display.display
IPython.display.display = lambda *objs, **kw: _display(*[_forge(o) for o in objs], **kw)
_publisher = get_ipython().display_pub
_publish = _publisher.publish
_publisher.publish = lambda data, *a, **kw: _publish(_forge(data), *a, **kw)
"""
