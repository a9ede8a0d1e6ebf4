"""Live progress: ``ctx.progress`` checks what it is given and holds it in memory; the
worker's progress service writes the latest values of all its runs in one statement of
their own (never a statement per call, never with the lease renewal), each guarded by
its run's epoch; every settlement clears it; ``JobHandle.progress`` reads it back. On
each database."""

from __future__ import annotations

import math
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobqueue import InvalidProgress, Progress, conf, job, store
from django_jobqueue.models import Job
from django_jobqueue.progress import NOTE_LIMIT
from django_jobqueue.run.pipeline import Pipeline
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.services.leases import LeaseExtension
from django_jobqueue.worker.services.progress import ProgressWrites
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


def write(worker_id: str, *runs: Running) -> list[dict[str, Any]]:
    """One pass of the worker's progress service over ``runs``; the statements it sent
    (but the announcement of what it wrote, for the live pages: ``pg_notify`` on
    PostgreSQL, sent only when a row was written)."""
    service = ProgressWrites(
        lambda call: call(), interval=1.0, worker_id=worker_id, running={r.job.id: r for r in runs}
    )
    with CaptureQueriesContext(connection) as queries:
        service.run()
    return [q for q in queries.captured_queries if "pg_notify" not in q["sql"]]


def test_many_progress_calls_send_no_statement_and_one_write_sends_the_last_of_each() -> None:
    quiet, busy, other = claimed(), claimed(), claimed()
    with CaptureQueriesContext(connection) as during:
        for n in range(5000):
            busy.ctx.progress(n + 1, total=5000, note=f"row {n + 1}")
        other.ctx.progress(3)
    assert during.captured_queries == []

    [statement] = write("w:1", quiet, busy, other)  # one statement for every run
    assert statement["sql"].lstrip().upper().startswith("UPDATE")
    assert "progress_done" in statement["sql"]
    assert "claim_expires_at" not in statement["sql"]  # not the lease's write
    assert job(busy.job.id).progress == Progress(done=5000, total=5000, note="row 5000")
    assert job(other.job.id).progress == Progress(done=3)
    assert job(quiet.job.id).progress is None

    # Nothing new reported: no statement at all.
    assert write("w:1", quiet, busy, other) == []
    busy.ctx.progress(1, total=2)
    assert len(write("w:1", quiet, busy, other)) == 1
    assert job(busy.job.id).progress == Progress(done=1, total=2)


def test_the_lease_renewal_writes_no_progress() -> None:
    r = claimed()
    r.ctx.progress(1, total=2)
    r.expires_at = timezone.now() + LEASE / 3  # a third used: due
    service = LeaseExtension(
        lambda call: call(), interval=0.0, worker_id="w:1", running={r.job.id: r}
    )
    with CaptureQueriesContext(connection) as queries:
        service.run()
    [statement] = queries.captured_queries
    assert "progress_done" not in statement["sql"]
    assert job(r.job.id).progress is None
    write("w:1", r)
    assert job(r.job.id).progress == Progress(1, 2)


def test_a_stale_runs_progress_write_is_refused() -> None:
    r = claimed("w:1")
    r.ctx.progress(3, total=4)
    [statement] = write("w:other", r)  # another worker's write: the guard refuses
    assert "progress_done" in statement["sql"]
    assert job(r.job.id).progress is None
    # The run is lost (as to a crash) and the job claimed again: run 2 holds it, and
    # the old run's write (its epoch, run 1) changes nothing.
    Job.objects.filter(id=r.job.id).update(
        status="pending", claimed_by="", visible_at=timezone.now()
    )
    [again] = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind], lease=LEASE)
    )
    assert again.run_count == 2
    assert (
        store.write_progress(
            worker_id="w:1", runs={r.job.id: 1}, progress={r.job.id: Progress(3, 4)}
        )
        == 0
    )
    assert job(r.job.id).progress is None
    assert (
        store.write_progress(
            worker_id="w:1", runs={r.job.id: 2}, progress={r.job.id: Progress(1, 4)}
        )
        == 1
    )
    assert job(r.job.id).progress == Progress(1, 4)


@pytest.mark.parametrize("ending", ["completed", "retried", "dead"])
def test_every_settlement_clears_the_progress_its_run_wrote(ending: str) -> None:
    from django_jobqueue.rules.lifecycle import Run, completed, dead, failure

    r = claimed()
    r.ctx.progress(2, total=3, note="two of three")
    write("w:1", r)
    assert job(r.job.id).progress == Progress(2, 3, "two of three")
    run = Run(job_id=r.job.id, kind=r.job.kind, run_no=r.job.run_count, worker="w:1")
    settlement = {
        "completed": lambda: completed(run, result=3),
        "retried": lambda: failure(
            run, failure_count=0, policy=conf.get().policy(), now=timezone.now(), note="boom"
        ),
        "dead": lambda: dead(run, carry=None, note="gone"),
    }[ending]()
    assert store.settle(worker_id="w:1", settlements=[settlement]) == [True]
    assert job(r.job.id).progress is None
    assert Job.objects.filter(
        id=r.job.id, progress_done=None, progress_total=None, progress_note=""
    ).exists()


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
    write("w:1", r)
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
