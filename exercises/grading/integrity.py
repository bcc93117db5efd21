"""The grader's own files, checked around each submission where no sandbox hides them (`sandbox="none"`).

Without bubblewrap the kernel runs as the grader's user and can write whatever the grader can: the
gradebook, the class's values, the course configuration, the keys and `book_lib`, the Python the
grader runs on, Jupyter's configuration. `snapshot` fingerprints all of them by inode, size, mode
and change time (which no process can set back), so a submission that wrote any of them is refused
before its grades are saved and before the grader imports anything it may have changed. `Backup`
keeps a copy of what can be put back (the gradebook, the course folder's files, `exercises/` and
`book_lib`): a change there is undone; a change anywhere else stops the grader.
"""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from contextlib import closing
from pathlib import Path

__all__ = ["guarded_paths", "snapshot", "changes", "Backup"]

EXERCISES = Path(__file__).resolve().parents[1]
# jupyter_core's marker of a finished migration (~/.jupyter/migrated), written once by the first
# Jupyter program to run: a time stamp, not configuration.
IGNORED_NAMES = frozenset({"migrated"})


def _book_lib() -> list[Path]:
    spec = importlib.util.find_spec("book_lib")
    return [Path(p) for p in spec.submodule_search_locations] if spec and spec.submodule_search_locations else []


def guarded_paths(course_root: Path) -> tuple[list[Path], list[Path]]:
    """What a submission must not change: (folders and files watched whole, folders watched one level deep).

    Whole: the course's gradebook, key (and the older `variant.json`), configuration, sources and
    handouts, the grader's code, its Python,
    Jupyter's configuration folders and the user's site-packages, whether they exist yet or not (one
    made during a submission would be read by the next run). One level: the course folder itself, so
    a configuration file added beside the gradebook (`nbgrader_config.json`) is seen too.
    """
    import site

    from jupyter_core.paths import jupyter_config_path

    root = Path(course_root)
    deep = [root / "gradebook.db", root / "key", root / "variant.json", root / "nbgrader_config.py"]
    deep += [root / "source", root / "handout"]
    deep += [EXERCISES, Path(sys.prefix), Path(sys.base_prefix), Path(sysconfig.get_paths()["purelib"])]
    deep += _book_lib() + [Path(p) for p in jupyter_config_path()] + [Path(site.getusersitepackages())]
    return sorted(set(deep)), [root]


def snapshot(paths: tuple[list[Path], list[Path]]) -> bytes:
    """The path, type, change time, size, inode and mode of everything under `paths` (`guarded_paths`'s
    two lists), as find lists them; a path that does not exist lists nothing until it does."""
    find = shutil.which("find")
    if find is None:
        raise RuntimeError("the `find` command is missing: the grader cannot check its own files")
    deep, shallow = paths
    listing = b""
    for roots, depth in ((deep, []), (shallow, ["-maxdepth", "1"])):
        args = [find, *map(str, roots), *depth, "-printf", r"%p\0%y %C@ %s %i %m\0"]
        listing += subprocess.run(args, capture_output=True, check=False).stdout
    return listing


def changes(before: bytes, after: bytes) -> list[str]:
    """The paths added, removed or changed between two snapshots, sorted; a folder only when it was
    added or removed (a file written inside one changes the folder's own times too)."""
    if before == after:
        return []
    old, new = (dict(zip(s.split(b"\0")[0::2], s.split(b"\0")[1::2], strict=False)) for s in (before, after))
    changed = []
    for path in old.keys() | new.keys():
        was, now = old.get(path), new.get(path)
        if was == now or (was and now and was.startswith(b"d ") and now.startswith(b"d ")):
            continue
        if Path(path.decode(errors="replace")).name in IGNORED_NAMES:
            continue
        changed.append(path.decode(errors="replace"))
    return sorted(changed)


class Backup:
    """A copy of what the grader can put back after a submission: the gradebook (through SQLite's
    backup, so a reader never sees half a file), and every file of the course folder, its sources and
    key, and of the grader's code (`exercises/`, `book_lib`), a few megabytes. The handouts, one per
    student and assignment, are watched but not copied: a change there stops the grader.

    Args:
        course_root: the course folder.
    """

    def __init__(self, course_root: Path):
        root = Path(course_root)
        self.gradebook = root / "gradebook.db"
        self.trees = [root / "source", root / "key", EXERCISES, *_book_lib()]
        self.root = root
        self.files = {p: p.read_bytes() for p in root.iterdir() if p.is_file() and p != self.gradebook}
        for tree in self.trees:
            self.files |= {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and not p.is_symlink()}
        self._db = sqlite3.connect(":memory:")
        self._had_gradebook = self.gradebook.is_file()
        if self._had_gradebook:
            with closing(sqlite3.connect(self.gradebook)) as source:
                source.backup(self._db)

    def covers(self, path: str) -> bool:
        """Whether `restore` puts `path` back."""
        p = Path(path)
        return p.parent == self.root or p == self.gradebook or any(t == p or t in p.parents for t in self.trees)

    def restore(self) -> None:
        """Every copied file as it was, every file added beside them or under the copied folders
        removed, the gradebook back."""
        for p in self.root.iterdir():
            kept = p == self.gradebook and self._had_gradebook
            if p not in self.files and not kept and (p.is_file() or p.is_symlink()):
                p.unlink()
        for tree in self.trees:
            for p in sorted(tree.rglob("*"), reverse=True):
                if p not in self.files and (p.is_file() or p.is_symlink()):
                    p.unlink()
        for path, data in self.files.items():
            if path.is_symlink() or not path.is_file() or path.read_bytes() != data:
                path.unlink(missing_ok=True)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        if self._had_gradebook:  # a PostgreSQL course has none here
            with closing(sqlite3.connect(self.gradebook)) as target:
                self._db.backup(target)
