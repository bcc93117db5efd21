"""tools/check_site.py finds each problem it promises to, on a small site made to have them all.

The real book goes through the same check in tests/site/test_book.py, where it must find nothing; this
test shows that finding nothing there means something.
"""

from pathlib import Path

import pytest

from tools import check_site

COLAB = "https://colab.research.google.com/github/o/r/blob/main/"

GOOD = """<html><head><title>good</title></head><body>
<h1 id="top">A good page</h1><img src="dot.svg" alt="a dot"><a href="bad.html#here">on</a>
</body></html>"""

BAD = """<html><head><title>bad</title><script>console.error("boom")</script></head><body>
<h1 id="here">A bad page</h1>
<button class="search-button-field">Search</button><button class="search-button-field">Search</button>
<img src="https://cdn.example.com/logo.png" alt="off the site"><img src="missing.png" alt="no file">
<a href="nowhere.html">a link to no file</a><a href="good.html#nope">a link to no anchor</a>
<span class="math">x^2</span>
<div style="width: 3000px">too wide</div>
</body></html>"""

NOTEBOOK_PAGE = f"""<html><body><h1>A chapter</h1>
<a href="{COLAB}chapters/other.ipynb"><img src="../_images/colab-badge.svg" alt="Open in Colab"></a>
<a href="{COLAB}chapters/other.ipynb" title="Launch on Colab">launch</a>
</body></html>"""

COLUMN = (
    """<html><body><div class="bd-article" style="width: 600px">
<h1>A column</h1>
<pre style="overflow-x: auto">scrolls sideways: """
    + "x" * 200
    + """</pre>
<pre style="overflow-x: auto">allowed to scroll: """
    + "x" * 200
    + """</pre>
<table><tr><td style="min-width: 900px">a table wider than the column</td></tr></table>
<p>a claim<span class="sidenote" style="float: right; margin-right: -300px; width: 250px">beside it</span></p>
<p>a sum<span class="marginnote" style="float: right; margin-right: -300px; width: 250px">
<span style="display: inline-block; width: 900px">runs past the window</span></span></p>
</div></body></html>"""
)

LEAK = "<html><body><h1>Q1</h1><pre>### BEGIN SOLUTION\nx = 1</pre></body></html>"


def test_each_kind_of_problem_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(check_site, "WIDE_ALLOWED", {("column.html", "allowed to scroll"): "a test of the list"})
    site, repo = tmp_path / "html", tmp_path / "repo"
    (site / "chapters").mkdir(parents=True)
    (site / "exercises" / "release" / "ch99").mkdir(parents=True)
    (repo / "chapters").mkdir(parents=True)
    (site / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=good.html" />')
    (site / "good.html").write_text(GOOD)
    (site / "dot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"></svg>')
    (site / "bad.html").write_text(BAD)
    (site / "column.html").write_text(COLUMN)
    (site / "_images").mkdir()
    (site / "_images" / "colab-badge.svg").write_text((site / "dot.svg").read_text())
    (site / "chapters" / "nb.html").write_text(NOTEBOOK_PAGE)
    (repo / "chapters" / "nb.ipynb").write_text("{}")
    (site / "exercises" / "release" / "ch99" / "ch99.html").write_text(LEAK)

    problems, n_pages = check_site.check(site, repo)
    text = "\n".join(problems)
    assert n_pages == 6
    expected = [
        "bad.html: asks for https://cdn.example.com/logo.png, off the site",
        "bad.html: console error: boom",
        "bad.html: image missing.png did not load",
        "bad.html: nowhere.html points at no file",
        "bad.html: good.html#nope points at no anchor",
        "bad.html: math not typeset: 'x^2'",
        "bad.html: 3",  # wider than the window at both widths
        "bad.html: 2 search fields at 1280 px",
        "column.html: a pre ",  # scrolls inside its box
        "column.html: a table ",  # sticks out of the column
        "column.html: a margin note runs ",  # its math past the window
        "chapters/nb.html: its Colab launch link",
        "exercises/release/ch99/ch99.html: shows 'BEGIN SOLUTION'",
    ]
    for message in expected:
        assert message in text, f"{message!r} not in:\n{text}"
    assert not any(p.startswith(("good.html", "index.html")) for p in problems), text
    column = [p for p in problems if p.startswith("column.html") and "column at 1280 px" in p]
    assert len(column) == 2 and not any("allowed to scroll" in p or "beside it" in p for p in column), column
    margins = [p for p in problems if "margin note" in p]
    assert len(margins) == 1 and "runs past the window" in margins[0], margins


def test_every_element_allowed_to_be_wide_says_why():
    for (page, start), reason in check_site.WIDE_ALLOWED.items():
        assert page.endswith(".html") and start and len(reason.split()) >= 4, (page, start, reason)


def test_a_folder_without_a_site_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no index.html there"):
        check_site.check(tmp_path, tmp_path)


def test_the_book_pages_exclude_sphinx_folders(tmp_path):
    for name in ("a.html", "_static/b.html", "_sources/c.html", "d/e.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("<html></html>")
    assert [p.relative_to(tmp_path).as_posix() for p in check_site.pages(tmp_path)] == ["a.html", "d/e.html"]


def test_launchers_are_the_badge_and_the_theme_button():
    page = check_site._Page()
    page.feed(f'<a href="{COLAB}x.ipynb"><img src="_images/colab-badge.svg"></a>')
    page.feed(f'<a href="{COLAB}y.ipynb" title="Launch on Colab">go</a><a href="{COLAB}z.ipynb">exercises</a>')
    assert page.launchers == [f"{COLAB}x.ipynb", f"{COLAB}y.ipynb"]
    assert Path(check_site.COLAB.match(page.launchers[0]).group(1)) == Path("x.ipynb")
