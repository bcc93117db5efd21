"""nbgrader course configuration: this folder is the course root (source/, release/, ...)."""

from pathlib import Path

c = get_config()  # noqa: F821 (injected by nbgrader)

c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.CourseDirectory.course_id = "how-to-scale-your-model"
c.CourseDirectory.db_url = f"sqlite:///{Path(__file__).resolve().parent / 'gradebook.db'}"
# One question must finish in 10 s on two cores; 60 s leaves room for importing JAX, and caps an
# endless loop in a submission, which is interrupted while the other answers are still graded.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.Execute.kernel_name = "python3"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.enforce_metadata = True
