"""The book builds from a clean output folder with warnings as errors, and reads in a browser.

Notebook execution is covered by nbval (every chapter and solution runs there), so this build uses
the committed outputs (`execute_notebooks: off`) and checks what Sphinx checks: references,
figures, the table of contents, the Colab launch buttons. The built site then goes through
`tools/check_site.py`: every page in headless Chromium with no network (console, images, math,
width), every internal link and anchor, each page's Colab link, no solution on an exercise page;
its screenshots are kept in `_build/site-check/`.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools import check_site

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def html(tmp_path_factory) -> Path:
    """The book built once for this module, from the committed outputs, with warnings as errors."""
    tmp_path = tmp_path_factory.mktemp("book")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    config["sphinx"]["local_extensions"] = {
        name: str(ROOT / path) for name, path in config["sphinx"]["local_extensions"].items()
    }
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    jb = Path(sys.executable).parent / "jupyter-book"
    done = subprocess.run(
        [
            str(jb),
            "build",
            str(ROOT),
            "-W",
            "-n",
            "--keep-going",
            "--all",
            "--path-output",
            str(tmp_path),
            "--config",
            str(tmp_path / "_config.yml"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return tmp_path / "_build" / "html"


def test_book_builds_clean_with_warnings_as_errors(html):
    chapter = (html / "chapters" / "01_rooflines.html").read_text()
    assert 'id="fig-roofline-v5e"' in chapter and "colab.research.google.com" in chapter
    for page in (html / "solutions").glob("*.html"):
        assert "Erratum" in page.read_text() or page.name != "ch01_rooflines.html"
    assert (html / "exercises" / "release" / "ch01_rooflines" / "ch01_rooflines.html").exists()
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").exists(), "MathJax is served from the site"
    assert "colab-badge.svg" not in chapter.replace("_images/colab-badge.svg", ""), "the badge image is local"
    serving = (html / "chapters" / "08_serving_llama3.html").read_text()
    assert '<table class="calculator">' in serving and "Live calculator: in Jupyter or Colab" in serving, (
        "a calculator's table"
    )
    assert "widget-view" not in serving and "html-manager" not in serving, "no widget, no widget script in the HTML"
    assert (html / "api" / "gpu.html").exists() and 'id="book_lib.gpu.hierarchical_all_reduce"' in (
        html / "api" / "gpu.html"
    ).read_text(), "the reference documents each function"

    problems, n_pages = check_site.check(html, ROOT, screenshots=ROOT / "_build" / "site-check")
    assert n_pages >= 30 and not problems, "\n".join(problems[:40])


# Each page with a calculator, and the knob to turn on it: a value other than its default.
CALCULATOR_PAGES = (
    "chapters/01_rooflines.html",
    "chapters/03_sharding.html",
    "chapters/06_training_llama3.html",
    "chapters/08_serving_llama3.html",
    "chapters/plan_a_run.html",
)
RESULT_ROWS = """form => [...form.querySelectorAll(".calculator-result tr")].map(
    tr => [...tr.querySelectorAll("td")].map(td => td.textContent))"""


def test_every_calculator_computes_in_the_page_offline(html):
    """In Chromium with the network cut off, each calculator's form runs book_lib's own Python
    (Pyodide, served by the book): every row it shows equals the same call made here; a setting the
    model refuses shows the model's words. The times go to _build/calculator-times.json (make bench)."""
    from playwright.sync_api import sync_playwright

    from book_lib import calculators

    assert (html / "_static" / "pyodide" / "pyodide.asm.wasm").exists() and (
        html / "_static" / "pyodide" / "book_lib.zip"
    ).exists()
    times: dict[str, list[int]] = {"first touch (ms)": [], "recompute (ms)": []}
    with check_site.serve(html) as site, sync_playwright() as pw:
        args = [*check_site.CHROMIUM_ARGS, check_site.NO_NETWORK]
        browser = pw.chromium.launch(executable_path=check_site.CHROMIUM, args=args)
        context = browser.new_context()
        offsite: list[str] = []
        context.on("request", lambda r: None if r.url.startswith((site, "data:", "blob:")) else offsite.append(r.url))
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        for name in CALCULATOR_PAGES:
            page.goto(site + name, wait_until="load")
            forms = page.locator("form.calculator-form")
            assert forms.count() >= 1, name
            for i in range(forms.count()):
                form = forms.nth(i)
                calc = calculators.FACTORIES[form.get_attribute("data-calculator")](
                    **json.loads(form.get_attribute("data-defaults"))
                )
                knob = next(k for k in calc.knobs if k.name == calc.sweep)
                for turn, value in enumerate(v for v in knob.values[:3] if v != knob.default):
                    form.locator(f'select[name="{knob.name}"]').select_option(index=knob.values.index(value))
                    form.locator(".calculator-result table").wait_for()
                    page.wait_for_function("f => f.dataset.state === 'ready'", arg=form.element_handle())
                    shown = form.evaluate(RESULT_ROWS)
                    assert shown == [list(row) for row in calc.rows(**{knob.name: value})], (name, value)
                    key = "first touch (ms)" if turn == 0 else "recompute (ms)"
                    times[key].append(int(form.get_attribute("data-milliseconds")))
        page.goto(site + "chapters/08_serving_llama3.html", wait_until="load")
        form = page.locator("form.calculator-form").first
        calc = calculators.FACTORIES["serving_calculator"](**json.loads(form.get_attribute("data-defaults")))
        chips = next(k for k in calc.knobs if k.name == "n_chips")
        form.locator('select[name="n_chips"]').select_option(index=chips.values.index(8960))
        page.wait_for_function("f => f.dataset.state === 'ready'", arg=form.element_handle())
        (refused,) = calc.rows(n_chips=8960)
        assert refused[0] == "not possible" and form.evaluate(RESULT_ROWS) == [list(refused)]
        browser.close()
    assert not offsite and not errors, (offsite, errors)
    (ROOT / "_build").mkdir(exist_ok=True)
    (ROOT / "_build" / "calculator-times.json").write_text(json.dumps(times))
