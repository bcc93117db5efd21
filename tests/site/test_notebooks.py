"""Structure of every notebook: the shared setup cell, the Colab URL, allowed tags, the TOC."""

import ast
import collections
import json
import math
import random
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from tools import notebooks as tools

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOURCES = sorted((ROOT / "exercises" / "source").glob("*/*.ipynb"))
RELEASES = sorted((ROOT / "exercises" / "release").glob("*/*.ipynb"))
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
ALL = CHAPTERS + SOURCES + RELEASES + SOLUTIONS
ALLOWED_TAGS = {"hide-input", "remove-output", "remove-input", "remove-cell", "nbval-ignore-output", "nbval-skip"}
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPO_URL = CONFIG["repository"]["url"]


def _first_code(nb):
    return next(c for c in nb.cells if c.cell_type == "code")


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def test_there_is_something_to_check():
    assert CHAPTERS and SOURCES and len(RELEASES) == len(SOURCES) and len(SOLUTIONS) == len(SOURCES)


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_first_code_cell_is_the_shared_setup_cell(path):
    reference = _first_code(nbformat.read(CHAPTERS[0], as_version=4)).source
    nb = nbformat.read(path, as_version=4)
    assert _first_code(nb).source == reference, "the setup cell must be byte-identical in every notebook"
    assert {"hide-input", "remove-output"} <= set(_first_code(nb).metadata.get("tags", []))
    first = nb.cells.index(_first_code(nb))
    assert all(c.cell_type == "markdown" for c in nb.cells[:first]), "no code above the setup cell"


def test_setup_cell_installs_from_the_configured_repository():
    setup = _first_code(nbformat.read(CHAPTERS[0], as_version=4)).source
    assert setup == tools.setup_cell_source(), "run `python tools/notebooks.py sync` after changing _config.yml"
    assert f'repo = "{REPO_URL}"' in setup
    assert f"git+{{repo}}.git@{CONFIG['repository']['branch']}" in setup
    assert "book_lib.devices.setup()" in setup
    assert "-c" in setup and '"jax", "jaxlib", "numpy"' in setup, "pins the runtime's own jax and numpy"
    assert "pip.stderr" in setup and tools.jax_requirement() in setup, "a failed install shows pip's reason"


@pytest.mark.parametrize("runtime", ["tpu", "gpu", "cpu"])
def test_a_failed_install_names_the_one_command_for_its_runtime(runtime):
    """The setup cell cannot import book_lib (that is what failed): its own lines must pick the command
    `devices.upgrade_command` would, on a TPU VM, an NVIDIA GPU runtime and a CPU one."""
    from types import SimpleNamespace

    from book_lib import devices

    lines = [line.strip() for line in tools.setup_cell_source().splitlines()]
    picked = [line for line in lines if line.startswith(("tpu = ", "gpu = ", "extra = ", "wanted = ", "fix = "))]
    exists = lambda path: runtime == "tpu" and path == "/dev/accel0"  # noqa: E731
    which = lambda tool: "/usr/bin/nvidia-smi" if runtime == "gpu" else None  # noqa: E731
    space = {"os": SimpleNamespace(path=SimpleNamespace(exists=exists)), "shutil": SimpleNamespace(which=which)}
    exec("\n".join(picked), space)  # noqa: S102 (the notebook's own lines)
    required = tools.jax_requirement().split(">=")[1]
    extra = {"tpu": "[tpu]", "gpu": "[cuda12]", "cpu": ""}[runtime]
    assert space["fix"] == devices.upgrade_command(required, exists=exists, which=which)
    assert space["fix"] == f'pip install -U "jax{extra}>={required}"'
    with pytest.raises(RuntimeError, match="pip install -U"):
        devices.check_jax_version("0.1.0")


