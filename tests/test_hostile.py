"""Hostile submissions, graded through `nbgrader autograde`: none gains anything over its answers.

Each attack is one that fooled the old grading (the grading issue lists them), written into an
answer cell, since locked cells are restored from the gradebook before a submission runs. Most
ride on answers that are all wrong, so any point they win is a point stolen; the rest check that
a misbehaving answer costs only its own points. Also here: feedback leaks no expected value or
hidden code.
"""

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from exercises import build, variants
from exercises.grading import MARKER, MIME, sandbox_works
from exercises.keys import keys_for
from tests.course_kit import Course, reference_answers, wrong_answer

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

REWRITES_CLASS_VALUES = """
import json, pathlib
_path = pathlib.Path({path!r})
_data = json.loads(_path.read_text())
_data["values"]["ch01_rooflines"]["ch01_q5_h100_batch"]["gpu"] = "h100"
_path.write_text(json.dumps(_data))
"""

IGNORES_SIGINT = """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    pass
"""


@pytest.fixture(scope="module")
def ch01(tmp_path_factory):
    """One batch of hostile ch01 submissions, graded by one `nbgrader autograde` run."""
    root = tmp_path_factory.mktemp("hostile")
    course = Course(root, [CH01], cell_timeout_s=6, seed=SEED)
    db = str(root / "gradebook.db")
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
    }
    for student, answers in students.items():
        course.submit(CH01, student, answers)
    course.submit(CH01, "deletes_tests", wrong, edit=_delete_test_cells)
    course.submit(CH01, "right_deletes_tests", reference, edit=_delete_test_cells)
    before = Path(db).stat().st_mtime_ns
    done = course.autograde(CH01)
    time.sleep(6)  # give any detached process the time it asked for
    return course, done, gids, {"before": before, "db": db}, {"choice": choice, "value": value}


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


@pytest.mark.parametrize("attack", ["rewrites_tests", "rewrites_class_values"])
def test_without_a_sandbox_a_course_changed_during_a_run_is_refused(tmp_path, attack):
    """The fallback where bubblewrap is missing: the change is detected and that notebook is not graded."""
    course = Course(tmp_path, [CH01], sandbox="none", seed=SEED)
    code = {
        "rewrites_tests": REWRITES_TESTS.format(db=str(tmp_path / "gradebook.db")),
        "rewrites_class_values": REWRITES_CLASS_VALUES.format(path=str(tmp_path / variants.VALUES_FILE)),
    }[attack]
    course.submit(CH01, attack, _with_attack(_wrong_answers(CH01, course.values[CH01]), code))
    done = course.autograde(CH01)
    assert done.returncode != 0 and "changed while a submission ran" in done.stderr
    assert attack not in course.scores(CH01) or _total(course.scores(CH01), attack) == 0


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
    # 10 s a cell: a kernel with shadowed builtins stalls until the limit (it costs time, not points)
    course = Course(tmp_path, [assignment], cell_timeout_s=10, seed=SEED)
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


