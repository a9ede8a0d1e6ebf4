"""A per-kind cap of 1 keeps that kind to one run at a time in a worker, while other kinds
use the free slots."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise

import pytest
from django.test import override_settings

from django_jobqueue import Status
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only, run_burst
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

CAPPED = "tests.capped"
OTHER = "tests.taskapp.tasks.timed_sleep"


def intervals(kind: str) -> list[tuple[datetime, datetime]]:
    rows = Execution.objects.filter(kind=kind).order_by("started_at")
    spans = [(r.started_at, r.finished_at) for r in rows]
    assert all(end is not None for _, end in spans), "a run did not finish"
    return [(start, end) for start, end in spans if end is not None]


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The largest number of these intervals that were open at one instant."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def enqueue_mix() -> None:
    for _ in range(5):
        tasks.capped.enqueue(seconds=0.3)
    for _ in range(12):
        tasks.timed_sleep.enqueue(seconds=0.3)


def assert_capped_ran_one_at_a_time_beside_others() -> None:
    assert set(Job.objects.values_list("status", flat=True)) == {Status.COMPLETED}
    capped = intervals(CAPPED)
    others = intervals(OTHER)
    assert len(capped) == 5
    assert len(others) == 12
    # Never two capped runs in flight: each starts after the previous one finished.
    for (_, end), (start, _) in pairwise(capped):
        assert start >= end, f"capped runs overlapped: {start} < {end}"
    # ...though the worker had slots to spare: other kinds ran beside them, several at once.
    assert most_at_once(capped + others) >= 3
    assert any(s < ce and cs < e for cs, ce in capped for s, e in others)


@postgres_only
def test_runworker_cap_flag_keeps_one_capped_job_in_flight_with_concurrency_4(
    runworker: WorkerProcesses,
) -> None:
    enqueue_mix()
    proc = runworker.start("--concurrency", "4", "--cap", f"{CAPPED}=1", "--burst")
    assert proc.wait(60) == 0, proc.describe()
    assert_capped_ran_one_at_a_time_beside_others()
    assert set(Execution.objects.values_list("pid", flat=True)) == {proc.pid}


@pytest.mark.sqlite
def test_kind_concurrency_setting_keeps_one_capped_job_in_flight_in_a_thread_worker() -> None:
    enqueue_mix()
    with override_settings(
        JOBQUEUE={
            "POLL_INTERVAL": 1,
            "BACKOFF_BASE": 0,
            "BACKOFF_CAP": 0,
            "KIND_CONCURRENCY": {CAPPED: 1},
        }
    ):
        assert run_burst(concurrency=4) == 17
    assert_capped_ran_one_at_a_time_beside_others()


@pytest.mark.sqlite
def test_without_a_cap_capped_kind_jobs_do_overlap() -> None:
    """The control: the same jobs on the same worker overlap when nothing caps them."""
    for _ in range(4):
        tasks.capped.enqueue(seconds=0.3)
    assert run_burst(concurrency=4) == 4
    assert most_at_once(intervals(CAPPED)) >= 2
