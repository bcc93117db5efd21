"""A Sphinx extension that makes the HTML book self-contained and tidy (loaded from `_config.yml`).

- MathJax is served from the build: `tools/site/` pins the npm package, `make book` installs it, and
  this extension copies its browser bundle into `_static/mathjax/` (`mathjax_path` points there),
  so the book's math typesets offline and behind firewalls.
- The calculators run in the page: this extension copies Pyodide's core (pinned in `tools/site/`
  too) into `_static/pyodide/` with a zip of the `book_lib` modules `book_lib.calculators` imports
  (plain Python, no NumPy or JAX), and loads `_static/calculators.js`, which starts Pyodide when a
  reader first turns a knob.
- The Colab badge of each notebook (an image on colab.research.google.com, right for a notebook
  opened in Jupyter or Colab) becomes the local `_static/colab-badge.svg` in the HTML.
- An image whose alt text is only its file name gets the caption of its figure, or else a short
  description of where it comes from.
- A script that a page would load twice with the same inline body (sphinx-thebe and
  sphinx-togglebutton register theirs twice, and a second `const` declaration is a console error)
  is kept once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

MATHJAX = Path(__file__).resolve().parent / "site" / "node_modules" / "mathjax" / "es5"
# Bundles the book does not load (SVG output, the "full" builds, MathML input, the Node entry point).
MATHJAX_UNUSED = ("*svg*.js", "*-full*.js", "mml-*.js", "node-main.js")
PYODIDE = Path(__file__).resolve().parent / "site" / "node_modules" / "pyodide"
# What loadPyodide reads for the core interpreter and its standard library: nothing else is served.
PYODIDE_CORE = ("pyodide.js", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
ROOT = Path(__file__).resolve().parent.parent
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE = "/_static/colab-badge.svg"  # "/" is the book's root for a Sphinx image


class LocalColabBadge(SphinxTransform):
    """Point every Colab badge image at the copy in `_static`."""

    default_priority = 400

    def apply(self, **kwargs) -> None:
        for image in self.document.findall(nodes.image):
            if image.get("uri") == COLAB_BADGE:
                image["uri"] = LOCAL_BADGE


class ImageAltText(SphinxTransform):
    """Replace an alt text that is a file path with the figure's caption (or a description)."""

    default_priority = 900

    def apply(self, **kwargs) -> None:
        for image in self.document.findall(nodes.image):
            alt = image.get("alt", "")
            uri = image.get("uri", "")
            if alt and alt != uri and not alt.endswith((".png", ".svg", ".jpg", ".jpeg", ".gif")):
                continue
            figure = image.parent
            while figure is not None and not isinstance(figure, nodes.figure):
                figure = figure.parent
            caption = next(iter(figure.findall(nodes.caption)), None) if figure is not None else None
            image["alt"] = caption.astext() if caption is not None else "A plot drawn by the code cell above"


def _check_mathjax(app: Sphinx) -> None:
    if app.builder.format == "html" and not (PYODIDE / "pyodide.asm.wasm").exists():
        raise RuntimeError(
            f"Pyodide is not installed in {PYODIDE.parent}: run `make book` (or `npm ci --prefix tools/site`), "
            "which installs the version pinned in tools/site/package-lock.json"
        )
    if app.builder.format == "html" and not (MATHJAX / "tex-mml-chtml.js").exists():
        raise RuntimeError(
            f"MathJax is not installed in {MATHJAX.parent}: run `make book` (or `npm ci --prefix tools/site`), "
            "which installs the version pinned in tools/site/package-lock.json"
        )


def _copy_mathjax(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(MATHJAX, target, ignore=shutil.ignore_patterns(*MATHJAX_UNUSED))


def calculator_modules() -> list[str]:
    """The `book_lib` modules `book_lib.calculators` imports, found by importing it in a fresh Python.

    Raises:
        RuntimeError: it imports NumPy or JAX, which the page's Pyodide does not load.
    """
    probe = (
        "import json, sys; import book_lib.calculators; "
        "print(json.dumps([sorted(m for m in sys.modules if m.startswith('book_lib')), "
        "[m for m in ('numpy', 'jax') if m in sys.modules]]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    modules, heavy = json.loads(done.stdout)
    if heavy:
        raise RuntimeError(f"book_lib.calculators imports {heavy}: the page's Pyodide runs plain Python only")
    return modules


def _copy_pyodide(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "pyodide"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in PYODIDE_CORE:
        shutil.copy2(PYODIDE / name, target / name)
    with zipfile.ZipFile(target / "book_lib.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for module in calculator_modules():
            path = Path(*module.split("."))
            source = ROOT / (f"{path}/__init__.py" if module == "book_lib" else f"{path}.py")
            archive.write(source, source.relative_to(ROOT).as_posix())


def _one_of_each_script(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # the same inline script is registered once with filename None and once with "" (sphinx-thebe, togglebutton)
        key = (str(getattr(script, "filename", script) or ""), repr(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def setup(app: Sphinx) -> dict:
    app.add_transform(LocalColabBadge)
    app.add_transform(ImageAltText)
    app.connect("builder-inited", _check_mathjax)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _copy_pyodide)
    app.add_js_file("calculators.js", loading_method="defer")
    app.connect("html-page-context", _one_of_each_script, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
