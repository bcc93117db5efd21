"""The book builds from a clean output folder with warnings as errors, and reads in a browser.

Notebook execution is covered by nbval (every chapter and solution runs there), so this build uses
the committed outputs (`execute_notebooks: off`) and checks what Sphinx checks: references,
figures, the table of contents, the Colab launch buttons. The built site then goes through
`tools/check_site.py`: every page in headless Chromium with no network (console, images, math,
width), every internal link and anchor, each page's Colab link, no solution on an exercise page;
its screenshots are kept in `_build/site-check/`.
"""

import subprocess
import sys
from pathlib import Path

import yaml

from tools import check_site

ROOT = Path(__file__).resolve().parent.parent


def test_book_builds_clean_with_warnings_as_errors(tmp_path):
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
    html = tmp_path / "_build" / "html"
    chapter = (html / "chapters" / "01_rooflines.html").read_text()
    assert 'id="fig-roofline-v5e"' in chapter and "colab.research.google.com" in chapter
    for page in (html / "solutions").glob("*.html"):
        assert "Erratum" in page.read_text() or page.name != "ch01_rooflines.html"
    assert (html / "exercises" / "release" / "ch01_rooflines" / "ch01_rooflines.html").exists()
    assert (html / "_static" / "mathjax" / "tex-mml-chtml.js").exists(), "MathJax is served from the site"
    assert "colab-badge.svg" not in chapter.replace("_images/colab-badge.svg", ""), "the badge image is local"
    serving = (html / "chapters" / "08_serving_llama3.html").read_text()
    assert '<table class="calculator">' in serving and "Live calculator: run this cell" in serving, (
        "a calculator's table"
    )
    assert "widget-view" not in serving and "html-manager" not in serving, "no widget, no widget script in the HTML"
    assert (html / "api" / "gpu.html").exists() and 'id="book_lib.gpu.hierarchical_all_reduce"' in (
        html / "api" / "gpu.html"
    ).read_text(), "the reference documents each function"

    problems, n_pages = check_site.check(html, ROOT, screenshots=ROOT / "_build" / "site-check")
    assert n_pages >= 30 and not problems, "\n".join(problems[:40])
