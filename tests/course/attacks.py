"""Attacks on the grader's limits, as the source a submission runs: shared by `test_hostile.py`
(through nbgrader) and `test_sandbox.py` (in the box directly). Each prints what it got."""

# 3 GB, every page touched: more than a submission's memory.
MEMORY_BOMB = """
import numpy
_block = numpy.ones(3 * 10**9 // 8)
print("ALLOCATED", _block.sum())
"""

# As many processes as it can make, up to 2,000 (each sleeps; the box ends them).
PROCESS_BOMB = """
import os, time
_made = 0
try:
    for _ in range(2000):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        _made += 1
except OSError:
    pass
print("FORKED", _made)
"""
