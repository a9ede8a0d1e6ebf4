"""Live progress: ``ctx.progress`` checks what it is given and holds it in memory; the
lease renewal writes it in the statement that renews the lease (never a statement per
call); ``JobHandle.progress`` reads it back. On each database."""

from __future__ import annotations

import math
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobqueue import InvalidProgress, Progress, job, store
from django_jobqueue.models import Job
from django_jobqueue.progress import NOTE_LIMIT
from django_jobqueue.run.pipeline import Pipeline
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.services.leases import LeaseExtension
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

LEASE = timedelta(minutes=1)


def claimed(worker_id: str = "w:1") -> Running:
    """A job of ours, really claimed by ``worker_id``, its lease due for renewal."""
    handle = tasks.add.enqueue(1, 2)
    [got] = store.claim_jobs(
        worker_id=worker_id,
        request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind], lease=LEASE),
    )
    assert got.id == handle.id
    ctx = Pipeline(worker_id=worker_id, alias="default", max_output_bytes=10_000).context(got)
    return Running(job=got, ctx=ctx, lease=LEASE, expires_at=timezone.now() + LEASE / 3)


def renew(worker_id: str, *runs: Running) -> list[dict[str, Any]]:
    """One pass of the worker's lease service over ``runs``; the statements it sent."""
    for r in runs:
        r.expires_at = timezone.now() + LEASE / 3  # a third used: due
    service = LeaseExtension(
        lambda call: call(), interval=0.0, worker_id=worker_id, running={r.job.id: r for r in runs}
    )
    with CaptureQueriesContext(connection) as queries:
        service.run()
    return list(queries.captured_queries)


def test_many_progress_calls_send_no_statement_and_the_renewal_writes_the_last_in_its_own() -> None:
    quiet, busy = claimed(), claimed()
    with CaptureQueriesContext(connection) as during:
        for n in range(5000):
            busy.ctx.progress(n + 1, total=5000, note=f"row {n + 1}")
    assert during.captured_queries == []

    [statement] = renew("w:1", quiet, busy)  # one statement renews both leases
    assert statement["sql"].lstrip().upper().startswith("UPDATE")
    assert "progress_done" in statement["sql"]
    assert job(busy.job.id).progress == Progress(done=5000, total=5000, note="row 5000")
    assert job(quiet.job.id).progress is None

    # Nothing new reported: the next renewal is the lease alone, still one statement.
    [again] = renew("w:1", quiet, busy)
    assert "progress_done" not in again["sql"]
    busy.ctx.progress(1, total=2)
    assert len(renew("w:1", quiet, busy)) == 1
    assert job(busy.job.id).progress == Progress(done=1, total=2)


def test_a_run_without_progress_calls_renews_with_as_many_statements_as_one_with_many() -> None:
    without, with_many = claimed(), claimed()
    for n in range(1000):
        with_many.ctx.progress(n)
    assert len(renew("w:1", without)) == len(renew("w:1", with_many)) == 1


def test_the_first_renewal_of_a_new_run_clears_the_progress_an_earlier_run_left() -> None:
    r = claimed()
    r.ctx.progress(7, total=10, note="before the crash")
    renew("w:1", r)
    assert job(r.job.id).progress == Progress(7, 10, "before the crash")
    # The run is lost (as to a crash) and the job runnable again: its next run has not
    # reported anything, and its first renewal says so.
    Job.objects.filter(id=r.job.id).update(
        status="pending", claimed_by="", visible_at=timezone.now()
    )
    [again] = store.claim_jobs(
        worker_id="w:2", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind], lease=LEASE)
    )
    assert again.run_count == 2
    ctx = Pipeline(worker_id="w:2", alias="default", max_output_bytes=10_000).context(again)
    rerun = Running(job=again, ctx=ctx, lease=LEASE, expires_at=timezone.now())
    renew("w:2", rerun)
    assert job(r.job.id).progress is None


def test_progress_is_not_written_for_a_run_that_lost_its_claim() -> None:
    r = claimed("w:1")
    r.ctx.progress(3, total=4)
    [statement] = renew("w:other", r)  # another worker's renewal: the guard refuses
    assert "progress_done" in statement["sql"]
    assert job(r.job.id).progress is None


def test_progress_reads_back_as_a_fraction_and_prints_short() -> None:
    p = Progress(done=30, total=120, note="invoices")
    assert p.fraction == 0.25
    assert p.percent == 25
    assert str(p) == "30/120 (25%) invoices"
    assert str(Progress(done=2.5)) == "2.5"
    assert Progress(done=3).fraction is None


BAD: list[tuple[tuple[Any, ...], str, str]] = [
    ((-1,), "done", "must not be negative"),
    ((math.nan,), "done", "must be finite"),
    ((math.inf, None), "done", "must be finite"),
    ((1, math.inf), "total", "must be finite"),
    (("3",), "done", "must be a number, not str"),
    ((True,), "done", "must be a number, not bool"),
    ((1, 0), "total", "must be positive"),
    ((1, -5), "total", "must be positive"),
    ((11, 10), "done", "is more than total"),
    ((1, 2, "x" * (NOTE_LIMIT + 1)), "note", f"over the limit of {NOTE_LIMIT}"),
    ((1, 2, 42), "note", "must be a string, not int"),
    ((1, 2, "a\x00b"), "note", "must not contain NUL"),
]


@pytest.mark.parametrize(("args", "argument", "message"), BAD)
def test_bad_progress_is_a_clear_error_and_keeps_what_was_reported(
    args: tuple[Any, ...], argument: str, message: str
) -> None:
    r = claimed()
    r.ctx.progress(1, total=2, note="fine")
    with pytest.raises(InvalidProgress, match=message) as info:
        r.ctx.progress(*args)
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError)
    assert "ctx.progress()" in str(info.value)
    assert r.ctx.reported == Progress(1, 2, "fine")
    renew("w:1", r)
    assert job(r.job.id).progress == Progress(1, 2, "fine")


def test_a_task_whose_progress_call_is_bad_fails_its_run_saying_why() -> None:
    from django_jobqueue.testing import run_jobs

    handle = tasks.reports_progress.enqueue(steps=0, step_seconds=0)
    [ran] = run_jobs()  # steps=0: nothing reported, a clean run
    assert ran.status == "completed"
    assert ran.id == handle.id
    bad = tasks.misreports_progress.enqueue(-1)
    ran = run_jobs()[0]  # max_failures=2: retried, then dead, each run failing alike
    assert ran.id == bad.id
    entry = ran.journal()[0]
    assert entry.outcome == "retried"
    assert "InvalidProgress" in entry.note
    assert "must not be negative" in entry.note


def test_a_job_that_never_ran_has_no_progress() -> None:
    handle = tasks.add.enqueue(1, 1)
    assert handle.progress is None
    assert job(handle.id).progress is None
    assert job(uuid.UUID(str(handle.id))).progress is None
