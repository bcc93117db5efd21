"""The calculators show the models' own numbers, stay live when a knob turns, and degrade to a table."""

import html
import re

import pytest

from book_lib import calculators, collectives, inference, planner, roofline
from book_lib.efficiency import Calibration
from book_lib.hardware import get_chip
from book_lib.numfmt import fmt

ALL = (
    calculators.roofline_calculator,
    calculators.collective_calculator,
    calculators.training_calculator,
    calculators.serving_calculator,
)


def test_the_roofline_calculator_reads_roofline_time():
    calc = calculators.roofline_calculator(chip="h100", batch=64)
    cost = roofline.matmul_cost(64, 8192, 32768)
    t = roofline.roofline_time(cost.flops, cost.bytes, get_chip("h100").bf16_flops_per_s, 3.35e12)
    rows = dict(calc.rows())
    assert rows["bound"] == t.bound == "bandwidth"
    assert rows["time"] == fmt(t.t_lower, "s")
    assert rows["ridge"] == f"{fmt(round(roofline.critical_intensity('h100')))} FLOPs/B"


def test_the_collective_calculator_reads_collective_time():
    calc = calculators.collective_calculator()
    t = collectives.collective_time("all_reduce", 1e9, 8, "tpu-v5e", link="ici")
    rows = dict(calc.rows(op="all_reduce", megabytes=1000, devices=8))
    assert rows["estimate"] == fmt(t.total_s, "s") and rows["hops"] == str(t.hops)


def test_the_training_calculator_shows_the_planners_best_scheme():
    plan = planner.plan_training("llama-3-70b", "tpu-v5p", 8960, batch_tokens=4 * 2**20, seq_len=4096)
    rows = dict(calculators.training_calculator().rows())
    assert rows["best scheme"] == plan.best.scheme
    # the expected time leads, the roofline is labelled as the bound, and no MFU is quoted for the bound
    assert list(rows)[2:5] == ["expected step", "expected MFU", "bound (roofline)"]
    assert rows["expected step"] == fmt(plan.best.step.expected_s, "s")
    assert rows["bound (roofline)"] == fmt(plan.best.step.roofline_s, "s")
    assert rows["expected MFU"] == f"{plan.best.step.mfu_expected:.0%}" != "100%"


def test_the_serving_calculator_reads_decode_step_time_and_says_when_the_batch_does_not_fit():
    s = inference.decode_step_time(
        "llama-3-70b", "tpu-v5e", 8, batch=256, context_len=8192, param_dtype="int8", kv_dtype="int8"
    )
    rows = dict(calculators.serving_calculator().rows(batch=256))
    assert list(rows)[:2] == ["expected step", "tokens/s"]
    assert rows["expected step"] == fmt(s.expected_s, "s") and rows["bound (roofline)"] == fmt(s.t_lower, "s")
    assert rows["tokens/s"] == fmt(round(256 / s.expected_s))
    assert not s.fits and rows["fits"] == "NO"


def test_a_calibration_profile_moves_the_calculators_expected_times_and_never_the_bound(tmp_path):
    slow = Calibration(chip="h100", device_kind="test", date="2026-11-27", jax_version="0",
                       figures=(("matmul", 0.1), ("hbm", 0.1)))  # fmt: skip
    path = tmp_path / "h100.json"
    path.write_text(slow.to_json())
    cited = dict(calculators.serving_calculator(chip="h100").rows())
    measured = dict(calculators.serving_calculator(chip="h100", calibration=path).rows())
    assert measured["bound (roofline)"] == cited["bound (roofline)"]
    assert _seconds(measured["expected step"]) > 5 * _seconds(cited["expected step"])
    # a profile of another chip is refused, with what would fit
    refused = calculators.serving_calculator(chip="tpu-v5e", calibration=path).rows()
    assert refused[0][0] == "not possible" and "allowed: a profile measured on a tpu-v5e" in refused[0][1]


def _seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"s": 1, "ms": 1e-3, "µs": 1e-6}[unit]


def test_a_setting_the_model_refuses_shows_its_message_instead_of_a_table():
    rows = calculators.collective_calculator().rows(devices=64, chip="h100")
    assert rows[0][0] == "not possible" and rows[0][1].startswith("axis_size=64: 64 GPUs exceed"), rows


@pytest.mark.parametrize("make", ALL)
def test_turning_a_knob_updates_the_live_table(make):
    calc = make()
    box = calc.widget()
    controls = {c.description: c for c in box.children[1:-1]}
    assert list(controls) == [k.label for k in calc.knobs]
    knob = next(k for k in calc.knobs if k.name == calc.sweep)
    other = next(v for v in calc.sweep_values if v != knob.default)
    before = box.children[-1].value
    controls[knob.label].value = other
    assert box.children[-1].value == calc.html(**{calc.sweep: other}) != before


@pytest.mark.parametrize("make", ALL)
def test_the_static_table_has_a_row_per_sweep_value_a_column_per_quantity_and_no_empty_cell(make):
    calc = make()
    header, rows = calc.sweep_table()
    knob = next(k for k in calc.knobs if k.name == calc.sweep)
    assert [row[0] for row in rows] == [knob.text(v) for v in calc.sweep_values]
    assert header == [knob.label, *(q for q, _ in calc.rows())], "the quantities of the default setting"
    assert all(len(row) == len(header) and all(row) for row in rows), rows
    assert "not possible" not in calc.static_text(), "the default sweep is a setting the model accepts"
    assert calc.static_html().count("<tr>") == len(rows) + 1


