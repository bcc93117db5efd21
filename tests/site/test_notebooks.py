"""Structure of every notebook: the shared setup cell, the Colab URL, allowed tags, the TOC."""

import json
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
