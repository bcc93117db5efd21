"""The module map's written forms, kept in step with `book_lib.LAYERS` by `make sync`.

    python tools/module_map.py          # rewrite every form that differs

- `api/<module>.md`: one reference page per module (Sphinx's automodule of it);
- `api/index.md`: the reference's front page, one list per layer;
- `_toc.yml`: the "Reference" part, a section per module;
- `CONTRIBUTING.md`: the table of layers and modules between its two markers.

`expected()` gives each file as the map writes it; `tests/pure/test_layers.py` compares them.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from book_lib import LAYERS  # noqa: E402

# What each layer may use besides the layers below it, as the reference's front page says.
LAYER_RULES = {
    "base": "the standard library only",
    "cost models": "plain Python and NumPy, no JAX, so they import in milliseconds and run in the page (Pyodide)",
    "JAX": "the demos and the tools that measure a real program",
    "reader": "matplotlib and the notebook's display: what a reader looks at",
}
TOC_START = "  - caption: Reference\n"
TABLE_START = "<!-- module map: written by `make sync` from book_lib.LAYERS -->\n"
TABLE_END = "<!-- end of module map -->\n"

INDEX_START = "The modules form four layers, lowest first; each imports only from its own layer and those before it.\n"


def page(module: str) -> str:
    """The reference page of one module."""
    return f"# `book_lib.{module}`\n\n```{{eval-rst}}\n.. automodule:: book_lib.{module}\n   :members:\n```\n"


def index(current: str) -> str:
    """api/index.md: its introduction as written, then each layer, what it may use, and its modules."""
    parts = [current[: current.index(INDEX_START)] + INDEX_START]
    for layer, modules in LAYERS.items():
        lines = [f"**{layer[0].upper() + layer[1:]}**: {LAYER_RULES[layer]}.", ""]
        lines += [f"- {{doc}}`{module}`: {what}" for module, what in modules.items()]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def toc(current: str) -> str:
    """_toc.yml with its Reference part (the last) written from the map."""
    head = current[: current.index(TOC_START)]
    sections = "".join(f"          - file: api/{module}\n" for modules in LAYERS.values() for module in modules)
    return head + TOC_START + "    chapters:\n      - file: api/index\n        sections:\n" + sections


def contributing(current: str) -> str:
    """CONTRIBUTING.md with the table between its markers written from the map."""
    head, _, rest = current.partition(TABLE_START)
    _, _, tail = rest.partition(TABLE_END)
    rows = ["| layer | module | what it holds |", "| --- | --- | --- |"]
    rows += [
        f"| {layer} | `{module}` | {what} |" for layer, modules in LAYERS.items() for module, what in modules.items()
    ]
    return head + TABLE_START + "\n".join(rows) + "\n" + TABLE_END + tail


def expected() -> dict[Path, str]:
    """Every file the map writes, as it should read."""
    out = {ROOT / "api" / f"{module}.md": page(module) for modules in LAYERS.values() for module in modules}
    out[ROOT / "api" / "index.md"] = index((ROOT / "api" / "index.md").read_text())
    out[ROOT / "_toc.yml"] = toc((ROOT / "_toc.yml").read_text())
    out[ROOT / "CONTRIBUTING.md"] = contributing((ROOT / "CONTRIBUTING.md").read_text())
    return out


def stale_pages() -> list[Path]:
    """Reference pages of modules the map no longer holds."""
    wanted = {f"{module}.md" for modules in LAYERS.values() for module in modules} | {"index.md"}
    return sorted(p for p in (ROOT / "api").glob("*.md") if p.name not in wanted)


def main() -> int:
    for path, text in expected().items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"updated {path.relative_to(ROOT)}")
    for path in stale_pages():
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
