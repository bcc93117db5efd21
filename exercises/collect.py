"""`make collect`: hand-ins from an LMS's zip (or a folder of them) placed where nbgrader grades them.

    python -m exercises.collect DIR ASSIGNMENT (--zip download.zip | --from folder)

Each notebook is read for the student it belongs to, in either form an LMS or a student gives it:

- a folder named after the student: `ada/Copy of ch01_rooflines.ipynb`, `ada/ch01_rooflines (2).ipynb`
  (the folder decides, whatever the file's name: a student chooses the name, not the folder);
- a file name that starts with the student: `bob_ch01_rooflines (1).ipynb`, or an LMS's
  `bob_123_456_ch01_rooflines.ipynb` (with a roster, the longest roster id the name starts with).

The name must hold the assignment's name (after Colab's `Copy of ` and a copy's ` (1)`), and the file
must be a notebook. Each is written to `DIR/submitted/<student>/<assignment>/<assignment>.ipynb` with
its time (the zip entry's or the file's, taken as UTC) in nbgrader's `timestamp.txt`, which the late
policy reads. A student with several files gets the latest; a submission already in `submitted/` is
replaced only by a newer one, and the one replaced is kept in `DIR/collected/replaced/`. Everything
left out is listed with the reason. nbgrader's own `zip_collect` reads a student id with one regular
expression; these two forms and a roster's ids need more, so the placing is done here.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Handin", "Report", "student_of", "collect", "main"]

COPY = re.compile(r"^(Copy of )+")
NUMBERED = re.compile(r"\s*\(\d+\)$")
MAX_BYTES = 64 << 20  # a notebook larger than this is not a submission
TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f UTC"  # what nbgrader's parse_utc reads


@dataclass(frozen=True, slots=True)
class Handin:
    """One file found: where it came from, its bytes and its time (UTC, naive)."""

    name: str
    data: bytes
    time: datetime.datetime


@dataclass(slots=True)
class Report:
    """What `collect` did: student -> the file placed for them, and (file, why) for each one left out."""

    placed: dict[str, str] = field(default_factory=dict)
    left_out: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def student_of(name: str, assignment: str, roster_ids: list[str]) -> tuple[str | None, str]:
    """(the student a hand-in's path `name` belongs to, or None; why not, when None).

    Args:
        name: the file's path inside the zip or folder (`ada/Copy of ch01_rooflines.ipynb`).
        assignment: the assignment it must be.
        roster_ids: the course's students (empty: any id that names a folder is taken).
    """
    from exercises.roster import ID

    path = Path(name)
    stem = NUMBERED.sub("", COPY.sub("", path.stem))
    if path.suffix != ".ipynb":
        return None, "not a notebook (.ipynb)"
    where = stem.find(assignment)
    if where < 0:
        return None, f"its name does not hold {assignment}"
    prefix = stem[:where].rstrip("_- ")
    folder = path.parts[-2] if len(path.parts) > 1 else ""
    if not prefix and not folder:
        return None, "no student in its name or folder"
    known = [s for s in roster_ids if prefix == s or prefix.startswith(f"{s}_")] if prefix else []
    named = max(known, key=len) if known else prefix.split("_")[0] if prefix and not roster_ids else ""
    # the folder first: an LMS makes it, while a file's name is the student's to choose
    for student in (folder, named):
        if student and ID.match(student) and (not roster_ids or student in roster_ids):
            return student, ""
    if not roster_ids:
        return None, "no usable student id"
    who = prefix or folder
    return None, f"{who!r} is not on the roster" if who == folder else f"{who!r} names no student of the roster"


def _read_zip(file: Path) -> list[Handin]:
    found = []
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            if info.is_dir() or info.filename.startswith("__MACOSX/"):
                continue
            data = archive.read(info) if info.file_size <= MAX_BYTES else b""
            found.append(Handin(info.filename, data, datetime.datetime(*info.date_time)))
    return found


def _read_folder(folder: Path) -> list[Handin]:
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            when = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC).replace(tzinfo=None)
            data = path.read_bytes() if path.stat().st_size <= MAX_BYTES else b""
            found.append(Handin(str(path.relative_to(folder)), data, when))
    return found


def _is_notebook(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data).get("cells"), list)
    except (ValueError, AttributeError):
        return False


def _earlier(folder: Path) -> datetime.datetime | None:
    stamp = folder / "timestamp.txt"
    if not stamp.exists():
        return datetime.datetime.min if (folder.is_dir() and any(folder.iterdir())) else None
    return datetime.datetime.strptime(stamp.read_text().strip(), TIMESTAMP)


def collect(root: Path, assignment: str, handins: list[Handin]) -> Report:
    """Place `handins` in the course at `root` (see the module's docstring); what was placed and left out."""
    from exercises.roster import FILE, read

    root = Path(root)
    ids = [s["id"] for s in read(root / FILE)] if (root / FILE).exists() else []
    report = Report()
    chosen: dict[str, Handin] = {}
    for handin in handins:
        student, why = student_of(handin.name, assignment, ids)
        if student is None:
            if not Path(handin.name).name.startswith("."):
                report.left_out.append((handin.name, why))
            continue
        if not _is_notebook(handin.data):
            report.left_out.append((handin.name, "not a readable notebook (or over 64 MiB)"))
            continue
        if student in chosen:
            older, newer = sorted((chosen[student], handin), key=lambda h: h.time)
            report.left_out.append((older.name, f"an older file of {student}'s than {newer.name}"))
            handin = newer
        chosen[student] = handin
    for student, handin in sorted(chosen.items()):
        folder = root / "submitted" / student / assignment
        before = _earlier(folder)
        if before is not None and before > handin.time:
            report.left_out.append((handin.name, f"older than {student}'s submission already collected ({before})"))
            continue
        if before is not None:
            kept = root / "collected" / "replaced" / student / f"{assignment}-{before:%Y%m%dT%H%M%S}"
            shutil.copytree(folder, kept, dirs_exist_ok=True)
            shutil.rmtree(folder)
            report.notes.append(f"{student}: replaced the submission of {before}, kept in {kept}")
        folder.mkdir(parents=True)
        (folder / f"{assignment}.ipynb").write_bytes(handin.data)
        (folder / "timestamp.txt").write_text(handin.time.strftime(TIMESTAMP) + "\n")
        report.placed[student] = handin.name
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="the course folder (`make course DIR=...`)")
    parser.add_argument("assignment")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--zip", type=Path, help="an LMS's zip of the hand-ins")
    where.add_argument("--from", dest="folder", type=Path, help="a folder of them")
    args = parser.parse_args(argv)
    if not (args.dir / "source" / args.assignment).is_dir():
        parser.error(f"assignment={args.assignment!r}: not in {args.dir / 'source'}; allowed: one of the course's")
    source = args.zip if args.zip is not None else args.folder
    if not source.exists():
        parser.error(f"{source}: no such file or folder")
    handins = _read_zip(source) if args.zip is not None else _read_folder(source)
    report = collect(args.dir, args.assignment, handins)
    for student, name in report.placed.items():
        print(f"{student}: {name}")
    for note in report.notes:
        print(note)
    for name, why in report.left_out:
        print(f"left out {name}: {why}")
    print(f"{len(report.placed)} placed in {args.dir / 'submitted'}, {len(report.left_out)} left out")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
