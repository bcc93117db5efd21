"""Grading a class across machines: one Dask task per submission, scores into a PostgreSQL gradebook.

    python -m exercises.grade DIR ASSIGNMENT --scheduler tcp://HOST:8786

The instructor's machine (`grade_on_cluster`) reads each submission of `DIR/submitted/` and sends it,
files and all, as one task to a Dask scheduler (`dask scheduler`); any worker (`dask worker
tcp://HOST:8786 --nthreads 1`, on a machine with this repository's `.venv` and bubblewrap) takes it.
The worker (`grade_submission`) builds a course folder of its own in a temporary folder (the
assignment's source files, its key and the class's secret, an `nbgrader_config.py` with the course's
limits, sandbox and gradebook), files the submission there and grades it through nbgrader's own API
(`NbGraderAPI.autograde`), exactly as `nbgrader autograde` would: in its sandbox, the scores written
to the course's PostgreSQL gradebook. The graded folder comes back in the task's result and is
written to `DIR/autograded/STUDENT/ASSIGNMENT/`. No folder is shared.

A worker that dies has its submissions graded again by another (Dask's scheduler reschedules them);
grading a student again replaces the earlier result (nbgrader's `force`); a submission that fails is
named and the rest of the class goes on. A worker whose course asks for the sandbox refuses to grade
where bubblewrap cannot run (`BookExecute`), as `make grade` does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from exercises import class_key

__all__ = ["course_payload", "submission_files", "grade_submission", "grade_on_cluster"]

# One submission at a time per worker process, whatever its `--nthreads`: the grader ends every process
# its children left when a submission is done (`sandbox.reap_children`), another thread's kernel included.
_ONE_AT_A_TIME = threading.Lock()


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, relative path -> bytes.

    Raises:
        ValueError: the folder holds a symbolic link (nbgrader would copy what it points to).
    """
    found = {}
    for parent, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(parent) / name
            if path.is_symlink():
                raise ValueError(
                    f"path={str(path)!r}: a symbolic link, which is not graded; allowed: the files themselves"
                )
            if path.is_file():
                found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def _write(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = folder / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            raise ValueError(f"name={name!r}: leaves its folder; allowed: a relative path inside it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def course_payload(root: Path, assignment: str) -> dict:
    """What every task of `assignment` carries of the course at `root`: its settings (gradebook,
    limits, sandbox), the assignment's source files, its key and the class's secret
    (`exercises/class_key.py`; a course made before keys were kept per assignment: its `variant.json`).

    Raises:
        ValueError: the course's gradebook is not PostgreSQL (workers on other machines cannot reach a
            SQLite file), or the assignment has no source.
    """
    from exercises.grade import _course_config

    root = Path(root).resolve()
    config = _course_config(root)
    db_url = config.CourseDirectory.db_url
    if not db_url.startswith("postgresql"):
        raise ValueError(
            f"db_url={db_url!r}: workers on other machines cannot write a SQLite gradebook; allowed: a course "
            "made with `make course DIR=... DB=postgresql://USER@HOST/NAME`"
        )
    source = root / "source" / assignment
    if not source.is_dir():
        raise ValueError(f"assignment={assignment!r}: not in {root / 'source'}; allowed: an assignment of the course")
    execute = config.BookExecute
    class_key.secret(root)  # made now, once, rather than by each worker in its own copy
    secret = root / class_key.KEY_DIR / class_key.SECRET_FILE
    kept = [class_key.path(root, assignment), secret, root / class_key.LEGACY_FILE]
    return {
        "assignment": assignment,
        "settings": {
            "db": db_url,
            "cell_timeout_s": int(execute.timeout),
            "notebook_timeout_s": int(execute.notebook_timeout),
            "sandbox": str(execute.sandbox),
        },
        "source": _files(source),
        "key": {str(file.relative_to(root)): file.read_bytes() for file in kept if file.exists()},
    }


def submission_files(root: Path, assignment: str, student: str) -> dict[str, bytes]:
    """The files of one student's submission, relative path -> bytes (`_files`)."""
    return _files(Path(root) / "submitted" / student / assignment)


def grade_submission(course: dict, student: str, files: dict[str, bytes]) -> dict:
    """On a worker: grade one submission as `nbgrader autograde` would, in a course folder of its own.

    Returns:
        {"student", "success", "seconds", "log", "notes": whose numbers the notebook shows where not the
        student's own (`holder.note`), "files": the autograded folder, relative path -> bytes}.
        Every failure is reported here, never raised: one submission never stops the class.
    """
    import traceback

    from exercises.course import write_config
    from exercises.grade import notes

    start = time.perf_counter()
    assignment = course["assignment"]
    _sweep_dead_courses()
    root = Path(tempfile.mkdtemp(prefix=f"book-worker-course-{os.getpid()}-"))
    try:
        _write(root / "source" / assignment, course["source"])
        _write(root, course["key"])
        write_config(root, **course["settings"])
        _write(root / "submitted" / student / assignment, files)
        with _ONE_AT_A_TIME:
            result = _api(root).autograde(assignment, student, force=True, create=True)
        graded = root / "autograded" / student / assignment
        ok = bool(result["success"])
        return {
            "student": student,
            "success": ok,
            "seconds": time.perf_counter() - start,
            "log": "" if ok else (result.get("error") or result.get("log") or ""),
            "notes": [line.removeprefix(f"{student}: ") for line in notes(result.get("log") or "")],
            "files": _files(graded) if ok and graded.is_dir() else {},
        }
    except Exception:  # a worker's own failure is this submission's, reported by name
        return _failure(student, traceback.format_exc(), time.perf_counter() - start)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _failure(student: str, log: str, seconds: float = 0.0) -> dict:
    """A submission that was not graded, as `grade_submission` reports it."""
    return {"student": student, "success": False, "seconds": seconds, "log": log, "notes": [], "files": {}}


def _sweep_dead_courses() -> None:
    """Remove the course folders of worker processes that died while grading (a killed worker leaves its own)."""
    for folder in Path(tempfile.gettempdir()).glob("book-worker-course-*-*"):
        pid = folder.name.split("-")[3]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def _api(root: Path):
    """nbgrader's API for the course folder at `root`, configured by its `nbgrader_config.py`."""
    import warnings

    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from sqlalchemy.exc import SAWarning

    from exercises.grade import _course_config

    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own, harmless (STACK-NOTES)
    config = _course_config(root)
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def grade_on_cluster(root: Path, assignment: str, scheduler: str, *, echo=print) -> dict:
    """Grade every submission of `assignment` in the course at `root` on the Dask cluster at `scheduler`.

    Each graded folder is written to `root/autograded/`; each result is echoed as it comes, with the
    counts done and failed and the rate so far.

    Returns:
        {"students": {student: success}, "seconds": wall time, "per_minute": submissions graded per minute,
        "logs": {student: why it failed}, "notes": {student: whose numbers their notebook shows}}.

    Raises:
        ValueError: no PostgreSQL gradebook, an unknown assignment, no submission, or no scheduler at `scheduler`.
    """
    from distributed import Client, as_completed

    from exercises.grade import submitted_students

    root = Path(root).resolve()
    course = course_payload(root, assignment)
    students = submitted_students(root, assignment)
    if not students:
        raise ValueError(f"assignment={assignment!r}: nobody submitted it under {root / 'submitted'}")
    start = time.perf_counter()
    done: dict[str, bool] = {}
    logs: dict[str, str] = {}
    said: dict[str, str] = {}
    try:
        client = Client(scheduler, timeout=30)
    except OSError as err:
        raise ValueError(
            f"scheduler={scheduler!r}: no Dask scheduler answered ({err}); allowed: the address `dask scheduler` "
            "prints, tcp://HOST:8786"
        ) from err
    with client:
        futures = {}
        for student in students:
            try:
                files = submission_files(root, assignment, student)
            except ValueError as err:
                done[student], logs[student] = False, str(err)
                echo(f"{student}: FAILED, not sent: {err}")
                continue
            key = f"grade-{assignment}-{student}-{time.time_ns()}"
            futures[client.submit(grade_submission, course, student, files, key=key, pure=False)] = student
        for future in as_completed(futures):
            student = futures[future]
            try:
                result = future.result()
            except Exception as err:  # the scheduler gave up on it (every worker that took it died)
                result = _failure(student, repr(err))
            if result["success"]:
                graded = root / "autograded" / student / assignment
                shutil.rmtree(graded, ignore_errors=True)
                _write(graded, result["files"])
            done[student] = result["success"]
            if not result["success"]:
                logs[student] = result["log"]
            failed = sum(not ok for ok in done.values())
            rate = 60 * len(done) / (time.perf_counter() - start)
            status = f"graded in {result['seconds']:.1f} s" if result["success"] else "FAILED"
            echo(f"[{len(done)}/{len(students)} done, {failed} failed, {rate:.1f}/min] {student}: {status}")
            for line in result["notes"]:
                said[student] = line
                echo(f"  {line}")
            if not result["success"]:
                echo(result["log"].strip()[-2000:])
    seconds = time.perf_counter() - start
    per_minute = 60 * len(students) / seconds
    return {"students": done, "seconds": seconds, "per_minute": per_minute, "logs": logs, "notes": said}
