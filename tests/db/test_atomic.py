"""Atomic tasks and ``ctx.settle_now()``: a run's database writes commit with its
settlement, or not at all.

Every test counts ``Effect`` rows, which the tasks write in their run's transaction into
a table with no unique constraint: only that transaction can keep them to one per job.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

import django_jobqueue
from django_jobqueue import InvalidOption, Status, task
from django_jobqueue.models import Job
from django_jobqueue.task.registry import Registry
from tests.helpers import WorkerThread, journal_of, postgres_only, row_locking, run_burst, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Effect

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def effects(job_id: Any) -> list[int]:
    """The run numbers of a job's Effect rows."""
    return sorted(Effect.objects.filter(job_id=job_id).values_list("run_no", flat=True))


def outcomes(job_id: Any) -> list[tuple[int, str]]:
    return [(e.run_no, e.outcome) for e in journal_of(job_id)]


@pytest.mark.django_db(transaction=True)
def test_an_atomic_run_commits_its_writes_with_its_completion() -> None:
    handle = tasks.atomic_effect.enqueue()
    assert run_burst() == 1
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result, job.run_count) == (Status.COMPLETED, 1, 1)
    assert effects(handle.id) == [1]
    [entry] = journal_of(handle.id)
    assert (entry.run_no, entry.outcome) == (1, "completed")
    assert entry.duration is not None
    assert entry.started_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_failing_atomic_run_leaves_no_rows_and_its_retry_writes_them_once() -> None:
    handle = tasks.atomic_effect.enqueue(fail_first=2)
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.failure_count, job.run_count) == (Status.COMPLETED, 2, 3)
    # Each failed run wrote its row before raising: both were rolled back.
    assert effects(handle.id) == [3]
    assert outcomes(handle.id) == [(1, "retried"), (2, "retried"), (3, "completed")]
    assert "planned failure 1 of 2" in journal_of(handle.id)[0].note


@pytest.mark.django_db(transaction=True)
def test_a_pause_rolls_the_writes_back_and_keeps_the_carry() -> None:
    handle = tasks.atomic_pause.enqueue()
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result == {"seen": [1, 2]}  # the carry of the paused run reached the next
    assert effects(handle.id) == [2]
    assert outcomes(handle.id) == [(1, "paused"), (2, "completed")]


@pytest.mark.django_db(transaction=True)
def test_permanent_rolls_the_writes_back_and_the_job_dies() -> None:
    handle = tasks.atomic_permanent.enqueue()
    run_burst()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert effects(handle.id) == []
    assert outcomes(handle.id) == [(1, "dead")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "write_first",
    [
        # Written before the claim is lost: the row is in the transaction all along. On
        # SQLite that transaction would hold the one write lock the test itself needs.
        pytest.param(True, marks=row_locking, id="written-before"),
        pytest.param(False, id="written-after"),
    ],
)
def test_a_run_whose_claim_was_taken_over_commits_nothing(write_first: bool) -> None:
    started, go = tasks.atomic_gate("takeover")
    handle = tasks.atomic_effect.enqueue(gate="takeover", write_first=write_first)
    first = WorkerThread(concurrency=1, worker_id="first").start()
    second: WorkerThread | None = None
    try:
        assert started.wait(10), "the first run never started"
        # Its lease runs out (as if its worker had stalled); another worker recovers the
        # job and runs it again, to completion.
        Job.objects.filter(id=handle.id).update(
            claim_expires_at=timezone.now() - timedelta(seconds=1)
        )
        second = WorkerThread(concurrency=1, worker_id="second").start()
        wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED)
        assert effects(handle.id) == [2]
        # The first run goes on, writes, and tries to complete in its transaction.
        go.set()
        wait_for(lambda: not first.worker._running)
    finally:
        go.set()
        first.stop()
        if second is not None:
            second.stop()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.run_count, job.result) == (Status.COMPLETED, 2, 2)
    assert effects(handle.id) == [2]
    assert [e.worker for e in Effect.objects.filter(job_id=handle.id)] == ["second"]
    # Nothing of the first run's end: its lease expiry and the second run's completion.
    assert outcomes(handle.id) == [(1, "stale-recovered"), (2, "completed")]


