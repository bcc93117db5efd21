"""`make grade`: grade every submitted student of an assignment with several workers.

    python -m exercises.grade DIR ASSIGNMENT [--jobs N]
    python -m exercises.grade DIR ASSIGNMENT --scheduler tcp://HOST:8786   (`exercises/distributed.py`)

Each worker is one process that loads nbgrader and the course's `nbgrader_config.py` once and then
grades one student after another through nbgrader's own API (`NbGraderAPI.autograde`), exactly as
`nbgrader autograde` would: each submission in a sandbox of its own, its scores saved to the
gradebook (SQLite, whose lock the writers wait for; `exercises/course.py`). With one job the grades
are those of `nbgrader autograde ASSIGNMENT`. Several jobs need the sandbox: without it the grader
checks its own files around each submission, and another worker's writes would look like an attack.
With `--scheduler`, the submissions go to the workers of a Dask cluster instead, each grading into the
course's PostgreSQL gradebook (`make course DB=...`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

__all__ = ["submitted_students", "grade", "main"]

_api = None  # each worker's NbGraderAPI


def submitted_students(root: Path, assignment: str) -> list[str]:
    """Every student with a submission of `assignment` under `root/submitted/`, sorted."""
    return sorted(p.parent.name for p in (Path(root) / "submitted").glob(f"*/{assignment}") if p.is_dir())


def _course_config(root: Path):
    from traitlets.config.loader import PyFileConfigLoader

    config_file = Path(root) / "nbgrader_config.py"
    if not config_file.exists():
        raise ValueError(f"DIR={str(root)!r}: no nbgrader_config.py; allowed: a course folder made by `make course`")
    return PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()


def _start_worker(root: str) -> None:
    global _api
    import warnings

    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own, harmless (STACK-NOTES)

    config = _course_config(Path(root))
    _api = NbGraderAPI(CourseDirectory(config=config), config=config)


def notes(log: str) -> list[str]:
    """What a grading log says about whose numbers a notebook shows (`holder.note`), one line each."""
    from exercises.grading.holder import NOTE

    return [line.split("] ", 1)[-1].strip() for line in log.splitlines() if NOTE in line]


def _grade_one(job: tuple[str, str]) -> tuple[str, bool, float, str, list[str]]:
    assignment, student = job
    start = time.perf_counter()
    result = _api.autograde(assignment, student, force=True, create=True)
    log = result.get("error") or ""
    return student, bool(result["success"]), time.perf_counter() - start, log, notes(result.get("log") or "")


def grade(root: Path, assignment: str, jobs: int = 1, *, echo=print) -> dict:
    """Autograde every submission of `assignment` in the course at `root` with `jobs` workers.

    Returns:
        {"students": {student: success}, "seconds": wall time, "per_minute": submissions graded per minute,
        "notes": {student: whose numbers their notebook shows, where not their own (`holder.note`)}}.

    Raises:
        ValueError: a bad `jobs`, an unknown assignment, no submission, or several jobs without a sandbox.
    """
    root = Path(root).resolve()
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs={jobs!r}: allowed: an int of 1 or more")
    config = _course_config(root)
    if not (root / "source" / assignment).is_dir():
        known = sorted(p.name for p in (root / "source").iterdir()) if (root / "source").is_dir() else []
        raise ValueError(f"assignment={assignment!r}: not in {root / 'source'}; allowed: {', '.join(known)}")
    sandbox = config.BookExecute.get("sandbox", "bwrap") if "BookExecute" in config else "bwrap"
    if jobs > 1 and sandbox == "none":
        raise ValueError(f"jobs={jobs}: sandbox='none' grades one submission at a time; allowed: jobs=1")
    students = submitted_students(root, assignment)
    if not students:
        raise ValueError(f"assignment={assignment!r}: nobody submitted it under {root / 'submitted'}")
    stale = _built_elsewhere(root, assignment)
    if stale:
        echo(stale)
    start = time.perf_counter()
    done: dict[str, bool] = {}
    said: dict[str, str] = {}
    context = multiprocessing.get_context("spawn")
    with context.Pool(min(jobs, len(students)), initializer=_start_worker, initargs=(str(root),)) as pool:
        for student, ok, seconds, log, found in pool.imap_unordered(_grade_one, [(assignment, s) for s in students]):
            done[student] = ok
            status = "graded" if ok else "FAILED"
            echo(f"[{len(done)}/{len(students)}] {student}: {status} in {seconds:.1f} s")
            for line in found:
                said[student] = line.removeprefix(f"{student}: ")
                echo(f"  {said[student]}")
            if not ok:
                echo(log.strip()[-2000:])
    seconds = time.perf_counter() - start
    return {"students": done, "seconds": seconds, "per_minute": 60 * len(students) / seconds, "notes": said}


def _built_elsewhere(root: Path, assignment: str) -> str | None:
    """A warning when this checkout is not the commit `assignment`'s key says the course was built from."""
    from exercises import class_key

    key = class_key.read(root, assignment)
    commit, _ = class_key.built_from()
    if key is None or key.commit is None or commit is None or key.commit == commit:
        return None
    return (
        f"warning: {assignment} was built from commit {key.commit[:12]} and is graded with {commit[:12]}: a key or "
        f"statement changed since may change a grade (`git checkout {key.commit[:12]}` grades it as built)"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="the course folder (`make course DIR=...`)")
    parser.add_argument("assignment")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=int, default=1, help="workers, each grading one submission at a time")
    where.add_argument("--scheduler", help="a Dask scheduler's address (tcp://HOST:8786): grade on its workers")
    args = parser.parse_args(argv)
    try:
        if args.scheduler is not None:
            from exercises.distributed import grade_on_cluster

            summary = grade_on_cluster(args.dir, args.assignment, args.scheduler)
        else:
            summary = grade(args.dir, args.assignment, args.jobs)
    except ValueError as err:
        parser.error(str(err))
    failed = sorted(s for s, ok in summary["students"].items() if not ok)
    workers = f"the workers of {args.scheduler}" if args.scheduler else f"{args.jobs} worker(s)"
    print(
        f"{len(summary['students'])} submissions in {summary['seconds']:.0f} s with {workers}: "
        f"{summary['per_minute']:.1f} per minute" + (f"; not graded: {', '.join(failed)}" if failed else "")
    )
    for student, said in sorted(summary.get("notes", {}).items()):
        print(f"{student}: {said}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
