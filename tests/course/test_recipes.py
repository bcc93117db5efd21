"""CONTRIBUTING's recipes, followed step by step: add a chip, add an autograded question, change a tolerance.

Each test does what its recipe says, on a copy or in memory, and then runs the checks the recipe
names, so a recipe that goes stale fails here.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

from book_lib import hardware
from book_lib import plots as book_plots
from exercises import build, variants
from exercises.grading import judge, pipeline, recorder
from exercises.keys import Key, pick, value
from tests.course.course_kit import wrong_answer

ROOT = Path(__file__).resolve().parents[2]

# ---- recipe 1: add a chip ----------------------------------------------------------------------------

NEW_TPU = """    _tpu(
        name="tpu-recipe",
        bf16_flops_per_s=3.0e15,  # vendor page, dense bf16
        int8_ops_per_s=6.0e15,
        hbm_bytes=256e9,
        hbm_bytes_per_s=8.0e12,
        ici_bytes_per_s=1.2e11,  # one link, one direction
        ici_links=6,
        ici_topology="3d-torus",
        cores_per_chip=2,
        host_shape=(2, 2, 1),
        pod_shape=(16, 16, 16),
        pcie_bytes_per_s=6.4e10,
        dcn_bytes_per_s=5.0e10,
        mxu_size=256,
        mxus_per_core=4,
        vpu_shape=(8, 128),
        device_kinds=(r"tpu recipe",),
        source="https://example.com/tpu-recipe (a chip made up for tests/course/test_recipes.py)",
    ),
