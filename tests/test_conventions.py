"""One calling convention for the cost models a practitioner calls (issue: "one convention").

In `bounds`, `training`, `planner`, `inference`, `gpu` and `parallelism`, a public function takes
`(model, chip, layout or n_chips)` first, each only where it needs it and in that order, and every
other argument by keyword; a dtype is always a string (`"bf16"`, `"int8"`), never a byte count.
"""

from __future__ import annotations

import inspect
import re

import pytest

from book_lib import bounds, gpu, inference, parallelism, planner, training, transformer

MODULES = (bounds, training, planner, inference, gpu, parallelism)
LEADING = ("model", "chip", "layout", "n_chips")
# Arguments that would carry a dtype's size as a number instead of naming the dtype.
BYTE_SIZES = re.compile(r"^(weight|kv|act|param|grad)_bytes$|^bytes_per_(value|param|grad|weight)$|dtype_bytes")


def _functions():
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj


FUNCTIONS = dict(_functions())


def test_every_module_has_public_functions():
    assert {name.split(".")[1] for name in FUNCTIONS} == {m.__name__.split(".")[1] for m in MODULES}


def _violations(fn) -> list[str]:
    """What breaks the convention in fn's signature (empty when it holds)."""
    params = list(inspect.signature(fn).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    out = [f"*{p.name}" for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    out += [f"{name} is positional" for name in positional if name not in LEADING]
    order = [LEADING.index(name) for name in positional if name in LEADING]
    if order != sorted(order) or {"layout", "n_chips"} <= set(positional):
        out.append(f"leading arguments out of order: {positional}")
    out += [f"{p.name} sizes a dtype" for p in params if BYTE_SIZES.search(p.name)]
    dtypes = [p for p in params if p.name == "dtype" or p.name.endswith("_dtype")]
    out += [
        f"{p.name}={p.default!r}" for p in dtypes if not (p.default in (p.empty, None) or isinstance(p.default, str))
    ]
    return out


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_leading_arguments_then_keywords_and_named_dtypes(name):
    assert _violations(FUNCTIONS[name]) == []


def test_the_rule_catches_the_old_signatures():
    def training_days(model, tokens, chip, n_chips, *, mfu):
        return 0.0

    def decode_step_time(model, chip, n_chips, batch, context_len, *, weight_bytes=2):
        return 0.0

    def memory_per_chip(model, mesh, batch_tokens, *, chip=None):
        return 0.0

    def step_time(model, chip, n_chips, layout):
        return 0.0

    assert _violations(training_days) == ["tokens is positional"]
    assert _violations(decode_step_time) == [
        "batch is positional",
        "context_len is positional",
        "weight_bytes sizes a dtype",
    ]
    assert _violations(memory_per_chip) == ["mesh is positional", "batch_tokens is positional"]
    assert _violations(step_time) == ["leading arguments out of order: ['model', 'chip', 'n_chips', 'layout']"]


def test_the_transformer_counts_name_their_dtypes_too():
    methods = [
        fn for name, fn in inspect.getmembers(transformer.TransformerConfig, inspect.isfunction) if name[0] != "_"
    ]
    functions = [getattr(transformer, name) for name in transformer.__all__]
    counted = [fn for fn in (*methods, *functions) if inspect.isfunction(fn)]
    assert len(counted) > 10
    dtype_rules = [(fn.__name__, v) for fn in counted for v in _violations(fn) if "sizes a dtype" in v or "dtype=" in v]
    assert dtype_rules == []
