"""Autograding that a submission cannot game: the kernel records answers, the grader judges them.

`nbgrader autograde` stays the instructor's one command (or `make grade`, which grades a class with
several workers, `exercises/grade.py`, or on a Dask cluster's, `exercises/distributed.py`);
`exercises/course.py` puts these pieces in its pipeline.
Each job has its module:

- `recorder`: what runs in the student's kernel (values, function outputs, JAX programs exported).
- `sandbox`: the box the kernel runs in (bubblewrap, an unprivileged user, no network, limits).
- `execute`: running one submission in its box, bounded per cell, per notebook and in output.
- `judge`: values, choices and function outputs against the keys.
- `programs`: JAX programs deserialised, checked, compiled and run by the grader's own worker.
- `integrity`: the grader's own files, checked around a submission when there is no sandbox.
- `pipeline`: the nbgrader preprocessors that tie them together.

Nothing is imported here: the grader's JAX worker loads `programs` alone, without nbgrader.

Book: none; this is course infrastructure. Threat model: README, "Grading".
"""
