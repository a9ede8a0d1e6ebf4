"""A worker whose database connections are killed under it reconnects and finishes the work."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from django.db import transaction

from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry
from tests.concurrency.procs import WorkerProcesses, terminate_other_backends
from tests.helpers import postgres_only, wait_for
from tests.taskapp import tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

JOBS = 240
ROUNDS = 5


def test_runworker_survives_pg_terminate_backend_and_completes_every_job(
    runworker: WorkerProcesses,
) -> None:
    [proc] = runworker.start_ready("--concurrency", "4", "--poll-interval", "30")
    with transaction.atomic():
        ids = {tasks.short_lease_step.enqueue(seconds=0.05).id for _ in range(JOBS)}

    terminated = []
    wait_for(lambda: JournalEntry.objects.exists())
    for _ in range(ROUNDS):
        terminated.append(terminate_other_backends())
        time.sleep(0.4)
        assert proc.alive(), proc.describe()
    # Each round cut the worker off: its loop, listener and job threads all connect.
    assert all(n >= 1 for n in terminated), terminated
    assert Job.objects.filter(status=Status.COMPLETED).count() < JOBS, "too late: all done"

    deadline = time.monotonic() + 60
    while Job.objects.filter(status=Status.COMPLETED).count() < JOBS:
        if time.monotonic() > deadline:
            statuses = Counter(Job.objects.values_list("status", flat=True))
            outcomes = Counter(JournalEntry.objects.values_list("outcome", flat=True))
            pytest.fail(f"not all completed: {statuses}, journal {outcomes}\n{proc.describe()}")
        time.sleep(0.25)
    assert proc.alive(), proc.describe()
    log = proc.log()
    assert "database error" in log, "the loop's connection was never cut"
    assert "database connection restored" in log
    # It listens again, on a new connection (its loop's own, or its listener thread's).
    wait_for(lambda: proc.listenings() >= 2, timeout=10)

    # A job enqueued afterwards still runs: the loop and the listener are back.
    after = tasks.short_lease_step.enqueue(seconds=0)
    wait_for(lambda: Job.objects.get(id=after.id).status == Status.COMPLETED, timeout=10)
    ids.add(after.id)

    jobs = Job.objects.filter(id__in=ids)
    assert set(jobs.values_list("status", flat=True)) == {Status.COMPLETED}
    completed = Counter(
        JournalEntry.objects.filter(outcome="completed").values_list("job_id", flat=True)
    )
    assert set(completed) == ids
    assert set(completed.values()) == {1}
    # A run cut off mid-way may have failed and been retried; nothing else happened.
    outcomes = Counter(JournalEntry.objects.values_list("outcome", flat=True))
    assert set(outcomes) <= {"completed", "retried", "stale-recovered"}, outcomes
    print(f"terminated per round: {terminated}; journal outcomes: {dict(outcomes)}")