def test_the_jax_floor_is_declared_once_and_stated_in_the_setup_cell():
    project = tools.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    floor = tools.jax_requirement().removeprefix("jax>=")
    assert tools.jax_requirement() == f"jax>={floor}" and f"jax {floor} or newer" in (ROOT / "README.md").read_text()
    assert "rich" in project["dependencies"], "chapter 3's sharding pictures need rich"


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_no_glue_role_anywhere_a_reader_looks(path):
    """Colab, Jupyter and GitHub show a myst-nb glue role as raw text: numbers must be real output."""
    for cell in nbformat.read(path, as_version=4).cells:
        shown = [cell.source] + [
            "".join(o.get("data", {}).get(kind, ""))
            for o in cell.get("outputs", [])
            for kind in ("text/markdown", "text/plain")
        ]
        for text in shown:
            assert not re.search(r"\{glue(:\w+)?\}|glue\(", text), (path.name, text[:120])


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_colab_badge_points_at_this_notebook(path):
    nb = nbformat.read(path, as_version=4)
    links = re.findall(r"colab\.research\.google\.com/github/([^)\s]+?)/blob/main/([^)\s]+\.ipynb)", nb.cells[0].source)
    assert links, "the title cell carries an Open in Colab badge"
    repo, target = links[0]
    assert f"https://github.com/{repo}" == REPO_URL
    every = re.findall(
        r"https://colab\.research\.google\.com/github/\S+?/blob/[^/]+/", "\n".join(c.source for c in nb.cells)
    )
    assert set(every) == {tools.colab_prefix()}, "every Colab link uses the configured repository and branch"
    if path in SOURCES:
        assert target == str(path.relative_to(ROOT)).replace("/source/", "/release/")
    else:
        assert target == str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_only_known_tags(path):
    for cell in nbformat.read(path, as_version=4).cells:
        assert set(cell.metadata.get("tags", [])) <= ALLOWED_TAGS, cell.metadata.get("tags")


@pytest.mark.parametrize("path", CHAPTERS + SOLUTIONS, ids=_ids(CHAPTERS + SOLUTIONS))
def test_committed_with_outputs_and_no_errors(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "commit chapters and solutions executed"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


@pytest.mark.parametrize("path", RELEASES, ids=_ids(RELEASES))
def test_release_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.outputs for c in nb.cells if c.cell_type == "code")


def test_toc_lists_every_notebook_and_nothing_missing():
    toc = (ROOT / "_toc.yml").read_text()
    listed = set(re.findall(r"file:\s*(\S+)", toc))
    for path in CHAPTERS + RELEASES + SOLUTIONS:
        assert str(path.relative_to(ROOT).with_suffix("")) in listed, path
    for entry in listed:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".ipynb", ".md")), entry


def test_figures_are_captioned_and_named():
    for path in CHAPTERS + SOLUTIONS:
        for cell in nbformat.read(path, as_version=4).cells:
            figure = cell.metadata.get("mystnb", {}).get("figure")
            has_image = any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
            if has_image:
                assert figure and figure["name"].startswith("fig-") and figure["caption"], (path.name, cell.source[:60])


def test_notebooks_are_valid_json_with_a_python3_kernel():
    for path in ALL:
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3", path


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_worked_problems_section_lists_every_question_of_the_chapter(path):
    from exercises.keys import keys_for

    number = path.name[:2]
    assignments = [p.parent.name for p in SOURCES if p.parent.name.startswith(f"ch{number}_")]
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    for assignment in assignments:
        assert f"exercises/release/{assignment}/{assignment}.ipynb" in text, "link to the exercise notebook"
        for gid in keys_for(assignment):
            assert f"`{gid}`" in text, f"{gid} is missing from the worked problems of {path.name}"