@pytest.mark.django_db(transaction=True)
def test_a_run_released_at_shutdown_commits_nothing_when_it_ends_later() -> None:
    started, go = tasks.atomic_gate("release")
    handle = tasks.atomic_effect.enqueue(gate="release")
    worker = WorkerThread(concurrency=1, shutdown_timeout=0.2).start()
    try:
        assert started.wait(10)
        worker.worker.stop()
        worker.thread.join(10)
        assert Job.objects.get(id=handle.id).status == Status.PENDING
    finally:
        go.set()
        worker.stop()
    # The abandoned run goes on to write and settle: its claim was released, so nothing.
    wait_for(lambda: tasks.ATOMIC_STARTED["release"].is_set())
    run_burst()
    assert effects(handle.id) == [2]
    assert outcomes(handle.id) == [(1, "released"), (2, "completed")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "write_first",
    [
        # Written before the cancel: on SQLite the run would hold the write lock that the
        # operator's cancel request needs.
        pytest.param(True, marks=postgres_only, id="written-before"),
        pytest.param(False, id="written-after"),
    ],
)
def test_an_operator_cancel_reaches_an_atomic_run_and_rolls_it_back(write_first: bool) -> None:
    handle = tasks.atomic_effect.enqueue(until_cancelled=True, write_first=write_first)
    worker = WorkerThread(concurrency=1).start()
    try:
        wait_for(lambda: Job.objects.get(id=handle.id).status == Status.CLAIMED)
        django_jobqueue.cancel(handle.id, actor="tester")
        wait_for(lambda: Job.objects.get(id=handle.id).status == Status.CANCELLED)
    finally:
        worker.stop()
    assert effects(handle.id) == []
    assert outcomes(handle.id)[-1] == (1, "cancelled")


@pytest.mark.django_db(transaction=True)
@row_locking
@override_settings(JOBQUEUE={"LEASE": 1.5, "POLL_INTERVAL": 1})
def test_the_lease_is_renewed_while_an_atomic_run_holds_its_transaction() -> None:
    # Written first, then held for twice the lease: only renewals on the worker's own
    # connection, unblocked by the run's transaction, keep the claim.
    handle = tasks.atomic_effect.enqueue(write_first=True, hold=3.0)
    worker = WorkerThread(concurrency=1).start()
    try:
        wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=20)
    finally:
        worker.stop()
    job = Job.objects.get(id=handle.id)
    assert job.run_count == 1
    assert outcomes(handle.id) == [(1, "completed")]
    assert effects(handle.id) == [1]


@pytest.mark.django_db(transaction=True)
@override_settings(JOBQUEUE={"ATOMIC_WARN_AFTER": 0.2, "POLL_INTERVAL": 0.1})
def test_a_long_atomic_run_is_logged_with_its_kind(caplog: pytest.LogCaptureFixture) -> None:
    handle = tasks.atomic_effect.enqueue(hold=1.5)
    with caplog.at_level(logging.WARNING, logger="django_jobqueue"):
        run_burst(poll_interval=0.1, concurrency=1)
    assert effects(handle.id) == [1]
    [warning] = [r.getMessage() for r in caplog.records if "ATOMIC_WARN_AFTER" in r.getMessage()]
    assert "kind=tests.atomic" in warning
    assert str(handle.id) in warning


