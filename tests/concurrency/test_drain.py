"""Several ``runworker`` processes share one backlog: every job runs exactly once."""

from __future__ import annotations

import signal
import time
from collections import Counter

import pytest
from django.db import transaction
from django.db.models import Count

from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry, WorkerHeartbeat
from django_jobqueue.store import wakeups
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import row_locking, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]

JOBS = 2000


def test_four_runworker_processes_drain_2000_jobs_each_exactly_once(
    runworker: WorkerProcesses,
) -> None:
    # Where the database wakes workers, the enqueue's NOTIFY wakes all four (a 30 s poll
    # would show if it did not). Where workers poll, a worker whose first claim came before
    # the enqueue committed sleeps its poll interval: at 30 s one worker could drain all
    # 2,000 alone.
    poll = "30" if wakeups.supported("default") else "0.5"
    procs = runworker.start_ready("--concurrency", "4", "--poll-interval", poll, count=4)
    with transaction.atomic():
        ids = {tasks.record.enqueue(n=i).id for i in range(JOBS)}
    assert len(ids) == JOBS
    started = time.monotonic()

    wait_for(
        lambda: Job.objects.filter(status=Status.COMPLETED).count() == JOBS,
        timeout=90,
        interval=0.25,
    )
    drained = time.monotonic() - started
    for proc in procs:
        assert proc.alive(), proc.describe()
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()

    # Every job completed once, on its first and only claim.
    jobs = Job.objects.filter(id__in=ids)
    assert jobs.count() == JOBS
    assert set(jobs.values_list("status", flat=True)) == {Status.COMPLETED}
    assert set(jobs.values_list("run_count", flat=True)) == {1}
    assert set(jobs.values_list("failure_count", flat=True)) == {0}
    assert set(jobs.values_list("claimed_by", flat=True)) == {""}
    assert sorted(int(r) for r in jobs.values_list("result", flat=True)) == list(range(JOBS))

    # Exactly one journal entry per job, and it is the completion.
    per_job = Counter(
        dict(JournalEntry.objects.values_list("job_id").annotate(n=Count("id")).order_by())
    )
    assert set(per_job) == ids
    assert set(per_job.values()) == {1}
    assert set(JournalEntry.objects.values_list("outcome", flat=True)) == {"completed"}

    # The task itself saw each job start exactly once.
    executions = Execution.objects.all()
    assert executions.count() == JOBS
    assert set(executions.values_list("job_id", flat=True)) == ids
    assert set(executions.values_list("run_no", flat=True)) == {1}

    # The work was shared, and each process's pid ran what it settled. Not necessarily by
    # all four: a worker claims a buffer beyond its free slots (up to 64 no-ops a turn),
    # so three may drain 2,000 before the last one's first claim finds anything.
    by_worker = Counter(JournalEntry.objects.values_list("worker", flat=True))
    assert set(by_worker) <= {p.worker_id for p in procs}, by_worker
    assert len(by_worker) >= 2, by_worker
    by_pid = Counter(executions.values_list("pid", flat=True))
    assert by_pid == Counter({int(w.rsplit(":", 1)[1]): n for w, n in by_worker.items()})
    heartbeats = WorkerHeartbeat.objects.filter(pid__in=[p.pid for p in procs])
    assert heartbeats.count() == 4
    assert all(h.stopped_at is not None for h in heartbeats)
    assert sum(h.jobs_done for h in heartbeats) == JOBS
    print(f"drained {JOBS} jobs in {drained:.1f}s; per worker: {sorted(by_worker.values())}")