# What the book's code column holds at 1280 px: 80 characters of its 13 px monospace (_static/book.css).
COLUMN_CHARACTERS = 80
PYTHON_EXPONENT = re.compile(r"\b\d+(?:\.\d+)?e[+-]\d\d\b")
COMMA_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")
NOT_PROSE = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$|```.*?```|`[^`\n]*`|\]\([^)]*\)", re.S)


def _shown_outputs(cell) -> list[str]:
    """The text of each output the HTML book shows of a code cell (none for a removed one)."""
    if {"remove-output", "remove-cell"} & set(cell.metadata.get("tags", [])):
        return []
    shown = []
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "text" in output:
            shown.append(output["text"])
        elif "text/markdown" in data:
            shown.append(data["text/markdown"])
        elif not {"image/png", "image/svg+xml", "text/html"} & set(data):
            shown.append(data.get("text/plain", ""))
    return shown


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_every_code_and_printed_line_fits_the_column(path):
    """A longer line scrolls sideways on the site and cuts an assert or a table mid-expression."""
    wide = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        printed = [t for t in _shown_outputs(cell) if "text/markdown" not in t]
        markdown = [o["data"]["text/markdown"] for o in cell.get("outputs", []) if "text/markdown" in o.get("data", {})]
        lines = cell.source.splitlines() + [line for t in printed if t not in markdown for line in t.splitlines()]
        wide += [line for line in lines if len(line) > COLUMN_CHARACTERS]
    assert not wide, f"{len(wide)} lines over {COLUMN_CHARACTERS} characters, the first: {wide[0]!r}"


@pytest.mark.parametrize("path", CHAPTERS + SOURCES + SOLUTIONS, ids=_ids(CHAPTERS + SOURCES + SOLUTIONS))
def test_numbers_reach_the_reader_by_the_house_rule(path):
    """No Python "1.5e+09" and no "8,192": prose, tables and printed lines go through book_lib.numfmt."""
    found = []
    for cell in nbformat.read(path, as_version=4).cells:
        texts = [cell.source] if cell.cell_type == "markdown" else _shown_outputs(cell)
        for text in texts:
            prose = NOT_PROSE.sub("", text)
            found += PYTHON_EXPONENT.findall(prose) + COMMA_THOUSANDS.findall(prose)
    assert not found, f"{len(found)} numbers in Python's format, e.g. {found[:5]}: use book_lib.numfmt.fmt"


LIBRARY_STRINGS = re.compile(
    r"\b[A-Z][A-Za-z]+\([a-z_]+=[^)]*\)"  # a dataclass repr: Layout(fsdp=8, ...)
    r"|object at 0x[0-9a-f]+"  # a default repr
    r"|\d+(?:\.\d+)?x the best expected step time"  # planner.PlanEntry.reason
    r"|collectives [\d.]+ \w*s > math|\(largest: "
)
ERRATUM = re.compile(r"```\{+admonition\}+ Erratum\n(.*?)```", re.S)
DIFFERENCE = re.compile(r"%|\btimes\b|\bshape\b|\bquarter\b|\bhalf\b|\btwice\b|\btypo\b|\bexponent\b|\bunit\b")


def _reader_texts(nb) -> list[str]:
    """What a reader sees as prose: Markdown cells and the Markdown outputs of code cells."""
    texts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            texts.append(cell.source)
        else:
            outputs = cell.get("outputs", [])
            texts += [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    return texts


def library_strings(nb) -> list[str]:
    """Raw reprs and planner reason strings that reached a sentence (code spans and math aside)."""
    return [m for text in _reader_texts(nb) for m in LIBRARY_STRINGS.findall(NOT_PROSE.sub("", text))]


def errata_missing_figures(nb) -> list[str]:
    """Erratum boxes that do not give a figure of the text's, the right one and the size of the difference."""
    bad = []
    for text in _reader_texts(nb):
        for body in ERRATUM.findall(text):
            body = body.split("\n", 1)[1] if body.startswith(":class:") else body
            numbers = len(re.findall(r"\d+(?:[.,  ]\d+)*", body))
            names_text = re.search(r"\b(?:[Tt]he text|[Tt]he book|Part \d+)", body)
            sized = (numbers >= 2 and DIFFERENCE.search(body)) or re.search(r"\b(?:shape|formula|unit)\b", body)
            if not (names_text and sized):
                bad.append(body[:120])
    return bad


def _fake(markdown_output: str):
    cell = nbformat.v4.new_code_cell("Markdown(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/markdown": markdown_output})]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# x"), cell])


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_no_library_string_in_a_sentence(path):
    """A repr or the planner's reason string is said in words, or shown as a table, never pasted into prose."""
    found = library_strings(nbformat.read(path, as_version=4))
    assert not found, f"{len(found)} library strings in prose, e.g. {found[:3]}"


def test_the_library_string_rule_catches_a_planted_one():
    reason = (
        "Pure FSDP ranks 15: communication-bound: collectives 0.784 s > math 0.442 s "
        "(largest: FSDP weight all-gather, forward, 0.261 s); 1.50x the best expected step time."
    )
    assert library_strings(_fake(reason))
    assert library_strings(_fake("The plan is Layout(fsdp=8, tensor=2)."))
    assert not library_strings(_fake("The plan is `Layout(fsdp=8, tensor=2)`: 1.5 times slower."))


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_every_erratum_box_names_the_figures_and_the_difference(path):
    """An erratum gives the text's figure, the right one and how far apart they are (CONTRIBUTING, "Errata")."""
    bad = errata_missing_figures(nbformat.read(path, as_version=4))
    assert not bad, f"{len(bad)} erratum boxes without both figures and their difference, e.g. {bad[0]!r}"


def test_the_erratum_rule_catches_a_planted_box():
    vague = "```{admonition} Erratum\n:class: warning\nThe text gets this wrong.\n```"
    assert errata_missing_figures(_fake(vague))
    full = (
        "```{admonition} Erratum\n:class: warning\nThe text says 76 000 tokens; its own figures give "
        "73 440, 3.5% fewer.\n```"
    )
    assert not errata_missing_figures(_fake(full))


