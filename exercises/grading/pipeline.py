"""The preprocessors `exercises/course.py` puts in nbgrader's autograde pipeline, around `BookExecute`.

1. `RestoreCells` (sanitising) puts back every graded cell a submission deleted, and every locked
   cell as the student was given it (their own handout's numbers, `exercises/handout.py`); first it
   notes whose numbers the submission's statements show (`holder.py`).
2. `RecordAnswers` appends the recorder (`recorder.py`) to every graded test cell with a spec for
   its question: a fresh nonce; for a function, its inputs; for a JAX question, only the shapes,
   dtypes and shardings to export the function for. Nothing secret goes into the kernel. Inputs (a
   function's, and those a JAX program runs on in the grader) are drawn from the class's secret, the
   student, the question and the submission's code (`probe_seed`): the same submission graded again
   gets the same inputs and the same grade, a changed one new inputs, and nobody without the course
   folder can know them.
3. `BookExecute` (`execute.py`) runs the submission in its sandbox.
4. `CompareAnswers` reads each test cell's record, judges it here (`judge.py`; a JAX program in the
   grader's own worker, `programs.py`) and rewrites the cell: its visible source, the student's
   printed output, and an error naming what is wrong (never the expected value) or nothing. A
   submission whose statements are someone else's numbers gets a note saying whose, at its top and
   in the grading log (`holder.note`).
5. `CheckSavedGrades` (after nbgrader's `SaveAutoGrades`) reads the scores back from the gradebook
   and refuses the submission if they are not the ones just judged.

`CheckMetadata` stands in for nbgrader's `CheckCellMetadata` wherever it runs (generating and
grading): the same rules, with the cell schema itself checked once per process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import random
import secrets
from collections.abc import Iterator

import jsonschema
import nbformat
import nbgrader.nbgraderformat.common as nbgrader_format
from nbformat.notebooknode import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.converters.base import NbGraderException
from nbgrader.preprocessors import CheckCellMetadata, NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import determine_grade

from exercises import class_key, handout, variants
from exercises.grading import holder, judge, programs, recorder
from exercises.grading.execute import error_output
from exercises.keys import Key, keys_for

__all__ = [
    "MARKER",
    "CheckMetadata",
    "RestoreCells",
    "RecordAnswers",
    "CompareAnswers",
    "CheckSavedGrades",
    "draw_spec",
    "probe_seed",
    "submission_digest",
]

MARKER = "# ---- recorded for the grader at grading time ----"
RESTORED = (
    "**Put back as handed out before grading: {cells}.** Only the cells that say `YOUR CODE HERE` are yours "
    "to change; an edit anywhere else is undone (an `import` belongs in an answer cell)."
)


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _grade_cells(nb):
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            yield meta["grade_id"], cell


def submission_digest(nb) -> str:
    """A digest of every code cell's source of a (sanitised) submission, in order: what its answers are."""
    digest = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            source = cell.source.encode()
            digest.update(len(source).to_bytes(8, "big") + source)
    return digest.hexdigest()


def probe_seed(secret: str, student: str, assignment: str, gid: str, digest: str) -> int:
    """The seed of one question's inputs: a keyed hash (HMAC-SHA256 under the class's `secret`) of the
    student, the question and the submission's `digest`."""
    message = "\0".join((student, assignment, gid, digest)).encode()
    return int.from_bytes(hmac.new(secret.encode(), message, hashlib.sha256).digest()[:8], "big")


def draw_spec(gid: str, key: Key, rng: random.Random) -> dict:
    """What the kernel is asked to record for one question; the grader keeps the same spec."""
    spec = {"grade_id": gid, "nonce": secrets.token_hex(16), "kind": key.kind, "names": list(key.names)}
    if key.kind == "function":
        spec["probes"] = key.probes(rng)
    elif key.kind == "jax":
        check = key.check
        spec["recorder"], spec["n_devices"], spec["probes"] = check.recorder, programs.N_DEVICES, []
        for sizes in check.cases:
            arrays, statics = check.inputs(sizes, programs.N_DEVICES, 0)  # only their types go to the kernel
            spec["probes"].append(
                {
                    "sizes": list(sizes),
                    "shapes": [list(a.shape) for a in arrays],
                    "dtypes": ["float32"] * len(arrays),  # every JAX question takes float32 arrays
                    "statics": list(statics),
                    "specs": [list(s) for s in check.in_specs],
                }
            )
    return spec


