"""Recording a durable step costs the same at the thousandth step as at the first: each
is one appended row (``StepRecord``) under the run's guard, never a rewrite of the steps
before it. Kept as one list in the job's row, each step wrote every step before it:
1,000 steps took 6 s and 3,000 took 88 s (issue 30).

Timed only to tell the two behaviours apart by a wide margin, and within one run, so
that the machine's load is the same on both sides of the comparison: in a job of 3,000
steps, a step among the last thousand takes about as long as one among the first
thousand when each step costs the same (a ratio near 1), and some five times as long
when each step writes all the ones before it (the median of 2,000..3,000 over that of
0..1,000). The test compares the medians of each thousand's steps, not their sums, and
asks for under 2.5 in the better of two runs: a burst of load on a busy CI lane lasts a
second or two, a whole thousand steps' sum, and took one run's ratio of sums to 6.6 and
the other's to 2.59 there, where a median moves only when most of its thousand slowed.
Inside the test's transaction, the harder case on PostgreSQL: there a rewritten row
leaves a version per step in one transaction, which every later step walks.
"""

from __future__ import annotations

import itertools
import statistics
from datetime import datetime

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.helpers import recorded
from tests.taskapp import steps_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

STEPS = 3000


def _growth() -> float:
    """How much longer a step of the last thousand of one job took than one of its first
    thousand: the ratio of the medians of their steps' times."""
    handle = steps_tasks.many.enqueue(STEPS)
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    at = [datetime.fromisoformat(r["at"]) for r in recorded(handle.id)]
    assert len(at) == STEPS
    steps = [(b - a).total_seconds() for a, b in itertools.pairwise(at)]
    return statistics.median(steps[-1000:]) / statistics.median(steps[:1000])


def test_the_last_thousand_of_3000_steps_take_about_as_long_as_the_first() -> None:
    ratios = [_growth() for _ in range(2)]
    assert min(ratios) < 2.5, f"a step of the last 1,000 / one of the first 1,000: {ratios}"
