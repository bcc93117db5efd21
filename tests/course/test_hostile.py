"""Hostile submissions, graded through `nbgrader autograde`: none gains anything over its answers.

Each attack is one that fooled an older grader (the grading issues list them), written into an
answer cell, since locked cells are restored from the gradebook before a submission runs. Most
ride on answers that are all wrong, so any point they win is a point stolen; the rest check that
a misbehaving answer costs only its own points. They run in the sandbox (a class with its own
numbers), without it (`sandbox="none"`, the text's numbers) and, for forged JAX evidence, on the
chapter 10 programs. Also here: feedback leaks no expected value or hidden code.
`tests/course/test_sandbox.py` attacks each wall of the box directly; `tests/course/test_programs.py` forges
JAX programs for every question.
"""

import importlib
import json
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from exercises import build, variants
from exercises.grading.pipeline import MARKER
from exercises.grading.recorder import MIME
from exercises.grading.sandbox import sandbox_works
from exercises.keys import keys_for
from tests.course.attacks import MEMORY_BOMB, PROCESS_BOMB
from tests.course.course_kit import SANDBOX, Course, reference_answers, wrong_answer

CH01 = "ch01_rooflines"
SEED = 7  # the hostile class has its own numbers, so reading them would pay
SANDBOXED = pytest.mark.skipif(not sandbox_works(), reason="needs a working bubblewrap (make test installs it)")


def _wrong_answers(assignment, values=None):
    keys, reference = keys_for(assignment), reference_answers(assignment, values)
    return {g + "_answer": wrong_answer(keys[g], g, reference[g + "_answer"], (values or {}).get(g)) for g in keys}


def _with_attack(answers, attack, assignment=CH01):
    """The answers with `attack` run first, at the top of the first answer cell."""
    first = min(answers, key=lambda gid: _order(assignment).index(gid))
    return {**answers, first: textwrap.dedent(attack) + "\n" + answers[first]}


def _order(assignment):
    return [build.grade_id(c) for c in nbformat.read(build.source_path(assignment), as_version=4).cells]


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
_mine = json.loads(pathlib.Path({path!r}).read_text())["values"]["ch01_rooflines"]["ch01_q5_h100_batch"]
from book_lib import hardware
b_crit_gpu_tokens = hardware.get_chip(_mine["gpu"]).bf16_flops_per_s / hardware.get_chip(_mine["gpu"]).hbm_bytes_per_s
"""

IGNORES_SIGINT = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""

# From inside the box: Jupyter connection files and the host's loopback (a kernel outside the box
# would run anything), another class's values, a file on the host. Prints what it reached.
ESCAPES = """
import glob, json, os, pathlib, socket
_reached = {{}}
def _attempt(name, how):
    try:
        _reached[name] = repr(how())[:100]
    except Exception as err:
        _reached[name] = "denied: " + type(err).__name__
