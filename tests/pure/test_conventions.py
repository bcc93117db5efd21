"""One vocabulary across book_lib and the keys, each rule tried on the code and on a planted violation.

- The calling convention: in `bounds`, `training`, `planner`, `inference`, `gpu` and `parallelism` a
  public function takes `(model, chip, layout or n_chips)` first, each only where it needs it and in
  that order, and every other argument by keyword; a dtype is a string, never a byte count.
- One set of dtype argument names (`DTYPE_ARGS`), one recomputation vocabulary
  (`transformer.REMAT_POLICIES`), a step's dtypes as a `parallelism.StepDtypes`, not a tuple.
- One way to find a chip, `hardware.get_chip` (no alias of it, no function called `chip`); optimizer
  bytes named for what they are, state or update traffic; no module named after another's class.
- The published models as keyword rows.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import book_lib
from book_lib import bounds, gpu, inference, parallelism, planner, training, transformer

ROOT = Path(__file__).resolve().parents[2]
MODULES = (bounds, training, planner, inference, gpu, parallelism)
LEADING = ("model", "chip", "layout", "n_chips")
# Arguments that would carry a dtype's size as a number instead of naming the dtype.
BYTE_SIZES = re.compile(r"^(weight|kv|act|param|grad)_bytes$|^bytes_per_(value|param|grad|weight)$|dtype_bytes")
DTYPE_ARGS = {
    "dtype",
    "param_dtype",
    "grad_dtype",
    "activation_dtype",
    "matmul_dtype",
    "kv_dtype",
    "optimizer_dtype",
    "master_dtype",
}
OPTIMIZER_BYTES = re.compile(r"optimizer\w*bytes_per_param")
OPTIMIZER_NAMES = {"optimizer_state_bytes_per_param", "optimizer_update_bytes_per_param"}
SOURCES = {
    str(path.relative_to(ROOT)): path.read_text()
    for folder in ("book_lib", "exercises")
    for path in sorted((ROOT / folder).rglob("*.py"))
}


def _public_functions():
    """Every public function and method of book_lib, by dotted name."""
    for module_name in book_lib.__all__:
        module = getattr(book_lib, module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module_name}.{name}", obj
            elif inspect.isclass(obj):
                for method, fn in inspect.getmembers(obj, inspect.isfunction):
                    if not method.startswith("_") and fn.__module__ == module.__name__:
                        yield f"{module_name}.{name}.{method}", fn


FUNCTIONS = dict(_public_functions())
CONVENTION = {
    name: fn
    for name, fn in FUNCTIONS.items()
    if name.count(".") == 1 and getattr(book_lib, name.split(".")[0]) in MODULES
}
# Where a dtype is always named, never a byte count: the cost models a practitioner calls and the counts.
NAMED_DTYPES = {name: fn for name, fn in FUNCTIONS.items() if name in CONVENTION or name.startswith("transformer.")}


# ----- the calling convention ------------------------------------------------------------------------


def signature_violations(fn) -> list[str]:
    """What breaks the calling convention in fn's signature (empty when it holds)."""
    params = list(inspect.signature(fn).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    out = [f"*{p.name}" for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    out += [f"{name} is positional" for name in positional if name not in LEADING]
    order = [LEADING.index(name) for name in positional if name in LEADING]
    if order != sorted(order) or {"layout", "n_chips"} <= set(positional):
        out.append(f"leading arguments out of order: {positional}")
    return out + size_violations(fn) + dtype_violations(fn)


def size_violations(fn) -> list[str]:
    """A dtype given as a byte count, or a dtype default that is not a name."""
    params = inspect.signature(fn).parameters.values()
    out = [f"{p.name} sizes a dtype" for p in params if BYTE_SIZES.search(p.name)]
    named = (inspect.Parameter.empty, None)
    dtypes = [p for p in params if p.name.endswith("dtype")]
    return out + [f"{p.name}={p.default!r}" for p in dtypes if not (p.default in named or isinstance(p.default, str))]


def dtype_violations(fn) -> list[str]:
    """A dtype argument outside the one vocabulary, or several dtypes in one tuple."""
    params = inspect.signature(fn).parameters.values()
    names = [p.name for p in params if p.name.endswith("dtype") and p.name not in DTYPE_ARGS]
    out = [f"{name}: not one of the dtype names {sorted(DTYPE_ARGS)}" for name in names]
    return out + [f"{p.name}: several dtypes in a tuple (a StepDtypes)" for p in params if _tuple_of_dtypes(p)]


def _tuple_of_dtypes(p: inspect.Parameter) -> bool:
    return "dtype" in p.name and "tuple" in str(p.annotation)


@pytest.mark.parametrize("name", sorted(CONVENTION))
def test_leading_arguments_then_keywords_and_named_dtypes(name):
    assert signature_violations(CONVENTION[name]) == []


def test_every_public_function_names_its_dtypes_by_the_one_vocabulary():
    assert len(FUNCTIONS) > 200 and len(NAMED_DTYPES) > 50
    assert {name: v for name, fn in FUNCTIONS.items() if (v := dtype_violations(fn))} == {}
    assert {name: v for name, fn in NAMED_DTYPES.items() if (v := size_violations(fn))} == {}


def test_the_rules_catch_the_old_signatures():
    def training_days(model, tokens, chip, n_chips, *, mfu):
        return 0.0

    def decode_step_time(model, chip, n_chips, batch, context_len, *, weight_bytes=2):
        return 0.0

    def memory_per_chip(model, mesh, batch_tokens, *, chip=None):
        return 0.0

    def step_time(model, chip, n_chips, layout):
        return 0.0

    def serve(model, *, weight_dtype="bf16", act_dtype="bf16", math_dtype="bf16"):
        return 0.0

    def step_collectives(cfg, *, dtypes: tuple[str, str]):
        return 0.0

    assert signature_violations(training_days) == ["tokens is positional"]
    assert signature_violations(decode_step_time) == [
        "batch is positional",
        "context_len is positional",
        "weight_bytes sizes a dtype",
    ]
    assert signature_violations(memory_per_chip) == ["mesh is positional", "batch_tokens is positional"]
    assert signature_violations(step_time) == ["leading arguments out of order: ['model', 'chip', 'n_chips', 'layout']"]
    assert [v.split(":")[0] for v in dtype_violations(serve)] == ["weight_dtype", "act_dtype", "math_dtype"]
    assert dtype_violations(step_collectives) == ["dtypes: several dtypes in a tuple (a StepDtypes)"]


# ----- recomputation ---------------------------------------------------------------------------------


def remat_violations(functions: dict) -> list[str]:
    """A `remat` argument whose default is not a policy of `transformer.REMAT_POLICIES`."""
    out = []
    for name, fn in functions.items():
        remat = inspect.signature(fn).parameters.get("remat")
        if remat is not None and remat.default not in transformer.REMAT_POLICIES:
            out.append(f"{name}: remat={remat.default!r}")
    return out


def test_one_recomputation_vocabulary():
    assert set(training.REMAT_FORWARD_PASSES) <= set(transformer.REMAT_POLICIES)
    assert remat_violations(FUNCTIONS) == []
    assert any("remat" in inspect.signature(fn).parameters for fn in FUNCTIONS.values())

    def stack_loss(params, *, remat=False):
        return 0.0

    def saved(*, remat="block"):
        return 0.0

    assert remat_violations({"stack_loss": stack_loss, "saved": saved}) == [
        "stack_loss: remat=False",
        "saved: remat='block'",
    ]


# ----- names in the source ---------------------------------------------------------------------------


def name_violations(sources: dict[str, str]) -> list[str]:
    """In each source: an alias of `hardware.get_chip`, a function called `chip`, optimizer bytes named
    for neither state nor update, and a preset of `models` given positional shapes."""
    out = []
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef):
                out += _function_violations(path, node)
            name = _identifier(node)
            if name and OPTIMIZER_BYTES.search(name) and name not in OPTIMIZER_NAMES:
                out.append(f"{path}:{node.lineno}: {name} (optimizer state or update bytes?)")
            if path.endswith("models.py") and _preset_call(node) and len(node.args) > 2:
                out.append(f"{path}:{node.lineno}: a preset with {len(node.args)} positional values")
    return sorted(set(out))


def _preset_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _called(node) in ("_checkpoint", "TransformerConfig")


def _called(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def _function_violations(path: str, node: ast.FunctionDef) -> list[str]:
    out = []
    if node.name.lstrip("_") == "chip":
        out.append(f"{path}:{node.lineno}: a function called {node.name} (hardware.get_chip finds a chip)")
    body = [stmt for stmt in node.body if not isinstance(stmt, ast.Expr)]  # the docstring aside
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call):
        if node.name != "get_chip" and _called(body[0].value) == "get_chip":
            out.append(f"{path}:{node.lineno}: {node.name} is an alias of get_chip")
    return out


def _identifier(node: ast.AST) -> str | None:
    for kind, field in ((ast.Name, "id"), (ast.Attribute, "attr"), (ast.arg, "arg"), (ast.FunctionDef, "name")):
        if isinstance(node, kind):
            return getattr(node, field)
    if isinstance(node, ast.keyword):
        return node.arg
    return None


def test_names_in_book_lib_and_the_keys():
    assert name_violations(SOURCES) == []


@pytest.mark.parametrize(
    ("path", "planted", "found"),
    [
        ("exercises/keys/ch01_rooflines.py", "def _chip(name):\n    return hardware.get_chip(name)", "an alias"),
        ("book_lib/checks.py", "def chip(value, arg='chip'):\n    '''A chip.'''\n    return 0", "called chip"),
        ("book_lib/devices.py", "def chip():\n    return None", "a function called chip"),
        ("book_lib/overheads.py", "def optimizer_bytes_per_param(*, moments):\n    return 0", "optimizer_bytes"),
        ("book_lib/transformer.py", "f(optimizer_bytes_per_param=8)", "optimizer_bytes_per_param"),
        ("book_lib/models.py", '_checkpoint("a", "b/c", 32, 4096)', "a preset with 4 positional values"),
    ],
)
def test_each_name_rule_catches_a_planted_violation(path, planted, found):
    sources = {**SOURCES, path: SOURCES[path] + "\n\n" + planted + "\n"}
    assert any(found in v for v in name_violations(sources)), name_violations(sources)


def module_class_clashes(modules: list[str], classes: dict[str, str]) -> list[str]:
    """A module named like a class of another module (`layout` beside `parallelism.Layout`)."""
    return [f"{m} beside {classes[m]}" for m in modules if m in classes and not classes[m].startswith(f"{m}.")]


def test_no_module_is_named_after_another_modules_class():
    classes = {
        name.lower(): f"{module}.{name}"
        for module in book_lib.__all__
        for name in getattr(book_lib, module).__all__
        if inspect.isclass(getattr(getattr(book_lib, module), name))
    }
    assert module_class_clashes(book_lib.__all__, classes) == []
    assert module_class_clashes([*book_lib.__all__, "layout"], classes) == ["layout beside parallelism.Layout"]


def shared_test_names(paths: list[Path]) -> list[str]:
    """Test modules of two tiers with one file name: pytest imports a test module by its file name
    (tests/ has no packages), so the second stops the whole run at collection."""
    seen: dict[str, Path] = {}
    return [f"{p} and {seen[p.name]}" for p in paths if seen.setdefault(p.name, p) != p]


def test_every_test_module_has_its_own_name():
    paths = sorted((ROOT / "tests").glob("*/test_*.py"))
    assert shared_test_names(paths) == []
    planted = [*paths, ROOT / "tests/tpu/test_exercises.py"]
    assert shared_test_names(planted) == [f"{planted[-1]} and {ROOT / 'tests/course/test_exercises.py'}"]