class RestoreCells(OverwriteCells):
    """nbgrader's OverwriteCells, putting back every graded cell a submission deleted, and every locked
    cell as its student was given it.

    nbgrader's own restore looks for the cell just before the missing one among graded cells
    only, and fails when that neighbour is a locked cell; this one uses the nearest earlier cell
    of the source that the submission still has. nbgrader puts back a changed locked cell as the
    gradebook holds it, the class's release; a student on the course's roster was given their own
    handout, so their locked cells are put back as it has them (`handout.notebook`), and a cell they
    left unchanged is not reported as changed. Before anything is put back, whose numbers the
    submission's statements show is noted in its metadata (`holder.whose`), and after, which code cells
    were put back (an import added to a locked cell is undone, and the answers that needed it fail),
    both for `CompareAnswers` to say in the feedback.
    """

    def preprocess(self, nb, resources):
        meta = resources["nbgrader"]
        root, assignment, student = variants.course_root(resources), meta["assignment"], meta["student"]
        nb.metadata["book_grading"] = {"holder": holder.whose(root, assignment, student, nb)}
        self._given: dict[str, str] = {}
        key = class_key.read(root, assignment)
        if key is not None and student in key.students:
            given = nbformat.reads(
                handout.notebook(root, assignment, variants.load(root, assignment, student), key.commit), as_version=4
            )
            self._given = {gid: cell.source for cell in given.cells if (gid := _grade_id(cell))}
        self._restored: list[str] = []
        nb, resources = super().preprocess(nb, resources)
        nb.metadata["book_grading"]["restored"] = self._restored
        return nb, resources

    def preprocess_cell(self, cell, resources, cell_index):
        submitted = cell.source
        cell, resources = self._restore(cell, resources, cell_index)
        if cell.cell_type == "code" and cell.source != submitted:
            self._restored.append(_grade_id(cell))
        return cell, resources

    def _restore(self, cell, resources, cell_index):
        given = self._given.get(_grade_id(cell) or "")
        if given is None or not cell.get("metadata", {}).get("nbgrader", {}).get("locked"):
            return super().preprocess_cell(cell, resources, cell_index)
        gid, changed = _grade_id(cell), cell.source != given
        # nbgrader's own checks (type, lock, points) on the cell as the gradebook holds it, then the student's
        cell.source = self.gradebook.find_source_cell(gid, self.notebook_id, self.assignment_id).source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if changed:
            self.report_change(gid, "source", "as handed out", "changed")
        cell.source = given
        return cell, resources

    def add_missing_grade_cells(self, nb, resources):
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source.source_cells]
        graded = {cell.name: cell for cell in source.grade_cells}
        solutions = {cell.name for cell in source.solution_cells}
        for index, gid in enumerate(order):
            present = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)}
            if gid not in graded or gid in present:
                continue
            before = [present[name] for name in order[:index] if name in present]
            cell = self.missing_cell_transform(
                source.source_cells[index], graded[gid].max_score, is_solution=gid in solutions
            )
            nb.cells.insert(max(before) + 1 if before else 0, cell)
        return nb, resources


class RecordAnswers(NbGraderPreprocessor):
    """Append the recorder to every graded test cell; keep its spec (nonce, probes) in this process."""

    def preprocess(self, nb, resources):
        meta = resources["nbgrader"]
        assignment, student, root = meta["assignment"], meta["student"], variants.course_root(resources)
        keys = keys_for(assignment)
        params = variants.load(root, assignment, student)
        secret, digest = class_key.secret(root), submission_digest(nb)
        specs = {}
        for gid, cell in _grade_cells(nb):
            if gid not in keys:
                continue
            rng = random.Random(probe_seed(secret, student, assignment, gid, digest))
            spec = draw_spec(gid, keys[gid], rng)
            kernel_spec = {k: v for k, v in spec.items() if k != "grade_id"}
            specs[gid] = {**spec, "params": params.get(gid, {}), "input_seed": rng.randrange(2**31)}
            cell.source = f"{cell.source}\n{MARKER}\n{recorder.injection(kernel_spec)}"
        noted = nb.metadata.get("book_grading", {})
        resources["book_grading"] = {"specs": specs, "holder": noted.get("holder"), "restored": noted.get("restored")}
        if any(spec["kind"] == "jax" for spec in specs.values()):
            programs.WORKER.start()  # it loads JAX while the notebook runs
        return nb, resources


