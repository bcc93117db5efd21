"""Every chip `hardware` knows, variants included, works in every public function that takes a chip.

A function either answers or refuses with the library's `ValueError` (`argument=value: ...; allowed:
...`); a KeyError, ZeroDivisionError or AttributeError is a missing table entry or a figure the chip
lacks. Functions are found by their signature (a parameter named `chip` or `chips`), so a new one is
covered as soon as it exists; a required parameter the table below has no sample for fails the test.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from book_lib import (  # noqa: E402
    bounds,
    collectives,
    diagrams,
    gpu,
    hardware,
    inference,
    model_plots,
    planner,
    plots,
    roofline,
    sharding,
    systolic,
    topology,
    training,
    transformer,
)
from book_lib.parallelism import Layout, place  # noqa: E402

EVERY_CHIP = (*hardware.chip_names(), *hardware.VARIANTS)
PURE = (roofline, topology, collectives, sharding, systolic, transformer, gpu, inference, bounds, training, planner)
# Sample values of the arguments these functions take besides the chip; a tuple is looped over.
SAMPLES: dict[str, tuple[Any, ...]] = {
    "dtype": ("bf16", "int8"),
    "op": collectives.OPS,
    "link": collectives.LINKS,
    "array_bytes": (0.0, 1e6),
    "axis_size": (1, 2, 16),
    "axis_sizes": ((1,), (2,), (4, 4)),
    "n_chips": (1, 2, 256),
    "n_devices": (1, 8),
    "model": ("llama-3-8b", "mixtral-8x7b"),
    "layout": (Layout(), Layout(fsdp=4), Layout(data=2, tensor=4, microbatches=2)),
    "batch": (1, 64),
    "context_len": (4096,),
    "prompt_len": (4096,),
    "output_len": (1, 512),
    "batches": ((1, 64),),
    "batch_tokens": (2**20,),
    "seq_len": (4096,),
    "tokens": (1e12,),
    "mfu": (0.5,),
    "d_ff": (14336,),
    "strategy": ("dp", "fsdp", "fsdp+tp"),
    "chips_per_pod": (1, 256),
    "n_nodes": (1, 4),
    "batch_per_gpu": (1e3,),
    "tokens_per_s_per_chip": (1e3,),
    "tokens_per_s": (1e6,),
    "flops_per_token": (1e10,),
    "fsdp_degree": (4.0,),
    "param_count": (7e9,),
    "kv_bytes_per_token": (1.3e5,),
}
# Functions whose arguments are structured: (lhs, rhs, contracting) of each of the book's four cases.
MATMULS = (("A[I, J]", "B[J, K]"), ("A[I_X, J]", "B[J, K]"), ("A[I, J_X]", "B[J_X, K]"), ("A[I_X, J]", "B[J, K_X]"))
SPECIAL: dict[str, Callable[[str], Iterator[Any]]] = {
    "matmul_plan": lambda chip: (
        sharding.matmul_plan(lhs, rhs, contracting="J", sizes={"I": 256, "J": 512, "K": 1024}, mesh={"X": 2}, chip=chip)
        for lhs, rhs in MATMULS
    ),
}
REFUSAL = re.compile(r"^[\w.\[\]'\"]+=")


def _chip_functions() -> list[tuple[str, Callable[..., Any]]]:
    """Every public function of the pure modules with a `chip` or `chips` parameter, as (name, function)."""
    found = []
    for module in PURE:
        for name in module.__all__:
            fn = getattr(module, name)
            if inspect.isfunction(fn) and {"chip", "chips"} & set(inspect.signature(fn).parameters):
                found.append((f"{module.__name__.rsplit('.', 1)[1]}.{name}", fn))
    return found


def _calls(name: str, fn: Callable[..., Any], chip: str) -> Iterator[Callable[[], Any]]:
    """One zero-argument call per combination of the sample values `fn` takes."""
    short = name.rsplit(".", 1)[1]
    if short in SPECIAL:
        yield lambda: list(SPECIAL[short](chip))
        return
    choices: dict[str, tuple[Any, ...]] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name in ("chip", "chips"):
            choices[param.name] = (chip,) if param.name == "chip" else ((chip,),)
        elif param.name in SAMPLES:
            choices[param.name] = SAMPLES[param.name]
        elif param.default is inspect.Parameter.empty:
            raise AssertionError(f"{name}: no sample value for {param.name!r}; add one to SAMPLES or SPECIAL")
    for values in itertools.product(*choices.values()):
        kwargs = dict(zip(choices, values, strict=True))
        yield lambda kwargs=kwargs: fn(**kwargs)


def _outcome(call: Callable[[], Any]) -> str:
    """'ok', 'refused' (the library's ValueError) or what else went wrong."""
    try:
        call()
    except ValueError as err:
        return "refused" if REFUSAL.match(str(err)) else f"ValueError without the argument: {err}"
    except Exception as err:  # noqa: BLE001 - anything else is the failure this test looks for
        return f"{type(err).__name__}: {err}"
    return "ok"


@pytest.mark.parametrize("chip", EVERY_CHIP)
def test_every_pure_function_answers_or_refuses_plainly(chip):
    functions = _chip_functions()
    assert len(functions) >= 10, [name for name, _ in functions]
    bad = []
    for name, fn in functions:
        for call in _calls(name, fn, chip):
            outcome = _outcome(call)
            if outcome not in ("ok", "refused"):
                bad.append(f"{name}({chip}): {outcome}")
    assert not bad, bad


@pytest.mark.parametrize("chip", EVERY_CHIP)
def test_every_layout_places_on_every_chip_or_is_refused_plainly(chip):
    layouts = (
        Layout(),
        Layout(fsdp=8),
        Layout(data=2, fsdp=4, tensor=2),
        Layout(tensor=hardware.get_chip(chip).chips_per_pod),
    )
    for layout in layouts:
        assert _outcome(lambda layout=layout: place(chip, layout)) in ("ok", "refused"), (chip, layout)


@pytest.mark.parametrize("chip", EVERY_CHIP)
def test_every_chip_property_and_its_pod_answer(chip):
    spec = hardware.get_chip(chip)
    for dtype in ("bf16", "int8"):
        assert spec.peak_ops_per_s(dtype) > 0
    for name, member in inspect.getmembers(hardware.Chip):
        if isinstance(member, property):
            getattr(spec, name)
    pod = topology.pod(chip)
    for name, member in inspect.getmembers(topology.Slice):
        if isinstance(member, property):
            getattr(pod, name)
    origin = (0,) * len(pod.shape)
    assert pod.hop_count(origin, origin) == 0
    assert topology.Slice.of(chip, (1,) * len(pod.shape)).n_chips == 1
    assert hardware.price_usd_per_chip_hour(chip) is None or hardware.price_usd_per_chip_hour(chip) > 0


def test_chip_style_gives_every_chip_a_colour_and_variants_their_chips():
    book = [plots.chip_style(name)["color"] for name in hardware.chip_names()]
    assert len(set(book)) == len(book)
    for name in hardware.VARIANTS:
        chip = next((base for base in hardware.chip_names() if name.startswith(f"{base}-")), None)
        if chip is None:  # a board with a name of its own (the H800): its own colour, dash-dotted
            assert plots.chip_style(name)["linestyle"] == "-.", name
            continue
        style, base = plots.chip_style(name), plots.chip_style(chip)
        assert style["color"] == base["color"] and style["linestyle"] != base["linestyle"], name
    own = dataclasses.replace(hardware.get_chip("h100"), name="my-accelerator")
    assert plots.chip_style(own)["color"] in set(plots.CHIP_COLORS.values())
    assert plots.chip_style(dataclasses.replace(own, name="h200-nvl"))["color"] == plots.CHIP_COLORS["h200"]


def test_the_plots_drawn_below_are_every_figure_that_takes_a_chip():
    takes = {
        name
        for module in (plots, model_plots, diagrams)
        for name in module.__all__
        if inspect.isfunction(getattr(module, name))
        and {"chip", "chips"} & set(inspect.signature(getattr(module, name)).parameters)
    }
    assert takes == {
        "chip_style",
        "roofline",
        "roofline_two_bandwidths",
        "chip_rates",
        "bandwidth_bars",
        "ridge_points",
        "tpu_chip",
    }


@pytest.mark.slow
@pytest.mark.parametrize("chip", EVERY_CHIP)
def test_every_plot_of_a_chip_draws_it(chip):
    bandwidths = (("HBM", hardware.get_chip(chip).hbm_bytes_per_s), ("ICI", hardware.get_chip(chip).ici_bytes_per_s))
    figures = [
        plots.roofline([chip], points=(("matmul", 300.0),)),
        plots.roofline_two_bandwidths(chip, bandwidths, points=(("x", 100.0),)),
        plots.chip_rates([chip]),
        plots.bandwidth_bars([chip]),
        plots.ridge_points([chip]),
    ]
    if hardware.get_chip(chip).is_tpu:
        figures.append(diagrams.tpu_chip(chip))
    else:
        with pytest.raises(ValueError, match=r"^chip="):
            diagrams.tpu_chip(chip)
    for fig, _ in figures:
        plt.close(fig)


def test_the_chip_figures_draw_every_chip_at_once():
    for draw in (plots.roofline, plots.chip_rates, plots.bandwidth_bars):
        fig, ax = draw(EVERY_CHIP)
        assert len(ax.get_legend().get_texts()) >= (len(EVERY_CHIP) if draw is not plots.bandwidth_bars else 4)
        plt.close(fig)
    fig, ax = plots.ridge_points(EVERY_CHIP)
    assert [p.get_gid() for p in ax.patches] == [f"ridge-{hardware.get_chip(c).name}" for c in EVERY_CHIP]
    plt.close(fig)
