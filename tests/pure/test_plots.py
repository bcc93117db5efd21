"""book_lib.plots, model_plots and diagrams: labelled axes, byte-identical files, and what each figure draws."""

import matplotlib

matplotlib.use("Agg")


import pytest  # noqa: E402

from book_lib import diagrams, model_plots, plots  # noqa: E402
from book_lib.numfmt import fmt


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


def _gids(ax, prefix):
    return [p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith(prefix)]


def _labels(ax):
    return {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}


def test_sharded_blocks_draws_each_block_labelled_with_the_devices_that_hold_it():
    from book_lib import notation

    mesh, texts = {"X": 2, "Y": 2}, ("A[I_X, J_Y]", "A[I_XY, J]", "A[I_X, J]", "A[I, J]")
    fig, axes = diagrams.sharded_blocks(texts, mesh)
    assert len(axes) == len(texts) and [len(_gids(ax, "block-")) for ax in axes] == [4, 4, 2, 1]
    for a, (ax, text) in enumerate(zip(axes, texts, strict=True)):
        owners = notation.parse(text).owners(mesh)
        assert sorted(_gids(ax, "block-")) == sorted(f"block-{a}-{i}-{j}" for i, j in owners)
        labels = _labels(ax)
        for (i, j), holders in owners.items():
            written = labels[f"block-{a}-{i}-{j}-label"].split()
            assert " ".join(written) == " ".join(f"({x}, {y})" for x, y in holders), "every holder, in order"
        assert ax.get_xlabel().startswith("columns $J$ of $A[") and ax.get_title() == ""
    assert axes[1].get_xlabel() == "columns $J$ of $A[I_{XY}, J]$"
    assert [ax.get_ylabel() for ax in axes] == ["rows $I$", "", "", ""], "the rows' name once, where it changes"
    block = next(p for p in axes[2].patches if p.get_gid() == "block-2-1-0")
    assert (block.get_y(), block.get_height(), block.get_width()) == (0.0, 0.5, 1.0), "row 1 is the lower half"
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"^arrays=\['A\[I_X, J, K\]'\]: A\[I_X, J, K\] has 3 dimensions; allowed: 2"):
        diagrams.sharded_blocks(["A[I_X, J, K]"], mesh)
    with pytest.raises(ValueError, match=r"^arrays=\(\): 0 arrays; allowed: 1 to 4"):
        diagrams.sharded_blocks((), mesh)
    with pytest.raises(ValueError, match=r"^mesh=\{'X': 2\}: no axis 'Y'"):
        diagrams.sharded_blocks(["A[I_X, J_Y]"], {"X": 2})


@pytest.mark.parametrize("n", range(1, diagrams.MAX_GATHER_RING + 1))
def test_ring_all_gather_fills_one_slot_per_block_held_after_each_step(n):
    from book_lib import collectives

    fig, axes = diagrams.ring_all_gather(n)
    for ax, way in zip(axes, ("one-way", "both-ways"), strict=True):
        blocks = collectives.all_gather_blocks(n, bidirectional=way == "both-ways")
        held = {(s, d, b) for s, step in enumerate(blocks) for d, h in enumerate(step) for b in h}
        assert sorted(_gids(ax, f"held-{way}-")) == sorted(f"held-{way}-{s}-{d}-{b}" for s, d, b in held)
        assert len(_gids(ax, f"slot-{way}-")) == len(blocks) * n * n - len(held), "the rest are empty slots"
        labels = _labels(ax)
        assert all(labels[f"held-{way}-{s}-{d}-{b}-label"] == str(b) for s, d, b in held)
        assert ax.get_xlabel() == f"{way.replace('-', ' ')} round"
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"device {d}" for d in range(n)]
    steps = [t.get_text() for t in axes[0].get_yticklabels()]
    assert steps == ["start"] + [f"after step {s}" for s in range(1, n)]
    matplotlib.pyplot.close(fig)