class CompareAnswers(NbGraderPreprocessor):
    """Judge every recorded answer here, then leave each test cell as the student may see it."""

    def preprocess(self, nb, resources):
        grading = resources.get("book_grading", {})
        assignment = resources["nbgrader"]["assignment"]
        keys = keys_for(assignment)
        whose = grading.get("holder")
        nb.metadata.pop("book_grading", None)
        for gid, cell in _grade_cells(nb):
            spec = grading.get("specs", {}).get(gid)
            if spec is None:
                continue
            cell.source = cell.source.split(f"\n{MARKER}\n")[0]
            records = [o for o in cell.outputs if recorder.MIME in o.get("data", {})]
            mine = [o.data[recorder.MIME] for o in records if isinstance(o.data[recorder.MIME], dict)]
            mine = [r for r in mine if r.get("nonce") == spec["nonce"]]
            failures = [o for o in cell.outputs if o.output_type == "error"]
            printed = [o for o in cell.outputs if o.output_type == "stream" and o.get("name") == "stdout"]
            share = 0.0
            if failures:
                message = f"the visible check failed ({failures[0].get('ename', 'error')})"
            elif len(mine) != 1:
                message = "no answer was recorded" if not mine else "more than one answer was recorded"
            elif keys[gid].kind == "jax":
                message = programs.WORKER.judge(assignment, gid, spec["probes"], mine[0], spec["input_seed"])
            else:
                share, message = dataclasses.astuple(judge.verdict(keys[gid], spec, mine[0]))
            if message and whose and keys[gid].params:
                message = f"{message} ({holder.note(whose)})"
            cell.outputs = printed + _verdict_outputs(share, message, cell.metadata["nbgrader"]["points"])
        restored = grading.get("restored") or []
        if restored:
            cells = ", ".join(f"`{gid}`" for gid in restored)
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(RESTORED.format(cells=cells)))
        if whose:
            said = holder.note(whose)
            self.log.warning("%s: %s", resources["nbgrader"]["student"], said)
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"**{said[:1].upper()}{said[1:]}.**"))
        return nb, resources


def _verdict_outputs(share: float, message: str | None, points: float) -> list[NotebookNode]:
    """The outputs that give a test cell its score as nbgrader reads them (`nbgrader.utils.determine_grade`):
    nothing for full marks, an error for none, and for part of them a note and the points earned."""
    if message is None:
        return []
    if share <= 0:
        return [error_output("Incorrect", message)]
    earned = round(points * share, 6)
    note = f"Partly right ({earned:g} of {points:g} points): {message}\n"
    result = {"text/plain": repr(earned)}
    return [
        NotebookNode(output_type="stream", name="stdout", text=note),
        NotebookNode(output_type="execute_result", data=result, metadata={}, execution_count=None),
    ]


class CheckSavedGrades(NbGraderPreprocessor):
    """After nbgrader saved the scores: the gradebook must hold exactly the scores judged for each cell."""

    def preprocess(self, nb, resources):
        meta = resources["nbgrader"]
        with Gradebook(meta["db_url"]) as gb:
            saved = gb.find_submission_notebook(meta["notebook"], meta["assignment"], meta["student"])
            scores = {grade.name: grade.auto_score for grade in saved.grades}
        for gid, cell in _grade_cells(nb):
            judged, _ = determine_grade(cell, self.log)
            if scores.get(gid) != judged:
                raise NbGraderException(
                    f"the gradebook holds {scores.get(gid)} for {gid} where the grader judged {judged}: "
                    "something changed it after it was saved; not graded"
                )
        return nb, resources


class _SchemaCheckedOnce:
    """`jsonschema` as nbgrader's metadata validator calls it, with each schema checked once: its
    `jsonschema.validate(instance, schema)` checks the schema against JSON Schema's own before every
    cell, most of the time a notebook's check takes. The instance is judged as `validate` judges it."""

    def __init__(self) -> None:
        self._validators: dict[int, jsonschema.protocols.Validator] = {}

    def validate(self, instance: object, schema: dict) -> None:
        validator = self._validators.get(id(schema))
        if validator is None:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators[id(schema)] = cls(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error

    def __getattr__(self, name: str) -> object:
        return getattr(jsonschema, name)


_ONCE = _SchemaCheckedOnce()


@contextlib.contextmanager
def _schema_checked_once() -> Iterator[None]:
    saved, nbgrader_format.jsonschema = nbgrader_format.jsonschema, _ONCE
    try:
        yield
    finally:
        nbgrader_format.jsonschema = saved


class CheckMetadata(CheckCellMetadata):
    """nbgrader's `CheckCellMetadata` (every cell's nbgrader metadata valid, grade ids unique), with the
    cell schema checked once per process rather than once per cell (`_SchemaCheckedOnce`)."""

    def preprocess(self, nb, resources):
        with _schema_checked_once():
            return super().preprocess(nb, resources)
