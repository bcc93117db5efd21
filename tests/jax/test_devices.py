"""book_lib.devices: the setup cell's choice of devices, a reader's own device count, hosts, the jax floor, meshes."""

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402
import pytest  # noqa: E402

from book_lib import devices  # noqa: E402

pytestmark = pytest.mark.usefixtures("eight_devices")


def test_setup_gives_eight_cpu_devices_here(eight_devices, capsys):
    assert eight_devices.virtual and eight_devices.mesh_platform == "cpu" and eight_devices.n_accelerators == 0
    assert devices.n_devices() == 8 and len(devices.mesh_devices()) == 8
    devices.setup(8)
    assert devices.choice() is eight_devices, "a second call keeps the first choice"
    assert "virtual CPU devices" in capsys.readouterr().out
    assert devices.current_chip() is None and devices.device_spec() is None and not devices.pallas_compiles()


def test_setup_rejects_bad_n():
    with pytest.raises(ValueError, match="n=0"):
        devices.setup(0)


def test_an_accelerator_with_enough_devices_runs_the_mesh_demos():
    v2 = devices.choose("tpu", "TPU v2", 8, 8)
    assert not v2.virtual and v2.n_mesh_devices == 8 and v2.mesh_platform == "tpu"
    assert v2.describe() == "book_lib: using 8 TPU devices (TPU v2)"


@pytest.mark.parametrize(
    ("platform", "kind", "found"), [("tpu", "TPU v5 lite", 1), ("gpu", "NVIDIA A100-SXM4-40GB", 4)]
)
def test_too_few_accelerators_are_reported_as_they_are(platform, kind, found):
    chosen = devices.choose(platform, kind, found, 8)
    assert chosen.virtual and chosen.mesh_platform == "cpu" and chosen.n_accelerators == found
    line = chosen.describe()
    assert (f"found {'one' if found == 1 else found} {platform.upper()} device" in line) and kind in line
    assert "8 virtual CPU devices" in line and ("devices (" in line) == (found > 1)


def test_an_unknown_gpu_is_named_not_called_a_cpu():
    chosen = devices.choose("gpu", "Tesla T4", 1, 8)
    assert "Tesla T4" in chosen.describe() and "CPU timings" not in chosen.describe()


MULTI_HOST_VARS = (
    "JAX_COORDINATOR_ADDRESS",
    "JAX_NUM_PROCESSES",
    "JAX_PROCESS_ID",
    "TPU_WORKER_HOSTNAMES",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
)


