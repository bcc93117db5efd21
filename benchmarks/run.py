"""`make bench`: time the execution of every notebook, each tier of the tests and the whole suite.

Each notebook runs in a fresh kernel (as nbval and the book build run it). Each tier of `make test`
runs on its own as `make test` runs it (`TIERS`: lint, tests/pure, tests/jax, `make unit`, tests/tpu,
tests/course, tests/site, the notebooks under nbval, `make floor`), then the suite as a whole.
Budgets (2 cores): a chapter under 60 s, `make unit` under 60 s, `make test` under 12 minutes;
`python benchmarks/run.py --tiers-only` prints only the tiers and the suite.
First it times the Pallas matmul against `jnp.dot` and the collective matmuls against the blocking
ones, as ratios from the same run; `python benchmarks/run.py --kernels-only` prints only that part.
Then it grades a class of 24 chapter 1 submissions with `make grade` on 1 and on 2 workers, and on a
2-process Dask cluster into PostgreSQL (`exercises/distributed.py`), and reports submissions per
minute (and checks the gradebooks agree); `--grading-only` prints only that.
Last it reports the HTML book's calculators in Chromium: the time to the first result after a
reader's first touch (loading Pyodide) and per recomputation, as the suite's browser test measured.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = {"chapters": 60.0, "solutions": 60.0}
PYTEST = [str(ROOT / ".venv" / "bin" / "pytest"), "-q", "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder"]
NBVAL = ["--nbval", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "--nbval-cell-timeout=300"]
# Each part of `make test` as it runs there: (what, command, budget in s or None).
TIERS = (
    ("make lint", ["make", "-s", "lint"], None),
    ("tests/pure", [*PYTEST, "tests/pure"], None),
    ("tests/jax", [*PYTEST, "tests/jax"], None),
    ("make unit (tests/pure and tests/jax)", ["make", "-s", "unit"], 60.0),
    ("tests/tpu (libtpu compiles)", ["env", "JAX_PLATFORMS=cpu", *PYTEST, "-p", "no:nbval", "tests/tpu"], None),
    ("tests/course", [*PYTEST, "tests/course"], None),
    ("tests/site", [*PYTEST, "tests/site"], None),
    ("notebooks (chapters, solutions; nbval)", [*PYTEST, "chapters", "solutions", *NBVAL], None),
    ("make floor (chapters at the jax floor)", ["make", "-s", "floor"], None),
)
SUITE_BUDGET_S = 720.0


def time_notebook(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def time_command(command: list[str]) -> tuple[float, int]:
    """Wall time of one command run from the repository root (s), and its exit status."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode


