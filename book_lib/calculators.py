"""Calculators: the book's cost models with knobs, live in Jupyter and Colab, a table in the HTML book.

A `Calculator` is a list of `Knob`s (each a keyword of one `book_lib` model, the values offered and a
default) and a function from their settings to the rows of a table: (quantity, value with its unit).
Displayed as a notebook cell's last expression, it shows:

1. where a kernel runs and ipywidgets is installed, the live calculator: a control per knob and the
   table for their current settings, recomputed on every change. Its output also carries a Markdown
   line, which is what a page without widgets (the HTML book, GitHub) shows in its place;
2. the page's calculator (`Calculator.form_html`): a select per knob and a result area, hidden
   until the HTML book's script shows it; there, turning a knob runs this very module in the
   reader's browser under Pyodide (`in_page`), served from the book itself, so no formula is written
   twice and nothing is fetched from another host;
3. the static table: the same quantities over a sweep of one knob, the others at their defaults,
   which every reader sees, with or without a kernel or JavaScript. The sweep runs down the rows and
   each quantity is a column, so the table fits the book's text column.

A setting the model refuses (a slice that is not offered, a batch that does not fit) shows the
model's own `ValueError` message in place of the table: the calculator never hides an error.

The four calculators call `roofline`, `collectives`, `planner.plan_training` and
`inference.decode_step_time`; none computes anything itself.
Book: Part 1 (rooflines), Part 3 (collectives), Parts 5-6 (training), Parts 7-8 (serving).
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from book_lib import checks, collectives, inference, planner, roofline, topology
from book_lib.efficiency import Calibration, load_calibration
from book_lib.hardware import CHIPS, get_chip, with_calibration
from book_lib.models import model_names
from book_lib.numfmt import fmt

__all__ = ["Knob", "Calculator", "roofline_calculator", "collective_calculator", "training_calculator",
           "serving_calculator", "LIVE_NOTE", "PAGE_NOTE", "FACTORIES", "in_page", "SideBySide",
           "side_by_side"]  # fmt: skip

Row = tuple[str, str]

LIVE_NOTE = (
    "*Live calculator: in Jupyter or Colab run this cell to turn its knobs; in the HTML book turn them "
    "below, where book_lib's own Python runs in your browser. The table under them is the same "
    "calculator over a sweep.*"
)
# The result area of the page's calculator before a reader turns a knob.
PAGE_NOTE = "Turn a knob: book_lib computes this table in your browser (Pyodide, loaded once, offline)."


@dataclass(frozen=True, slots=True, kw_only=True)
class Knob:
    """One control of a calculator.

    Attributes:
        name: the keyword the calculator's function takes.
        label: what the reader sees, with its unit ("batch B (tokens)").
        values: the settings offered, in order (strings or numbers).
        default: one of `values`.
    """

    name: str
    label: str
    values: tuple[Any, ...]
    default: Any

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"default={self.default!r}: not offered by knob {self.name!r}; allowed: {self.values}")

    def text(self, value: Any) -> str:
        """`value` as the reader sees it: numbers by the house rule (`numfmt.fmt`), names as they are."""
        return fmt(value) if isinstance(value, int | float) else str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Calculator:
    """A table of one model's outputs as a function of its knobs; see the module docstring.

    Attributes:
        title: one line naming the model ("Roofline of a matmul X[B, D] @ Y[D, F]").
        knobs: the controls, in the order shown.
        compute: settings (one keyword per knob) -> rows (quantity, value with unit); may raise ValueError.
        sweep: the knob whose values label the static table's rows.
        sweep_values: those values (a subset of the knob's).
        factory: the name of the function of this module that made it (`FACTORIES`), so that the HTML
            book's page can make it again under Pyodide (`in_page`).
    """

    title: str
    knobs: tuple[Knob, ...]
    compute: Callable[..., list[Row]]
    sweep: str
    sweep_values: tuple[Any, ...]
    factory: str = ""

    def settings(self, **changes: Any) -> dict[str, Any]:
        """Every knob's default, with `changes` applied.

        Raises:
            ValueError: a name that is no knob, or a value the knob does not offer.
        """
        knobs = {k.name: k for k in self.knobs}
        for name, value in changes.items():
            knob = checks.lookup("knob", name, knobs, what="knob")
            if value not in knob.values:
                raise ValueError(f"{name}={value!r}: not offered; allowed: {', '.join(map(knob.text, knob.values))}")
        return {k.name: changes.get(k.name, k.default) for k in self.knobs}

    def with_defaults(self, **defaults: Any) -> Calculator:
        """The same calculator starting from other settings (each one a knob offers)."""
        settings = self.settings(**defaults)
        knobs = tuple(dataclasses.replace(k, default=settings[k.name]) for k in self.knobs)
        return dataclasses.replace(self, knobs=knobs)

    def rows(self, **changes: Any) -> list[Row]:
        """The table at these settings; a setting the model refuses gives one row with its message."""
        try:
            return self.compute(**self.settings(**changes))
        except ValueError as error:
            return [("not possible", str(error))]

    def html(self, **changes: Any) -> str:
        """The table at these settings, as an HTML table."""
        body = "".join(f"<tr><td>{html.escape(q)}</td><td>{html.escape(v)}</td></tr>" for q, v in self.rows(**changes))
        return f'<table class="calculator"><tbody>{body}</tbody></table>'

    def sweep_table(self) -> tuple[list[str], list[list[str]]]:
        """(header, rows) of the static table: a row per sweep value, a column per quantity."""
        knob = next(k for k in self.knobs if k.name == self.sweep)
        tables = [dict(self.rows(**{self.sweep: v})) for v in self.sweep_values]
        quantities = list(dict.fromkeys(q for table in tables for q in table))
        rows = [
            [knob.text(v), *(t.get(q, "") for q in quantities)] for v, t in zip(self.sweep_values, tables, strict=True)
        ]
        return [knob.label, *quantities], rows

    def caption(self) -> str:
        """What the static table shows: the title and the fixed settings."""
        fixed = ", ".join(f"{k.label} {k.text(k.default)}" for k in self.knobs if k.name != self.sweep)
        return f"{self.title}: {fixed}"

    def static_html(self) -> str:
        """The static table (see `sweep_table`) as HTML, its caption above it."""
        header, rows = self.sweep_table()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
        return (
            f'<table class="calculator"><caption>{html.escape(self.caption())}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )

    def form_html(self) -> str:
        """The page's own calculator: a select per knob (its offers by index) and a result area.

        Hidden until the HTML book's `_static/calculators.js` shows it and computes `in_page` in the
        browser; Jupyter and Colab, which run no such script, never show it.
        """
        defaults = html.escape(json.dumps({k.name: k.default for k in self.knobs}), quote=True)
        selects = "".join(
            f'<label>{html.escape(k.label)} <select name="{k.name}">'
            + "".join(
                f'<option value="{i}"{" selected" if v == k.default else ""}>{html.escape(k.text(v))}</option>'
                for i, v in enumerate(k.values)
            )
            + "</select></label>"
            for k in self.knobs
        )
        return (
            f'<form class="calculator-form" data-calculator="{self.factory}" data-defaults="{defaults}" hidden>'
            f"<b>{html.escape(self.title)}</b>{selects}"
            f'<div class="calculator-result" aria-live="polite">{PAGE_NOTE}</div></form>'
        )

    def static_text(self) -> str:
        """The static table as aligned plain text, turned for a terminal: a line per quantity."""
        header, rows = self.sweep_table()
        header, *rows = [list(line) for line in zip(header, *rows, strict=True)]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
        return "\n".join([self.caption(), *lines])

    def widget(self) -> Any:
        """The live calculator: an ipywidgets box of one control per knob and the table, kept current."""
        import ipywidgets as w

        controls = {k.name: _control(w, k) for k in self.knobs}
        table = w.HTML(self.html())

        def update(_: object) -> None:
            table.value = self.html(**{name: c.value for name, c in controls.items()})

        for control in controls.values():
            control.observe(update, names="value")
        return w.VBox([w.HTML(f"<b>{html.escape(self.title)}</b>"), *controls.values(), table])

    def bundles(self, *, live: bool) -> list[dict[str, Any]]:
        """The outputs a notebook shows (module docstring): the live widget when `live`, then the static table."""
        shown: list[dict[str, Any]] = []
        if live:
            view = {"version_major": 2, "version_minor": 0, "model_id": self.widget().model_id}
            shown.append(
                {"application/vnd.jupyter.widget-view+json": view, "text/markdown": LIVE_NOTE, "text/plain": LIVE_NOTE}
            )
        shown.append({"text/html": self.form_html() + self.static_html(), "text/plain": self.static_text()})
        return shown

    def _ipython_display_(self) -> None:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is None:  # plain Python: the table as text
            print(self.static_text())
            return
        for bundle in self.bundles(live=_live()):
            display(bundle, raw=True)


def _control(w: Any, knob: Knob) -> Any:
    """A dropdown for names, a slider for numbers."""
    kind = w.Dropdown if isinstance(knob.default, str) else w.SelectionSlider
    options = [(knob.text(v), v) for v in knob.values]
    return kind(
        options=options, value=knob.default, description=knob.label, style={"description_width": "200px"},
        layout=w.Layout(width="520px"),
    )  # fmt: skip


def _live() -> bool:
    """True inside a running Jupyter kernel (Jupyter, Colab) that has ipywidgets."""
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


# ----- units -----------------------------------------------------------------------------------------


def _per(value: float, unit: str) -> str:
    """A rate or ratio in whole numbers, its unit unprefixed: "1 827 tokens/s", "886 FLOPs/B"."""
    return f"{fmt(round(value))} {unit}"


def _profile(calibration: Calibration | str | None) -> Calibration | None:
    """A calculator's `calibration=`, read once (a path is loaded here, not on every knob turn)."""
    return None if calibration is None else load_calibration(calibration)


def _powers_of_two(low: int, high: int) -> tuple[int, ...]:
    return tuple(2**i for i in range(low, high + 1))


# ----- the four calculators --------------------------------------------------------------------------

# The dtypes a chip has a matmul peak for (`hardware.Chip.peak_ops_per_s`).
_MATMUL_DTYPES = ("bf16", "int8")


def _roofline_rows(chip: str, dtype: str, batch: int, d_model: int, d_ff: int) -> list[Row]:
    hw = get_chip(chip)
    size = checks.dtype_bytes(dtype, allowed=_MATMUL_DTYPES)
    cost = roofline.matmul_cost(batch, d_model, d_ff, size, size, size)
    peak = hw.peak_ops_per_s(dtype)
    t = roofline.roofline_time(cost.flops, cost.bytes, peak, hw.hbm_bytes_per_s)
    attained = roofline.attainable_flops_per_s(cost.intensity, peak, hw.hbm_bytes_per_s)
    return [
        ("work", fmt(cost.flops, "FLOPs")),
        ("HBM traffic", fmt(cost.bytes, "B")),
        ("intensity", _per(cost.intensity, "FLOPs/B")),
        ("ridge", _per(roofline.critical_intensity(hw, dtype), "FLOPs/B")),
        ("T_math", fmt(t.t_math, "s")),
        ("T_comms (HBM)", fmt(t.t_comms, "s")),
        ("time", fmt(t.t_lower, "s")),
        ("bound", t.bound),
        ("of peak", f"{attained / peak:.0%}"),
    ]


def roofline_calculator(**defaults: Any) -> Calculator:
    """Roofline of a matmul bf16[B, D] @ bf16[D, F] on one chip: `roofline.matmul_cost` and `roofline_time`.

    T_math = 2 B D F / C; T_comms = (B D + D F + B F) bytes / W_hbm; the static table sweeps B.
    Knobs: chip, dtype, batch, d_model, d_ff; `defaults` changes where the knobs start.
    Book: Part 1 (Rooflines), "Where Does the Time Go?".
    """
    calc = Calculator(
        title="Roofline of a matmul X[B, D] @ Y[D, F]",
        knobs=(
            Knob(name="chip", label="chip", values=tuple(CHIPS), default="tpu-v5e"),
            Knob(name="dtype", label="dtype", values=_MATMUL_DTYPES, default="bf16"),
            Knob(name="batch", label="B (tokens)", values=_powers_of_two(0, 16), default=256),
            Knob(name="d_model", label="D", values=_powers_of_two(8, 16), default=8192),
            Knob(name="d_ff", label="F", values=_powers_of_two(8, 17), default=32768),
        ),
        compute=_roofline_rows,
        sweep="batch",
        sweep_values=_powers_of_two(5, 10),
        factory="roofline_calculator",
    )
    return calc.with_defaults(**defaults)


def _collective_rows(op: str, chip: str, megabytes: float, devices: int, link: str) -> list[Row]:
    t = collectives.collective_time(op, megabytes * 1e6, devices, chip, link=link)
    return [
        ("bandwidth", fmt(t.bytes_per_s, "B/s")),
        ("bandwidth time", fmt(t.bandwidth_s, "s")),
        ("hops", f"{t.hops}"),
        ("latency time", fmt(t.latency_s, "s")),
        ("estimate", fmt(t.total_s, "s")),
        ("bound", t.bound),
    ]


def collective_calculator(**defaults: Any) -> Calculator:
    """Time of one collective over one mesh axis: `collectives.collective_time` (physical rings).

    AllGather or ReduceScatter (N - 1) / N * V / B, AllReduce twice that, each at least its hops'
    latency; V is the array after the gather (module `collectives`). The static table sweeps V.
    Knobs: op, chip, megabytes (V in MB), devices (N), link; `defaults` changes where they start.
    Book: Part 3 (Sharded Matrices), "Case 2" and "Case 3".
    """
    calc = Calculator(
        title="Time of one collective over one mesh axis",
        knobs=(
            Knob(name="op", label="collective", values=collectives.OPS, default="all_gather"),
            Knob(name="chip", label="chip", values=tuple(CHIPS), default="tpu-v5e"),
            Knob(name="megabytes", label="array V (MB)", values=(0.01, 0.1, 1, 10, 100, 1000, 10000), default=100),
            Knob(name="devices", label="devices N", values=_powers_of_two(1, 6), default=16),
            Knob(name="link", label="link", values=collectives.LINKS, default="ici"),
        ),
        compute=_collective_rows,
        sweep="megabytes",
        sweep_values=(0.01, 0.1, 1, 10, 100, 1000),
        factory="collective_calculator",
    )
    return calc.with_defaults(**defaults)


def _training_rows(
    model: str, chip: str, n_chips: int, batch_mtokens: int, seq_len: int, calibration: Calibration | None = None
) -> list[Row]:
    plan = planner.plan_training(
        model, with_calibration(chip, calibration), n_chips, batch_tokens=batch_mtokens * 2**20, seq_len=seq_len
    )
    best, step = plan.best, plan.best.step
    rows = [
        ("best scheme", best.scheme),
        ("mesh", " × ".join(f"{name} {size}" for name, size in step.mesh.items())),
        ("expected step", fmt(step.expected_s, "s")),
        ("expected MFU", f"{step.mfu_expected:.0%}"),
        ("bound (roofline)", fmt(step.roofline_s, "s")),
        ("T_math", fmt(step.terms[0].seconds, "s")),
        ("T_comms", fmt(step.t_comms, "s")),
        ("memory / HBM", f"{fmt(best.memory.total_bytes, 'B')} / {fmt(best.memory.hbm_bytes or 0, 'B')}"),
    ]
    if len(plan.entries) > 1:
        second = plan.entries[1]
        rows.append(("runner-up", f"{second.scheme}, {second.expected_s / step.expected_s:.2f}×"))
    return rows


def training_calculator(calibration: Calibration | str | None = None, **defaults: Any) -> Calculator:
    """The best way to shard one training step: `planner.plan_training` (every layout, ranked).

    The expected step time per scheme (`training.StepTime.expected_s`, at the chip's cited rates or
    `calibration`'s, a `calibrate` profile or its path), the bound `roofline_s` = max(T_math, T_comms)
    beside it (T_math: the model's FLOPs at peak), memory per chip with Adam; the static table sweeps
    the number of chips. Knobs: model, chip, n_chips, batch_mtokens (2**20 tokens), seq_len.
    Book: Part 5 (Training), "Key Takeaways"; Part 6, "How to shard LLaMA 3-70B".
    """
    tpus = tuple(name for name, chip in CHIPS.items() if chip.is_tpu)
    calc = Calculator(
        title="Best sharding of one training step",
        knobs=(
            Knob(name="model", label="model", values=model_names(), default="llama-3-70b"),
            Knob(name="chip", label="chip", values=tpus, default="tpu-v5p"),
            Knob(name="n_chips", label="chips", values=(64, 256, 1024, 2048, 4096, 8960, 17920), default=8960),
            Knob(name="batch_mtokens", label="batch (M tokens)", values=_powers_of_two(0, 5), default=4),
            Knob(name="seq_len", label="sequence (tokens)", values=_powers_of_two(11, 15), default=4096),
        ),
        compute=functools.partial(_training_rows, calibration=_profile(calibration)),
        sweep="n_chips",
        sweep_values=(256, 1024, 4096, 8960),
        factory="training_calculator",
    )
    return calc.with_defaults(**defaults)


def _serving_rows(
    model: str,
    chip: str,
    n_chips: int,
    context_len: int,
    dtype: str,
    batch: int,
    calibration: Calibration | None = None,
) -> list[Row]:
    s = inference.decode_step_time(
        model, with_calibration(chip, calibration), n_chips, batch=batch, context_len=context_len,
        param_dtype=dtype, kv_dtype=dtype,
    )  # fmt: skip
    rate = s.batch / s.expected_s
    try:
        usd = f"${inference.cost_per_million_tokens(chip, tokens_per_s_per_chip=rate / n_chips):.2f}"
    except ValueError:
        usd = "no price in the text"
    return [
        ("expected step", fmt(s.expected_s, "s")),
        ("tokens/s", fmt(round(rate))),
        ("per chip", fmt(round(rate / n_chips))),
        ("$ / M tokens", usd),
        ("bound (roofline)", fmt(s.t_lower, "s")),
        ("T_kv", fmt(s.t_kv, "s")),
        ("T_weights", fmt(s.t_weights, "s")),
        ("T_math", fmt(s.t_math, "s")),
        ("T_ici", fmt(s.t_ici, "s")),
        ("memory / HBM", f"{fmt(s.memory_bytes, 'B')} / {fmt(s.hbm_bytes, 'B')}"),
        ("fits", "yes" if s.fits else "NO"),
    ]


def serving_calculator(calibration: Calibration | str | None = None, **defaults: Any) -> Calculator:
    """Latency and throughput of one decode step: `inference.decode_step_time`.

    The expected step (`DecodeStep.expected_s`, at the cited rates or `calibration`'s) and the tokens/s
    and cost at it; the bound t = t_kv + max(t_weights, t_math, t_ici) (the text's estimate) beside it;
    weights and KV cache in the same dtype. The static table sweeps the batch. Knobs: model, chip,
    n_chips, context_len, dtype, batch.
    Book: Part 7 (Inference), "Theoretical estimates for LLM latency and throughput"; Part 8.
    """
    slices = sorted({math.prod(s) for name in CHIPS for s in topology.slice_shapes(name)})
    calc = Calculator(
        title="Latency and throughput of one decode step",
        knobs=(
            Knob(name="model", label="model", values=model_names(), default="llama-3-70b"),
            Knob(name="chip", label="chip", values=tuple(CHIPS), default="tpu-v5e"),
            Knob(name="n_chips", label="chips", values=tuple(slices), default=8),
            Knob(name="context_len", label="context (tokens)", values=_powers_of_two(9, 17), default=8192),
            Knob(name="dtype", label="weights and KV", values=inference.SERVING_DTYPES, default="int8"),
            Knob(name="batch", label="batch (sequences)", values=_powers_of_two(0, 10), default=32),
        ),
        compute=functools.partial(_serving_rows, calibration=_profile(calibration)),
        sweep="batch",
        sweep_values=(1, 8, 32, 64, 128, 256),
        factory="serving_calculator",
    )
    return calc.with_defaults(**defaults)


FACTORIES: dict[str, Callable[..., Calculator]] = {
    f.__name__: f for f in (roofline_calculator, collective_calculator, training_calculator, serving_calculator)
}


def in_page(request: str) -> str:
    """The result table the HTML book's page shows, computed in the browser by Pyodide.

    `request` is the JSON the page's script sends: {"name": a key of FACTORIES, "defaults": the
    form's starting settings, "chosen": knob -> index of the offer chosen}. The answer is
    `Calculator.html` at those settings, the same table the notebook widget shows; a setting the
    model refuses shows its own message (`Calculator.rows`). No formula lives in the page's script.

    Raises:
        ValueError: an unknown calculator or knob, or an index that is no offer.
    """
    asked = json.loads(request)
    calc = checks.lookup("name", asked["name"], FACTORIES, what="calculator")(**asked["defaults"])
    knobs = {k.name: k for k in calc.knobs}
    settings = {}
    for name, index in asked["chosen"].items():
        knob = checks.lookup("knob", name, knobs, what="knob")
        if not isinstance(index, int) or not 0 <= index < len(knob.values):
            raise ValueError(f"chosen[{name!r}]={index!r}: not an offer; allowed: 0 to {len(knob.values) - 1}")
        settings[name] = knob.values[index]
    return calc.html(**settings)


@dataclass(frozen=True, slots=True)
class SideBySide:
    """Calculators shown next to each other (the "Plan a run" page): live widgets side by side in a
    kernel, the page's forms side by side in the HTML book, then each one's static table."""

    calculators: tuple[Calculator, ...]

    def bundles(self, *, live: bool) -> list[dict[str, Any]]:
        """The live widgets in one row when `live`, then the forms in one row and the static tables."""
        shown: list[dict[str, Any]] = []
        if live:
            import ipywidgets as w

            row = w.HBox([c.widget() for c in self.calculators])
            view = {"version_major": 2, "version_minor": 0, "model_id": row.model_id}
            shown.append(
                {"application/vnd.jupyter.widget-view+json": view, "text/markdown": LIVE_NOTE, "text/plain": LIVE_NOTE}
            )
        forms = "".join(c.form_html() for c in self.calculators)
        tables = "".join(c.static_html() for c in self.calculators)
        text = "\n\n".join(c.static_text() for c in self.calculators)
        shown.append({"text/html": f'<div class="calculator-row">{forms}</div>{tables}', "text/plain": text})
        return shown

    def _ipython_display_(self) -> None:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is None:
            print(self.bundles(live=False)[-1]["text/plain"])
            return
        for bundle in self.bundles(live=_live()):
            display(bundle, raw=True)


def side_by_side(*calculators: Calculator) -> SideBySide:
    """`calculators` shown next to each other (two or more).

    Raises:
        ValueError: fewer than two, or something that is not a Calculator.
    """
    if len(calculators) < 2 or not all(isinstance(c, Calculator) for c in calculators):
        raise ValueError(f"calculators={calculators!r}: allowed: two or more Calculator objects")
    return SideBySide(calculators)
