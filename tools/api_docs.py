"""A Sphinx extension for the `book_lib` reference pages in `api/` (loaded from `_config.yml`).

`book_lib`'s docstrings are written to be read as plain text (`help()`, an editor's hover): formulas
sit on indented lines, `|X|` is the size of mesh axis X, `*` multiplies and `U_` is a name. As
reStructuredText those would be block quotes, substitutions, emphasis and link targets. Before
napoleon reads the Google-style sections (`Args:`, `Raises:`, `Attributes:`), `plain_to_rst` turns
the text into the reStructuredText it means:

- an indented block below a line of prose is a block of plain text, shown as written;
- `|`, `*` and a word's trailing `_` are escaped; a `name` in single backticks is inline code;
- bullet and numbered lists, their continuation lines and the sections stay as they are.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.config import Config

SECTION = re.compile(r"^(Args|Arguments|Attributes|Returns|Raises|Yields|Examples?|Notes?|Warns|References):\s*$")
ITEM = re.compile(r"^(\s*)((?:[*-]|\d+\.)\s+)")
CODE = re.compile(r"(`+)(.+?)\1")
# What reStructuredText would read as markup in plain prose.
MARKUP = re.compile(r"(\||\*|(?<=\w)_(?=\W|$))")
# Types that live outside book_lib: no page of this book documents them.
EXTERNAL_TYPES = r"(jax|jaxlib|numpy|np|matplotlib|collections|typing|pathlib|types)\b.*|Axes|Figure|Path|DTypeLike"
TYPE_VARIABLES = r"(book_lib\.\w+\.)?_?[PRT]"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def escape(line: str) -> str:
    """One line of prose: markup characters escaped, backtick spans as inline code."""
    out, at = [], 0
    for match in CODE.finditer(line):
        out.append(MARKUP.sub(r"\\\1", line[at : match.start()]))
        glued = line[match.end() : match.end() + 1].isalnum()  # `Name`s: code, then an escaped space
        out.append(f"``{match.group(2)}``" + ("\\ " if glued else ""))
        at = match.end()
    out.append(MARKUP.sub(r"\\\1", line[at:]))
    return "".join(out)


def _prose(line: str) -> str:
    item = ITEM.match(line)
    return item.group(0) + escape(line[item.end() :]) if item else escape(line)


def plain_to_rst(lines: list[str]) -> list[str]:
    """A plain-text docstring (list of lines, dedented) as reStructuredText; see the module docstring."""
    out: list[str] = []
    previous = ""  # the last non-blank line of prose
    item_body = -1  # where the text of the current list item starts, or -1
    section = literal = False
    for line in lines:
        if not line.strip():
            out.append(line)
            continue
        indent = _indent(line)
        if literal and indent > _indent(previous):
            out.append(line)
            continue
        if literal:
            out.append("")
            literal = False
        if SECTION.match(line.strip()):
            section, item_body = indent == 0 or section, -1
        elif section and indent == 0:
            section = False
        if section or indent <= _indent(previous) or indent == item_body or not previous:
            item = ITEM.match(line)
            item_body = item.end() if item else (item_body if indent == item_body else -1)
            out.append(_prose(line))
            previous = line
            continue
        out.extend(["", " " * _indent(previous) + ".. code-block:: text", "", line])
        literal = True
    return out


# Napoleon reads a property's first line as "type: description"; ours are "what (unit): formula".
_NOT_FOR_NAPOLEON: dict[str, list[str]] = {}


def _convert(app: Sphinx, what: str, name: str, obj: object, options: dict, lines: list[str]) -> None:
    if name.startswith("book_lib"):
        lines[:] = plain_to_rst(lines)
        if what in ("attribute", "property"):
            _NOT_FOR_NAPOLEON[name] = list(lines)


def _restore(app: Sphinx, what: str, name: str, obj: object, options: dict, lines: list[str]) -> None:
    if name in _NOT_FOR_NAPOLEON:
        lines[:] = _NOT_FOR_NAPOLEON.pop(name)


def _configure(app: Sphinx, config: Config) -> None:
    config.nitpick_ignore_regex = [*config.nitpick_ignore_regex, (r"py:.*", EXTERNAL_TYPES), (r"py:.*", TYPE_VARIABLES)]
    # Our "Returns:" sections are prose ("shape (rows, ...): this device's block"), not "type: description".
    config.napoleon_custom_sections = [*(config.napoleon_custom_sections or []), "Returns"]


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.connect("config-inited", _configure)
    app.connect("autodoc-process-docstring", _convert, priority=400)  # napoleon's runs at 500
    app.connect("autodoc-process-docstring", _restore, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
