"""A class's late policy: what a submission handed in after its assignment's due date loses.

nbgrader compares each submission's time (`timestamp.txt`, which `make collect` writes from the
LMS's file time) with the assignment's due date in the gradebook (`make course DUE=...`) and asks
the course's late-submission plugin for the penalty (`AssignLatePenalties`). `LatePolicy` is that
plugin, configured by `make course LATE=...`: nbgrader's own `none` and `zero`, or a share of the
score per day or part of a day late (`10%/day`).
"""

from __future__ import annotations

import math
import re

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Unicode, validate

__all__ = ["LatePolicy", "parse_policy"]

PER_DAY = re.compile(r"^(\d+(?:\.\d+)?)%/day$")
DAY_S = 86400


def parse_policy(policy: str) -> float | None:
    """The share of the score lost per day late (0 for `none`, None for `zero`: the whole score at once).

    Raises:
        ValueError: not `none`, `zero` or `P%/day` with P from 0 to 100.
    """
    if policy == "none":
        return 0.0
    if policy == "zero":
        return None
    match = PER_DAY.match(policy)
    if match is None or not 0 <= float(match[1]) <= 100:
        raise ValueError(f"late={policy!r}: unknown; allowed: none, zero, or P%/day with P from 0 to 100 (10%/day)")
    return float(match[1]) / 100


class LatePolicy(LateSubmissionPlugin):
    """nbgrader's late-submission plugin with the course's policy (`penalty`)."""

    penalty = Unicode("none", help="none, zero, or P%/day: P percent of the score per day or part of one").tag(
        config=True
    )

    @validate("penalty")
    def _valid(self, proposal):
        parse_policy(proposal["value"])
        return proposal["value"]

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float | None:
        """The points a submission `total_seconds_late` late loses of its `score`:
        score * min(1, share per day * ceil(days late)), the whole score for `zero`, None for `none`."""
        share = parse_policy(self.penalty)
        if total_seconds_late <= 0 or share == 0:
            return None
        if share is None:
            return score
        return score * min(1.0, share * math.ceil(total_seconds_late / DAY_S))