"""


def test_add_a_chip(tmp_path):
    """Recipe 1 on a copy of `book_lib`: one entry in the table, a colour if the palette runs out,
    its name in the table's test; then the chip tests pass for it and the keys' chip lists hold it."""
    shutil.copytree(ROOT / "book_lib", tmp_path / "book_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tests").mkdir()
    for test in ("test_hardware.py", "test_every_chip.py"):
        shutil.copy(ROOT / "tests" / "pure" / test, tmp_path / "tests" / test)
    # 1. the table: after the newest chip of its family (TPUs come before the first GPU)
    table = tmp_path / "book_lib" / "hardware.py"
    text = table.read_text()
    first_gpu = text.index("    _gpu(\n")
    table.write_text(text[:first_gpu] + NEW_TPU + text[first_gpu:])
    # 2. a colour, when the table now has more chips than the palette has colours
    plots = tmp_path / "book_lib" / "plots.py"
    palette = re.search(r"^PALETTE = .*$", plots.read_text(), re.MULTILINE)
    assert palette, "plots.PALETTE moved: update recipe 1 in CONTRIBUTING.md"
    if len(hardware.CHIPS) + 1 > len(book_plots.PALETTE):
        plots.write_text(plots.read_text().replace(palette[0], palette[0] + "\nPALETTE += ((0.55, 0.34, 0.29),)"))
    # 3. the table's own test: every chip in order, the new one's headline figures
    pinned = tmp_path / "tests" / "test_hardware.py"
    figures = '        ("tpu-recipe", 3.0e15, 6.0e15, 8.0e12, 1.2e11),\n'
    pinned.write_text(
        pinned.read_text()
        .replace('"tpu-7x", ', '"tpu-7x", "tpu-recipe", ', 1)
        .replace("        # NVIDIA spec sheets", figures + "        # NVIDIA spec sheets", 1)
    )

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "MPLBACKEND": "Agg"}
    tests = [str(tmp_path / "tests" / t) for t in ("test_hardware.py", "test_every_chip.py")]
    select = "recipe or not (tpu or a100 or h100 or h200 or b200)"  # the new chip's cases and the chip-free ones
    command = [sys.executable, "-m", "pytest", "-v", "--rootdir", str(tmp_path), "-k", select, *tests]
    ran = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    # the table's test with the new figures, and every public function, property and plot of the chip
    assert len(re.findall(r"\[tpu-recipe[-\]].* PASSED", ran.stdout)) >= 4, ran.stdout[-3000:]
    found = subprocess.run(
        [sys.executable, "-c", KEY_LISTS], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
    )
    assert found.stdout.split() == [str(table), "tpu-recipe", "tpu-recipe", "True"], found.stdout + found.stderr


KEY_LISTS = """
from book_lib import hardware, plots
print(hardware.__file__)  # the copy
print(hardware.chip_names(family="tpu", since="tpu-v4")[-1])  # the keys' TPUS
print(hardware.chip_names(ici_topology="3d-torus")[-1])  # their TPUS_3D
print(plots.CHIP_COLORS["tpu-recipe"] not in [plots.CHIP_COLORS[n] for n in hardware.chip_names() if n != "tpu-recipe"])
"""


# ---- recipe 2: add an autograded question --------------------------------------------------------------

ASSIGNMENT = "recipe_demo"
GID = "recipe_q1_time"


def _cell(kind: str, source: str, grade_id: str, **nbgrader) -> nbformat.NotebookNode:
    make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    meta = {"grade_id": grade_id, "schema_version": 3, "grade": False, "solution": False, "locked": True, **nbgrader}
    return make(source, metadata={"nbgrader": meta})


def _question(points: int = 2, heading: str = "(<% pts %>)", tolerance: str = "within 1 %") -> list:
    """The four cells of recipe 2, as CONTRIBUTING lists them."""
    return [
        _cell(
            "markdown",
            f"## Q1 {heading}: the time of some work\n\n"
            "How long do $<% sci(flops) %>$ bf16 FLOPs take at the peak of a <% chip_name(tpu) %>?\n"
            f"Assign it **in seconds** ({tolerance}) to `t_work_s`.",
            f"{GID}_statement",
        ),
        _cell(
            "code",
            "### BEGIN SOLUTION\n"
            "t_work_s = <% flops %> / hardware.get_chip(<% tpu %>).bf16_flops_per_s\n"
            "### END SOLUTION",
            f"{GID}_answer",
            solution=True,
            locked=False,
        ),
        _cell("code", 'assert t_work_s > 0, "a time is positive"', f"{GID}_sanity"),
        _cell("code", "assert isinstance(t_work_s, float)", GID, grade=True, points=points),
    ]


def _notebook(cells: list) -> nbformat.NotebookNode:
    header = _cell(
        "markdown", "# Recipe demo exercises\n\n**<% total_points %> points.** Answer each question.", "header"
    )
    imports = _cell("code", "from book_lib import hardware", "imports")
    return nbformat.v4.new_notebook(cells=[header, imports, *cells])


def _time(flops: float, tpu: str) -> float:
    return flops / hardware.get_chip(tpu).bf16_flops_per_s


def _key(rel_tol: float = 0.01) -> Key:
    """Recipe 2's key, as `exercises/keys/recipe_demo.py` would write it; recipe 3 changes its `rel_tol`."""
    return value(
        "t_work_s",
        _time,
        rel_tol=rel_tol,
        params={"flops": 1e12, "tpu": "tpu-v5e"},
        draw=pick(flops=(2e12, 5e12, 3e13, 4e14), tpu=hardware.chip_names(family="tpu")),
        accept=lambda v: _time(**v) < 1.0,  # under a second, as the sanity check says
    )


KEY = _key()


@pytest.fixture
def demo(monkeypatch):
    """The recipe's key module, `exercises/keys/recipe_demo.py`, in memory: `KEYS` by grade_id."""
    module = types.ModuleType(f"exercises.keys.{ASSIGNMENT}")
    module.KEYS = {GID: KEY}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def _points(key: Key, spec_params: dict, answer: str, points: int = 2) -> int:
    """What the grader gives `answer` (the answer cell's code): the kernel's record judged in this process."""
    spec = {**pipeline.draw_spec(GID, key, random.Random(0)), "params": spec_params}
    space: dict = {}
    exec("from book_lib import hardware", space)  # noqa: S102 (the recipe's own cells)
    try:
        exec(answer, space)  # noqa: S102
    except NotImplementedError:
        pass  # the release's stub
    return points if judge.judge_record(key, spec, recorder.record(spec, space)) is None else 0


