"""Pausing a queue while two ``runworker`` processes drain it: claims stop within a turn
of the pause's commit, running jobs finish, other queues go on, and after the resume
(a NOTIFY wakes the idle workers) every job completes exactly once."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from django_jobqueue import Status, pause_queue, resume_queue
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

JOBS = 400
# A claim statement that began before the pause committed may still hand out jobs; their
# runs start right after it. Nothing may start later than this after the commit.
ONE_TURN = timedelta(seconds=1)


def test_pause_stops_two_draining_workers_within_a_turn_and_resume_completes_all(
    runworker: WorkerProcesses,
) -> None:
    # --poll-interval 30: only a NOTIFY can wake an idle worker in time for the asserts.
    procs = runworker.start_ready("--concurrency", "4", "--poll-interval", "30", count=2)
    with transaction.atomic():
        ids = {tasks.timed_sleep.using(queue="bulk").enqueue(0.05).id for _ in range(JOBS)}
    wait_for(lambda: Execution.objects.count() >= 40, timeout=30)

    assert pause_queue("bulk") is True  # committed when it returns (autocommit)
    paused_at = timezone.now()
    time.sleep(ONE_TURN.total_seconds() + 0.5)
    started = set(Execution.objects.values_list("job_id", flat=True))
    assert started < ids  # the drain was cut short
    late = Execution.objects.filter(started_at__gt=paused_at + ONE_TURN)
    assert not late.exists(), list(late.values_list("started_at", flat=True))

    # Running jobs finish; nothing more of the queue is claimed while it stays paused,
    # enqueueing into it goes on, and the other queues are served as usual.
    extra = tasks.timed_sleep.using(queue="bulk").enqueue(0).id
    other = tasks.timed_sleep.using(queue="other").enqueue(0).id
    wait_for(lambda: Job.objects.get(id=other).status == Status.COMPLETED, timeout=10)
    wait_for(lambda: not Job.objects.filter(status=Status.CLAIMED).exists(), timeout=10)
    time.sleep(1.0)
    assert set(Execution.objects.exclude(job_id=other).values_list("job_id", flat=True)) == started
    assert Job.objects.filter(id__in=ids, status=Status.PENDING).count() == JOBS - len(started)
    assert Job.objects.get(id=extra).status == Status.PENDING

    assert resume_queue("bulk") is True
    wait_for(
        lambda: Job.objects.filter(status=Status.COMPLETED).count() == JOBS + 2,
        timeout=60,
        interval=0.25,
    )
    runs = Execution.objects.values("job_id").annotate(n=Count("id"))
    assert {r["n"] for r in runs} == {1}
    assert len(runs) == JOBS + 2
    for proc in procs:
        assert proc.alive(), proc.describe()
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()
