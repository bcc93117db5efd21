"""The TPU tier: programs compiled by libtpu for described TPU slices (`book_lib.tpu_aot`); nothing runs."""

import pytest

from book_lib import tpu_aot


@pytest.fixture(scope="session", autouse=True)
def _libtpu(eight_devices):
    """libtpu is required, not optional: `make tpu` and `make test` install the pinned one."""
    if not tpu_aot.available():
        pytest.fail("libtpu is not installed: run `make tpu` (it installs requirements-tpu.lock into .venv)")
    return eight_devices
