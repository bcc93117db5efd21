"""`make bench`: time the execution of every notebook and of the test suite, then print a table.

Each notebook runs in a fresh kernel (as nbval and the book build run it); the suite is timed as
`make test` runs it. Budgets (2 cores): a chapter under 60 s; the suite under 10 minutes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = {"chapters": 60.0, "solutions": 60.0}


def time_notebook(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def time_suite() -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(["make", "-s", "test"], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, done.returncode


def main(argv: list[str]) -> int:
    rows = []
    for folder in ("chapters", "solutions"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            seconds = time_notebook(path)
            rows.append((str(path.relative_to(ROOT)), seconds, BUDGET_S[folder]))
            print(f"{rows[-1][0]:<45} {seconds:7.1f} s", flush=True)
    if "--no-suite" not in argv:
        seconds, code = time_suite()
        rows.append((f"make test (exit {code})", seconds, 600.0))
    print(f"\n{'what':<45} {'time (s)':>9} {'budget (s)':>11}  ok")
    for name, seconds, budget in rows:
        print(f"{name:<45} {seconds:9.1f} {budget:11.0f}  {'yes' if seconds <= budget else 'NO'}")
    return 0 if all(s <= b for _, s, b in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
