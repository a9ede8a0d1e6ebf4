"""A global ``max_in_flight`` holds across workers: four ``runworker`` processes with eight
slots each never have more than two jobs of the limited kind claimed at once, while the
other kinds use the slots left; and the same with worker threads, on SQLite too."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from django.db import transaction
from django.test import override_settings

from django_jobqueue import Status, set_limit
from django_jobqueue.models import Job
from django_jobqueue.task import limiting
from tests.concurrency.procs import WorkerProcesses
from tests.concurrency.test_caps import intervals, most_at_once
from tests.helpers import WorkerThread, postgres_only, wait_for
from tests.taskapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

LIMITED = tasks.limited.kind
OTHER = tasks.timed_sleep.kind
WAVES = 8  # each wave: 2 limited jobs and 2 others, a NOTIFY that wakes every worker


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiting.forget()
    yield
    limiting.forget()


def claimed_now() -> int:
    return Job.objects.filter(kind=LIMITED, status=Status.CLAIMED).count()


def all_done() -> bool:
    return not Job.objects.exclude(status=Status.COMPLETED).exists()


@postgres_only
def test_max_in_flight_2_holds_across_four_runworker_processes_with_concurrency_8(
    runworker: WorkerProcesses,
) -> None:
    set_limit(LIMITED, max_in_flight=2)  # in the database: each worker reads it at start
    procs = runworker.start_ready("--concurrency", "8", count=4)
    # Enqueued in waves while the workers run, so that all four race for each wave.
    seen: list[int] = []
    next_wave, waves = time.monotonic(), 0
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        if waves < WAVES and time.monotonic() >= next_wave:
            for _ in range(2):
                tasks.limited.enqueue(0.3)
                tasks.timed_sleep.enqueue(0.3)
            waves += 1
            next_wave += 0.25
        seen.append(claimed_now())
        if waves == WAVES and all_done():
            break
    for proc in procs:
        assert proc.alive(), proc.describe()
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()

    assert all_done(), runworker.describe()
    assert Job.objects.filter(kind=LIMITED).count() == 2 * WAVES
    # The sampler, polling the table all along, never saw more than two claimed...
    assert max(seen) == 2, f"claimed of {LIMITED} seen over {len(seen)} samples: max {max(seen)}"
    # ...nor did the runs themselves (each records its start and finish) overlap more,
    assert most_at_once(intervals(LIMITED)) <= 2
    # while the other kind ran more than two at a time in the slots left free.
    assert most_at_once(intervals(OTHER)) > 2


@pytest.mark.sqlite
def test_max_in_flight_from_the_settings_holds_across_worker_threads() -> None:
    for _ in range(8):
        tasks.limited.enqueue(0.2)
        tasks.timed_sleep.enqueue(0.2)
    jobqueue = {
        "POLL_INTERVAL": 0.2,
        "BACKOFF_BASE": 0,
        "BACKOFF_CAP": 0,
        "LIMITS": {LIMITED: {"max_in_flight": 2}},
    }
    with override_settings(JOBQUEUE=jobqueue):
        workers = [WorkerThread(concurrency=4, poll_interval=0.2).start() for _ in range(3)]
        seen: list[int] = []
        try:
            wait_for(lambda: seen.append(claimed_now()) or all_done(), timeout=60, interval=0.01)
        finally:
            for w in workers:
                w.stop()
    assert max(seen) <= 2
    assert most_at_once(intervals(LIMITED)) <= 2
    assert len(intervals(LIMITED)) == 8


@postgres_only
@pytest.mark.parametrize("kinds", [None, [LIMITED]], ids=["sync-and-async-pools", "one-pool"])
def test_a_limit_set_while_a_worker_idles_holds_for_its_very_next_claim(
    kinds: list[str] | None,
) -> None:
    """An idle worker makes its next claim ready before it waits (``Turns._make_ready``)
    and sends it first when woken. A max_in_flight set in the transaction that enqueues
    the jobs (its NOTIFY, delivered first, marks the limits stale) drops that claim: the
    one sent instead counts the new limit. The periodic re-read is pushed out to an
    hour, so only that NOTIFY can tell it."""
    from django_jobqueue.worker.services.base import Timings

    worker = WorkerThread(
        concurrency=4, kinds=kinds, poll_interval=30, timings=Timings(recover=3600, limits=3600)
    ).start()
    try:
        warm_up = tasks.limited.enqueue(0)
        wait_for(lambda: Job.objects.get(id=warm_up.id).status == Status.COMPLETED, timeout=30)
        time.sleep(0.5)  # idle, its claim ready: made with no limit on the kind
        with transaction.atomic():  # one commit: one wake-up for the limit and the jobs
            set_limit(LIMITED, max_in_flight=1)
            for _ in range(4):
                tasks.limited.enqueue(0.3)
        seen: list[int] = []
        wait_for(lambda: seen.append(claimed_now()) or all_done(), timeout=60, interval=0.01)
    finally:
        worker.stop()
    assert max(seen) <= 1
    assert most_at_once(intervals(LIMITED)) <= 1
