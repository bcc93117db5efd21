"""Check the built HTML book as a reader's browser sees it, with no network.

    python tools/check_site.py _build/html [--screenshots DIR]

Serves the site on localhost and opens every page in Debian's headless Chromium (driven by
Playwright) with every request to another host refused, at 1280 px, then narrowed to phone width
(412 px). A page fails when it logs a console error or raises, asks for anything off the site, shows
an image that did not load, leaves math untypeset (or typeset with an error), or scrolls sideways at
either width; and at 1280 px, when any element of the text column (a code block, an output, a table,
an equation, a figure) is wider than the column or scrolls inside its own box, unless `WIDE_ALLOWED`
names it with a reason (a margin note sits outside the column by design, but nothing in one may run
past the window), or when it shows more than one search field. Read from
the HTML files: every internal link and anchor resolves, each notebook page's Colab links open that
notebook, and no exercise page carries solution or hidden-test text. Prints the problems and exits 1
when there are any; `--screenshots` keeps three pages as PNG files.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import re
import sys
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

CHROMIUM = "/usr/bin/chromium"
# Flags that keep Chromium from calling home on a machine without a network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The network cut off: every host name but localhost resolves to nothing, so a page's request for
# anything off the site fails in the browser itself (and is reported from the page's request events).
NO_NETWORK = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"
WIDTHS = {"desktop": 1280, "phone": 412}
SCREENSHOTS = ("intro.html", "chapters/04_transformers.html", "exercises/release/ch01_rooflines/ch01_rooflines.html")
SOLUTION_TEXT = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "**Solution.**", "book_grader")
COLAB = re.compile(r"https://colab\.research\.google\.com/github/[^\"'<>\s]+?/blob/[^/\"'<>\s]+/([^\"'<>\s#?]+\.ipynb)")
SKIPPED = ("_static", "_sources", "_images", "_sphinx_design_static")

# Elements that may be wider than the text column at 1280 px, each with the reason: (page, start of its
# text) -> why. tests/site/test_site.py keeps every entry's reason written out.
WIDE_ALLOWED: dict[tuple[str, str], str] = {}

# Runs in the page once it has loaded: what the reader would see.
PAGE_REPORT = """
async () => {
  // The outermost elements of the text column that stick out of it or scroll inside their own box.
  function wideElements() {
    const column = document.querySelector(".bd-article");
    if (!column) return [];
    const right = column.getBoundingClientRect().right;
    const found = [];
    const leaves = new Set(["PRE", "MJX-CONTAINER", "SVG", "IMG", "CODE"]);  // checked whole, not inside
    (function visit(parent) {
      for (const el of parent.children) {
        if (el.matches(".sidenote, .marginnote, .margin, mjx-assistive-mml")) continue;
        const box = el.getBoundingClientRect();
        const overflow = getComputedStyle(el).overflowX;
        const scrolls = (overflow === "auto" || overflow === "scroll") && el.scrollWidth > el.clientWidth + 1;
        if (box.width > 0 && box.height > 0 && (scrolls || box.right > right + 1)) found.push(el);
        else if (!leaves.has(el.tagName.toUpperCase())) visit(el);
      }
    })(column);
    return found.map(el => [el.tagName.toLowerCase(), el.scrollWidth, el.clientWidth,
                            (el.textContent || el.getAttribute("src") || "").trim().slice(0, 60)]);
  }
  // Margin notes sit outside the column by design, but nothing in one may run past the window.
  function marginOverflow() {
    const found = [];
    for (const note of document.querySelectorAll(".sidenote, .marginnote, .margin")) {
      let right = 0;
      for (const el of [note, ...note.querySelectorAll("*")]) {
        const box = el.getBoundingClientRect();
        if (box.width > 0 && box.height > 0) right = Math.max(right, box.right);
      }
      if (right > window.innerWidth + 1) {
        found.push([Math.round(right - window.innerWidth), (note.textContent || "").trim().slice(0, 60)]);
      }
    }
    return found;
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const math = [...document.querySelectorAll("span.math, div.math")];
  const images = [...document.querySelectorAll("img")];
  return {
    math: math.length,
    untypeset: math.filter(m => !m.querySelector("mjx-container")).map(m => m.textContent.slice(0, 60)),
    mathErrors: [...document.querySelectorAll("mjx-merror")].map(m => m.textContent.slice(0, 60)),
    brokenImages: images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute("src")),
    wide: wideElements(),
    margins: marginOverflow(),
    // The theme's search fields (the search page's own query box is the page, not a field).
    searchFields: [...document.querySelectorAll(".search-button-field")].filter(el => {
      const box = el.getBoundingClientRect();
      return box.width > 0 && box.height > 0 && getComputedStyle(el).visibility !== "hidden";
    }).length,
  };
}
"""


class _Page(HTMLParser):
    """The ids, links and image sources of one HTML page, and the links that launch it in Colab."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.sources: list[str] = []
        self.launchers: list[str] = []  # the theme's "Launch on Colab" button and the page's badge
        self._open: list[str] = []  # hrefs of the <a> elements we are inside

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"])
        if tag == "a":
            href = values.get("href") or ""
            self._open.append(href)
            if href:
                self.links.append(href)
            if "colab" in (values.get("title") or "").lower():
                self.launchers.append(href)
        if tag == "img" and values.get("src"):
            self.sources.append(values["src"])
            if "colab-badge" in values["src"] and self._open:
                self.launchers.append(self._open[-1])

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open:
            self._open.pop()


