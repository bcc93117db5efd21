"""book_lib.devices, bench, hlo and plots: the parts that touch JAX or matplotlib."""

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402
from jax import P  # noqa: E402

from book_lib import bench, devices, diagrams, hlo, model_plots, plots, precision  # noqa: E402
from book_lib.numfmt import fmt

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


def test_precision_emulation_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="kind='fp8'"):
        precision.emulate("fp8")


EMULATED = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np
    from book_lib import devices, hlo
    devices.setup(8)
    x, y = jax.random.normal(jax.random.key(0), (64, 256)), jax.random.normal(jax.random.key(1), (256, 32))
    bits = {"bf16": jnp.bfloat16}.get(devices.choice().matmul_emulation)
    rounded = lambda a: np.asarray(a.astype(bits).astype(jnp.float32), np.float64) if bits else None
    exact = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
    default = np.asarray(jax.jit(jnp.matmul)(x, y), np.float64)
    with jax.default_matmul_precision("highest"):
        highest = np.asarray(jax.jit(lambda a, b: a @ b)(x, y), np.float64)
    grad = np.asarray(jax.grad(lambda a: (a @ y).sum())(x), np.float64)
    print("default", np.abs(default - exact).max())
    print("highest", np.abs(highest - exact).max())
    print("grad", np.abs(grad - np.ones((64, 32)) @ np.asarray(y, np.float64).T).max())
    if bits:
        print("rounded", np.abs(default - rounded(x) @ rounded(y)).max())
    f = lambda a, b: a @ b
    print("flops", hlo.cost(hlo.compile_on_cpu(f, x, y)).flops, "exact", 2 * 64 * 256 * 32)
    """
)


@pytest.mark.parametrize("kind", ["bf16", "tf32"])
def test_emulated_precision_rounds_default_matmuls_only(kind):
    env = {**os.environ, precision.ENV_VAR: kind}
    done = subprocess.run([sys.executable, "-c", EMULATED], capture_output=True, text=True, env=env, check=True)
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines()[1:])
    assert f"round float32 operands to {kind}" in done.stdout.splitlines()[0]
    assert float(out["default"]) > 1e-3, "a default-precision matmul is rounded"
    assert float(out["highest"]) < 1e-4, "'highest' stays exact"
    assert float(out["grad"]) > 1e-3, "the backward pass's matmuls are rounded too"
    if kind == "bf16":
        assert float(out["rounded"]) < 1e-3, "exactly bf16 operands with float32 accumulation"
    flops, exact = out["flops"].split(" exact ")
    assert float(flops) == float(exact), "compile_on_cpu counts the program as written"


def test_an_unknown_precision_variable_is_refused():
    env = {**os.environ, precision.ENV_VAR: "fp8"}
    code = "from book_lib import devices; devices.setup(8)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and f"{precision.ENV_VAR}='fp8'" in done.stderr


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


def test_time_jitted_returns_ordered_positive_times():
    t = bench.time_jitted(lambda x: x * 2, jnp.ones(1024), n_warmup=1, n_runs=3)
    assert 0 < t.min_s <= t.median_s <= t.max_s and t.n_runs == 3 and t.compile_s > 0
    with pytest.raises(ValueError, match="n_runs=0"):
        bench.time_jitted(lambda x: x, jnp.ones(2), n_runs=0)
    with pytest.raises(ValueError, match="n_warmup=-1"):
        bench.time_jitted(lambda x: x, jnp.ones(2), n_warmup=-1)


def _compiled(fn, spec_in, spec_out, x):
    mesh = devices.make_mesh((8,), ("X",))
    with jax.set_mesh(mesh):
        xs = jax.device_put(x, P("X"))
        return jax.jit(jax.shard_map(fn, in_specs=spec_in, out_specs=spec_out)).lower(xs).compile()


def test_collective_counts_see_each_collective_once():
    x = jnp.arange(64.0).reshape(64, 1)
    gathered = _compiled(lambda a: jax.lax.all_gather(a, "X", tiled=True, to="invarying"), P("X"), P(), x)
    assert hlo.collective_counts(gathered) == {**dict.fromkeys(hlo.COLLECTIVES, 0), "all-gather": 1}
    summed = _compiled(lambda a: jax.lax.psum(a, "X"), P("X"), P(), x)
    assert hlo.collective_counts(summed)["all-reduce"] == 1
    shifted = _compiled(lambda a: jax.lax.ppermute(a, "X", [(i, (i + 1) % 8) for i in range(8)]), P("X"), P("X"), x)
    assert hlo.collective_counts(shifted)["collective-permute"] == 1


def test_collective_counts_on_async_text():
    text = "\n".join(
        [
            "%ag-start = (f32[8], f32[64]) all-gather-start(f32[8] %p), dimensions={0}",
            "%ag-done = f32[64] all-gather-done((f32[8], f32[64]) %ag-start)",
            "%async_computation { %rs = f32[8] reduce-scatter(f32[64] %x), dimensions={0} }",
            "%rs-start = ((f32[64]), f32[8]) async-start(f32[64] %y), calls=%async_computation",
            "%fusion.all-reduce = f32[8] fusion(f32[8] %z), kind=kLoop",
        ]
    )
    counts = hlo.collective_counts(text)
    assert counts["all-gather"] == 1 and counts["reduce-scatter"] == 1 and counts["all-reduce"] == 0


def test_collective_elements_and_permute_traffic_read_sizes_and_directions():
    x = jnp.arange(64.0).reshape(64, 1)
    summed = _compiled(lambda a: jax.lax.psum(a, "X"), P("X"), P(), x)
    assert hlo.collective_elements(summed) == [("all-reduce", 8)], "one f32[8,1] block summed"
    both = _compiled(
        lambda a: (
            jax.lax.ppermute(a, "X", [(i, (i + 1) % 8) for i in range(8)])
            + jax.lax.ppermute(a, "X", [(i, (i - 1) % 8) for i in range(8)])
        ),
        P("X"),
        P("X"),
        x,
    )
    assert hlo.permute_traffic(both, 8) == {1: 8, 7: 8}, "one f32[8,1] block each way"
    assert [op for op, _ in hlo.collective_elements(both)] == ["collective-permute"] * 2
    assert hlo.permute_traffic(summed, 8) == {}
    text = "%cp = (f32[4,2]{1,0}, f32[4,2]{1,0}, u32[]) collective-permute-start(%a), source_target_pairs={{0,3},{3,0}}"
    assert hlo.collective_elements(text) == [("collective-permute", 8)]
    assert hlo.permute_traffic(text, 4) == {3: 8, 1: 8}
    with pytest.raises(ValueError, match="n_devices=0"):
        hlo.permute_traffic(text, 0)


def test_cost_normalises_cost_analysis():
    compiled = jax.jit(jnp.matmul).lower(jnp.ones((8, 16)), jnp.ones((16, 4))).compile()
    cost = hlo.cost(compiled)
    assert cost.flops == pytest.approx(2 * 8 * 16 * 4, rel=0.01) and cost.bytes_accessed > 0


def test_plots_label_axes_with_units(tmp_path):
    fig, ax = plots.roofline(["v5e", "h100"], points=[("dot", 0.5)])
    assert ax.get_xlabel() == "arithmetic intensity (FLOPs/byte)" and "(FLOPs/s)" in ax.get_ylabel()
    assert len(ax.get_lines()) >= 4 and ax.get_title() == ""
    first = plots.save(fig, tmp_path / "a.png").read_bytes()
    fig, _ = plots.roofline(["v5e", "h100"], points=[("dot", 0.5)])
    assert plots.save(fig, tmp_path / "b.png").read_bytes() == first, "saving twice gives the same bytes"
    fig, ax = plots.measured_vs_predicted([1e-3, 2e-3], [1.1e-3, 2.5e-3], ["a", "b"])
    assert ax.get_xlabel() == "predicted time (s)" and ax.get_ylabel() == "measured time (s)"
    assert plots.chip_style("h100")["linestyle"] == "--" and plots.chip_style("v5e")["linestyle"] == "-"


def test_measure_peaks_and_sweeps_give_positive_rates():
    device = devices.single_device()
    peaks = bench.measure_peaks(device, jnp.float32, matmul_n=128, vector_n=2**14)
    assert peaks.flops_per_s > 0 and peaks.bytes_per_s > 0 and peaks.dtype == "float32"
    assert peaks.vector_bytes == 2 * 2**14 * 4
    assert bench.time_matmul(8, 64, 32, device, jnp.float32, n_runs=2).median_s > 0
    assert bench.time_add(1024, device, jnp.float32, n_runs=2).n_runs == 2


def test_hlo_text_accepts_text_or_compiled():
    compiled = jax.jit(jnp.sin).lower(jnp.ones(4)).compile()
    assert hlo.hlo_text(compiled) == compiled.as_text() and hlo.hlo_text("abc") == "abc"


def test_op_lines_shows_each_collective_once_without_metadata():
    text = "\n".join(
        [
            "  %p = f32[8]{0} parameter(0)",
            "  %ag = f32[64]{0} all-gather-start(f32[8]{0} %p), dimensions={0},"
            ' metadata={op_name="jit(f)" source_file="x.py"}',
            "  %agd = f32[64]{0} all-gather-done(%ag)",
            "  %d = f32[64]{0} dot(f32[64]{0} %agd, f32[64]{0} %agd)",
        ]
    )
    shown = hlo.op_lines(text).splitlines()
    assert shown == ["%ag = f32[64]{0} all-gather-start(f32[8]{0} %p), dimensions={0}"]
    assert hlo.op_lines(text, ("dot",)) == "%d = f32[64]{0} dot(f32[64]{0} %agd, f32[64]{0} %agd)"
    assert hlo.op_lines(text, ("dot",), width=20) == "%d = f32[64]{0} d..."
    with pytest.raises(ValueError, match="ops=()"):
        hlo.op_lines(text, ())
    with pytest.raises(ValueError, match="width=5"):
        hlo.op_lines(text, width=5)


@pytest.mark.parametrize("name", ["tpu-v5e", "tpu-v4", "tpu-v5p"])
def test_tpu_chip_diagram_draws_each_unit_and_labels_links_from_hardware(name):
    from book_lib import hardware

    chip = hardware.get_chip(name)
    fig, ax = diagrams.tpu_chip(chip)
    gids = [p.get_gid() for p in ax.patches]
    assert gids.count("tensorcore") == chip.cores_per_chip
    assert gids.count("mxu") == chip.cores_per_chip * chip.mxus_per_core
    assert gids.count("vpu") == gids.count("vmem") == gids.count("scalar") == chip.cores_per_chip
    assert gids.count("ici") == chip.ici_links and gids.count("hbm") == gids.count("pcie") == 1
    labels = {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}
    assert labels["hbm-vmem-label"] == f"DMA {fmt(chip.hbm_bytes_per_s, 'B/s', digits=2)}"
    assert fmt(chip.pcie_bytes_per_s, "B/s", digits=2) in labels["pcie-label"]
    fast = hardware.VMEM_OVER_HBM_BANDWIDTH_RATIO * chip.hbm_bytes_per_s / chip.cores_per_chip
    assert fmt(fast, "B/s", digits=2) in labels["vmem-mxu-label"]
    assert f"{chip.hbm_bytes / 2**30:.0f} GiB" in labels["hbm-label"] and ax.get_title() == ""
    matplotlib.pyplot.close(fig)


def test_tpu_chip_diagram_refuses_a_gpu():
    with pytest.raises(ValueError, match="chip='h100'.*allowed: a TPU"):
        diagrams.tpu_chip("h100")


def test_two_bandwidth_roofline_bends_at_each_links_critical_intensity():
    import matplotlib.pyplot as plt

    from book_lib import hardware, roofline

    v5e = hardware.get_chip("v5e")
    ici, hbm = v5e.ici_bytes_per_s, v5e.hbm_bytes_per_s
    links = [("ICI", ici), ("HBM", hbm)]  # slower first: the plot orders them itself
    fig, ax = plots.roofline_two_bandwidths(v5e, links, points=[("dot", 0.5), ("matmul", 455.0)])
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "arithmetic intensity (FLOPs/byte)" and ax.get_ylabel().endswith("(FLOPs/s)")
    roofs = {
        line.get_label().split(" (")[0]: line.get_xydata() for line in ax.get_lines() if "B/s)" in line.get_label()
    }
    assert set(roofs) == {"ICI", "HBM"}
    for name, bw in links:
        (x0, y0), (knee_x, knee_y), (_, y1) = roofs[name]
        assert knee_x == pytest.approx(roofline.critical_intensity(v5e, bytes_per_s=bw))
        assert (knee_y, y1, y0) == pytest.approx((v5e.bf16_flops_per_s, v5e.bf16_flops_per_s, x0 * bw))
    hbm_ridge, ici_ridge = roofline.critical_intensity(v5e), roofline.critical_intensity(v5e, bytes_per_s=ici)
    assert ici_ridge == pytest.approx(4377.8, rel=1e-4) and hbm_ridge == pytest.approx(243.2, rel=1e-3)
    red, yellow, green = ((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
    assert red[1] == pytest.approx(hbm_ridge) and yellow == pytest.approx((hbm_ridge, ici_ridge))
    assert green[0] == pytest.approx(ici_ridge)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[:3] == ["bandwidth-bound on both", "bandwidth-bound on ICI only", "compute-bound on both"]
    dot_ys = sorted(y for line in ax.get_lines() for x, y in line.get_xydata() if x == 0.5 and line.get_marker() == "o")
    assert dot_ys == pytest.approx([0.5 * ici, 0.5 * hbm]), "the dot product sits on both slanted walls"
    plt.close(fig)
    with pytest.raises(ValueError, match=r"^bandwidths=.*1 given; allowed: exactly two"):
        plots.roofline_two_bandwidths(v5e, links[:1])
    with pytest.raises(ValueError, match=r"^intensity_range=\(10.0, 1.0\): not increasing"):
        plots.roofline_two_bandwidths(v5e, links, intensity_range=(10.0, 1.0))


@pytest.mark.parametrize("name", ["llama-3-70b", "mixtral-8x7b", "book-ch4-q1"])
def test_transformer_layer_diagram_draws_one_box_per_layer_operation(name):
    from book_lib import models

    config = models.get_model(name)
    fig, ax = diagrams.transformer_layer(config)
    boxes = [p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("op:")]
    layer_ops = [r for r in config.op_rows(0) if r.count == config.n_layers and r.group != "router"]
    # every per-layer operation once, the norms row once per norm position (before attention, before the MLP)
    assert len(boxes) == len(layer_ops) + 1 and boxes.count("op:W_Q") == 1 and "op:W_out (down)" in boxes
    texts = [t.get_text() for t in ax.texts]
    assert any("BTDF train FLOPs" in t for t in texts) and any("6BTSNH" in t for t in texts)
    assert "[B,T,F]" in texts and f"D={config.d_model}" in texts[-1] and ax.get_title() == ""
    assert [p.get_gid() for p in ax.patches].count("residual") == 2
    matplotlib.pyplot.close(fig)


def test_latency_vs_throughput_draws_each_setup_and_hollows_what_does_not_fit():
    from book_lib import inference

    batches = [1, 8, 64]
    steps = inference.latency_throughput("llama-2-13b", "v5e", 8, context_len=8192, batches=batches)
    curve = ([s.tokens_per_s_per_chip for s in steps], [s.t_lower for s in steps])
    fits = {"bf16": [s.fits for s in steps]}
    assert fits["bf16"] == [True, True, False]
    fig, ax = model_plots.latency_vs_throughput({"bf16": curve}, batches, fits=fits)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "throughput per chip (tokens/s/chip)" and ax.get_ylabel() == "decode step latency (s)"
    line, filled, hollow = ax.get_lines()[:3]
    assert line.get_xydata().tolist() == [list(p) for p in zip(*curve, strict=True)]
    assert len(filled.get_xydata()) == 2 and hollow.get_xydata().tolist() == [[curve[0][2], curve[1][2]]]
    assert hollow.get_markerfacecolor() == "white"
    assert [t.get_text() for t in ax.texts] == ["B=1", "B=8", "B=64"]
    assert "does not fit in HBM" in [t.get_text() for t in ax.get_legend().get_texts()]
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"curves\['bf16'\]=2, 2 points: .*allowed: 3 of each"):
        model_plots.latency_vs_throughput({"bf16": ([1.0, 2.0], [1.0, 2.0])}, batches)


def test_comms_ratio_vs_fsdp_degree_draws_lines_points_and_the_bound():
    from book_lib import bounds

    degrees = [512.0, 1024.0, 2048.0, 4096.0]
    ratios = [
        bounds.fsdp_tp_comms_ratio("v5p", 8960, fsdp_degree=x, batch_tokens=4 * 2**20, d_ff=28_672) for x in degrees
    ]
    fig, ax = model_plots.comms_ratio_vs_fsdp_degree(
        degrees, {"text's model": ratios}, points={"meshes": ([2240], [0.85])}
    )
    assert ax.get_xscale() == "log" and ax.get_title() == ""
    assert ax.get_xlabel() == "FSDP degree X (chips)" and ax.get_ylabel() == "T_comms / T_math (ratio)"
    line, dots, bound = ax.get_lines()
    assert line.get_xydata().tolist() == [list(p) for p in zip(degrees, ratios, strict=True)]
    assert dots.get_xydata().tolist() == [[2240, 0.85]] and dots.get_linestyle() == "None"
    assert bound.get_ydata()[0] == 1.0
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["text's model", "meshes", "compute-bound below 1"]
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"curves\['x'\]=1 values: .*allowed: 4"):
        model_plots.comms_ratio_vs_fsdp_degree(degrees, {"x": [1.0]})


def test_math_over_comms_vs_batch_draws_each_scheme_and_the_compute_bound_line():
    from book_lib import bounds

    per_chip = [256, 1024, 4096]
    ratios = {
        s: [
            bounds.layer_costs(strategy=s, batch_tokens=64 * b, d_model=8192, d_ff=28672, x=64).intensity("forward")
            / 2550
            for b in per_chip
        ]
        for s in ("fsdp",)
    }
    fig, ax = model_plots.math_over_comms_vs_batch(per_chip, ratios)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "batch per chip B / N (tokens)" and ax.get_ylabel() == "T_math / T_comms (ratio)"
    curve, line = ax.get_lines()
    assert curve.get_xydata()[:, 1] == pytest.approx([b / 2550 for b in per_chip]), "FSDP: B / X over C / W"
    assert list(line.get_ydata()) == [1.0, 1.0] and line.get_linestyle() == ":"
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"^ratios\['fsdp'\]=2 points: not one per batch; allowed: 3 values"):
        model_plots.math_over_comms_vs_batch(per_chip, {"fsdp": [1.0, 2.0]})


def test_comms_time_vs_batch_draws_t_math_dashed_in_black_after_the_schemes():
    batches = [1e6, 2e6, 4e6]
    fig, ax = model_plots.comms_time_vs_batch(
        batches, {"FSDP": [1.0, 1.0, 1.0], "TP": [0.5, 1.0, 2.0]}, [0.4, 0.8, 1.6]
    )
    fsdp, tp, math_line = ax.get_lines()
    assert tp.get_xydata().tolist() == [[1e6, 0.5], [2e6, 1.0], [4e6, 2.0]]
    assert math_line.get_linestyle() == "--" and math_line.get_color() == "black"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["FSDP", "TP", "T_math"]
    assert ax.get_xlabel() == "batch B (tokens per step)" and ax.get_ylabel() == "time per step (s)"
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"^t_comms\['t_math'\]=1 points"):
        model_plots.comms_time_vs_batch(batches, {"FSDP": [1.0, 1.0, 1.0]}, [0.4])


def test_the_collective_names_are_jaxs_own():
    from book_lib import collectives

    for names in collectives.NAMES.values():
        assert callable(getattr(jax.lax, names.lax)), names.lax
    assert hlo.COLLECTIVES == tuple(n.hlo for n in collectives.NAMES.values())
