"""Live progress seen from another process: a ``runworker`` child runs a task that
reports its progress; this process reads it from the database while the job runs,
through ``JobHandle.progress`` and ``jobqueue show``, and sees none once it completed.

The task's lease is 60 s: its first renewal is 20 s after the claim. The worker writes
progress on its own about once a second, so it is seen within a few seconds, and the
lease's expiry is still the claim's when it is: written by its own write, not with a
renewal. The run lasts 4 s, so progress written only at a renewal would never be seen.
"""

from __future__ import annotations

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from django_jobqueue import Progress, Status, job
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

LEASE = timedelta(seconds=60)  # the tasks' lease: renewed once a third is used
RENEWAL = LEASE.total_seconds() / 3
PROMPT = 8.0  # seconds: generous for a write due within about one, far below RENEWAL
STEPS, STEP_SECONDS = 8, 0.5


def test_the_task_s_lease_is_the_one_this_test_reasons_with() -> None:
    assert tasks.reports_progress.lease == LEASE
    assert tasks.reports_progress_async.lease == LEASE


def test_running_jobs_progress_is_seen_from_another_process_within_a_renewal(
    runworker: WorkerProcesses,
) -> None:
    """A sync and an ``async def`` task side by side, in one child."""
    runworker.start_ready("--concurrency", "2")
    handles = [
        t.enqueue(steps=STEPS, step_seconds=STEP_SECONDS)
        for t in (tasks.reports_progress, tasks.reports_progress_async)
    ]
    for handle in handles:
        assert_seen_while_running(handle.id)
    out = StringIO()
    call_command("jobqueue", "show", str(handles[0].id), stdout=out)
    shown = [line for line in out.getvalue().splitlines() if line.startswith("progress:")]
    assert len(shown) == 1, out.getvalue()
    assert f"/{STEPS} (" in shown[0]
    for handle in handles:
        wait_for(lambda h=handle: job(h.id).status == Status.COMPLETED, timeout=30)
        assert job(handle.id).result == STEPS
        # Completed: no stale partial value (the settlement cleared it).
        assert job(handle.id).progress is None
    out = StringIO()
    call_command("jobqueue", "show", str(handles[0].id), stdout=out)
    assert not [line for line in out.getvalue().splitlines() if line.startswith("progress:")]


def assert_seen_while_running(job_id: object) -> None:
    wait_for(lambda: Job.objects.get(id=job_id).status == Status.CLAIMED, timeout=30)
    claimed_seen = time.monotonic()
    expiry = Job.objects.get(id=job_id).claim_expires_at
    first = wait_for(lambda: job(job_id).progress, timeout=RENEWAL)
    waited = time.monotonic() - claimed_seen
    assert waited < PROMPT, f"first progress seen {waited:.2f}s after the claim"
    row = Job.objects.get(id=job_id)
    assert row.status == Status.CLAIMED  # seen while the job runs
    assert row.claim_expires_at == expiry  # no lease renewal has happened: its own write
    assert first.total == STEPS
    assert 1 <= first.done < STEPS
    assert first.note.endswith(f"step {int(first.done)}")
    # It moves on as the run does, each value seen while the job is still running.
    later = wait_for(
        lambda: (p := job(job_id).progress) is not None and p.done > first.done and p,
        timeout=5,
    )
    assert isinstance(later, Progress)
    assert job(job_id).status == Status.CLAIMED
