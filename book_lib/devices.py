"""Which devices the demos run on, chosen once per kernel by `setup()`.

Every notebook calls `setup()` in its first code cell, before JAX starts a backend. With an
accelerator that has at least `n` devices, the mesh demos use those; otherwise JAX also gets `n`
virtual CPU devices for the mesh demos, while the single-chip demos keep the accelerator when there
is one. This module holds the project's only global state and is the only place that changes JAX's
configuration.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from book_lib.hardware import Chip, chip_from_device_kind

__all__ = [
    "Choice",
    "setup",
    "choice",
    "mesh_devices",
    "n_devices",
    "single_device",
    "chip",
    "make_mesh",
    "mesh_shape",
    "pallas_compiles",
]

_CHOICE: Choice | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """What `setup()` chose.

    Attributes:
        mesh_platform: platform of the mesh devices (`"cpu"`, `"tpu"` or `"gpu"`).
        n_mesh_devices: devices the mesh demos use (count).
        single_platform: platform of the device the single-chip demos use.
        device_kind: `device_kind` of that single device.
        virtual: True when the mesh devices are virtual CPU devices.
    """

    mesh_platform: str
    n_mesh_devices: int
    single_platform: str
    device_kind: str
    virtual: bool

    def describe(self) -> str:
        """One line for the reader."""
        if not self.virtual:
            return f"book_lib: using {self.n_mesh_devices} {self.mesh_platform.upper()} devices ({self.device_kind})"
        if self.single_platform == "cpu":
            return (
                f"book_lib: no accelerator found; using {self.n_mesh_devices} virtual CPU devices "
                "(timings are CPU timings, not TPU ones)"
            )
        return (
            f"book_lib: one {self.single_platform.upper()} ({self.device_kind}) for single-chip demos, "
            f"{self.n_mesh_devices} virtual CPU devices for the mesh demos"
        )


def setup(n: int = 8) -> None:
    """Choose the devices for this kernel and print one line saying which (idempotent).

    Must run before the first JAX computation: JAX fixes the number of CPU devices when its CPU
    backend starts. Calling it again keeps the first choice; `choice()` returns it.

    Args:
        n: devices the mesh demos want (count), >= 1.

    Raises:
        ValueError: `n` is not a positive int.
        RuntimeError: JAX already started with fewer than `n` CPU devices and no accelerator has `n`.
    """
    global _CHOICE
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}: not a positive int; allowed: 1, 2, 4, 8, ...")
    if _CHOICE is not None:
        print(_CHOICE.describe())
        return
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:
        pass  # backends already started: whatever JAX has is checked below
    default = jax.devices()
    if default[0].platform != "cpu" and len(default) >= n:
        chosen = Choice(
            mesh_platform=default[0].platform,
            n_mesh_devices=len(default),
            single_platform=default[0].platform,
            device_kind=default[0].device_kind,
            virtual=False,
        )
    else:
        cpus = jax.devices("cpu")
        if len(cpus) < n:
            raise RuntimeError(
                f"JAX started before book_lib.devices.setup() with {len(cpus)} CPU devices; "
                f"restart the kernel and run the setup cell first (it asks for {n})"
            )
        chosen = Choice(
            mesh_platform="cpu",
            n_mesh_devices=n,
            single_platform=default[0].platform,
            device_kind=default[0].device_kind,
            virtual=True,
        )
    _CHOICE = chosen
    print(chosen.describe())


def choice() -> Choice:
    """The choice `setup()` made (runs `setup()` first if nobody has)."""
    if _CHOICE is None:
        setup()
    return _CHOICE


def mesh_devices() -> list:
    """The devices the mesh demos use, in JAX's order."""
    import jax

    c = choice()
    return list(jax.devices(c.mesh_platform))[: c.n_mesh_devices]


def n_devices() -> int:
    """How many devices the mesh demos have (count)."""
    return choice().n_mesh_devices


def single_device():
    """The device single-chip demos and timings use: the accelerator when there is one."""
    import jax

    return jax.devices(choice().single_platform)[0]


def chip() -> Chip | None:
    """The `hardware.Chip` of `single_device()`, or None on a CPU or an unknown accelerator."""
    c = choice()
    return None if c.single_platform == "cpu" else chip_from_device_kind(c.device_kind)


def mesh_shape(n_axes: int = 2) -> tuple[int, ...]:
    """A near-cubic shape over `n_devices()` devices, largest axis first (8 -> (4, 2) or (2, 2, 2)).

    Raises:
        ValueError: `n_axes` is not a positive int.
    """
    if isinstance(n_axes, bool) or not isinstance(n_axes, int) or n_axes < 1:
        raise ValueError(f"n_axes={n_axes!r}: not a positive int; allowed: 1, 2, 3")
    remaining, shape = n_devices(), []
    for axes_left in range(n_axes, 0, -1):
        ideal = remaining ** (1 / axes_left) - 1e-9
        size = min(d for d in range(1, remaining + 1) if remaining % d == 0 and d >= ideal)
        shape.append(size)
        remaining //= size
    return tuple(shape)


def make_mesh(shape: Sequence[int], names: Sequence[str], *, axis_types: str = "explicit"):
    """A `jax.sharding.Mesh` of `shape` over the first prod(shape) mesh devices.

    Args:
        shape: devices along each axis (counts); their product may not exceed `n_devices()`.
        names: one name per axis (`("X", "Y")`).
        axis_types: `"explicit"` (sharding in types) or `"auto"` (the compiler chooses).

    Raises:
        ValueError: lengths differ, the product is too large, or an unknown axis type.
    """
    import jax
    from jax.sharding import AxisType

    kinds = {"explicit": AxisType.Explicit, "auto": AxisType.Auto}
    if axis_types not in kinds:
        raise ValueError(f"axis_types={axis_types!r}: unknown; allowed: 'explicit', 'auto'")
    shape, names = tuple(shape), tuple(names)
    if len(shape) != len(names):
        raise ValueError(f"shape={shape!r}: {len(shape)} axes but names={names!r} has {len(names)}")
    size = math.prod(shape)
    if size > n_devices() or size < 1:
        raise ValueError(f"shape={shape!r}: needs {size} devices; allowed: at most {n_devices()}")
    return jax.make_mesh(shape, names, (kinds[axis_types],) * len(shape), devices=mesh_devices()[:size])


def pallas_compiles() -> bool:
    """True when Pallas kernels compile for `single_device()` (TPU v4 and newer, or a GPU)."""
    c = choice()
    if c.single_platform == "gpu":
        return True
    found = chip()
    return c.single_platform == "tpu" and found is not None and found.name not in ("tpu-v2", "tpu-v3")
