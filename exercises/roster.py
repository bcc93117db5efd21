"""A class's roster: who gets a handout of their own (`make course ... ROSTER=students.csv`).

The file is nbgrader's student list, a CSV whose header names `id` and optionally `first_name`,
`last_name` and `email` (what `nbgrader db student import` reads). The course keeps the roster it was
given in `DIR/roster.csv`; a later roster adds its new students and changes no one already there (a
name or an email is updated, an id is never dropped). Every student is also put in the gradebook,
so nbgrader's own commands (`formgrade`, `export`) show their names.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

__all__ = ["FIELDS", "FILE", "Student", "parse", "read", "merge", "write", "add_to_gradebook"]

FIELDS = ("id", "first_name", "last_name", "email")
FILE = "roster.csv"
# An id names the student's folders (`handout/<id>/`, `submitted/<id>/`): no separator, no leading dot.
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")

Student = dict[str, str]


def parse(text: str, where: str = "roster") -> list[Student]:
    """The students of a roster's CSV `text`, in its order, each with every field of `FIELDS` ("" where absent).

    Raises:
        ValueError: no `id` column, an empty or unusable id (it names folders), or an id given twice.
    """
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    columns = [c.strip() for c in reader.fieldnames or []]
    if "id" not in columns:
        raise ValueError(f"{where}: columns {columns}; allowed: a header with `id` (and first_name, last_name, email)")
    students: list[Student] = []
    seen: set[str] = set()
    for line, row in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        student = {name: row.get(name, "") for name in FIELDS}
        if not ID.match(student["id"]):
            raise ValueError(
                f"{where}, line {line}: id={student['id']!r}; allowed: letters, digits and _.@+- "
                "(it names the student's folders)"
            )
        if student["id"] in seen:
            raise ValueError(f"{where}, line {line}: id={student['id']!r} is given twice; allowed: one row per student")
        seen.add(student["id"])
        students.append(student)
    return students


def read(file: Path) -> list[Student]:
    """The students of the roster file `file` (`parse`)."""
    return parse(Path(file).read_text(encoding="utf-8"), where=str(file))


def merge(kept: list[Student], given: list[Student]) -> tuple[list[Student], list[str]]:
    """(`kept` with `given` merged in, the ids that are new): everyone in `kept` stays, in order, their
    details updated where `given` has them; new students follow in `given`'s order."""
    given_by_id = {s["id"]: s for s in given}
    known = {s["id"] for s in kept}
    merged = [{**s, **{k: v for k, v in given_by_id.get(s["id"], {}).items() if v}} for s in kept]
    added = [s for s in given if s["id"] not in known]
    return merged + added, [s["id"] for s in added]


def write(root: Path, students: list[Student]) -> Path:
    """Write the course's roster, `root/roster.csv`."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(students)
    file = Path(root) / FILE
    file.write_text(out.getvalue(), encoding="utf-8")
    return file


def add_to_gradebook(db_url: str, students: list[Student]) -> None:
    """Create or update every student in the gradebook at `db_url` (names and emails as the roster has them)."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        for s in students:
            details = {k: s[k] or None for k in ("first_name", "last_name", "email")}
            gb.update_or_create_student(s["id"], **details)