def time_tiers() -> list[tuple[str, float, float | None]]:
    """Each tier of `make test` on its own, then the whole suite: (what, seconds, budget) rows. The pytest
    tiers keep their folders where `make test` does (a tmpfs where there is one: the Makefile's TEST_TMP)."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    rows = []
    for name, command, budget in (*TIERS, ("make test", ["make", "-s", "test"], SUITE_BUDGET_S)):
        base = tempfile.mkdtemp(prefix="book-bench.", dir=shm if shm.is_dir() else None)
        if command[0].endswith("pytest"):
            command = [*command, f"--basetemp={base}"]
        seconds, code = time_command(command)
        shutil.rmtree(base, ignore_errors=True)
        rows.append((f"{name}{'' if code == 0 else f' (exit {code})'}", seconds, budget))
        print(f"{rows[-1][0]:<45} {seconds:7.1f} s", flush=True)
    return rows


def report_kernels() -> None:
    """Pallas matmul against jnp.dot, and the collective matmuls against the blocking ones, timed in this run."""
    from book_lib import bench, devices, kernels

    devices.setup(8)
    how = kernels.backend()
    print(how.describe())
    small = how.interpret  # interpreted kernels are slow: small sizes, float32
    sizes, dtype = ((256, 512), "float32") if small else ((1024, 2048, 4096), "bfloat16")
    rows = bench.compare_kernels(sizes, dtype)
    b, d, f = (512, 2048, 2048) if devices.choice().virtual else (4096, 8192, 8192)
    mesh_dtype = "float32" if devices.choice().mesh_platform == "cpu" else "bfloat16"
    rows += bench.compare_collective_matmuls(b, d, f, mesh_dtype)
    print(f"\n{'comparison':<58} {'candidate (s)':>13} {'baseline (s)':>13} {'speed ratio':>11}")
    for row in rows:
        print(f"{row.name:<58} {row.candidate_s:13.2e} {row.baseline_s:13.2e} {row.speed_ratio:11.3f}")
    print(
        "speed ratio = baseline time / candidate time (Pallas vs jnp.dot, collective vs blocking); "
        "above 1 the candidate is faster"
    )
    if how.interpret:
        print("The Pallas kernels ran interpreted (plain JAX ops, one grid step at a time): their ratio means nothing.")
    if devices.choice().mesh_platform == "cpu":
        print("The mesh is virtual CPU devices sharing this machine's cores: the collective ratio means little.")


def report_grading(n_submissions: int = 24, assignment: str = "ch01_rooflines") -> None:
    """Submissions graded per minute by `make grade` with 1 and 2 workers, on the same class."""
    import shutil
    import tempfile

    sys.path.insert(0, str(ROOT))
    from exercises import grade
    from exercises.keys import keys_for
    from tests.course.course_kit import Course, gradebook_scores, reference_answers, wrong_answer

    with tempfile.TemporaryDirectory(prefix="book-bench-grading-") as tmp:
        course = Course(Path(tmp) / "class", [assignment], seed=2026)
        values = course.values[assignment]
        keys, right = keys_for(assignment), reference_answers(assignment, values)
        wrong = {g + "_answer": wrong_answer(keys[g], g, right[g + "_answer"], values.get(g)) for g in keys}
        for i in range(n_submissions):
            course.submit(assignment, f"student{i:02d}", right if i % 2 else wrong)
        results = {}
        for jobs in (1, 2):
            copy = Path(tmp) / f"jobs{jobs}"
            shutil.copytree(course.root, copy)
            summary = grade.grade(copy, assignment, jobs=jobs, echo=lambda line: None)
            results[jobs] = gradebook_scores(copy, assignment)
            print(
                f"make grade JOBS={jobs}: {n_submissions} submissions in {summary['seconds']:.0f} s, "
                f"{summary['per_minute']:.1f} per minute",
                flush=True,
            )
        print("the two gradebooks agree:", results[1] == results[2])
        report_cluster(course, assignment, results[1])


def report_cluster(course, assignment: str, serial: dict) -> None:
    """Submissions graded per minute by a 2-process Dask `LocalCluster` into a throwaway PostgreSQL, on
    the same submissions as `course` (the cluster's start is not counted; each worker's first task
    loads nbgrader, as each local worker does)."""
    import shutil

    from exercises import distributed
    from tests.course.course_kit import Course
    from tests.course.services import PostgresServer, local_cluster

    server = PostgresServer()
    try:
        root = course.root.parent / "dask"
        on_postgres = Course(root, [assignment], seed=2026, db=server.create_database("bench"))
        shutil.copytree(course.root / "submitted", root / "submitted")
        with local_cluster(2) as address:
            summary = distributed.grade_on_cluster(root, assignment, address, echo=lambda line: None)
        n = len(summary["students"])
        print(
            f"Dask, 2 worker processes, PostgreSQL: {n} submissions in {summary['seconds']:.0f} s, "
            f"{summary['per_minute']:.1f} per minute",
            flush=True,
        )
        print("the cluster's gradebook agrees:", on_postgres.scores(assignment) == serial)
    finally:
        server.stop()


def main(argv: list[str]) -> int:
    if "--grading-only" in argv:
        report_grading()
        return 0
    rows: list[tuple[str, float, float | None]] = []
    if "--tiers-only" not in argv:
        report_kernels()
        if "--kernels-only" in argv:
            return 0
        report_grading()
        for folder in ("chapters", "solutions"):
            for path in sorted((ROOT / folder).glob("*.ipynb")):
                seconds = time_notebook(path)
                rows.append((str(path.relative_to(ROOT)), seconds, BUDGET_S[folder]))
                print(f"{rows[-1][0]:<45} {seconds:7.1f} s", flush=True)
    if "--no-suite" not in argv:
        rows += time_tiers()
    print(f"\n{'what':<45} {'time (s)':>9} {'budget (s)':>11}  ok")
    for name, seconds, budget in rows:
        ok = "" if budget is None else ("yes" if seconds <= budget else "NO")
        print(f"{name:<45} {seconds:9.1f} {'' if budget is None else f'{budget:.0f}':>11}  {ok}")
    report_calculators()
    return 0 if all(budget is None or s <= budget for _, s, budget in rows) else 1


def report_calculators() -> None:
    """The HTML book's calculators in Chromium, as the suite's browser test measured them in its run
    (tests/site/test_book.py writes _build/calculator-times.json): Pyodide's first result, then each change."""
    measured = ROOT / "_build" / "calculator-times.json"
    if not measured.exists():
        print("\ncalculators in the page: not measured (run make test first)")
        return
    print("\ncalculators in the page (Chromium, Pyodide)   median      max")
    for what, times in json.loads(measured.read_text()).items():
        print(f"  {what:<43} {statistics.median(times):7.0f} {max(times):8.0f}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