def test_add_a_question_points_and_names_written_once(demo, tmp_path):
    nb = variants.render(_notebook(_question(points=2)), ASSIGNMENT)
    assert build.question_problems(nb, ASSIGNMENT) == []
    assert nb.cells[0].source.endswith("**2 points.** Answer each question.")
    assert nb.cells[2].source.startswith("## Q1 (2 pts): ")
    three = variants.render(_notebook(_question(points=3)), ASSIGNMENT)  # the points change in one place
    assert "**3 points.**" in three.cells[0].source and three.cells[2].source.startswith("## Q1 (3 pts): ")
    # what the build refuses: a heading typed by hand that disagrees, a name the answer lacks, a missing cell
    typed = variants.render(_notebook(_question(points=3, heading="(2 pts)")), ASSIGNMENT)
    assert build.question_problems(typed, ASSIGNMENT) == [
        f"{GID}: the heading does not give its 3 pts; allowed: '(<% pts %>)'"
    ]
    unnamed = _notebook(_question())
    unnamed.cells[3].source = unnamed.cells[3].source.replace("t_work_s =", "t_s =")
    assert build.question_problems(variants.render(unnamed, ASSIGNMENT), ASSIGNMENT) == [
        f"{GID}: the answer does not define t_work_s"
    ]
    with pytest.raises(ValueError, match=rf"{GID}: cells \[.*\]; allowed: .*in this order"):
        build.check_questions(variants.render(_notebook(_question()[:2] + _question()[3:]), ASSIGNMENT), ASSIGNMENT)
    # nbgrader's generate_assignment renders the release from the template: points given, no solution
    source = tmp_path / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    source.parent.mkdir(parents=True)
    nbformat.write(_notebook(_question()), source)
    release = nbformat.read(build.generate_release(ASSIGNMENT, tmp_path), as_version=4)
    assert release.cells[2].source.startswith("## Q1 (2 pts): ")
    assert "NotImplementedError" in release.cells[3].source and "BEGIN SOLUTION" not in release.cells[3].source


def test_add_a_question_blank_scores_0_reference_full_wrong_0(demo):
    text = variants.render(_notebook(_question()), ASSIGNMENT)
    reference = build.MARKER.sub("", text.cells[3].source)
    assert _points(KEY, KEY.params, "# YOUR CODE HERE\nraise NotImplementedError()") == 0
    assert _points(KEY, KEY.params, reference) == 2
    assert _points(KEY, KEY.params, wrong_answer(KEY, GID, reference)) == 0
    # a class's own numbers: its draw meets `accept`, its reference is right, the text's is not
    values = variants.draw(7, ASSIGNMENT)[GID]
    assert KEY.accept(values) and values != KEY.params
    mine = build.MARKER.sub("", variants.render(_notebook(_question()), ASSIGNMENT, {GID: values}).cells[3].source)
    assert _points(KEY, values, mine) == 2 and _points(KEY, values, reference) == 0


# ---- recipe 3: change a tolerance --------------------------------------------------------------------


def test_change_a_tolerance(demo):
    text = variants.render(_notebook(_question()), ASSIGNMENT)
    right = _time(**KEY.params)
    off = {f: f"t_work_s = {right * (1 + f)!r}" for f in (0.015, 0.03)}
    assert _points(KEY, KEY.params, off[0.015]) == 0  # 1.5 % off fails within 1 %
    wider = _key(rel_tol=0.02)  # step 1: the key's rel_tol
    demo.KEYS[GID] = wider
    assert build.question_problems(text, ASSIGNMENT) == [
        f"{GID}: the statement does not say 'within 2 %', the key's tolerance"
    ], "the build refuses a statement that still says the old words"
    said = variants.render(_notebook(_question(tolerance="within 2 %")), ASSIGNMENT)  # step 2: the statement
    assert build.question_problems(said, ASSIGNMENT) == []
    assert _points(wider, KEY.params, off[0.015]) == 2 and _points(wider, KEY.params, off[0.03]) == 0
    demo.KEYS[GID] = _key(rel_tol=0.03)  # a tolerance with no words yet
    assert "add them to TOLERANCE_WORDS" in build.question_problems(said, ASSIGNMENT)[0]
