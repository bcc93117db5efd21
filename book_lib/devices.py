"""Which devices the demos run on, chosen once per kernel by `setup()`.

Every notebook calls `setup()` in its first code cell, before JAX starts a backend. With an
accelerator that has at least `n` devices, the mesh demos use those; otherwise JAX also gets `n`
virtual CPU devices for the mesh demos, while the single-chip demos keep the accelerator when there
is one. This module (with `book_lib.precision`, which it calls) holds the project's only global
state and is the only place that changes JAX's configuration.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from book_lib import checks
from book_lib.hardware import Chip, chip_from_device_kind

if TYPE_CHECKING:
    import jax

__all__ = [
    "Choice",
    "Hosts",
    "hosts_from_environment",
    "choose",
    "check_jax_version",
    "requested_cpu_devices",
    "DEMO_DEVICES",
    "ONE_CHIP_ENV_VAR",
    "upgrade_command",
    "setup",
    "choice",
    "mesh_devices",
    "n_devices",
    "single_device",
    "current_chip",
    "device_spec",
    "make_mesh",
    "mesh_shape",
    "pallas_compiles",
    "pallas_compiles_for",
    "MIN_PALLAS_COMPUTE_CAPABILITY",
    "compiling_for",
]

_CHOICE: Choice | None = None
# The devices of a TPU described, not present, while `compiling_for` traces programs for it.
_TARGET: list | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hosts:
    """How this process joins a run over several hosts, as its environment describes it.

    Attributes:
        source: the environment variable that said so.
        n_processes: processes in the run (one per host on a TPU slice) (count).
        initialize_kwargs: the arguments `setup()` passes to `jax.distributed.initialize`; empty
            where JAX reads them itself (Cloud TPU, Slurm, Open MPI).
    """

    source: str
    n_processes: int
    initialize_kwargs: dict[str, Any]


def _count_var(environ: Mapping[str, str], name: str) -> int:
    value = environ[name]
    try:
        return checks.count(name, int(value))
    except ValueError:
        raise ValueError(f"{name}={value!r}: not a count; allowed: an int >= 1") from None


def hosts_from_environment(environ: Mapping[str, str] | None = None) -> Hosts | None:
    """The multi-host run this process belongs to, or None for a single process.

    Read in order: `JAX_COORDINATOR_ADDRESS` (with `JAX_NUM_PROCESSES` and `JAX_PROCESS_ID`, for
    a cluster set up by hand); `TPU_WORKER_HOSTNAMES` (a Cloud TPU slice: one comma-separated name
    per host); `SLURM_NTASKS` (a Slurm job); `OMPI_COMM_WORLD_SIZE` (`mpirun`). One process
    (one host name, one task) is not a multi-host run.

    Args:
        environ: the variables to read (default: `os.environ`).

    Raises:
        ValueError: a count that is not an int >= 1, or a coordinator without its process count and id.
    """
    env = os.environ if environ is None else environ
    if env.get("JAX_COORDINATOR_ADDRESS"):
        missing = [v for v in ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID") if v not in env]
        if missing:
            raise ValueError(
                f"JAX_COORDINATOR_ADDRESS={env['JAX_COORDINATOR_ADDRESS']!r}: {' and '.join(missing)} unset; "
                "allowed: set JAX_NUM_PROCESSES (count) and JAX_PROCESS_ID (0 to count - 1) beside it"
            )
        n = _count_var(env, "JAX_NUM_PROCESSES")
        me = env["JAX_PROCESS_ID"]
        if not me.isdigit() or int(me) >= n:
            raise ValueError(f"JAX_PROCESS_ID={me!r}: not a process of {n}; allowed: 0 to {n - 1}")
        kwargs: dict[str, Any] = {
            "coordinator_address": env["JAX_COORDINATOR_ADDRESS"],
            "num_processes": n,
            "process_id": int(me),
        }
        return Hosts(source="JAX_COORDINATOR_ADDRESS", n_processes=n, initialize_kwargs=kwargs) if n > 1 else None
    if env.get("TPU_WORKER_HOSTNAMES"):
        n = len([h for h in env["TPU_WORKER_HOSTNAMES"].split(",") if h.strip()])
        return Hosts(source="TPU_WORKER_HOSTNAMES", n_processes=n, initialize_kwargs={}) if n > 1 else None
    for name in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        if env.get(name):
            n = _count_var(env, name)
            return Hosts(source=name, n_processes=n, initialize_kwargs={}) if n > 1 else None
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    """What `setup()` chose.

    Attributes:
        mesh_platform: platform of the mesh devices (`"cpu"`, `"tpu"` or `"gpu"`).
        n_mesh_devices: devices the mesh demos use (count).
        single_platform: platform of the device the single-chip demos use.
        device_kind: `device_kind` of that single device.
        n_accelerators: accelerator devices JAX found (count; 0 on a CPU-only runtime).
        virtual: True when the mesh devices are virtual CPU devices.
        matmul_emulation: `"bf16"` or `"tf32"` when CPU matmuls emulate an accelerator's rounding
            (`book_lib.precision`), else None.
        n_processes: JAX processes (hosts) the devices belong to (count; 1 on one machine).
        process_index: which of them this one is.
        compute_capability: an NVIDIA GPU's compute capability (`"7.5"`, `"8.0"`), else None.
        requested_by: the environment variable through which the user set the CPU device count
            (`requested_cpu_devices`), or None when `setup()` chose it.
        single_index: the single device's index in `jax.devices(single_platform)`: 0, or the CPU
            device after the mesh's when `ONE_CHIP_ENV_VAR` keeps it apart (a one-chip runtime's mix).
    """

    mesh_platform: str
    n_mesh_devices: int
    single_platform: str
    device_kind: str
    n_accelerators: int = 0
    virtual: bool
    matmul_emulation: str | None = None
    n_processes: int = 1
    process_index: int = 0
    compute_capability: str | None = None
    requested_by: str | None = None
    single_index: int = 0

    def describe(self) -> str:
        """One line for the reader."""
        hosts = f" on {self.n_processes} hosts (this is process {self.process_index})" if self.n_processes > 1 else ""
        emulation = (
            f"; CPU matmuls round float32 operands to {self.matmul_emulation}, as an accelerator does by default"
            if self.matmul_emulation
            else ""
        )
        if not self.virtual:
            return (
                f"book_lib: using {self.n_mesh_devices} {self.mesh_platform.upper()} devices "
                f"({self.device_kind}){hosts}{emulation}"
            )
        asked = (
            f", as your {self.requested_by} asks (the demos are written for {DEMO_DEVICES}; those that need more "
            "devices than there are say so and skip)"
            if self.requested_by
            else ""
        )
        devices = f"{self.n_mesh_devices} virtual CPU device{'s' * (self.n_mesh_devices != 1)}"
        if self.single_platform == "cpu" and self.single_index:
            return (
                f"book_lib: using {devices} for the mesh demos, and a CPU device of their own outside the mesh "
                f"for single-device demos and timings, as on a one-chip TPU or GPU runtime ({ONE_CHIP_ENV_VAR})"
                f"{emulation}"
            )
        if self.single_platform == "cpu":
            return (
                f"book_lib: no accelerator found; using {devices}{asked} (timings are CPU timings, not TPU ones)"
                f"{emulation}"
            )
        found = "one" if self.n_accelerators == 1 else f"{self.n_accelerators}"
        return (
            f"book_lib: found {found} {self.single_platform.upper()} device{'s' * (self.n_accelerators != 1)} "
            f"({self.device_kind}), fewer than the {self.n_mesh_devices} the mesh demos need: "
            f"those run on {devices}{asked}, single-device demos and timings "
            f"on the first {self.single_platform.upper()} device{emulation}"
        )


DEMO_DEVICES = 8  # the devices the mesh demos are written for: a TPU v5e-8, or 8 virtual CPU devices
# Set to 1, single-device work runs on a CPU device of its own beside the mesh's, the default device:
# the mix of a one-chip TPU or GPU runtime (arrays on the chip, the mesh demos on virtual CPU devices),
# which a CPU-only machine otherwise never shows (the test suite runs the chapters so once).
ONE_CHIP_ENV_VAR = "BOOK_LIB_EMULATE_ONE_CHIP"
_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\S+)")


def requested_cpu_devices(environ: Mapping[str, str] | None = None) -> tuple[int, str] | None:
    """The CPU device count the user set before `setup()`, and where: `JAX_NUM_CPU_DEVICES`, else the
    `--xla_force_host_platform_device_count` flag in `XLA_FLAGS`; None when neither says.

    Args:
        environ: the variables to read (default: `os.environ`).

    Raises:
        ValueError: the variable holds no positive count.
    """
    env = os.environ if environ is None else environ
    if env.get("JAX_NUM_CPU_DEVICES"):
        return _count_var(env, "JAX_NUM_CPU_DEVICES"), "JAX_NUM_CPU_DEVICES"
    found = _FLAG.findall(env.get("XLA_FLAGS", ""))
    if found:
        return _count_var({"XLA_FLAGS": found[-1]}, "XLA_FLAGS"), "XLA_FLAGS"
    return None


def check_jax_version(installed: str | None = None) -> None:
    """Stop with a clear message when the installed jax is older than book_lib requires.

    The floor is the one `pyproject.toml` declares (read from the installed package's metadata).

    Args:
        installed: a jax version string to check instead of the installed one (for tests).

    Raises:
        RuntimeError: jax is older than required; the message names both versions and the fix.
    """
    import importlib.metadata

    required = _required_jax()
    have = installed if installed is not None else importlib.metadata.version("jax")
    if required is None or _version_tuple(have) >= _version_tuple(required):
        return
    raise RuntimeError(
        f"jax {have} is installed, but book_lib needs jax>={required} (jax.shard_map, jax.set_mesh, jax.P "
        f"and sharded .at[] updates as these notebooks use them). Fix: run  !{upgrade_command(required)}  in a "
        "cell, then restart the runtime and run this cell again."
    )


# Where a runtime's accelerator shows itself before JAX is imported: a TPU VM's chips (/dev/accel*, or
# /dev/vfio on newer ones), an NVIDIA driver's tool. The setup cell repeats this line (tools/notebooks.py).
TPU_DEVICE_FILES = ("/dev/accel0", "/dev/vfio/0")


def upgrade_command(required: str, *, exists: Any = os.path.exists, which: Any = None) -> str:
    """The one pip command that brings this runtime's jax to `required`, with the TPU or CUDA extra it needs.

    Args:
        required: the lowest jax version (`"0.8.2"`).
        exists, which: `os.path.exists` and `shutil.which` (replaced in tests).
    """
    import shutil

    which = which or shutil.which
    extra = "[tpu]" if any(exists(p) for p in TPU_DEVICE_FILES) else "[cuda12]" if which("nvidia-smi") else ""
    return f'pip install -U "jax{extra}>={required}"'


def _required_jax() -> str | None:
    """The lowest jax version book_lib's installed metadata allows, or None when it states none."""
    import importlib.metadata

    try:
        requires = importlib.metadata.requires("book_lib") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for requirement in requires:
        match = re.fullmatch(r"jax\s*>=\s*([0-9][0-9.]*)", requirement.split(";")[0].strip())
        if match:
            return match.group(1)
    return None


def _version_tuple(version: str) -> tuple[int, ...]:
    """(0, 8, 0) from "0.8.0" or "0.8.0.dev20251101"; stops at the first part that is not a number."""
    parts = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def choose(
    platform: str,
    device_kind: str,
    n_found: int,
    n: int,
    *,
    emulation: str | None = None,
    compute_capability: str | None = None,
) -> Choice:
    """The choice `setup()` makes when JAX's default backend has `n_found` devices of `platform`.

    With an accelerator of at least `n` devices the mesh demos use it; otherwise they use `n`
    virtual CPU devices, and single-device demos keep the first accelerator device if there is one.

    Args:
        platform: `jax.devices()[0].platform` (`"cpu"`, `"tpu"`, `"gpu"`).
        device_kind: `jax.devices()[0].device_kind`.
        n_found: `len(jax.devices())` (count), >= 1.
        n: devices the mesh demos want (count), >= 1.
        emulation: the matmul rounding in force (`book_lib.precision`), or None.
        compute_capability: `jax.devices()[0].compute_capability` on an NVIDIA GPU, else None.
    """
    checks.count("n_found", n_found)
    checks.count("n", n)
    accelerators = 0 if platform == "cpu" else n_found
    enough = accelerators >= n
    return Choice(
        mesh_platform=platform if enough else "cpu",
        n_mesh_devices=n_found if enough else n,
        single_platform=platform,
        device_kind=device_kind,
        n_accelerators=accelerators,
        virtual=not enough,
        matmul_emulation=emulation,
        compute_capability=compute_capability,
    )


def _cpu_device_count(n: int) -> tuple[int, str | None, bool]:
    """(mesh devices, the variable the user set them with or None, one-chip emulation on) before JAX starts.

    Asks JAX for `n` CPU devices (one more when `ONE_CHIP_ENV_VAR` keeps single-device work apart),
    unless the user set a count themselves (`requested_cpu_devices`), which JAX reads itself.
    """
    import jax

    requested = requested_cpu_devices()
    apart = os.environ.get(ONE_CHIP_ENV_VAR) == "1"
    if requested is not None and apart:
        raise ValueError(f"{ONE_CHIP_ENV_VAR}=1 and {requested[1]}: set one or the other")
    if requested is not None:
        return requested[0], requested[1], False
    try:
        jax.config.update("jax_num_cpu_devices", n + apart)
    except RuntimeError:
        pass  # backends already started: whatever JAX has is checked by `setup`
    return n, None, apart


def _matmul_emulation() -> str | None:
    """Start the CPU matmul rounding `book_lib.precision.ENV_VAR` asks for; its kind, or None."""
    from book_lib import precision

    emulation = os.environ.get(precision.ENV_VAR) or None
    if emulation is not None:
        if emulation not in precision.MANTISSA_BITS:
            raise ValueError(
                f"{precision.ENV_VAR}={emulation!r}: unknown matmul precision; "
                f"allowed: {', '.join(precision.MANTISSA_BITS)} or unset"
            )
        precision.emulate(emulation)
    return emulation


def setup(n: int = DEMO_DEVICES) -> None:
    """Choose the devices for this kernel and print one line saying which (idempotent).

    Must run before the first JAX computation: JAX fixes the number of CPU devices when its CPU
    backend starts. Calling it again keeps the first choice; `choice()` returns it. First checks
    that jax is new enough; when the environment describes a run over several hosts
    (`hosts_from_environment`), joins it with `jax.distributed.initialize`, so that `jax.devices()`
    lists every host's devices; when the environment variable `book_lib.precision.ENV_VAR` says
    `bf16` or `tf32`, CPU matmuls then emulate that rounding (the test suite's accelerator mode).
    A CPU device count the user set themselves (`requested_cpu_devices`) is kept and replaces `n`;
    `ONE_CHIP_ENV_VAR` keeps single-device work on a CPU device beside the mesh's. In a Jupyter
    kernel, inline figures are then drawn at twice their resolution (`_sharp_figures`).

    Args:
        n: devices the mesh demos want (count), >= 1.

    Raises:
        ValueError: `n` is not a positive int, the precision variable names an unknown kind, or both
            a device count and the one-chip emulation are set.
        RuntimeError: jax is too old, or JAX already started with fewer than `n` CPU devices and no
            accelerator has `n`.
    """
    global _CHOICE
    checks.count("n", n)
    if _CHOICE is not None:
        print(_CHOICE.describe())
        return
    check_jax_version()
    import jax

    n, requested_by, apart = _cpu_device_count(n)
    hosts = hosts_from_environment()
    if hosts is not None:  # before the first backend starts: devices then span every host
        jax.distributed.initialize(**hosts.initialize_kwargs)
    emulation = _matmul_emulation()
    default = jax.devices()
    capability = getattr(default[0], "compute_capability", None)  # NVIDIA GPUs only
    chosen = choose(
        default[0].platform, default[0].device_kind, len(default), n, emulation=emulation, compute_capability=capability
    )
    if hosts is not None:
        chosen = replace(chosen, n_processes=jax.process_count(), process_index=jax.process_index())
    if chosen.virtual and len(jax.devices("cpu")) < n + apart:
        raise RuntimeError(
            f"JAX started before book_lib.devices.setup() with {len(jax.devices('cpu'))} CPU devices; "
            f"restart the kernel and run the setup cell first (it asks for {n + apart})"
        )
    if chosen.virtual:
        chosen = replace(chosen, requested_by=requested_by)
    if apart and chosen.single_platform == "cpu":
        chosen = replace(chosen, single_index=n)
        jax.config.update("jax_default_device", jax.devices("cpu")[n])
    _CHOICE = chosen
    print(chosen.describe())
    _register_needs_devices()
    _sharp_figures()


def _register_needs_devices() -> None:
    """Give a running IPython the cell magic `%%needs_devices N` (nothing outside IPython).

    A cell that starts with it runs as usual when the mesh demos have at least N devices; with fewer
    (the reader's own `XLA_FLAGS` device count), it is skipped with one line saying so.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def needs_devices(line: str, cell: str) -> None:
        n = checks.count("%%needs_devices N", int(line))
        if n_devices() < n:
            print(
                f"Skipped: this cell needs a mesh of {n} devices and the mesh demos have {n_devices()} here "
                f"(set by your {choice().requested_by or 'runtime'}); the text around it still reads as written."
            )
            return
        if not shell.run_cell(cell, store_history=False).success:
            raise RuntimeError("the cell above failed: its error is printed above")

    shell.register_magic_function(needs_devices, "cell", "needs_devices")


def _sharp_figures() -> None:
    """In a Jupyter kernel, draw inline figures as 2x PNGs shown at their 1x size (IPython's "retina").

    Sharp on a high-density screen and in the HTML book, the same size on the page; nothing outside one.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if getattr(get_ipython(), "kernel", None) is None:
        return
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")


def choice() -> Choice:
    """The choice `setup()` made (runs `setup()` first if nobody has)."""
    if _CHOICE is None:
        setup()
    return cast(Choice, _CHOICE)  # setup() has set it


def mesh_devices() -> list:
    """The devices the mesh demos use, in JAX's order."""
    import jax

    c = choice()
    if _TARGET is not None:
        return _TARGET[: c.n_mesh_devices]
    return list(jax.devices(c.mesh_platform))[: c.n_mesh_devices]


def n_devices() -> int:
    """How many devices the mesh demos have (count)."""
    return choice().n_mesh_devices


def single_device() -> jax.Device:
    """The device single-chip demos and timings use: the accelerator when there is one."""
    import jax

    c = choice()
    if _TARGET is not None:
        return _TARGET[0]
    return jax.devices(c.single_platform)[c.single_index]


def current_chip() -> Chip | None:
    """The `hardware.Chip` of `single_device()`, or None on a CPU or an unknown accelerator."""
    c = choice()
    return None if c.single_platform == "cpu" else chip_from_device_kind(c.device_kind)


def device_spec() -> Chip | None:
    """The figures of ONE JAX device, `single_device()`: its chip's, or half of them where a device is one core.

    On TPU v2, v3 and 7x JAX shows each TensorCore as a device, so a device has half the chip's
    FLOPs/s, HBM and HBM bandwidth (`Chip.per_device()`). None on a CPU or an unknown accelerator.
    """
    found = current_chip()
    return None if found is None else found.per_device()


def mesh_shape(n_axes: int = 2) -> tuple[int, ...]:
    """A near-cubic shape over `n_devices()` devices, largest axis first (8 -> (4, 2) or (2, 2, 2)).

    Raises:
        ValueError: `n_axes` is not a positive int.
    """
    checks.count("n_axes", n_axes)
    remaining, shape = n_devices(), []
    for axes_left in range(n_axes, 0, -1):
        ideal = remaining ** (1 / axes_left) - 1e-9
        size = min(d for d in range(1, remaining + 1) if remaining % d == 0 and d >= ideal)
        shape.append(size)
        remaining //= size
    return tuple(shape)


def make_mesh(shape: Sequence[int], names: Sequence[str], *, axis_types: str = "explicit") -> jax.sharding.Mesh:
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


# Pallas compiles with Triton on NVIDIA GPUs of this compute capability and newer (Ampere, 8.0);
# older ones (Colab's T4, 7.5) fail in Triton, so they interpret.
MIN_PALLAS_COMPUTE_CAPABILITY = (8, 0)


# Mosaic on TPU v2 and v3 has no bfloat16 matmul (E2001 CompileTimeMosaicUnsupportedRhsType, from
# libtpu's own compiler: tests/tpu); float32 kernels compile there.
_NO_BF16_PALLAS = ("tpu-v2", "tpu-v3")


def pallas_compiles_for(
    platform: str, chip_name: str | None, compute_capability: str | None = None, dtype: str = "float32"
) -> bool:
    """True when Pallas kernels on `dtype` operands compile for a device: a TPU (Mosaic; on TPU v2 and
    v3 float32 only, as their Mosaic refuses a bfloat16 matmul), or an NVIDIA GPU of compute capability
    8.0 or newer (Triton). Anything else interprets them (`interpret=True`).

    Args:
        platform: the device's platform (`"cpu"`, `"tpu"`, `"gpu"`).
        chip_name: its `hardware.Chip` name (`"tpu-v5e"`), or None when unknown.
        compute_capability: an NVIDIA GPU's compute capability (`"7.5"`), or None (not NVIDIA).
        dtype: the kernel's operand dtype (`"float32"`, `"bfloat16"`).
    """
    if platform == "gpu":
        return compute_capability is not None and _version_tuple(compute_capability) >= MIN_PALLAS_COMPUTE_CAPABILITY
    if platform != "tpu" or chip_name is None:
        return False
    return chip_name not in _NO_BF16_PALLAS or dtype == "float32"


def pallas_compiles(dtype: str = "float32") -> bool:
    """`pallas_compiles_for` the device of `single_device()` and `dtype` operands."""
    c, found = choice(), current_chip()
    return pallas_compiles_for(c.single_platform, None if found is None else found.name, c.compute_capability, dtype)


@contextlib.contextmanager
def compiling_for(target: Sequence[jax.Device]) -> Iterator[Choice]:
    """While inside, book_lib's choice of devices is `target`, a TPU described rather than present
    (`book_lib.tpu_aot`): `mesh_devices()`, `single_device()`, `current_chip()`, `make_mesh` and the
    kernels' decisions are that TPU's, so programs traced inside are the ones a student there runs.
    They can be compiled for it, not run. The choice made by `setup()` comes back on leaving. JAX's
    caches are cleared on entering and on leaving: a program traced under one choice (a kernel
    compiled, or interpreted) must not be reused under another.

    Args:
        target: the described TPU's devices (`jax.experimental.topologies`), all of one kind.

    Raises:
        ValueError: no devices, or devices of several kinds.
    """
    import jax

    global _CHOICE, _TARGET
    found = list(target)
    kinds = {d.device_kind for d in found}
    if len(kinds) != 1:
        raise ValueError(f"target={found!r}: devices of kinds {sorted(kinds)}; allowed: one or more of one kind")
    saved = (_CHOICE, _TARGET)
    (kind,) = kinds
    _CHOICE = Choice(
        mesh_platform=found[0].platform,
        n_mesh_devices=len(found),
        single_platform=found[0].platform,
        device_kind=kind,
        n_accelerators=len(found),
        virtual=False,
    )
    _TARGET = found
    jax.clear_caches()
    try:
        yield _CHOICE
    finally:
        _CHOICE, _TARGET = saved
        jax.clear_caches()
