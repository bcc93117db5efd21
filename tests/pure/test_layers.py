"""The module map (`book_lib.LAYERS`) holds: every module is on it, imports only from its own layer and
those below, takes no private name of another module, and no two modules import each other; the
map's written forms (reference pages, table of contents, CONTRIBUTING's table) are what `make sync`
writes. Each rule is also tried on a planted violation."""

import ast
from pathlib import Path

import pytest

import book_lib
from tools import module_map

BOOK_LIB = Path(book_lib.__file__).resolve().parent
NAMES = tuple(book_lib.LAYERS)
LAYER = {module: i for i, modules in enumerate(book_lib.LAYERS.values()) for module in modules}
LAYER["__main__"] = len(NAMES)  # the command line stands on every layer
SOURCES = {path.stem: path.read_text() for path in sorted(BOOK_LIB.glob("*.py")) if path.stem != "__init__"}


def _imports(source: str) -> list[tuple[str, str | None, int, bool]]:
    """(book_lib module, the name taken from it or None, line, for types only) for each import of `source`
    at any depth, and each `module._name` read through a module it imported. An import under
    `if TYPE_CHECKING:` is for types only: it keeps the layers but makes no cycle."""
    tree = ast.parse(source)
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    found, aliases = [], {}
    for node in ast.walk(tree):
        types = id(node) in typing_only
        if isinstance(node, ast.ImportFrom) and node.module == "book_lib":
            for alias in node.names:
                found.append((alias.name, None, node.lineno, types))
                aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("book_lib."):
            found += [(node.module.split(".")[1], alias.name, node.lineno, types) for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[1] for a in node.names if a.name.startswith("book_lib.")]
            found += [(name, None, node.lineno, types) for name in names]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found.append((aliases[node.value.id], node.attr, node.lineno, False))
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the import graph, as a path that returns to its start, or None."""
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target, [*path, target])):
                return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [module])):
            return found
    return None


def violations(sources: dict[str, str]) -> list[str]:
    """Every break of the map's rules in `sources` (module name -> its text)."""
    out, graph = [], {}
    for module, source in sources.items():
        if module not in LAYER:
            out.append(f"{module}: not on the map (book_lib.LAYERS)")
            continue
        for target, name, line, types in _imports(source):
            if target == module:
                continue
            if not types:
                graph.setdefault(module, set()).add(target)
            if LAYER[target] > LAYER[module]:
                out.append(f"{module}:{line} imports {target}, of the layer above it ({NAMES[LAYER[target]]})")
            if name and name.startswith("_") and not name.startswith("__"):
                out.append(f"{module}:{line} takes the private name {target}.{name}")
    cycle = _cycle(graph)
    if cycle:
        out.append(f"modules import each other: {' -> '.join(cycle)}")
    return out


def test_every_module_is_on_the_map_and_keeps_its_rules():
    assert set(SOURCES) - {"__main__"} == set(book_lib.__all__)
    assert violations(SOURCES) == []
    assert [m for m in book_lib.__all__ if "\n__all__ = [" not in SOURCES[m]] == [], "each module lists its names"


@pytest.mark.parametrize(
    ("module", "planted", "found"),
    [
        ("roofline", "from book_lib import plots", "roofline:1 imports plots, of the layer above it (reader)"),
        ("training", "from book_lib.devices import setup", "training:1 imports devices, of the layer above it (JAX)"),
        ("decode", "from book_lib.attention import _dense", "decode:1 takes the private name attention._dense"),
        ("diagrams", "from book_lib import plots\nplots._base_chip('h100')", "takes the private name plots._base_chip"),
        (
            "checks",
            "def f():\n    from book_lib import hardware",
            "modules import each other: checks -> hardware -> checks",
        ),
        ("layout", "", "layout: not on the map"),
    ],
)
def test_each_rule_catches_a_planted_violation(module, planted, found):
    sources = {**SOURCES, module: planted + "\n" + SOURCES.get(module, "")}
    assert any(found in v for v in violations(sources)), violations(sources)


def test_the_maps_written_forms_are_what_make_sync_writes():
    for path, text in module_map.expected().items():
        assert path.read_text() == text, f"{path.name} differs from the map: run make sync"
    assert module_map.stale_pages() == []
    toc = (module_map.ROOT / "_toc.yml").read_text()
    assert module_map.toc(toc.replace("          - file: api/roofline\n", "")) == toc, "a dropped page comes back"
