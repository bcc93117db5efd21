"""Keep the notebooks' shared parts in step with `_config.yml`, and re-execute chapters.

The repository URL lives in one place, `repository.url` (and `branch`) in `_config.yml`. Every
notebook carries it twice, in its Colab links and in its setup cell, because Colab opens a notebook
with nothing else around it. `sync` rewrites both from the config; a test fails when they differ.

    python tools/notebooks.py sync              # rewrite setup cells and Colab links everywhere
    python tools/notebooks.py execute [PATH...] # re-run chapters in place (default: all of them)
"""

from __future__ import annotations

import re
import sys
import tomllib
import uuid
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOURCES = sorted((ROOT / "exercises" / "source").glob("*/*.ipynb"))
COLAB_LINK = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/[^/\s)]+/")

SETUP_CELL = """\
# Setup: install book_lib when it is missing (keeping this runtime's jax
# and numpy), then pick devices.
import importlib.metadata, importlib.util, subprocess, sys, tempfile
if importlib.util.find_spec("book_lib") is None:
    keep = [f"{p}=={importlib.metadata.version(p)}"
            for p in ("jax", "jaxlib", "numpy") if importlib.util.find_spec(p)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pins:
        pins.write("\\n".join(keep))
    repo = "@REPO@"
    source = f"book_lib @ git+{repo}.git@@BRANCH@"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-color",
         "-c", pins.name, source],
        capture_output=True, text=True)
    if pip.returncode:  # name the one command for this runtime's jax
        import os, shutil
        tpu = any(map(os.path.exists, @TPU_FILES@))
        gpu = shutil.which("nvidia-smi")
        extra = "[tpu]" if tpu else "[cuda12]" if gpu else ""
        wanted = "@JAX@".replace("jax", "jax" + extra, 1)
        fix = f'pip install -U "{wanted}"'
        raise RuntimeError(
            "pip could not install book_lib. It said:\\n"
            f"{(pip.stdout + pip.stderr)[-2500:]}\\n"
            "Where it names jax: this book needs @JAX@. "
            f"Run  !{fix}  in a cell, restart the runtime "
            "and run this cell again.")
import book_lib.devices
book_lib.devices.setup()"""


# The HTML book hides the cell and drops its log line; Jupyter and Colab show both.
SETUP_TAGS = ("hide-input", "remove-output")


def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def repository() -> tuple[str, str]:
    """(`https://github.com/<org>/<repo>`, branch) from `_config.yml`."""
    repo = config()["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def colab_prefix() -> str:
    """The Colab URL prefix of a notebook in this repository: append its path."""
    url, branch = repository()
    return f"https://colab.research.google.com/github/{url.removeprefix('https://github.com/')}/blob/{branch}/"


def setup_cell_source() -> str:
    """The setup cell every notebook starts with, pointing at the configured repository."""
    url, branch = repository()
    from book_lib.devices import TPU_DEVICE_FILES

    cell = SETUP_CELL.replace("@REPO@", url).replace("@BRANCH@", branch)
    cell = cell.replace("@JAX@", jax_requirement())
    return cell.replace("@TPU_FILES@", repr(TPU_DEVICE_FILES))


def jax_requirement() -> str:
    """The jax requirement `pyproject.toml` declares (`"jax>=0.10.0"`)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(d for d in project["dependencies"] if d.startswith("jax"))


def read(path: Path):
    """Read a notebook, giving any cell without an id a fresh one (nbformat 4.5 wants them)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.setdefault("id", uuid.uuid4().hex[:8])
    return nb


def sync_notebook(path: Path) -> bool:
    """Rewrite the setup cell and every Colab link of one notebook; True when it changed."""
    nb = read(path)
    before = [(c.source, list(c.metadata.get("tags", []))) for c in nb.cells]
    setup = next(c for c in nb.cells if c.cell_type == "code")
    setup.source = setup_cell_source()
    tags = setup.metadata.setdefault("tags", [])
    tags += [t for t in SETUP_TAGS if t not in tags]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = COLAB_LINK.sub(colab_prefix(), cell.source)
    if [(c.source, list(c.metadata.get("tags", []))) for c in nb.cells] == before:
        return False
    nbformat.write(nb, path)
    return True


def execute(path: Path) -> None:
    """Run one notebook in a fresh python3 kernel, in its own folder, and save it with its outputs."""
    from exercises import build

    nbformat.write(build.execute(read(path), path.parent), path)


def main(argv: list[str]) -> int:
    if argv[:1] == ["sync"]:
        for path in CHAPTERS + SOURCES:
            if sync_notebook(path):
                print(f"updated {path.relative_to(ROOT)}")
        return 0
    if argv[:1] == ["execute"]:
        for path in [Path(p).resolve() for p in argv[1:]] or CHAPTERS:
            execute(path)
            print(f"executed {path.relative_to(ROOT)}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
