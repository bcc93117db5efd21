"""The book_lib reference: every module has its page, and plain-text docstrings become the RST they mean.

That every docstring then builds without a warning is `tests/test_book.py`'s (`-W -n`).
"""

from pathlib import Path

import yaml
from docutils.core import publish_doctree
from docutils.utils import Reporter

import book_lib
from tools import api_docs

ROOT = Path(__file__).resolve().parent.parent


def _toc_files() -> list[str]:
    found, stack = [], [yaml.safe_load((ROOT / "_toc.yml").read_text())]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found += [node["file"]] if "file" in node else []
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return found


def test_every_module_has_a_reference_page_in_the_table_of_contents():
    listed = {f.removeprefix("api/") for f in _toc_files() if f.startswith("api/")}
    assert listed == {*book_lib.__all__, "index"}
    for module in book_lib.__all__:
        page = (ROOT / "api" / f"{module}.md").read_text()
        assert f".. automodule:: book_lib.{module}\n   :members:" in page, module
        assert f"{{doc}}`{module}`" in (ROOT / "api" / "index.md").read_text(), f"api/index.md lists {module}"


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
