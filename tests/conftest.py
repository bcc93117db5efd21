"""Shared test set-up: the repository root on sys.path (for `exercises.keys`), and the device fixture."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def eight_devices():
    """`devices.setup(8)` before a module's first JAX computation: 8 virtual CPU devices here."""
    from book_lib import devices

    devices.setup(8)
    return devices.choice()
