"""The book_lib reference: plain-text docstrings become the RST they mean (the pages: tests/pure/test_layers.py).

That every docstring then builds without a warning is `tests/site/test_book.py`'s (`-W -n`).
"""

import importlib
import inspect
from pathlib import Path

from docutils.core import publish_doctree
from docutils.utils import Reporter
from sphinx.pycode import ModuleAnalyzer

import book_lib
from tools import api_docs

ROOT = Path(__file__).resolve().parents[2]


def _problems(rst: str) -> list[str]:
    """Warnings and errors docutils reports on `rst` (napoleon's sections aside, plain RST)."""
    messages = []
    doctree = publish_doctree(rst, settings_overrides={"report_level": Reporter.SEVERE_LEVEL + 1})
    for node in doctree.findall():
        if node.tagname == "system_message" and node["level"] >= Reporter.WARNING_LEVEL:
            messages.append(node.astext())
    return messages


def test_a_formula_under_prose_is_shown_as_written():
    lines = ["Roots of the quadratic (communication equals math):", "    X = M_X |B| * F", "None when negative."]
    rst = api_docs.plain_to_rst(lines)
    assert rst == [
        "Roots of the quadratic (communication equals math):",
        "",
        ".. code-block:: text",
        "",
        "    X = M_X |B| * F",
        "",
        "None when negative.",
    ]
    assert _problems("\n".join(lines)), "as plain RST the same lines are an error"


def test_pipes_stars_and_trailing_underscores_are_text_and_backticks_are_code():
    assert api_docs.escape("|X| * |Y| blocks of {U_...}, `x`s") == r"\|X\| \* \|Y\| blocks of {U\_...}, ``x``\ s"
    assert not _problems(api_docs.escape("split |X| * |Y| ways into {U_...} and `name`s"))


def test_lists_and_sections_stay_as_they_are():
    lines = [
        "1. no contracting dimension is sharded: multiply the local blocks,",
        "   no communication;",
        "2. gather first.",
        "",
        "Args:",
        "    x: this device's block, shape (rows, ...);",
        "        continued.",
    ]
    assert api_docs.plain_to_rst(lines) == lines
    assert not _problems("\n".join(api_docs.plain_to_rst(lines[:3])))


# What a <pre> on the site holds: 80 characters of the 13 px code font (as tests/site/test_notebooks.py).
COLUMN_CHARACTERS = 80


def _documented() -> dict[str, list[str]]:
    """Name -> dedented docstring lines of everything `automodule:: ... :members:` puts on an api page.

    That is the module; its public classes and functions (its `__all__`, or the names it defines),
    not data, whose docstring is its type's; a class's own public methods and properties; and an
    attribute with a doc comment. Each docstring is autodoc's: `inspect.getdoc`, inherited included;
    an object without one is not shown. (Checked against a Sphinx build of the api pages: the same
    objects, the same lines.)
    """
    found: dict[str, list[str]] = {}

    def add(name: str, obj: object) -> None:
        if doc := inspect.getdoc(obj):
            found[name] = doc.splitlines()

    for page in book_lib.__all__:
        module = importlib.import_module(f"book_lib.{page}")
        add(module.__name__, module)
        for name in getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")]):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isroutine(obj)) or obj.__module__ != module.__name__:
                continue
            add(f"{module.__name__}.{name}", obj)
            for member in [m for m in vars(obj) if not m.startswith("_")] if inspect.isclass(obj) else []:
                value = getattr(obj, member)
                if inspect.isroutine(value) or isinstance(value, property):
                    add(f"{module.__name__}.{name}.{member}", value)
        for (owner, attribute), doc in ModuleAnalyzer.for_module(module.__name__).find_attr_docs().items():
            found[".".join(filter(None, (module.__name__, owner, attribute)))] = list(doc)
    return found


def _too_wide_for_pre(name: str, lines: list[str]) -> list[str]:
    """Lines of `lines` (a dedented docstring) that the page shows in a <pre> and that exceed the column.

    `plain_to_rst` makes a `code-block` of each indented block below prose and passes its lines
    through unchanged; napoleon's sections (Args:, Returns:, ...) are field lists and rubrics that
    wrap. A line is measured as the docstring has it, indentation in the block included. A `>>>`
    line in prose would start a doctest block, another <pre>: it is reported, to be indented.
    """
    wide, block = [], -1  # block: the indentation of the current code-block directive, or -1
    for line in api_docs.plain_to_rst(lines):
        indent = len(line) - len(line.lstrip())
        if line.strip() == ".. code-block:: text":
            block = indent
        elif line.strip() and indent <= block:
            block = -1
        if block < 0 and line.lstrip().startswith(">>>"):
            wide.append(f"{name}: a doctest block in prose, indent it below a line of prose: {line.strip()}")
        elif block >= 0 and len(line) > COLUMN_CHARACTERS:
            wide.append(f"{name}: {len(line)} characters: {line.strip()}")
    return wide


def test_a_line_shown_as_written_is_measured_and_prose_and_sections_are_not():
    long_formula, long_prose = "    X = " + "M_X * " * 12 + "F", "A sentence " * 10
    lines = ["Roots:", long_formula, "    Y = 1", long_prose, "", "Args:", "    x: " + long_prose]
    assert len(long_formula) == COLUMN_CHARACTERS + 1
    assert _too_wide_for_pre("f", lines) == [f"f: 81 characters: {long_formula.strip()}"]
    assert not _too_wide_for_pre("f", ["Roots:", long_formula[1:], long_prose, "Args:", "    x: " + long_prose])
    assert _too_wide_for_pre("f", ["Example:", "", ">>> f(1)", "2"]) == [
        "f: a doctest block in prose, indent it below a line of prose: >>> f(1)"
    ]


def test_every_formula_and_example_shown_as_written_fits_the_column():
    """A <pre> line longer than the column scrolls sideways on the api page; `help()` wraps it."""
    documented = _documented()
    assert len(documented) > 400 and "book_lib.transformer.TransformerConfig.op_rows" in documented
    wide = [line for name, lines in documented.items() for line in _too_wide_for_pre(name, lines)]
    assert not wide, f"{len(wide)} lines over {COLUMN_CHARACTERS} characters:\n" + "\n".join(wide)
