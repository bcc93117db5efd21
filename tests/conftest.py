"""Shared test set-up: the repository root on sys.path (for `exercises.keys`), its bytecode, the device
fixture, and a marker per tier: each test is marked with its folder (pure, jax, course, site), and a
notebook's cells with `notebooks`, so `pytest -m pure` picks a tier (`make unit`: pure and jax)."""

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


TIERS = ("pure", "jax", "course", "site")


def pytest_collection_modifyitems(items):
    for item in items:
        path = Path(str(item.path)).resolve()
        tier = path.parent.name if path.parent.parent == ROOT / "tests" else "notebooks"
        item.add_marker(getattr(pytest.mark, tier if tier in TIERS else "notebooks"))