# --- Asserts that check nothing: true by their own cell's construction. ---

TRUE_WHEN_EQUAL = (ast.Eq, ast.LtE, ast.GtE)
CLOSE_CALLS = {"isclose", "allclose", "array_equal", "array_equiv", "approx_equal"}
PURE_MATH = {"math.sqrt", "math.log", "math.log2", "math.log10", "math.exp", "np.sqrt", "np.log", "np.log2", "abs"}
ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)


def _python_of(source: str) -> str:
    """A cell's source with IPython's magics and shell lines blanked (line numbers kept)."""
    if source.lstrip().startswith("%%"):
        return ""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _scope_statements(scope):
    """Every statement of one scope with the blocks that hold it, nested functions and classes left out."""
    found = []

    def walk(body, blocks):
        for statement in body:
            found.append((statement, blocks))
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner:
                    if isinstance(inner[0], (ast.ExceptHandler, ast.match_case)):
                        for handler in inner:
                            walk(handler.body, blocks + [id(handler.body)])
                    else:
                        walk(inner, blocks + [id(inner)])

    walk(scope.body, [id(scope.body)])
    return found


def _stored(node) -> set[str]:
    """Names a statement rebinds or mutates (`x = ...`, `x += ...`, `x.a = ...`, `x[i] = ...`, `for x in`), the
    locals of a function it defines and of its comprehensions aside."""
    names, todo = set(), [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(sub.name)
            todo += sub.decorator_list
            continue
        if isinstance(sub, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            names.add(sub.id)
        elif isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            base = sub.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
        todo += ast.iter_child_nodes(sub)
    return names


def _place(statement) -> tuple[int, int]:
    return statement.lineno, statement.col_offset


class _Cell:
    """The single-name assignments of one scope, to read a name as the expression it was given."""

    def __init__(self, scope):
        self.statements = _scope_statements(scope)

    def definition(self, name: str, at):
        """The assignment that last gave `name` its value before statement `at`, if nothing has touched the name or
        the names its value reads since, and it is not in a branch or loop that `at` is outside of."""
        blocks = {b for s, bs in self.statements if s is at for b in bs}
        before = [(s, bs) for s, bs in self.statements if _place(s) < _place(at) and s is not at]
        for index in range(len(before) - 1, -1, -1):
            statement, statement_blocks = before[index]
            if name not in _stored(statement):
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
            simple = isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None
            if not (simple and any(isinstance(t, ast.Name) and t.id == name for t in targets)):
                return None
            if statement_blocks[-1] not in blocks:
                return None
            inputs = {n.id for n in ast.walk(statement.value) if isinstance(n, ast.Name)}
            if name in inputs or any(inputs & _stored(later) for later, _ in before[index + 1 :]):
                return None
            if any(isinstance(n, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in ast.walk(statement)):
                return None
            return statement
        return None

    def value(self, node, at):
        """The expression a name was given, through aliases (`z = y`), or None for anything else."""
        given = None
        for _ in range(8):
            statement = self.definition(node.id, at) if isinstance(node, ast.Name) else None
            if statement is None:
                return given
            node = given = statement.value
        return given

    def expand(self, node, at, depth=0) -> str:
        """`node` as text, each name replaced by the arithmetic or literal it was given in this scope. A name given
        a call's result stays one value: it becomes a token of its assignment, so `y1 = f(k); y2 = f(k)` differ."""
        if depth > 8:
            return ast.dump(node)

        class Inline(ast.NodeTransformer):
            def visit_Name(inner, name):  # noqa: N805
                statement = self.definition(name.id, at)
                if statement is None:
                    return name
                if any(isinstance(n, ast.Call) for n in ast.walk(statement.value)):
                    return ast.Name(f"{name.id}_given_at_{statement.lineno}_{statement.col_offset}", ast.Load())
                return ast.parse(self.expand(statement.value, at, depth + 1), mode="eval").body

        return ast.unparse(Inline().visit(ast.parse(ast.unparse(node), mode="eval").body))


def _arithmetic(text: str, atoms: dict):
    """`text` as a Python expression over symbols, if it is arithmetic on names, attributes and numbers only."""

    class Symbols(ast.NodeTransformer):
        def generic_visit(self, node):
            if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
                return ast.Name(atoms.setdefault(ast.unparse(node), f"v{len(atoms)}"), ast.Load())
            if isinstance(node, ast.Call) and ast.unparse(node.func) in PURE_MATH and not node.keywords:
                node.args = [self.visit(a) for a in node.args]
                node.func = ast.Name(ast.unparse(node.func).replace(".", "_"), ast.Load())
                return node
            if isinstance(node, (ast.operator, ast.unaryop)) or (
                isinstance(node, ast.Constant) and type(node.value) in (int, float)
            ):
                return node
            if isinstance(node, (ast.BinOp, ast.UnaryOp)) and isinstance(node.op, ARITHMETIC):
                return super().generic_visit(node)
            raise ValueError(ast.unparse(node))

    try:
        return ast.unparse(Symbols().visit(ast.parse(text, mode="eval").body))
    except (ValueError, SyntaxError):
        return None


def _identical(left: str, right: str) -> bool:
    """Two expressions that are the same text, or the same arithmetic of the same names (`2 * sqrt(f / (4 * f))`
    and `1`): equal at every value of their names, so comparing them checks nothing."""
    if left == right:
        return True
    atoms = {}
    a, b = _arithmetic(left, atoms), _arithmetic(right, atoms)
    if a is None or b is None or not atoms:
        return False
    space = {name.replace(".", "_"): getattr(math, name.split(".")[1], None) for name in PURE_MATH if "." in name}
    space |= {"abs": abs}
    rng = random.Random(0)
    for _ in range(5):
        values = {symbol: rng.uniform(1.5, 9.5) for symbol in atoms.values()}
        try:
            x, y = eval(a, space, values), eval(b, space, values)  # noqa: S307 (arithmetic only)
        except (ArithmeticError, ValueError, TypeError):
            return False
        if not (isinstance(x, float | int) and isinstance(y, float | int) and math.isclose(x, y, rel_tol=1e-9)):
            return False
    return True


def _callee(call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _tautologies(test, cell, at) -> list[str]:
    """The parts of an assert's test that hold whatever the code computed."""

    def same(a, b) -> bool:
        """The same value by construction: one expression, or one side the other's own definition written out."""
        left, right = cell.expand(a, at), cell.expand(b, at)
        if _identical(left, right):
            return True
        given = [(cell.value(a, at), right), (cell.value(b, at), left)]
        return any(_identical(cell.expand(v, at), other) for v, other in given if v is not None)

    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [found for value in test.values for found in _tautologies(value, cell, at)]
    if isinstance(test, ast.Call) and _callee(test) in ("all", "any") and len(test.args) == 1:
        return _tautologies(test.args[0], cell, at)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr in ("all", "any"):
        return _tautologies(test.func.value, cell, at) if not test.args else []
    if isinstance(test, ast.Call) and _callee(test) in CLOSE_CALLS and len(test.args) >= 2:
        return [ast.unparse(test)] if same(test.args[0], test.args[1]) else []
    if isinstance(test, ast.Call) and _callee(test) == "isinstance" and len(test.args) == 2:
        value = cell.value(test.args[0], at)
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        built = isinstance(value, ast.Call) and any(cell.expand(value.func, at) == cell.expand(k, at) for k in kinds)
        return [ast.unparse(test)] if built else []
    if isinstance(test, ast.Constant) and test.value:
        return [ast.unparse(test)]
    if isinstance(test, ast.Name):
        value = cell.value(test, at)
        return [ast.unparse(test)] if isinstance(value, ast.Constant) and value.value else []
    if not isinstance(test, ast.Compare):
        return []
    sides = [test.left, *test.comparators]
    for op, left, right in zip(test.ops, sides[:-1], sides[1:], strict=True):
        pair = (left, right)
        if isinstance(op, ast.Is) and cell.expand(left, at) == cell.expand(right, at):
            return [ast.unparse(test)]
        if isinstance(op, TRUE_WHEN_EQUAL) and same(left, right):
            return [ast.unparse(test)]
        if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Call) and _callee(left) == "abs":
            inner = left.args[0] if left.args else None
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
                pair = (inner.left, inner.right)
                if isinstance(inner.left, ast.BinOp) and isinstance(inner.left.op, ast.Div):
                    pair = (inner.left.left, inner.left.right)
                if same(*pair):
                    return [ast.unparse(test)]
        if isinstance(op, (ast.Is, ast.Eq)) and isinstance(left, ast.Call) and _callee(left) == "type" and left.args:
            value = cell.value(left.args[0], at)
            if isinstance(value, ast.Call) and cell.expand(value.func, at) == cell.expand(right, at):
                return [ast.unparse(test)]
    return []


def tautological_asserts(nb) -> list[str]:
    """Asserts true by their own cell's construction: `x == x`, `y = a * b; assert y == a * b`, `n = 4; assert n == 4`,
    `x = T(...); assert isinstance(x, T)`. An assert against a value computed another way is a check, not this."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(_python_of(cell.source))
        except SyntaxError:
            continue
        scopes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            names = _Cell(scope)
            for statement, _ in names.statements:
                if isinstance(statement, ast.Assert):
                    for part in _tautologies(statement.test, names, statement):
                        found.append(f"{cell.get('id', '?')}: assert {part}")
    return found


def _fake_code(source: str):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_no_assert_is_a_tautology(path):
    """An assert checks something the cell did not just write down: a value computed another way."""
    found = tautological_asserts(nbformat.read(path, as_version=4))
    assert not found, f"{len(found)} asserts true by construction, e.g. {found[:3]}"


@pytest.mark.parametrize(
    "source",
    [
        "x = f(3)\nassert x == x",
        "y = a * b\nassert y == a * b",
        "y = a * b\nassert a * b == y, 'the product'",
        "n = 4\nassert n == 4",
        "n = 4; assert n == 4",
        "flops = hlo.cost(c).flops\nassert flops == hlo.cost(c).flops",
        "y = f(a)\nz = y\nassert z == y",
        "%time z = 1\nn = 4\n!ls\nassert n == 4",
        "mesh = Mesh(devices, ('x',))\nassert isinstance(mesh, Mesh)",
        "ratio = t / u\nassert abs(ratio - t / u) < 1e-9",
        "y = a * b\nz = y\nassert math.isclose(z, a * b, rel_tol=1e-6)",
        "def check(a, b):\n    y = a @ b\n    assert (y == a @ b).all()",
        "y = a * b\nassert y > 0 and y == a * b",
        "even = 4 * f / d\nassert math.isclose(2 * math.sqrt(f / (even * d)), 1)",  # the same arithmetic
        "share = part / whole\nassert share * whole == part",
        "ok = True\nassert ok",
        "x = jnp.ones(3)\nassert type(x) is jnp.ones",
    ],
)
def test_the_tautology_rule_catches_a_planted_assert(source):
    assert tautological_asserts(_fake_code(source)), source


@pytest.mark.parametrize(
    "source",
    [
        "y = a * b\nassert y == xla_flops(a, b)",  # computed another way
        "y = a * b\na = a + 1\nassert y == a * b",  # a changed in between: a real check
        "n = len(shards)\nassert n == 4",  # a count, not the literal it was given
        "y = a * b\nassert y == a * c",
        "mesh = make_mesh(devices)\nassert isinstance(mesh, Mesh)",
        "if big:\n    y = a * b\nelse:\n    y = 0\nassert y == a * b",
        "y = a * b\nassert abs(y / predicted - 1) < 0.02",
        "%%bash\nassert x == x",
        "x = total\nx += 1\nassert x == total",
        "assert math.isclose(2 * math.sqrt(f / (n * d)), 1)",  # n comes from elsewhere
        "share = part / whole\nassert share * whole > 0.5 * part",
        "t = 44 * 8960 / 225\nassert round(t) == 1752",  # the text's own arithmetic, checked
        "ok = check(x)\nassert ok",
        "y1 = f(key)\ny2 = f(key)\nassert (y1 == y2).all()",  # the same call twice: a check of determinism
        "def f(a):\n    y = 3\n    return y\ny = g(a)\nassert y == g(b)",
    ],
)
def test_the_tautology_rule_spares_a_real_check(source):
    assert not tautological_asserts(_fake_code(source)), source


# --- Takeaways boxes that only repeat the chapter's own sentences. ---

TAKEAWAYS = re.compile(r"```\{+admonition\}+ Takeaways?\n(?::class:[^\n]*\n)?(.*?)```", re.S)
BLOCK_BREAK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+\.)\s)|\n(?=\s*[#|])|\n(?=\s*:\w+:)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^a-z\s])")


def _normal(sentence: str) -> str:
    """A sentence in lower case without markdown or math punctuation, roles, or decimal-free full stops."""
    text = re.sub(r"\{[a-z:-]+\}`[^`]*`", " ", sentence.lower())
    text = re.sub(r"[^\w.%]|_", " ", text)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", text)
    return " ".join(text.split())


def _sentences(markdown: str) -> list[str]:
    """The normalized sentences of a piece of markdown: paragraphs and list items, cut at full stops."""
    found = []
    for block in BLOCK_BREAK.split(markdown):
        block = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+|^\s*:\w+:.*", "", block.strip())
        pieces = block.split("|") if block.startswith("|") else SENTENCE_END.split(" ".join(block.split()))
        found += [n for n in map(_normal, pieces) if n]
    return found


def _long_words(sentence: str) -> collections.Counter:
    return collections.Counter(w for w in sentence.split() if len(w) > 3)


def _said_before(sentence: str, earlier_text: str, earlier: list[collections.Counter]) -> bool:
    """Whether the sentence is in the earlier text, or 90 % of its long words are in one earlier sentence."""
    if f" {sentence} " in earlier_text:
        return True
    words = _long_words(sentence)
    need = 0.9 * sum(words.values())
    return any(sum((words & seen).values()) >= need for seen in earlier)


def restating_takeaways(nb) -> list[str]:
    """Takeaways boxes every sentence of which the chapter has already said, word for word or nearly."""
    found, before = [], ""
    for text in _reader_texts(nb):
        for match in TAKEAWAYS.finditer(text):
            earlier_markdown = before + "\n\n" + text[: match.start()]
            earlier = [_long_words(s) for s in _sentences(earlier_markdown)]
            earlier_text = f" {' '.join(_sentences(earlier_markdown))} "
            box = [s for s in _sentences(match.group(1)) if _long_words(s)]
            if box and all(_said_before(s, earlier_text, earlier) for s in box):
                found.append(" ".join(match.group(1).split())[:160])
        before += "\n\n" + text
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_no_restating_takeaways_box(path):
    """A Takeaways box distils the section in words of its own; one that pastes earlier sentences adds nothing."""
    found = restating_takeaways(nbformat.read(path, as_version=4))
    assert not found, f"{len(found)} Takeaways boxes that only repeat earlier sentences, e.g. {found[:2]}"


def test_the_restating_takeaways_rule_catches_a_planted_box():
    prose = (
        "A run time is an amount over a rate: FLOPs over FLOPs/s, bytes over bytes/s. "
        "The larger of the two bounds bounds the step time from below, and their sum bounds it from above."
    )
    pasted = (
        "```{admonition} Takeaways\n:class: tip\n- A *run time* is an amount over a rate: FLOPs over FLOPs/s, "
        "bytes over bytes/s.\n- Their sum bounds the step time from above, and the larger of the two bounds "
        "from below.\n```"
    )
    nb = _fake(pasted)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(prose))
    assert restating_takeaways(nb)
    distilled = pasted.replace("from below.", "from below.\n- Most steps of a large model are compute-bound.")
    nb.cells[-1] = _fake(distilled).cells[-1]
    assert not restating_takeaways(nb), "one new sentence makes it a summary, not a copy"
    assert not restating_takeaways(_fake(pasted)), "nothing said before it"


# --- Errata for what is only a rounding (CONTRIBUTING, "Errata": more than about 2 % off, or a wrong shape). ---

ROUNDING = 0.02
KIND_OF_SLIP = re.compile(  # "shape $[F, F]$", "bf16[32, 1024]", a unit, a formula, a typo: wrong at any size
    r"\bshapes?\W{0,3}(?:\$|\[|\w+\[)|\w\[\d+(?:, ?\d+)+\]|\bunits?\b(?! of)|\bformula|\bexponent|\btypo"
    r"|\btranspose|\bsign\b",
    re.I,
)
PERCENT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s?%(?!\s*(?:MFU|of\b|utili[sz]ation|efficien))")
FACTOR = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s+times\b|x\b)|\b(twice|half|a third|a quarter|an eighth|double|triple)\b",
    re.I,
)
WORD_FACTORS = {"twice": 2, "half": 2, "a third": 3, "a quarter": 4, "an eighth": 8, "double": 2, "triple": 3}
SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
FIGURE = re.compile(
    r"(?<![\w.^{/-])(\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+|\d+(?:\.\d+)?)"  # 73 440, 3.55, 20
    r"(?:\s*\\times\s*10\^\{?(-?\d+)\}?|e([+-]?\d+)|([kKMBGT])\b)?"  # 4 \times 10^{14}, 3.8e18, 1.5M, 20k
    r"(?![\w.]*[A-Za-z_(\[])"  # not v5e, H100, bf16[8, ...
)
NOT_A_FIGURE = re.compile(
    r"\b(?:Part|Parts|[Cc]hapter|Appendix|Section|Figure|Table|Q|LLaMA|Llama)\s+[\d.]+|\[[^\]]*\]"
)


def _figures(body: str) -> list[float]:
    """The numbers an erratum states, in order, with their powers of ten and suffixes (1.5M, 20k, 3.8e18)."""
    found = []
    for match in FIGURE.finditer(NOT_A_FIGURE.sub(" ", body)):
        digits, power, exponent, suffix = match.groups()
        value = float(re.sub(r"\s", "", digits))
        value *= 10 ** int(power or exponent or 0) * SCALE.get(suffix or "", 1)
        found.append(value)
    return found


def _stated_differences(body: str) -> list[float]:
    """The relative differences an erratum states: its percentages and its factors ("2.4 times", "half")."""
    differences = [float(p) / 100 for p in PERCENT.findall(body)]
    for number, word in FACTOR.findall(body):
        factor = float(number) if number else WORD_FACTORS[word.lower()]
        differences.append(abs(factor - 1))
    return differences


def errata_within_rounding(nb) -> list[str]:
    """Erratum boxes about a number whose difference from the right one is within the text's rounding: a stated
    difference under 2 %, or, with none stated, two leading figures less than 2 % apart. A wrong shape, unit or
    formula is an erratum at any size."""
    found = []
    for text in _reader_texts(nb):
        for body in ERRATUM.findall(text):
            body = re.sub(r"^:class:.*\n", "", body)
            if KIND_OF_SLIP.search(body):
                continue
            stated = _stated_differences(body)
            if stated:
                within = max(stated) < ROUNDING
            else:
                figures = _figures(body)[:2]
                within = len(figures) == 2 and abs(figures[0] - figures[1]) < ROUNDING * min(map(abs, figures))
            if within:
                found.append(" ".join(body.split())[:160])
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=_ids(CHAPTERS))
def test_no_erratum_within_rounding(path):
    """A figure within about 2 % of the right one is the text's rounding: an inline note or `The printed answer`."""
    found = errata_within_rounding(nbformat.read(path, as_version=4))
    assert not found, f"{len(found)} erratum boxes for a difference within rounding, e.g. {found[:2]}"


@pytest.mark.parametrize(
    "body",
    [
        "The text says 5.8e17 FLOPs per dollar; its own figures give 5.91e17, 1.7% more.",
        "The text's 432 tokens per chip is 433.5 from its rates (0.35 % fewer).",
        "The book gives 4 378 FLOPs per byte; the chip's figures give 4 400.",  # no % stated: 0.5 % apart
        "The text's $3.8 \\times 10^{18}$ FLOPs/s is $3.75 \\times 10^{18}$ by Part 2's figures.",
        "The text says a hop takes 2.02 µs where 2 µs is right: 1.01 times the right time.",
    ],
)
def test_the_within_rounding_rule_catches_a_planted_erratum(body):
    assert errata_within_rounding(_fake(f"```{{admonition}} Erratum\n:class: warning\n{body}\n```")), body


@pytest.mark.parametrize(
    "body",
    [
        "The text says 76 000 tokens; its own figures give 73 440, 3.5% fewer.",
        "The text says 1.5M tokens; the bound needs 3.55M, 2.4 times as many.",
        "The text's $dW$ has shape $[F, F]$, 1% of the text's own [D, F] at F = 100 D.",  # a shape, at any size
        "The text's Part 2 gives 4 378 FLOPs per byte at 40% MFU where 2 190 is right.",  # 40 % MFU is no difference
        "The text writes the bound as 1.6e10; the expression equals 1.63M tokens, an exponent typo.",
        "The text calls 1 752 days nearly four years; that is 4.8 years.",
    ],
)
def test_the_within_rounding_rule_spares_a_real_erratum(body):
    assert not errata_within_rounding(_fake(f"```{{admonition}} Erratum\n:class: warning\n{body}\n```")), body
