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


def _xdist_group(item: pytest.Item) -> str:
    """Which tests must share a worker: a notebook's cells, and tests sharing a module-scoped fixture value.

    Everything else runs wherever a worker is free (`make test` uses `--dist loadgroup`), so one
    slow file no longer holds a whole worker while the other idles.
    """
    if item.path.suffix == ".ipynb":
        return str(item.path)
    defs = getattr(item, "_fixtureinfo", None)
    shared = sorted(
        name for name, fixture in (defs.name2fixturedefs.items() if defs else ()) if fixture[-1].scope == "module"
    )
    if not shared:
        return item.nodeid
    params = getattr(item, "callspec", None)
    values = [f"{n}={params.params[n]}" if params and n in params.params else n for n in shared]
    return f"{item.path}::{','.join(values)}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