# --- ctx.settle_now() ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_settle_now_commits_the_completion_with_the_tasks_own_transaction() -> None:
    handle = tasks.settles_now.enqueue(how="ok")
    assert run_burst() == 1
    job = Job.objects.get(id=handle.id)
    # The value given to settle_now is the result; what the task returned after is not.
    assert (job.status, job.result) == (Status.COMPLETED, {"paid": True})
    assert effects(handle.id) == [1]
    assert outcomes(handle.id) == [(1, "completed")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("outside", "must be called inside transaction.atomic(using='default')"),
        ("twice", "already settled (settle_now() was called before)"),
        ("unstorable", "the settle_now() result is not JSON-serialisable (dict)"),
        ("then_fail", "failed after settle_now"),
    ],
)
def test_settle_now_misuse_fails_the_run_and_rolls_its_writes_back(how: str, says: str) -> None:
    handle = tasks.settles_now.enqueue(how=how)
    run_burst(max_jobs=1)
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 1
    [entry] = journal_of(handle.id)
    assert entry.outcome == "retried"
    assert says in entry.note
    assert effects(handle.id) == []


def test_settle_now_outside_a_run_says_so() -> None:
    ctx = django_jobqueue.Context(job_id=Job().id, kind="k", run_count=1, failure_count=0)
    with pytest.raises(django_jobqueue.SettleError, match="settles a run a worker started"):
        ctx.settle_now()


def test_the_testing_kit_runs_atomic_tasks_in_a_test_transaction() -> None:
    from django_jobqueue.testing import run_jobs

    handle = tasks.atomic_effect.enqueue(fail_first=1)
    with transaction.atomic():  # as a TestCase would hold one around the test
        [first, second] = run_jobs()
        assert [first.status, second.status] == [Status.PENDING, Status.COMPLETED]
        assert effects(handle.id) == [2]
    assert outcomes(handle.id) == [(1, "retried"), (2, "completed")]


# --- declaring atomic tasks -------------------------------------------------------------


def test_atomic_must_be_a_bool(task_registry: Registry) -> None:
    with pytest.raises(InvalidOption, match="atomic must be True or False, got 'yes'"):

        @task(atomic="yes")  # type: ignore[arg-type]
        def sloppy() -> None: ...


def test_an_async_task_cannot_be_atomic(task_registry: Registry) -> None:
    with pytest.raises(InvalidOption, match="atomic=True needs a plain"):

        @task(atomic=True)
        async def remote() -> None: ...

    with pytest.raises(InvalidOption, match="atomic=True needs a plain"):

        class Remote(django_jobqueue.Task):
            atomic = True

            async def run(self, ctx: django_jobqueue.Context) -> None: ...


def test_a_class_task_can_be_atomic(task_registry: Registry) -> None:
    class Ledger(django_jobqueue.Task):
        kind = "tests.ledger"
        atomic = True

        def run(self, ctx: django_jobqueue.Context) -> None: ...

    assert task_registry.get("tests.ledger").atomic is True


@pytest.mark.django_db(transaction=True)
def test_settle_now_inside_an_atomic_task_keeps_the_early_result() -> None:
    handle = tasks.atomic_settles_early.enqueue()
    assert run_burst() == 1
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, "early")
    assert effects(handle.id) == [1]
    assert outcomes(handle.id) == [(1, "completed")]


@pytest.mark.django_db(transaction=True)
@postgres_only
def test_an_atomic_run_that_swallowed_a_database_error_fails_and_commits_nothing() -> None:
    # PostgreSQL aborts the transaction at the failed statement: the settlement cannot
    # be written in it, so the run fails (dead: max_failures=1), its write rolled back.
    handle = tasks.atomic_swallows_an_error.enqueue()
    run_burst()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert effects(handle.id) == []
    [entry] = journal_of(handle.id)
    assert entry.outcome == "dead"
    assert "the run's transaction could not commit" in entry.note
    assert "current transaction is aborted" in entry.note


@pytest.mark.django_db(transaction=True)
def test_job_finished_reports_the_value_an_atomic_run_settled() -> None:
    finished: list[Any] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        finished.append(kwargs)

    django_jobqueue.job_finished.connect(receiver)
    try:
        handle = tasks.atomic_settles_early.enqueue()
        run_burst()
    finally:
        django_jobqueue.job_finished.disconnect(receiver)
    [done] = finished
    assert (done["outcome"], done["job"].id, done["job"].result) == (
        "completed",
        handle.id,
        "early",
    )