def test_ring_all_gather_refuses_a_ring_too_long_to_read():
    with pytest.raises(ValueError, match=rf"^n_devices={diagrams.MAX_GATHER_RING + 1}: .*allowed: 1 to "):
        diagrams.ring_all_gather(diagrams.MAX_GATHER_RING + 1)


def test_pipeline_schedules_draw_every_op_of_every_microbatch_where_the_schedule_puts_it():
    from book_lib import bounds

    runs = {
        "1F1B": bounds.pipeline_schedule(stages=4, microbatches=8, split_backward=False),
        "split": bounds.pipeline_schedule(stages=4, microbatches=8),
        "both ways": bounds.pipeline_schedule(stages=4, microbatches=8, both_ways=True),
    }
    fig, axes = diagrams.pipeline_schedules(runs)
    for panel, (ax, (name, schedule)) in enumerate(zip(axes, runs.items(), strict=True)):
        for kind in "FBW":  # an unsplit backward draws its W half too
            assert len(_gids(ax, f"{kind}-{panel}-")) == schedule.stages * schedule.microbatches, (name, kind)
        boxes = {p.get_gid(): p for p in ax.patches}
        labels = _labels(ax)
        for d, ops in enumerate(schedule.timeline):
            for op in ops:
                assert boxes[f"{op.kind}-{panel}-{d}-{op.microbatch}"].get_x() == op.start
                assert labels[f"{op.kind}-{panel}-{d}-{op.microbatch}-label"] == str(op.microbatch)
        assert labels[f"name-{panel}"] == name
        bubble = f"{fmt(schedule.span_units)} units\nbubble {fmt(100 * schedule.bubble_fraction, '%')}"
        assert labels[f"bubble-{panel}"] == bubble and ax.get_ylabel() == "device"
    assert _labels(axes[0])["bubble-0"] == "33 units\nbubble 37.5 %"
    assert axes[-1].get_xlabel() == "time (units of one stage's forward pass)"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["forward (F)", "input gradient (B)", "weight gradient (W)"]
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"^schedules=\{\}: 0 schedules; allowed: 1 to 4"):
        diagrams.pipeline_schedules({})
    with pytest.raises(ValueError, match=r"^schedules\['1F1B'\]=33: allowed: a bounds.PipelineSchedule"):
        diagrams.pipeline_schedules({"1F1B": 33})


def test_ridge_points_draw_one_bar_per_chip_at_its_critical_intensity():
    from book_lib import hardware, roofline

    names = ["tpu-v5e", "h100", "h100-pcie"]
    fig, ax = plots.ridge_points(names)
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("ridge-")}
    assert sorted(bars) == sorted(f"ridge-{name}" for name in names)
    labels = _labels(ax)
    for row, name in enumerate(names):
        ridge = roofline.critical_intensity(name)
        assert bars[f"ridge-{name}"].get_width() == pytest.approx(ridge)
        assert bars[f"ridge-{name}"].get_y() + bars[f"ridge-{name}"].get_height() / 2 == pytest.approx(row)
        assert labels[f"ridge-{name}-label"] == fmt(ridge)
        assert bars[f"ridge-{name}"].get_facecolor()[:3] == pytest.approx(plots.chip_style(name)["color"])
    assert labels["ridge-tpu-v5e-label"] == "243" and [t.get_text() for t in ax.get_yticklabels()] == names
    assert [bars[f"ridge-{n}"].get_hatch() for n in names] == [None, "//", ".."], "TPU, GPU, a board of VARIANTS"
    assert ax.get_xlabel() == "ridge point: bf16 FLOPs/s over HBM bytes/s (FLOPs/byte)" and ax.get_title() == ""
    assert "h100-pcie" in hardware.VARIANTS
    matplotlib.pyplot.close(fig)
    with pytest.raises(ValueError, match=r"^chips=\[\]: nothing to draw; allowed: one chip or more"):
        plots.ridge_points([])
    with pytest.raises(ValueError, match=r"^chips='tpu-v9': unknown chip"):
        plots.ridge_points(["tpu-v9"])
