"""Several ``runworker`` processes settle the same kinds at once: the run tally, which
each settlement adds to in its own write, counts every run exactly once (no update
lost between workers adding to the same kind and outcome), equal to the journal."""

from __future__ import annotations

import signal

import pytest
from django.db import transaction
from django.db.models import Count

from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry, RunTally
from django_jobqueue.store import run_totals
from django_jobqueue.store.monitoring import shard_of
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import row_locking, wait_for
from tests.taskapp import tasks

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]

JOBS = 600
FAILING = 30  # always_fails: retried twice, then dead (max_failures=3)


def test_three_workers_settling_one_kind_at_once_count_every_run_exactly_once(
    runworker: WorkerProcesses,
) -> None:
    procs = runworker.start_ready("--concurrency", "4", "--poll-interval", "30", count=3)
    with transaction.atomic():
        tasks.record.enqueue_many([{"n": i} for i in range(JOBS)])
        tasks.always_fails.enqueue_many([{}] * FAILING)

    wait_for(
        lambda: (
            Job.objects.filter(status__in=[Status.COMPLETED, Status.DEAD]).count() == JOBS + FAILING
        ),
        timeout=120,
        interval=0.25,
    )
    for proc in procs:
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()

    counted = {(t.kind, t.outcome): t.runs for t in run_totals()}
    journalled = {
        (row["kind"], row["outcome"]): row["n"]
        for row in JournalEntry.objects.values("kind", "outcome").annotate(n=Count("id"))
    }
    assert counted == journalled
    assert counted == {
        (tasks.record.kind, "completed"): JOBS,
        (tasks.always_fails.kind, "retried"): 2 * FAILING,
        (tasks.always_fails.kind, "dead"): FAILING,
    }
    # Each worker's loop added to a shard of its own (a hash of its name and thread,
    # the main thread here as in runworker): the rows are the settling workers' shards.
    settled_by = set(
        JournalEntry.objects.filter(kind=tasks.record.kind).values_list("worker", flat=True)
    )
    shards = set(RunTally.objects.filter(kind=tasks.record.kind).values_list("shard", flat=True))
    assert shards == {shard_of(worker, held=False) for worker in settled_by}