def test_setup_joins_a_multi_host_run_when_the_environment_says_so(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kwargs: calls.append(kwargs))
    for name in MULTI_HOST_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(devices, "_CHOICE", None)
    devices.setup(8)
    assert calls == [], "one machine: no jax.distributed"
    monkeypatch.setattr(devices, "_CHOICE", None)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "10.0.0.1:8476")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "4")
    monkeypatch.setenv("JAX_PROCESS_ID", "2")
    devices.setup(8)
    assert calls == [{"coordinator_address": "10.0.0.1:8476", "num_processes": 4, "process_id": 2}]
    assert devices.choice().n_processes == jax.process_count() == 1, "the stand-in joined nothing"
    assert "virtual CPU devices" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("environ", "source", "n", "kwargs"),
    [
        ({"TPU_WORKER_HOSTNAMES": "t1k-w-0,t1k-w-1,t1k-w-2,t1k-w-3"}, "TPU_WORKER_HOSTNAMES", 4, {}),
        ({"SLURM_NTASKS": "16"}, "SLURM_NTASKS", 16, {}),
        ({"OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_SIZE", 2, {}),
        (
            {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"},
            "JAX_COORDINATOR_ADDRESS",
            2,
            {"coordinator_address": "h:1", "num_processes": 2, "process_id": 0},
        ),
    ],
)
def test_hosts_from_environment_reads_each_launcher(environ, source, n, kwargs):
    hosts = devices.hosts_from_environment(environ)
    assert (hosts.source, hosts.n_processes, hosts.initialize_kwargs) == (source, n, kwargs)


def test_one_host_is_not_a_multi_host_run_and_bad_counts_are_refused():
    for single in ({}, {"TPU_WORKER_HOSTNAMES": "t1k-w-0"}, {"SLURM_NTASKS": "1"}, {"OMPI_COMM_WORLD_SIZE": ""}):
        assert devices.hosts_from_environment(single) is None, single
    with pytest.raises(ValueError, match="SLURM_NTASKS='many'"):
        devices.hosts_from_environment({"SLURM_NTASKS": "many"})
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES and JAX_PROCESS_ID unset"):
        devices.hosts_from_environment({"JAX_COORDINATOR_ADDRESS": "h:1"})
    with pytest.raises(ValueError, match="JAX_PROCESS_ID='4': not a process of 4"):
        devices.hosts_from_environment(
            {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "4"}
        )


def test_several_hosts_are_named_in_the_setup_line():
    line = devices.Choice(
        mesh_platform="tpu",
        n_mesh_devices=32,
        single_platform="tpu",
        device_kind="TPU v5 lite",
        virtual=False,
        n_accelerators=32,
        n_processes=4,
        process_index=1,
    ).describe()
    assert line == "book_lib: using 32 TPU devices (TPU v5 lite) on 4 hosts (this is process 1)"


@pytest.mark.parametrize(
    ("environ", "want"),
    [
        ({}, None),
        ({"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}, (4, "XLA_FLAGS")),
        (
            {"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=16"},
            (16, "XLA_FLAGS"),
        ),
        (
            {"JAX_NUM_CPU_DEVICES": "2", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"},
            (2, "JAX_NUM_CPU_DEVICES"),
        ),
    ],
)
def test_a_users_own_cpu_device_count_is_read(environ, want):
    assert devices.requested_cpu_devices(environ) == want


def test_a_users_device_count_that_is_no_count_is_refused():
    with pytest.raises(ValueError, match="XLA_FLAGS='0'"):
        devices.requested_cpu_devices({"XLA_FLAGS": "--xla_force_host_platform_device_count=0"})


def _setup_line(env: dict) -> list[str]:
    """What `setup()` prints, and the devices it chose, in a fresh process with `env` added."""
    code = (
        "import jax.numpy as jnp; from book_lib import devices; devices.setup(); "
        "print(devices.n_devices(), devices.mesh_devices()[-1].id, devices.single_device().id, jnp.ones(1).devices())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")} | env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()


@pytest.mark.parametrize("count", [1, 16])
def test_setup_keeps_a_users_own_device_count(count):
    line, chosen = _setup_line({"XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"})
    assert chosen.split()[:3] == [str(count), str(count - 1), "0"], chosen
    assert f"using {count} virtual CPU device" in line and "as your XLA_FLAGS asks" in line


def test_one_chip_emulation_keeps_single_device_work_beside_the_mesh():
    """BOOK_LIB_EMULATE_ONE_CHIP: the mesh on CPU devices 0 to 7, single-device work and new arrays on
    device 8, as a one-chip TPU runtime puts them on its chip."""
    line, chosen = _setup_line({devices.ONE_CHIP_ENV_VAR: "1"})
    assert chosen.split()[:3] == ["8", "7", "8"] and "id=8" in chosen, chosen
    assert "outside the mesh" in line


def test_choose_rejects_bad_counts():
    with pytest.raises(ValueError, match="n_found=0"):
        devices.choose("gpu", "x", 0, 8)


@pytest.mark.parametrize("old", ["0.9.2", "0.4.38", "0.9.9.dev20260101"])
def test_an_old_jax_stops_with_the_versions_and_the_fix(old):
    with pytest.raises(RuntimeError) as err:
        devices.check_jax_version(old)
    message = str(err.value)
    assert f"jax {old} is installed" in message and "jax>=0.10.0" in message and "pip install -U" in message


@pytest.mark.parametrize("new", ["0.10.0", "0.10.2", "1.0.0"])
def test_a_new_enough_jax_passes(new):
    devices.check_jax_version(new)


def test_mesh_shapes_divide_the_devices():
    assert devices.mesh_shape(1) == (8,)
    assert devices.mesh_shape(2) == (4, 2)
    assert devices.mesh_shape(3) == (2, 2, 2)
    with pytest.raises(ValueError, match="n_axes=0"):
        devices.mesh_shape(0)


def test_make_mesh_axis_types_and_errors():
    mesh = devices.make_mesh((4, 2), ("X", "Y"), axis_types="auto")
    assert dict(mesh.shape) == {"X": 4, "Y": 2}
    assert all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types)
    with pytest.raises(ValueError, match="axis_types='manual'"):
        devices.make_mesh((2,), ("X",), axis_types="manual")
    with pytest.raises(ValueError, match=r"shape=\(4, 4\)"):
        devices.make_mesh((4, 4), ("X", "Y"))
    with pytest.raises(ValueError, match=r"shape=\(2,\)"):
        devices.make_mesh((2,), ("X", "Y"))