_attempt("connection_files", lambda: glob.glob("/root/.local/share/jupyter/runtime/*.json") or 1 / 0)
_attempt("host_file", lambda: open({host_file!r}).read())
_attempt("loopback", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
_attempt("other_class", lambda: open({other_values!r}).read())
_attempt("marker", lambda: pathlib.Path({marker!r}).write_text("escaped"))
print("REACHED", json.dumps(_reached))
"""

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


@pytest.fixture(scope="module")
def ch01(tmp_path_factory):
    """One batch of hostile ch01 submissions, graded by one `nbgrader autograde` run."""
    root = tmp_path_factory.mktemp("hostile")
    course = Course(root, [CH01], cell_timeout_s=6, seed=SEED)
    db = str(root / "gradebook.db")
    listener = socket.create_server(("127.0.0.1", 0))  # what a kernel outside the box would listen on
    listener.setblocking(False)
    host_file = root.parent / "kernel-outside.json"
    host_file.write_text(json.dumps({"transport": "tcp", "ip": "127.0.0.1", "shell_port": listener.getsockname()[1]}))
    other = tmp_path_factory.mktemp("another-class")
    (other / variants.VALUES_FILE).write_text('{"seed": 1, "values": {}}')
    facts = {"db": db, "marker": root.parent / "escaped-marker", "tag": f"book-hostile-{time.monotonic_ns()}"}
    escapes = ESCAPES.format(
        host_file=str(host_file),
        port=listener.getsockname()[1],
        other_values=str(other / variants.VALUES_FILE),
        marker=str(facts["marker"]),
    )
    values = course.values[CH01]
    keys, reference, wrong = keys_for(CH01), reference_answers(CH01, values), _wrong_answers(CH01, values)
    gids = sorted(keys)
    choice = next(g for g, k in keys.items() if k.kind == "choice")
    value = next(g for g, k in keys.items() if k.kind == "value")
    wrong_choice = next(c for c in keys[choice].choices if c != keys[choice].answer(values.get(choice)))
    students = {
        "wrong": wrong,
        "shadows_builtins": _with_attack(wrong, SHADOW_BUILTINS),
        "any_string": {
            **_with_attack(wrong, ANY_STRING),
            choice + "_answer": f"{keys[choice].names[0]} = _Anything({wrong_choice!r})",
        },
        "reads_expected": {
            **_with_attack(wrong, READS_EXPECTED),
            **{value + "_answer": "\n".join(f"{n} = _Spy()" for n in keys[value].names)},
        },
        "blanks_later_cells": _with_attack(wrong, BLANKS_LATER_CELLS),
        "swallows_errors": _with_attack(wrong, SWALLOWS_ERRORS),
        "detached_writer": _with_attack(wrong, DETACHED_WRITER.format(db=db)),
        "rewrites_tests": _with_attack(wrong, REWRITES_TESTS.format(db=db)),
        "holds_lock": _with_attack(wrong, HOLDS_LOCK.format(db=db)),
        "reads_class_values": {
            **wrong,
            "ch01_q5_h100_batch_answer": READS_CLASS_VALUES.format(path=str(root / variants.VALUES_FILE)),
        },
        "zz_after_attacks": wrong,
        "mixed": {
            **reference,
            gids[1] + "_answer": "raise RuntimeError('a bug in this answer')",
            gids[2] + "_answer": "while True:\n    pass",
            gids[3] + "_answer": wrong[gids[3] + "_answer"],
        },
        "ignores_sigint": {**reference, gids[4] + "_answer": IGNORES_SIGINT},
        "prints_to_stderr": {
            g: "import sys\nprint('debugging', file=sys.stderr)\n" + src + "\nprint('done', file=sys.stderr)"
            for g, src in reference.items()
        },
        "escapes": _with_attack(wrong, escapes),
        "memory_bomb": _with_attack(wrong, MEMORY_BOMB),
        "process_bomb": _with_attack(wrong, PROCESS_BOMB),
        "detaches": _with_attack(wrong, DETACHES.format(tag=facts["tag"])),
        "floods_output": _with_attack(wrong, FLOODS_OUTPUT),
    }
    for student, answers in students.items():
        course.submit(CH01, student, answers)
    course.submit(CH01, "deletes_tests", wrong, edit=_delete_test_cells)
    course.submit(CH01, "right_deletes_tests", reference, edit=_delete_test_cells)
    done = course.autograde(CH01)
    time.sleep(6)  # give any detached process the time it asked for
    try:
        listener.accept()
        facts["loopback_connections"] = 1
    except BlockingIOError:
        facts["loopback_connections"] = 0
    listener.close()
    return course, done, gids, facts, {"choice": choice, "value": value}


def _delete_test_cells(nb):
    nb.cells = [
        c
        for c in nb.cells
        if not (c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))
    ]


def _total(scores, student):
    return sum(score for score, _ in scores[student].values())


@SANDBOXED
def test_the_batch_completes_despite_every_attack(ch01):
    course, done, *_ = ch01
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not graded" not in done.stderr


@pytest.mark.parametrize(
    "student",
    [
        "shadows_builtins",
        "any_string",
        "reads_expected",
        "blanks_later_cells",
        "swallows_errors",
        pytest.param("detached_writer", marks=SANDBOXED),
        pytest.param("rewrites_tests", marks=SANDBOXED),
        pytest.param("holds_lock", marks=SANDBOXED),
        pytest.param("reads_class_values", marks=SANDBOXED),
        pytest.param("zz_after_attacks", marks=SANDBOXED),
        "deletes_tests",
        pytest.param("escapes", marks=SANDBOXED),
        pytest.param("memory_bomb", marks=SANDBOXED),
        pytest.param("process_bomb", marks=SANDBOXED),
        pytest.param("detaches", marks=SANDBOXED),
        pytest.param("floods_output", marks=SANDBOXED),
    ],
)
def test_an_attack_on_wrong_answers_scores_what_the_wrong_answers_score(ch01, student):
    course, *_ = ch01
    scores = course.scores(CH01)
    assert _total(scores, "wrong") == 0
    assert _total(scores, student) == 0, scores[student]


@SANDBOXED
def test_nothing_rewrote_the_gradebook_after_grading(ch01):
    course, _, _, db, _ = ch01
    scores = course.scores(CH01)
    assert all(score <= top for student in scores for score, top in scores[student].values())
    with sqlite3.connect(db["db"]) as conn:
        assert conn.execute("SELECT COUNT(*) FROM grade WHERE auto_score = 99").fetchone()[0] == 0


def _printed(course, student: str, word: str) -> list[str]:
    """Lines a submission printed that start with `word`, from its autograded notebook."""
    lines = []
    for cell in course.autograded(CH01, student).cells:
        for out in cell.get("outputs", []):
            lines += [line for line in out.get("text", "").splitlines() if line.startswith(word)]
    return lines


@SANDBOXED
def test_from_inside_the_box_nothing_outside_is_reached(ch01):
    """Connection files, the host's loopback, another class's values, the host's files: all out of reach."""
    course, _, _, facts, _ = ch01
    (line,) = _printed(course, "escapes", "REACHED")
    reached = json.loads(line.split(" ", 1)[1])
    assert set(reached) == {"connection_files", "host_file", "loopback", "other_class", "marker"}
    assert all(what.startswith("denied") for what in reached.values()), reached
    assert facts["loopback_connections"] == 0 and not facts["marker"].exists()


@SANDBOXED
def test_memory_and_process_bombs_are_bounded_and_nothing_outlives_grading(ch01):
    course, _, _, facts, _ = ch01
    assert not _printed(course, "memory_bomb", "ALLOCATED")
    (forked,) = _printed(course, "process_bomb", "FORKED")
    assert int(forked.split()[1]) < 256, forked
    left = subprocess.run(["pgrep", "-f", facts["tag"]], capture_output=True, text=True).stdout.split()
    assert not left, f"{len(left)} detached processes outlived grading"


@SANDBOXED
def test_a_flood_of_output_is_cut_in_the_grader(ch01):
    course, *_ = ch01
    assert _printed(course, "floods_output", "[the grader dropped this cell's output past")
    path = course.root / "autograded" / "floods_output" / CH01 / f"{CH01}.ipynb"
    assert path.stat().st_size < 3_000_000, path.stat().st_size


def test_grading_refuses_a_box_it_cannot_build_and_a_submission_that_links_outside(tmp_path):
    """No bubblewrap on the PATH, and no `sandbox="none"` in the configuration: nothing is graded. A
    submission holding a link to the class's values (nbgrader would copy what it points to): refused."""
    course = Course(tmp_path, [CH01], seed=SEED, sandbox="bwrap")
    reference = reference_answers(CH01, course.values[CH01])
    course.submit(CH01, "student", reference)
    done = course.autograde(CH01, path=str(Path(sys.executable).parent))
    assert done.returncode != 0 and "bubblewrap cannot run a kernel here" in done.stderr, done.stderr[-2000:]
    assert "student" not in course.scores(CH01) or _total(course.scores(CH01), "student") == 0
    folder = course.submit(CH01, "links", reference)
    (folder / "values.json").symlink_to(tmp_path / variants.VALUES_FILE)
    done = course.autograde(CH01, "links")
    assert done.returncode != 0 and "holds a symbolic link (values.json)" in done.stderr, done.stderr[-2000:]
    assert "links" not in course.scores(CH01) or _total(course.scores(CH01), "links") == 0


def test_errors_and_endless_loops_cost_only_their_own_points(ch01):
    course, _, gids, _, _ = ch01
    lost = set(gids[1:4])
    for gid, (score, top) in course.scores(CH01)["mixed"].items():
        assert score == (0 if gid in lost else top), (gid, score, top)


def test_a_loop_that_ignores_the_interrupt_costs_only_its_question(ch01):
    course, _, gids, _, _ = ch01
    for gid, (score, top) in course.scores(CH01)["ignores_sigint"].items():
        assert score == (0 if gid == gids[4] else top), (gid, score, top)


def test_printing_to_stderr_costs_nothing(ch01):
    course, *_ = ch01
    scores = course.scores(CH01)["prints_to_stderr"]
    assert all(score == top for score, top in scores.values()), scores


def test_deleted_test_cells_are_restored_and_graded(ch01):
    course, *_ = ch01
    scores = course.scores(CH01)
    assert set(scores["right_deletes_tests"]) == set(keys_for(CH01))
    assert all(score == top for score, top in scores["right_deletes_tests"].values())
    graded = course.autograded(CH01, "deletes_tests")
    assert {build.grade_id(c) for c in graded.cells} >= set(keys_for(CH01))


def test_autograded_notebooks_keep_no_recorder_and_no_expected_value(ch01):
    course, *_ = ch01
    for student in ("wrong", "mixed"):
        text = json.dumps([c for c in course.autograded(CH01, student).cells])
        assert MARKER not in text and "__book_grader_record" not in text and MIME not in text and "nonce" not in text


def test_feedback_names_what_is_wrong_and_leaks_no_answer(ch01):
    course, *_ = ch01
    nbgrader = Path(sys.executable).parent / "nbgrader"
    done = subprocess.run(
        [str(nbgrader), "generate_feedback", CH01, "--student", "wrong", "--force"],
        cwd=course.root,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    html = (course.root / "feedback" / "wrong" / CH01 / f"{CH01}.html").read_text()
    assert "Incorrect" in html and "is not within" in html
    assert "expected" not in html.lower() and "__book_grader_record" not in html and "nonce" not in html
    for gid, key in keys_for(CH01).items():
        if key.kind == "value":
            for want in key.answer(course.values[CH01].get(gid)).values():
                assert f"{want:.6g}" not in html and repr(want) not in html


@pytest.fixture(scope="module")
def unboxed(tmp_path_factory):
    """Without a sandbox (the instructor's explicit `sandbox="none"`), the text's numbers: a late gradebook
    writer and 30 detached processes."""
    root = tmp_path_factory.mktemp("unboxed")
    course = Course(root, [CH01], cell_timeout_s=6, sandbox="none")
    wrong = _wrong_answers(CH01)
    tag = f"book-unboxed-{time.monotonic_ns()}"
    db = str(root / "gradebook.db")
    course.submit(CH01, "wrong", wrong)
    course.submit(CH01, "late_writer", _with_attack(wrong, DETACHED_WRITER.format(db=db)))
    course.submit(CH01, "detaches", _with_attack(wrong, DETACHES.format(tag=tag)))
    first = course.autograde(CH01)
    time.sleep(6)  # the late writer's 4 s
    return course, first, tag


@pytest.fixture(scope="module")
def poisoned(unboxed):
    """The same unsandboxed course: a submission that rewrites the gradebook, gives the class values of
    its own (a `variant.json` where there was none), rewrites the course configuration, the library
    and the Python, then an honest one. Its poisons are shared files: only where every other test
    process grades in the sandbox (which does not watch them)."""
    if SANDBOX != "bwrap":
        pytest.skip("the poisons would stop the other test processes' unsandboxed grading")
    course, *_ = unboxed
    root = course.root
    db = str(root / "gradebook.db")
    wrong = _wrong_answers(CH01)
    library = Path(build.ROOT) / "book_lib" / "__pycache__" / "zz_poisoned.cpython-311.pyc"
    python = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    startup = python / "zz_book_grading_test.pth"  # every later Python would run it (this one is a comment)
    raises_scores = (
        f"import sqlite3\nsqlite3.connect({db!r}).execute('UPDATE grade SET auto_score = 99').connection.commit()\n"
    )
    own_values = f"open({str(root / variants.VALUES_FILE)!r}, 'w').write('{{\"seed\": 0, \"values\": {{}}}}')\n"
    attack = raises_scores + own_values
    attack += POISONS.format(config=str(root / "nbgrader_config.py"), library=str(library))
    attack += f"\npathlib.Path({str(startup)!r}).write_text('# poisoned')\n"
    config = (root / "nbgrader_config.py").read_text()
    course.submit(CH01, "poisons", _with_attack(wrong, attack))
    course.submit(CH01, "zz_after_poison", reference_answers(CH01))
    try:
        second = course.autograde(CH01, "[pz]*")  # nbgrader takes one student, or a glob: these two
        restored = {
            "config": (root / "nbgrader_config.py").read_text() == config,
            "values": not (root / variants.VALUES_FILE).exists(),
            "library": not library.exists(),
            "startup": not startup.exists(),
        }
    finally:
        library.unlink(missing_ok=True)
        startup.unlink(missing_ok=True)
    return course, second, restored


def test_without_a_sandbox_late_writers_and_detached_processes_gain_nothing(unboxed):
    course, first, tag = unboxed
    assert first.returncode == 0, first.stderr[-3000:]
    scores = course.scores(CH01)
    for student in ("wrong", "late_writer", "detaches"):
        assert _total(scores, student) == 0, (student, scores[student])
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert not left, f"{len(left)} detached processes outlived grading"


def test_without_a_sandbox_a_submission_that_changes_the_graders_files_stops_grading(poisoned):
    """The gradebook, the class's values, the configuration, the library and the Python: each named, the
    course's and the library's put back, and nothing graded after a change that cannot be."""
    course, second, restored = poisoned
    assert second.returncode != 0
    assert "changed while a submission ran" in second.stderr, second.stderr[-3000:]
    for name in ("gradebook.db", "variant.json", "nbgrader_config.py", "zz_poisoned", "zz_book_grading_test.pth"):
        assert name in second.stderr, name
    assert "zz_book_grading_test.pth cannot be put back" in second.stderr
    assert "nothing more is graded until the instructor has checked them" in second.stderr
    assert restored == {"config": True, "values": True, "library": True, "startup": False}
    scores = course.scores(CH01)
    for student in ("wrong", "late_writer", "detaches", "poisons", "zz_after_poison"):
        assert student not in scores or _total(scores, student) == 0, (student, scores.get(student))


@pytest.fixture(scope="module")
def sleepy(tmp_path_factory):
    """A submission that sleeps in every answer cell, under a 12 s notebook limit."""
    course = Course(tmp_path_factory.mktemp("sleepy"), [CH01], cell_timeout_s=4, notebook_timeout_s=12)
    reference = reference_answers(CH01)
    course.submit(CH01, "sleeps", {g: src + "\nimport time\ntime.sleep(59)" for g, src in reference.items()})
    start = time.perf_counter()
    done = course.autograde(CH01)
    return course, done, time.perf_counter() - start


def test_a_sleeping_submission_is_bounded_as_a_whole(sleepy):
    course, done, seconds = sleepy
    assert done.returncode == 0, done.stderr[-2000:]
    assert seconds < 12 + 30, f"one notebook took {seconds:.0f} s against a 12 s limit"
    scores = course.scores(CH01)["sleeps"]
    assert sum(s for s, _ in scores.values()) < sum(t for _, t in scores.values()), "cells past the limit are not run"


# Rebinds the book_lib helpers a key might call, so that any check run in the kernel would agree.
REBINDS_HELPERS = """
import book_lib, importlib
for _name in ("roofline", "collectives", "gpu", "inference", "training", "hardware"):
    _module = importlib.import_module(f"book_lib.{_name}")
    for _attr in dir(_module):
        if callable(getattr(_module, _attr)) and not _attr.startswith("_"):
            setattr(_module, _attr, lambda *a, **k: 0.0)
"""

# The value and choice assignments of chapters 7 to 12: each in-kernel cheat, on answers that are all wrong.
CHEATS = ("ch07_inference", "ch08_serving_llama3", "ch09_profiling", "ch12_gpus")


@pytest.mark.parametrize("assignment", CHEATS)
def test_cheats_in_the_kernel_gain_nothing_on_later_assignments(assignment, tmp_path):
    # 6 s a cell: a kernel with shadowed builtins stalls until the limit (it costs time, not points)
    course = Course(tmp_path, [assignment], cell_timeout_s=6, seed=SEED)
    values = course.values[assignment]
    keys, wrong = keys_for(assignment), _wrong_answers(assignment, values)
    students = {
        "wrong": wrong,
        "shadows_builtins": _with_attack(wrong, SHADOW_BUILTINS, assignment),
        "rebinds_helpers": _with_attack(wrong, REBINDS_HELPERS, assignment),
        "blanks_later_cells": _with_attack(wrong, BLANKS_LATER_CELLS, assignment),
    }
    choices = [g for g, k in keys.items() if k.kind == "choice"]
    if choices:
        g = choices[0]
        wrong_choice = next(c for c in keys[g].choices if c != keys[g].answer(values.get(g)))
        students["any_string"] = {
            **_with_attack(wrong, ANY_STRING, assignment),
            g + "_answer": f"{keys[g].names[0]} = _Anything({wrong_choice!r})",
        }
    for student, answers in students.items():
        course.submit(assignment, student, answers)
    course.submit(assignment, "deletes_tests", wrong, edit=_delete_test_cells)
    done = course.autograde(assignment)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = course.scores(assignment)
    assert set(scores) == {*students, "deletes_tests"}
    for student in scores:
        assert set(scores[student]) == set(keys), (student, scores[student])
        assert _total(scores, student) == 0, (student, scores[student])


CH10 = "ch10_jax"

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


def test_forged_jax_evidence_gains_no_point(tmp_path):
    """Chapter 10's blocking programs (right values, wrong structure) under each forgery: 0 on every question."""
    course = Course(tmp_path, [CH10])
    blocking = {g + "_answer": src for g, src in importlib.import_module(f"exercises.keys.{CH10}").PLAUSIBLE.items()}
    reference = reference_answers(CH10)
    answers = {g: reference[g] + "\n" + blocking[g] if g in blocking else reference[g] for g in reference}
    course.submit(CH10, "forges_text", _with_attack(answers, FORGES_TEXT, CH10))
    course.submit(CH10, "forges_record", _with_attack(answers, FORGES_RECORD, CH10))
    done = course.autograde(CH10)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = course.scores(CH10)
    assert set(scores) == {"forges_text", "forges_record"}
    for student in scores:
        assert set(scores[student]) == set(keys_for(CH10)) == {g.removesuffix("_answer") for g in blocking}
        assert _total(scores, student) == 0, (student, scores[student])