def pages(root: Path) -> list[Path]:
    """Every HTML page of the book under `root`, Sphinx's own folders left out."""
    return sorted(p for p in root.rglob("*.html") if p.relative_to(root).parts[0] not in SKIPPED)


@functools.cache
def _parsed(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf8"))
    return page


def redirect(page: Path) -> str | None:
    """Where a redirect page (Jupyter Book's index.html) sends the reader, or None for a real page."""
    found = re.search(r'http-equiv="Refresh" content="\d+; url=([^"]+)"', page.read_text(encoding="utf8"), re.I)
    return found.group(1) if found else None


def link_problems(root: Path, page: Path) -> Iterator[str]:
    """Internal links and images of `page` that point at no file, or at an anchor the file lacks."""
    name = page.relative_to(root)
    parsed = _parsed(page)
    target = redirect(page)
    for href in parsed.links + parsed.sources + ([target] if target else []):
        if urlsplit(href).scheme or href.startswith(("//", "mailto:", "javascript:")):
            continue
        target, anchor = urldefrag(href)
        path = (page.parent / unquote(target)).resolve() if target else page
        if path.is_dir():
            path = path / "index.html"
        if not path.exists():
            yield f"{name}: {href} points at no file"
        elif anchor and path.suffix == ".html" and anchor not in _parsed(path).ids:
            yield f"{name}: {href} points at no anchor"


def colab_problems(root: Path, page: Path, repo_root: Path) -> Iterator[str]:
    """A page built from a notebook has a launch button and a badge, and both open that notebook.

    Other Colab links (a chapter's link to its exercises) may open other notebooks.
    """
    name = page.relative_to(root)
    notebook = name.with_suffix(".ipynb")
    if not (repo_root / notebook).exists():
        return
    launchers = _parsed(page).launchers
    if len(launchers) < 2:
        yield f"{name}: {len(launchers)} Colab launch links, not the theme's button and the badge"
    for href in launchers:
        target = COLAB.match(href)
        if target is None or target.group(1) != notebook.as_posix():
            yield f"{name}: its Colab launch link {href} does not open {notebook.as_posix()}"


def leak_problems(root: Path, page: Path) -> Iterator[str]:
    """An exercise page shows no solution or hidden-test text."""
    name = page.relative_to(root)
    if name.parts[:2] != ("exercises", "release"):
        return
    text = page.read_text(encoding="utf8")
    for marker in SOLUTION_TEXT:
        if marker in text:
            yield f"{name}: shows {marker!r}"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # a page closed while a file was still being sent: nothing the reader would see


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve the folder `root` on localhost, as a plain static server would; yields its base URL."""
    server = _Server(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()


def browser_problems(root: Path, names: list[Path], screenshots: Path | None) -> Iterator[str]:
    """Open every page in headless Chromium, no network, and report what went wrong.

    One tab visits every page: it loads at the desktop width and is checked there, then is narrowed
    to the phone width, where only its width is checked again (the rest does not depend on the window).
    """
    from playwright.sync_api import sync_playwright

    offsite: list[str] = []

    def record(request) -> None:
        if not request.url.startswith((site, "data:", "blob:")):
            offsite.append(request.url)

    with serve(root) as site, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, NO_NETWORK])
        context = browser.new_context(viewport={"width": WIDTHS["desktop"], "height": 900})
        context.on("request", record)  # a listener only: routing every request through Python is slow
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda err: errors.append(str(err)))
        for name in names:
            page.set_viewport_size({"width": WIDTHS["desktop"], "height": 900})
            errors.clear()
            offsite.clear()
            page.goto(site + name.as_posix(), wait_until="load")
            report = page.evaluate(PAGE_REPORT)  # after MathJax has typeset the page
            for url in sorted(set(offsite)):
                yield f"{name}: asks for {url}, off the site"
            for error in errors:
                if "net::ERR_" not in error or not offsite:  # a refused request is reported above
                    yield f"{name}: console error: {error[:160]}"
            for src in report["brokenImages"]:
                yield f"{name}: image {src} did not load"
            for text in report["untypeset"][:3]:
                yield f"{name}: math not typeset: {text!r}"
            for text in report["mathErrors"][:3]:
                yield f"{name}: math error: {text!r}"
            for tag, wide, shown, text in report["wide"]:
                if not any(name.as_posix() == page and text.startswith(start) for page, start in WIDE_ALLOWED):
                    yield f"{name}: a {tag} {wide} px wide in a {shown} px column at 1280 px: {text!r}"
            if report["searchFields"] > 1:
                yield f"{name}: {report['searchFields']} search fields at 1280 px, where one is enough"
            for past, text in report["margins"]:
                yield f"{name}: a margin note runs {past} px past the window at 1280 px: {text!r}"
            if screenshots is not None and name.as_posix() in SCREENSHOTS:
                screenshots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(screenshots / (name.as_posix().replace("/", "__") + ".png")))
            for width_name, width in WIDTHS.items():
                page.set_viewport_size({"width": width, "height": 900})
                wide = page.evaluate("document.documentElement.scrollWidth")
                if wide > width:
                    yield f"{name}: {wide} px wide at the {width_name} width, {width} px: it scrolls sideways"
        context.close()
        browser.close()


def check(root: Path, repo_root: Path, screenshots: Path | None = None) -> tuple[list[str], int]:
    """Every problem found on the site under `root`, and how many pages were checked."""
    if not (root / "index.html").exists():
        raise ValueError(f"root={str(root)!r}: no index.html there; allowed: the HTML folder of a built book")
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium package (`make browser` does)")
    found = pages(root)
    problems = []
    for page in found:
        problems += link_problems(root, page)
        problems += colab_problems(root, page, repo_root)
        problems += leak_problems(root, page)
    shown = [p.relative_to(root) for p in found if redirect(p) is None]
    problems += browser_problems(root, shown, screenshots)
    return problems, len(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path, help="the built site, e.g. _build/html")
    parser.add_argument("--screenshots", type=Path, help="folder for PNG screenshots of three pages")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    problems, n_pages = check(args.html.resolve(), Path(__file__).resolve().parent.parent, args.screenshots)
    for problem in problems:
        print(problem)
    seconds = time.perf_counter() - start
    print(f"{n_pages} pages checked in {seconds:.0f} s: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