def test_a_notebook_shows_the_widget_with_a_markdown_stand_in_then_the_table():
    calc = calculators.serving_calculator()
    live, static = calc.bundles(live=True)
    view = live["application/vnd.jupyter.widget-view+json"]
    assert re.fullmatch(r"[0-9a-f]{32}", view["model_id"]) and view["version_major"] == 2
    assert live["text/markdown"] == calculators.LIVE_NOTE
    assert static["text/html"].startswith('<form class="calculator-form" data-calculator="serving_calculator"')
    assert '<table class="calculator"><caption>' in static["text/html"]
    assert [set(b) for b in calc.bundles(live=False)] == [{"text/html", "text/plain"}]


def test_outside_a_kernel_only_the_table_is_displayed(capsys):
    calculators.roofline_calculator()._ipython_display_()
    assert capsys.readouterr().out.startswith("Roofline of a matmul")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: calculators.serving_calculator(chips=8), r"^knob='chips': unknown knob; closest: chip, n_chips"),
        (lambda: calculators.serving_calculator(batch=3), r"^batch=3: not offered; allowed: 1, 2, 4"),
        (lambda: calculators.Knob(name="x", label="x", values=(1, 2), default=3), r"^default=3: not offered"),
    ],
)
def test_bad_settings_are_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.slow
def test_in_a_kernel_the_cell_shows_the_live_widget_then_the_table():
    """Executed as Jupyter and Colab execute it: the widget's models live in the kernel, the table beside it."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import book_lib\nbook_lib.calculators.collective_calculator(op='all_reduce')")
    ]
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    live, static = (o["data"] for o in nb.cells[0].outputs)
    model_id = live["application/vnd.jupyter.widget-view+json"]["model_id"]
    models = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert models[model_id]["model_name"] == "VBoxModel"
    sliders = [m["state"] for m in models.values() if m["model_name"] == "SelectionSliderModel"]
    assert {s["description"] for s in sliders} == {"array V (MB)", "devices N"}
    assert live["text/markdown"] == calculators.LIVE_NOTE
    assert static["text/html"].startswith('<form class="calculator-form" data-calculator="collective_calculator"')
    assert '<table class="calculator"><caption>Time of one collective' in static["text/html"]
    assert "collective all_reduce" in static["text/plain"]


@pytest.mark.parametrize("make", ALL)
def test_the_pages_form_offers_every_knob_and_computes_what_the_widget_shows(make):
    import json
    from html.parser import HTMLParser

    calc = make()

    class Form(HTMLParser):
        def __init__(self):
            super().__init__()
            self.attrs, self.selects, self.selected = {}, {}, {}

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "form":
                self.attrs = attrs
            elif tag == "select":
                self.name = attrs["name"]
                self.selects[self.name] = 0
            elif tag == "option":
                self.selects[self.name] += 1
                if "selected" in attrs:
                    self.selected[self.name] = int(attrs["value"])

    form = Form()
    form.feed(calc.form_html())
    assert "hidden" in form.attrs and calc.factory in calculators.FACTORIES
    assert form.attrs["data-calculator"] == calc.factory
    assert form.selects == {k.name: len(k.values) for k in calc.knobs}
    assert form.selected == {k.name: k.values.index(k.default) for k in calc.knobs}
    defaults = json.loads(form.attrs["data-defaults"])
    knob = next(k for k in calc.knobs if k.name == calc.sweep)
    other = next(i for i, v in enumerate(knob.values) if v != knob.default)
    request = json.dumps({"name": calc.factory, "defaults": defaults, "chosen": {knob.name: other}})
    assert calculators.in_page(request) == calc.html(**{knob.name: knob.values[other]})


def test_the_page_shows_a_refused_setting_as_the_model_words_it_and_refuses_a_forged_request():
    import json

    calc = calculators.serving_calculator()
    chips = next(k for k in calc.knobs if k.name == "n_chips")
    pod = chips.values.index(8960)  # a TPU v5p pod, no slice of v5e
    request = {"name": "serving_calculator", "defaults": {}, "chosen": {"n_chips": pod}}
    shown = calculators.in_page(json.dumps(request))
    with pytest.raises(ValueError) as refused:
        inference.decode_step_time("llama-3-70b", "tpu-v5e", 8960, batch=32, context_len=8192)
    assert "not possible" in shown and html.escape(str(refused.value)) in shown
    for bad, message in (
        ({**request, "name": "serving"}, r"^name='serving': unknown calculator; closest: serving_calculator"),
        ({**request, "chosen": {"n_chips": 10**6}}, r"^chosen\['n_chips'\]=1000000: not an offer"),
    ):
        with pytest.raises(ValueError, match=message):
            calculators.in_page(json.dumps(bad))


def test_side_by_side_puts_the_forms_in_one_row_and_needs_two():
    pair = calculators.side_by_side(calculators.training_calculator(), calculators.serving_calculator())
    (static,) = pair.bundles(live=False)
    assert static["text/html"].startswith('<div class="calculator-row"><form class="calculator-form"')
    assert static["text/html"].count("<form") == 2 and static["text/html"].count('<table class="calculator">') == 2
    with pytest.raises(ValueError, match="allowed: two or more Calculator objects"):
        calculators.side_by_side(calculators.training_calculator())
