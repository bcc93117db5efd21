"""A class's key: the numbers its students were given, kept in the course folder and never lost.

`make course` draws them (`variants.draw`) from the class's seed and writes one file per assignment,
`DIR/key/<assignment>.json`:

    {"assignment": "ch07_inference", "seed": 20261124, "commit": "<the repository's HEAD>",
     "built": "2026-11-29", "class": {grade_id: {param: value}},
     "students": {student_id: {grade_id: {param: value}}}}

`class` holds the numbers of the course's release (and of anyone not on its roster), `students` each
rostered student's own. Without a seed the class has the text's numbers and `class` is empty. A key,
once written, only grows: an assignment or a student added later gets an entry of its own and nothing
else changes (`with_students`). A new seed replaces an assignment's key only when asked (`replace`),
and the old file is kept in `key/replaced/`. `key/secret` is the class's secret, from which the grader
draws the inputs a submission's functions are called on (`pipeline.RecordAnswers`). The sandbox hides
the whole course folder from a student's kernel.

A course made before keys were kept per assignment holds them in `variant.json` (the class's values
of every assignment and its seed): `read` takes an assignment's key from there when it has no file.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from exercises.keys import keys_for

__all__ = [
    "KEY_DIR",
    "LEGACY_FILE",
    "SECRET_FILE",
    "ClassKey",
    "path",
    "read",
    "write",
    "archive",
    "secret",
    "built_from",
]

KEY_DIR = "key"
LEGACY_FILE = "variant.json"
SECRET_FILE = "secret"
REPLACED_DIR = "replaced"
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassKey:
    """One assignment's numbers in one course.

    Attributes:
        assignment: the assignment (`"ch07_inference"`).
        seed: the class's seed, or None (the text's numbers).
        commit: the repository's commit the assignment was built from, or None where it was not recorded.
        built: the date it was built (ISO), or None where it was not recorded.
        values: grade_id -> the class's values (the release's); empty for the text's numbers.
        students: student id -> grade_id -> that student's own values.
    """

    assignment: str
    seed: int | None
    commit: str | None
    built: str | None
    values: dict[str, dict] = field(default_factory=dict)
    students: dict[str, dict[str, dict]] = field(default_factory=dict)

    def for_student(self, student: str | None) -> dict[str, dict]:
        """grade_id -> the values `student` was given: their own where the roster has them, else the class's."""
        return self.students.get(student, self.values) if student is not None else self.values

    def with_students(self, drawn: dict[str, dict[str, dict]]) -> ClassKey:
        """This key with `drawn` students added; a student it already holds keeps their numbers."""
        return replace(self, students={**drawn, **self.students})

    def to_json(self) -> str:
        data = {
            "assignment": self.assignment,
            "seed": self.seed,
            "commit": self.commit,
            "built": self.built,
            "class": self.values,
            "students": self.students,
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"


def path(root: Path, assignment: str) -> Path:
    """Where the course at `root` keeps `assignment`'s key."""
    return Path(root) / KEY_DIR / f"{assignment}.json"


def read(root: Path, assignment: str) -> ClassKey | None:
    """`assignment`'s key in the course at `root`; None where the course has none for it.

    Raises:
        ValueError: a key whose values do not fit the assignment's questions (a grade_id it lacks,
            parameters other than its key's).
    """
    file = path(root, assignment)
    legacy = Path(root) / LEGACY_FILE
    if file.exists():
        data = json.loads(file.read_text())
        key = ClassKey(
            assignment=assignment,
            seed=data["seed"],
            commit=data["commit"],
            built=data["built"],
            values=data["class"],
            students=data["students"],
        )
    elif legacy.exists() and assignment in json.loads(legacy.read_text())["values"]:
        data = json.loads(legacy.read_text())
        values = data["values"][assignment]
        key = ClassKey(assignment=assignment, seed=data["seed"], commit=None, built=None, values=values)
    else:
        return None
    questions = keys_for(assignment)
    where = file if file.exists() else legacy
    for values in [key.values, *key.students.values()]:
        for gid, mine in values.items():
            if gid not in questions or set(mine) != set(questions[gid].params):
                allowed = sorted(questions[gid].params) if gid in questions else "a grade_id of the assignment"
                raise ValueError(f"{where}: {gid} has parameters {sorted(mine)}; allowed: {allowed}")
    return key


def write(root: Path, key: ClassKey) -> Path:
    """Write `key` to its file in the course at `root` (the folder only its owner may read)."""
    file = path(root, key.assignment)
    file.parent.mkdir(mode=0o700, exist_ok=True)
    file.write_text(key.to_json())
    return file


def archive(root: Path, assignment: str) -> Path:
    """Set `assignment`'s key aside before it is drawn again: its file moves to `key/replaced/<assignment>.<time>.json`.

    Returns:
        `key/replaced/<assignment>.<time>`, the name the file now has without its suffix: a folder of
        that name is where the caller keeps what else it sets aside (the old handouts).
    """
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    kept = Path(root) / KEY_DIR / REPLACED_DIR / f"{assignment}.{stamp}"
    kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    file = path(root, assignment)
    if file.exists():
        file.rename(kept.parent / f"{kept.name}.json")
    return kept


def secret(root: Path) -> str:
    """The class's secret (64 hex digits), made the first time it is asked for and kept in `key/secret`."""
    file = Path(root) / KEY_DIR / SECRET_FILE
    file.parent.mkdir(mode=0o700, exist_ok=True)
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return file.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return file.read_text().strip()


def built_from() -> tuple[str | None, bool]:
    """(the repository's commit, whether its tracked files differ from it); (None, False) outside a git checkout."""
    try:

        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()

        head, status = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None, False
    return head, bool(status)
