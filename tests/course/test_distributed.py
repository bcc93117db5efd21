"""A class graded across a Dask cluster into a PostgreSQL gradebook (`exercises/distributed.py`), with the
real parts, started here: a PostgreSQL server of Debian's package in a folder of its own and a
`LocalCluster` of 2 worker processes, one of each for the module.

One chapter 1 course on PostgreSQL (`make course DB=...`) holds a blank, a reference and a wrong
submission of a class with its own numbers, a hostile one and one that is no notebook. `nbgrader
autograde` grades the first three serially into PostgreSQL; then the cluster grades them all again,
one of its workers killed while it grades: every submission is graded once, with the serial run's
grades, the hostile one gains nothing, the broken one is named and stops nothing, and nbgrader's own
export and feedback read the gradebook.
"""

import csv
import json
import os
import signal
import threading

import pytest

from exercises import distributed
from exercises.course import gradebook_url, write_config
from tests.course.attacks import ATTEMPT, CH01, SANDBOXED, total, with_attack, wrong_answers
from tests.course.course_kit import Course, reference_answers
from tests.course.services import PostgresServer, local_cluster

SEED = 35
SERIAL = ("blank", "reference", "wrong")

# Through a worker: the gradebook's server (its socket and the same URL the course uses), the
# scheduler's port, and the worker's own copy of the course (the class's values), each printed.
REACHES_WORKER = (
    ATTEMPT
    + """def _raise_scores():
    import psycopg
    with psycopg.connect({dsn!r}) as db:
        db.execute("UPDATE grade SET auto_score = 99")
_attempt("gradebook", _raise_scores)
_attempt("scheduler", lambda: socket.create_connection(({host!r}, {port}), timeout=2))
_attempt("worker_course", lambda: open(glob.glob("/tmp/book-worker-course-*/key/*")[0]).read())
print("REACHED", json.dumps(_reached))
"""
)


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(2) as address:
        yield address


@pytest.fixture(scope="module")
def graded(tmp_path_factory, postgres, cluster):
    """The course graded serially by `nbgrader autograde`, then again on the cluster (a worker killed
    mid-run): (course, URL, serial scores, the cluster's summary, the killed worker's address)."""
    from distributed import Client

    url = postgres.create_database("ch01_class")
    course = Course(tmp_path_factory.mktemp("on_postgres"), [CH01], seed=SEED, cell_timeout_s=10, db=url)
    values = course.values[CH01]
    answers = {"blank": {}, "reference": reference_answers(CH01, values), "wrong": wrong_answers(CH01, values)}
    for student, given in answers.items():
        course.submit(CH01, student, given)
    serial = course.autograde(CH01)
    assert serial.returncode == 0, serial.stderr[-3000:]
    serial_scores = course.scores(CH01)
    host, port = cluster.removeprefix("tcp://").rsplit(":", 1)
    dsn = f"dbname=ch01_class user=postgres host={postgres.folder} port={postgres.port}"
    attack = REACHES_WORKER.format(dsn=dsn, host=host, port=int(port))
    course.submit(CH01, "attacks_through_worker", with_attack(wrong_answers(CH01, values), attack))
    (course.submit(CH01, "broken", {}) / f"{CH01}.ipynb").write_text("not a notebook")
    with Client(cluster) as client:
        pids = client.run(os.getpid)
        killed = []

        def kill_a_busy_worker() -> None:
            """Once a worker is grading: kill its process (its nanny starts another)."""
            while not killed:
                busy = [worker for worker, keys in client.processing().items() if keys]
                if busy:
                    killed.append(busy[0])
                    os.kill(pids[busy[0]], signal.SIGKILL)
                threading.Event().wait(0.5)

        threading.Thread(target=kill_a_busy_worker, daemon=True).start()
        summary = distributed.grade_on_cluster(course.root, CH01, cluster, echo=lambda line: None)
    return course, url, serial_scores, summary, killed


def test_the_cluster_grades_every_submission_once_with_the_grades_of_nbgrader_autograde(graded):
    course, _, serial, summary, killed = graded
    assert killed, "no worker was killed mid-run"
    assert summary["students"] == {**dict.fromkeys([*SERIAL, "attacks_through_worker"], True), "broken": False}
    assert set(summary["logs"]) == {"broken"}, summary["logs"]
    scores = course.scores(CH01)
    assert set(scores) >= {*SERIAL, "attacks_through_worker"}  # graded twice, one result each
    assert "broken" not in scores or total(scores, "broken") == 0
    assert {student: scores[student] for student in SERIAL} == serial
    assert total(serial, "reference") == sum(top for _, top in serial["reference"].values()) > 0
    graded_files = sorted(p.name for p in (course.root / "autograded").glob(f"*/{CH01}/*.ipynb"))
    assert graded_files == [f"{CH01}.ipynb"] * 4


@SANDBOXED
def test_a_submission_gains_nothing_through_a_worker(graded):
    course, *_ = graded
    assert total(course.scores(CH01), "attacks_through_worker") == 0
    outputs = [o for c in course.autograded(CH01, "attacks_through_worker").cells for o in c.get("outputs", [])]
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    reached = json.loads(printed.split("REACHED ", 1)[1].splitlines()[0])
    assert set(reached) == {"gradebook", "scheduler", "worker_course"}, reached
    assert all(result.startswith("denied") for result in reached.values()), reached


def test_nbgrader_export_and_feedback_read_the_postgresql_gradebook(graded):
    """nbgrader's export (the CSV plugin `nbgrader export` runs) and feedback (the API `nbgrader
    generate_feedback` runs), on the instructor's machine, against PostgreSQL; in this process, which has
    nbgrader loaded already."""
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.plugins import CsvExportPlugin
    from traitlets.config.loader import PyFileConfigLoader

    course, url, *_ = graded
    with Gradebook(gradebook_url(course.root, url)) as gradebook:
        CsvExportPlugin(to=str(course.root / "grades.csv")).export(gradebook)
    with open(course.root / "grades.csv") as table:
        rows = {row["student_id"]: float(row["score"]) for row in csv.DictReader(table)}
    assert rows["blank"] == rows["wrong"] == rows["attacks_through_worker"] == 0
    assert rows["reference"] == total(course.scores(CH01), "reference") > 0
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.root)).load_config()
    done = NbGraderAPI(CourseDirectory(config=config), config=config).generate_feedback(CH01, "wrong")
    assert done["success"], done.get("error")
    assert "Incorrect" in (course.root / "feedback" / "wrong" / CH01 / f"{CH01}.html").read_text()


def test_the_cluster_needs_a_postgresql_gradebook(tmp_path):
    write_config(tmp_path)
    (tmp_path / "source" / CH01).mkdir(parents=True)
    with pytest.raises(ValueError, match="db_url=.*sqlite.*allowed: a course made with"):
        distributed.course_payload(tmp_path, CH01)
    with pytest.raises(ValueError, match="db='mysql://x/y': not a PostgreSQL URL"):
        gradebook_url(tmp_path, "mysql://x/y")
