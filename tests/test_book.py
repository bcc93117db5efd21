"""The book builds from a clean output folder with warnings as errors.

Notebook execution is covered by nbval (every chapter and solution runs there), so this build uses
the committed outputs (`execute_notebooks: off`) and checks what Sphinx checks: references,
figures, the table of contents, the Colab launch buttons.
"""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_book_builds_clean_with_warnings_as_errors(tmp_path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
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
