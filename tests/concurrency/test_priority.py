"""Claim order is priority, then age; a steady high-priority backlog does not starve the low
tier, which gets the share ``PRIORITY_RATIO`` sets (and none under strict priority)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from django_jobqueue import Priority, Status
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.worker import sizing
from django_jobqueue.worker.claiming import priority_floor
from tests.helpers import WorkerThread, run_burst, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def one_job_of_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the run order slot by slot. A claim takes its free slots plus the
    claim buffer in one batch, which runs in the order the claim returns it; with a
    ceiling of one (a one-thread worker's before it rose to 64) each batch is two slots,
    so the order shows each slot's tier. A larger batch keeps each tier's share per
    batch (every fifth slot is the next tier's), not its place within the batch."""
    monkeypatch.setattr(sizing, "CAP", 1)


def jobqueue(**extra: Any) -> dict[str, Any]:
    return {"POLL_INTERVAL": 1, "BACKOFF_BASE": 0, "BACKOFF_CAP": 0, **extra}


def enqueue(priority: int, n: int) -> object:
    return tasks.record.using(priority=priority).enqueue(n=n).id


def run_order() -> list[int]:
    """The ``n`` of each job in the order a concurrency-1 worker started them."""
    starts = list(Execution.objects.order_by("id").values_list("job_id", flat=True))
    n_of = dict(Job.objects.values_list("id", "payload__n"))
    # The journal's start times tell the same story as the Execution rows.
    journal = list(
        JournalEntry.objects.filter(outcome="completed")
        .order_by("started_at", "id")
        .values_list("job_id", flat=True)
    )
    assert journal == starts
    return [n_of[job_id] for job_id in starts]


def test_concurrency_1_worker_claims_by_priority_then_age() -> None:
    plan = [
        Priority.LOW,
        Priority.NORMAL,
        Priority.HIGH,
        Priority.NORMAL,
        Priority.LOW,
        Priority.HIGH,
        Priority.HIGH,
        Priority.LOW,
        Priority.NORMAL,
    ]
    for n, priority in enumerate(plan):
        enqueue(priority, n)
    with override_settings(JOBQUEUE=jobqueue(PRIORITY_RATIO=None)):
        assert run_burst(concurrency=1) == len(plan)
    expected = sorted(range(len(plan)), key=lambda n: (plan[n], n))
    assert expected == [2, 5, 6, 1, 3, 8, 0, 4, 7]
    assert run_order() == expected


def test_low_priority_gets_one_slot_in_five_under_a_high_backlog_with_ratio_4() -> None:
    highs = {enqueue(Priority.HIGH, n) for n in range(100)}
    lows = {enqueue(Priority.LOW, 100 + n) for n in range(20)}
    with override_settings(JOBQUEUE=jobqueue(PRIORITY_RATIO=4)):
        assert run_burst(concurrency=1) == 120
    assert Job.objects.filter(status=Status.COMPLETED).count() == 120

    order = run_order()
    low_slots = [i for i, n in enumerate(order) if n >= 100]
    # Every 5th slot (ratio + 1) prefers the next lower tier, every 25th the tier after it;
    # with no normal jobs both go to the low tier: slots 4, 9, 14, …, so 10 of the first 50.
    preferring = [i for i in range(100) if priority_floor(i, 4) > 0]
    assert preferring[:10] == [4, 9, 14, 19, 24, 29, 34, 39, 44, 49]
    # A turn may claim one job beyond the free slot (the claim buffer, sized by what the
    # worker measures), and a turn's jobs start highest priority first: the low job
    # claimed for slot 34 with the high one for slot 35 starts 35th. So each low job
    # starts at its slot or the one after, never earlier, and never more than one later.
    assert len(low_slots) == 20
    for k, (got, slot) in enumerate(zip(low_slots, preferring, strict=True)):
        assert slot <= got <= slot + 1, f"low job {k} started at {got}, its slot is {slot}"
    assert sum(1 for n in order[:51] if n >= 100) == 10
    # Within each tier, oldest first.
    assert [n for n in order if n < 100] == list(range(100))
    assert [n for n in order if n >= 100] == list(range(100, 120))
    assert len(highs) == 100
    assert len(lows) == 20


def test_strict_priority_runs_no_low_job_while_high_ones_remain() -> None:
    for n in range(10):
        enqueue(Priority.LOW, 100 + n)
    for n in range(30):
        enqueue(Priority.HIGH, n)
    with override_settings(JOBQUEUE=jobqueue(PRIORITY_RATIO=None)):
        assert run_burst(concurrency=1) == 40
    assert run_order() == list(range(30)) + list(range(100, 110))


def test_slot_preferring_a_lower_tier_takes_a_high_job_when_no_lower_job_waits(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    """Only high jobs, one slot: the fifth claim prefers the normal tier, finds it empty and
    must still take the next high job rather than leave the slot idle."""
    ids = [enqueue(Priority.HIGH, n) for n in range(8)]
    with override_settings(JOBQUEUE=jobqueue(PRIORITY_RATIO=4)):
        w = worker_thread(concurrency=1, poll_interval=0.2)
        wait_for(lambda: Job.objects.filter(status=Status.COMPLETED).count() == 8)
        w.stop()
    assert w.worker.processed == 8
    assert run_order() == list(range(8))
    assert set(Job.objects.filter(id__in=ids).values_list("run_count", flat=True)) == {1}
