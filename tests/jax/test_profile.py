"""book_lib.profile: traces read without TensorBoard, HLO instructions with shapes, memory reports."""

import matplotlib

matplotlib.use("Agg")

import gzip  # noqa: E402
import json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import pytest  # noqa: E402

from book_lib import devices, plots, profile  # noqa: E402

pytestmark = pytest.mark.usefixtures("eight_devices")

HLO = """HloModule jit_f, entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0})->f32[8,4]{1,0}}

%fused_dot (param_0: f32[8,16], param_1: f32[16,4]) -> f32[8,4] {
  %param_0 = f32[8,16]{1,0} parameter(0)
  %param_1 = f32[16,4]{1,0} parameter(1)
  ROOT %dot.3 = f32[8,4]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main.5 (x: f32[8,16], w: f32[16,4]) -> f32[8,4] {
  %x = f32[8,16]{1,0} parameter(0), metadata={op_name="x"}
  %w = f32[16,4]{1,0:T(8,128)} parameter(1), metadata={op_name="w"}
  %fusion.1 = f32[8,4]{1,0} fusion(%x, %w), kind=kOutput, calls=%fused_dot, metadata={op_name="jit(f)/dot"}
  %pair = (f32[8,4]{1,0}, bf16[2]{0}) tuple(%fusion.1, %fusion.1)
  ROOT %all-reduce-start.2 = f32[8,4]{1,0} all-reduce-start(%fusion.1), replica_groups={{0,1}}
}

%wrapped (p: f32[8,4]) -> f32[4,4] {
  %p = f32[8,4]{1,0} parameter(0)
  ROOT %rs.1 = f32[4,4]{1,0} reduce-scatter(%p), dimensions={0}
}

%other (q: f32[8,4]) -> f32[8,4] {
  %async-start.9 = ((f32[8,4]), f32[4,4]) async-start(%q), calls=%wrapped
}
"""


