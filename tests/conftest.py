"""Shared test set-up: the repository root on sys.path (for `exercises.keys`), its bytecode, the device
fixture, and a marker per tier: each test is marked with its folder (pure, jax, tpu, course, site), and a
notebook's cells with `notebooks`, so `pytest -m pure` picks a tier (`make unit`: pure and jax; `make tpu`). The
tiers of long tests run first (`FIRST_TO_LAST`)."""

import compileall
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# A grader without a sandbox watches its own files, bytecode included: compile them before any test,
# so that no test process importing a module for the first time writes one while a submission runs.
for _package in ("exercises", "book_lib"):
    compileall.compile_dir(ROOT / _package, quiet=1)
# Every figure book_lib draws in a test or a notebook kernel started from here is checked for legibility.
os.environ["BOOK_LIB_CHECK_FIGURES"] = "1"


@pytest.fixture(scope="session")
def eight_devices():
    """`devices.setup(8)` before a module's first JAX computation: 8 virtual CPU devices here."""
    from book_lib import devices

    devices.setup(8)
    return devices.choice()


TIERS = ("pure", "jax", "tpu", "course", "site")
# The order tests are handed to pytest-xdist's workers (`make test` keeps it: --no-loadscope-reorder): the
# longest modules first, each a minute or more of grading or of a browser (make bench), then the tiers of
# few long tests, so that the many short ones at the end fill whichever worker is free and neither waits
# on the other at the finish.
LONGEST_FIRST = (
    "test_hostile.py",
    "test_book.py",
    "test_grading.py",
    "test_distributed.py",
    "test_cheats.py",
    "test_unsandboxed.py",
)
FIRST_TO_LAST = ("course", "site", "tpu", "notebooks", "jax", "pure")


def _tier(item) -> str:
    path = Path(str(item.path)).resolve()
    tier = path.parent.name if path.parent.parent == ROOT / "tests" else "notebooks"
    return tier if tier in TIERS else "notebooks"


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(getattr(pytest.mark, _tier(item)))

    def rank(item) -> tuple[int, int]:
        name = Path(str(item.path)).name
        first = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
        return first, FIRST_TO_LAST.index(_tier(item))

    items.sort(key=rank)  # stable: each module keeps its own order
