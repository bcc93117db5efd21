"""nbgrader course configuration: this folder is the course root (source/, release/, ...)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from exercises.course import configure  # noqa: E402

configure(get_config(), HERE)  # noqa: F821 (get_config is injected by nbgrader)