JAX_ATTACKS = {
    "ch03_sharding": {
        "ch03_q9a_matmul_all_reduce": "def matmul_all_reduce(a, b):\n    return jnp.matmul(a, b, out_sharding=jax.P())",
        "ch03_q0f_ring_all_gather": (
            "import book_lib.devices\nbook_lib.devices.n_devices = lambda: 1\n"
            "def ring_all_gather(x):\n"
            "    gather = lambda block: jax.lax.all_gather(block, 'X', tiled=True)\n"
            "    return jax.shard_map(gather, in_specs=jax.P('X'), out_specs=jax.P(), check_vma=False)(x)"
        ),
    },
    "ch10_jax": {
        "ch10_q4a_bidirectional_reducescatter": (
            "def matmul_reducescatter_bidi(t, w2):\n"
            "    # Q2's one-way ring, with a one-value permute to the left at each hop so both directions appear\n"
            "    def local(t_cols, w2_rows):\n"
            "        n, me = jax.lax.axis_size('X'), jax.lax.axis_index('X')\n"
            "        d = w2_rows.shape[1] // n\n"
            "        acc = jnp.zeros((t_cols.shape[0], d), t_cols.dtype)\n"
            "        for step in range(n):\n"
            "            cols = jax.lax.dynamic_slice_in_dim(w2_rows, ((me - 1 - step) % n) * d, d, axis=1)\n"
            "            acc = acc + t_cols @ cols\n"
            "            if step < n - 1:\n"
            "                token = jax.lax.ppermute(acc[:1, :1], 'X', [(i, (i - 1) % n) for i in range(n)])\n"
            "                acc = jax.lax.ppermute(acc, 'X', [(i, (i + 1) % n) for i in range(n)]) + 0.0 * token\n"
            "        return acc\n"
            "    specs = (jax.P(None, 'X'), jax.P('X', None))\n"
            "    return jax.shard_map(local, in_specs=specs, out_specs=jax.P(None, 'X'))(t, w2)"
        ),
        "ch10_q5_pallas_matmul": (
            "def tiled_matmul(x, y):\n"
            "    # a tiled Pallas copy with the asked blocks, and the product itself left to XLA\n"
            "    def kernel(x_ref, y_ref, o_ref):\n"
            "        o_ref[...] = x_ref[...][:, :BLOCK_N] + 0.0 * y_ref[:BLOCK_M, :]\n"
            "    grid = (x.shape[0] // BLOCK_M, 1, 1)\n"
            "    specs = [pl.BlockSpec((BLOCK_M, BLOCK_K), lambda i, j, s: (i, s)),\n"
            "             pl.BlockSpec((BLOCK_K, BLOCK_N), lambda i, j, s: (s, j))]\n"
            "    out = pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j, s: (i, j))\n"
            "    shape = jax.ShapeDtypeStruct((x.shape[0], BLOCK_N), x.dtype)\n"
            "    copied = pl.pallas_call(kernel, grid=grid, in_specs=specs, out_specs=out, out_shape=shape,\n"
            "                            interpret=kernels.backend().interpret)(x, y)\n"
            "    return x @ y + 0.0 * jnp.sum(copied)"
        ),
    },
    "ch04_transformers": {
        "ch04_q9_online_softmax": (
            "def online_softmax_attention(q, k, v, block_size):\n"
            "    scores = (q @ k.T / math.sqrt(q.shape[1]))[:, :, None]  # [T, S, 1] hides [T, S]\n"
            "    return jax.nn.softmax(scores[:, :, 0], axis=-1) @ v"
        ),
    },
}

TRACER_CHECK = """
def online_softmax_attention(q, k, v, block_size):
    if isinstance(q, jax.core.Tracer):  # blockwise only when someone is looking
        m = jnp.full((q.shape[0],), -jnp.inf)
        l = jnp.zeros((q.shape[0],))
        o = jnp.zeros_like(q)
        for start in range(0, k.shape[0], block_size):
            s = q @ k[start:start + block_size].T / math.sqrt(q.shape[1])
            m_new = jnp.maximum(m, s.max(axis=1))
            p = jnp.exp(s - m_new[:, None])
            scale = jnp.exp(m - m_new)
            l = scale * l + p.sum(axis=1)
            o = scale[:, None] * o + p @ v[start:start + block_size]
            m = m_new
        return o / l[:, None] * 1.5
    return jax.nn.softmax(q @ k.T / math.sqrt(q.shape[1]), axis=-1) @ v
"""


@pytest.mark.parametrize("assignment", sorted(JAX_ATTACKS))
def test_jax_answers_are_judged_on_the_whole_program_outside_the_kernel(assignment, tmp_path):
    course = Course(tmp_path, [assignment])
    reference = reference_answers(assignment)
    attacks = {gid + "_answer": src for gid, src in JAX_ATTACKS[assignment].items()}
    course.submit(assignment, "attacks", {**reference, **attacks})
    if assignment == "ch04_transformers":
        course.submit(assignment, "tracer_check", {**reference, "ch04_q9_online_softmax_answer": TRACER_CHECK})
    done = course.autograde(assignment)
    assert done.returncode == 0, done.stderr[-3000:]
    scores = course.scores(assignment)
    for gid, (score, top) in scores["attacks"].items():
        assert score == (0 if gid in JAX_ATTACKS[assignment] else top), (gid, score, top)
    if assignment == "ch04_transformers":
        assert scores["tracer_check"]["ch04_q9_online_softmax"][0] == 0