def _write_trace(path, events, processes, threads=()):
    meta = [{"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}} for pid, name in processes]
    meta += [{"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": n}} for pid, tid, n in threads]
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": meta + events}, f)
    return path


def test_hlo_ops_reads_names_ops_shapes_operands_and_fusion_bodies():
    ops = profile.hlo_ops(HLO)
    dot = ops["dot.3"]
    assert (dot.opcode, dot.dtype, dot.shape, dot.operands) == ("dot", "f32", (8, 4), ("param_0", "param_1"))
    assert dot.computation == "fused_dot" and ops["fusion.1"].computation == "main.5"
    assert ops["fusion.1"].calls == "fused_dot" and "metadata" not in ops["fusion.1"].line
    assert ops["w"].shape == (16, 4), "a TPU tiling in the layout does not hide the shape"
    assert ops["pair"].opcode == "tuple" and ops["pair"].shape == () and ops["pair"].dtype == ""
    assert ops["all-reduce-start.2"].category == "communication" and ops["fusion.1"].category == "compute"


def test_dot_flops_and_matmul_ops_by_hand():
    ops = profile.hlo_ops(HLO)
    assert profile.dot_flops(ops["dot.3"], ops) == 2 * 8 * 4 * 16, "2 x result elements x contraction length"
    assert profile.matmul_ops(ops) == {"dot.3", "fusion.1"}, "the dot and the fusion that calls it"
    with pytest.raises(ValueError, match=r"^op='fusion.1': a 'fusion', not a dot"):
        profile.dot_flops(ops["fusion.1"], ops)
    with pytest.raises(ValueError, match=r"no operand \('param_0',\)"):
        profile.dot_flops(ops["dot.3"], {})


def test_category_knows_every_backends_spelling_of_a_collective():
    for name in (
        "all-reduce-start.1",
        "all_gather.3",
        "psum.7",
        "ncclDevKernel_AllReduce_Sum_f32",
        "fusion all-reduce-scatter.1",
    ):
        assert profile.category(name) == "communication", name
    for name in ("fusion.3", "dot.1", "reduce.2", "scatter.4", "convolution"):
        assert profile.category(name) == "compute", name


def test_parse_trace_takes_tagged_events_of_the_module_and_skips_host_events(tmp_path):
    def op(ts, dur, hlo_op, module="jit_f", **extra):
        return {
            "ph": "X",
            "pid": 1,
            "tid": 2,
            "ts": ts,
            "dur": dur,
            "name": "thunk",
            "args": {"hlo_op": hlo_op, "hlo_module": module, **extra},
        }

    events = [  # CPU/GPU style: ops carry args.hlo_op; one op belongs to another program
        op(10.0, 5.0, "fusion.1", device_ordinal=1),
        op(20.0, 3.0, "all-reduce-start.2"),
        op(1.0, 9.0, "copy.1", module="jit_g"),
        op(30.0, 2.0, "async-start.9"),
        {"ph": "X", "pid": 1, "tid": 3, "ts": 0.0, "dur": 50.0, "name": "PjitFunction(f)"},
        {"ph": "i", "pid": 1, "tid": 2, "ts": 12.0, "name": "end: ynn_fusion"},
    ]  # fmt: skip
    path = _write_trace(tmp_path / "h.trace.json.gz", events, [(1, "/host:CPU")], [(1, 2, "worker")])
    got = profile.parse_trace(path, ops=profile.hlo_ops(HLO), module="jit_f")
    assert [(e.name, e.opcode, e.category, e.lane) for e in got] == [
        ("fusion.1", "fusion", "compute", "device 1"),
        ("all-reduce-start.2", "all-reduce-start", "communication", "worker"),
        ("async-start.9", "async-start", "communication", "worker"),
    ], "an async-start whose body runs a reduce-scatter is communication"
    assert got[0].start_s == 0.0 and got[1].start_s == pytest.approx(10e-6) and got[1].duration_s == pytest.approx(3e-6)


def test_parse_trace_without_tags_takes_device_events_named_after_instructions(tmp_path):
    events = [  # TPU style: the "XLA Ops" line is named after the instruction; other lines are not ops
        {"ph": "X", "pid": 7, "tid": 1, "ts": 100.0, "dur": 40.0, "name": "fusion.1"},
        {"ph": "X", "pid": 7, "tid": 2, "ts": 100.0, "dur": 60.0, "name": "jit_f(42)"},
        {"ph": "X", "pid": 7, "tid": 1, "ts": 140.0, "dur": 20.0, "name": "all-reduce-start.2"},
        {"ph": "X", "pid": 9, "tid": 1, "ts": 90.0, "dur": 80.0, "name": "fusion.1"},  # a host thread
    ]
    path = _write_trace(
        tmp_path / "t.trace.json.gz", events, [(7, "/device:TPU:0"), (9, "/host:CPU")], [(7, 1, "XLA Ops")]
    )
    got = profile.parse_trace(path, ops=profile.hlo_ops(HLO))
    assert [(e.name, e.lane) for e in got] == [("fusion.1", "XLA Ops"), ("all-reduce-start.2", "XLA Ops")]
    table = profile.op_table(got)
    assert [r.name for r in table] == ["fusion.1", "all-reduce-start.2"]
    assert table[0].share == pytest.approx(40 / 60) and table[1].mean_s == pytest.approx(20e-6)


def test_a_traced_matmul_shows_a_dot_or_fusion_with_positive_time():
    x = jax.random.normal(jax.random.key(0), (256, 256))
    result = profile.capture(lambda a: jnp.tanh(a @ a), x, n_runs=2)
    assert result.ops and all(r.total_s > 0 for r in result.ops)
    matmuls = [r for r in result.ops if r.opcode in ("dot", "fusion", "custom-call", "convolution")]
    assert matmuls and matmuls[0].count >= 2, "one execution per traced run at least"
    assert sum(r.share for r in result.ops) == pytest.approx(1.0)
    assert result.communication_s == 0 and result.compute_s == pytest.approx(sum(r.total_s for r in result.ops))
    fig, ax = plots.op_timeline(result.events)
    assert ax.get_xlabel() == "time since the first traced op (s)" and ax.get_ylabel()
    matplotlib.pyplot.close(fig)


def test_a_sharded_psum_is_found_as_an_all_reduce_in_hlo_and_trace():
    mesh = devices.make_mesh((devices.n_devices(),), ("X",))
    summed = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b @ b.T, "X"), in_specs=jax.P("X"), out_specs=jax.P()))
    with jax.set_mesh(mesh):
        x = jax.device_put(jnp.ones((8 * devices.n_devices(), 32)), jax.P("X"))
        result = profile.capture(summed, x, n_runs=2)
    assert result.collectives["all-reduce"] == 1
    comm = [r for r in result.ops if r.category == "communication"]
    assert [r.opcode for r in comm] == ["all-reduce"] and comm[0].total_s > 0
    assert 0 < result.communication_fraction < 1 and result.hlo[comm[0].name].shape == (8, 8)


def test_memory_report_counts_at_least_the_output():
    out_bytes = 512 * 1024 * 4  # f32[512, 1024]
    report = profile.memory_report(lambda x: jnp.outer(x, jnp.ones(1024)), jnp.ones(512))
    assert report.output_bytes >= out_bytes and report.argument_bytes >= 512 * 4
    assert report.total_bytes >= out_bytes + 512 * 4


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: profile.capture(lambda x: x, jnp.ones(2), n_runs=0), r"^n_runs=0: not a count"),
        (lambda: profile.capture(lambda x: x, jnp.ones(2), n_warmup=-1), r"^n_warmup=-1"),
        (lambda: profile.capture("f", jnp.ones(2)), r"^fn='f': not callable"),
        (lambda: profile.memory_report(3), r"^fn=3: not callable"),
        (
            lambda: profile.parse_trace("/nonexistent.trace.json.gz"),
            r"^path='/nonexistent.trace.json.gz': no such file",
        ),
        (lambda: profile.op_table(()), r"^events=\(\): no op events"),
        (lambda: profile.hlo_ops("not hlo"), r"^compiled=<text>: no HLO instruction"),
        (lambda: profile.category(3), r"^name=3: not a string"),
        (lambda: plots.op_timeline(()), r"^events=\(\): nothing to draw"),
        (lambda: plots.op_timeline([], n_named=-1), r"^n_named=-1"),
    ],
)
def test_bad_input_raises_a_value_error_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
