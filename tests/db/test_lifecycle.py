"""Every row of the lifecycle table, asserted on job rows and journal entries."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import django_jobqueue
from django_jobqueue import Status, enqueue, store
from django_jobqueue.models import Job
from tests.helpers import journal_of, run_burst, wait_for
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def outcomes(job_id: object) -> list[str]:
    return [e.outcome for e in journal_of(job_id)]


@pytest.mark.django_db(transaction=True)
def test_return_value_completes_and_stores_result() -> None:
    handle = tasks.add.enqueue(2, 3)
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result == 5
    assert job.finished_at is not None
    assert job.failure_count == 0
    assert job.claimed_by == ""
    [entry] = journal_of(job.id)
    assert entry.outcome == "completed"
    assert entry.run_no == 1
    assert entry.started_at is not None
    assert entry.duration is not None
    assert entry.duration >= timedelta(0)
    assert entry.worker


@pytest.mark.django_db(transaction=True)
def test_pause_returns_to_pending_later_with_carry_and_no_failure() -> None:
    handle = tasks.pause_later.enqueue(seconds=3600)
    before = timezone.now()
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.carry == {"paused": True}
    assert job.failure_count == 0
    assert job.visible_at >= before + timedelta(seconds=3590)
    [entry] = journal_of(job.id)
    assert entry.outcome == "paused"
    assert entry.note == "later"


@pytest.mark.django_db(transaction=True)
def test_pause_until_done_keeps_carry_between_runs() -> None:
    handle = tasks.paginate.enqueue(pages=3)
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result == {"pages": 3}
    assert job.run_count == 3
    assert outcomes(job.id) == ["paused", "paused", "completed"]


@pytest.mark.django_db(transaction=True)
def test_exception_retries_after_backoff_counting_a_failure_and_keeping_carry() -> None:
    with override_settings(JOBQUEUE={"BACKOFF_BASE": 60, "BACKOFF_CAP": 600, "BACKOFF_JITTER": 0}):
        handle = tasks.fail_times.enqueue(times=1)
        before = timezone.now()
        run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 1
    # First failure waits base × (fib(3) − 1) = 60 s.
    assert (
        before + timedelta(seconds=59) <= job.visible_at <= timezone.now() + timedelta(seconds=61)
    )
    [entry] = journal_of(job.id)
    assert entry.outcome == "retried"
    assert "RuntimeError: planned failure 1 of 1" in entry.note
    assert entry.attachment == {"run": 1}


@pytest.mark.django_db(transaction=True)
def test_retry_then_success() -> None:
    handle = tasks.fail_times.enqueue(times=2)
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.failure_count == 2
    assert outcomes(job.id) == ["retried", "retried", "completed"]
    assert [e.run_no for e in journal_of(job.id)] == [1, 2, 3]


@pytest.mark.django_db(transaction=True)
def test_permanent_goes_dead_at_once() -> None:
    handle = tasks.permanent.enqueue("no such file")
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.DEAD
    assert job.failure_count == 1
    assert job.finished_at is not None
    [entry] = journal_of(job.id)
    assert entry.outcome == "dead"
    assert entry.note == "no such file"


@pytest.mark.django_db(transaction=True)
def test_max_failures_backstop_makes_the_job_dead() -> None:
    handle = tasks.always_fails.enqueue()
    run_burst()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.DEAD
    assert job.failure_count == 3
    assert outcomes(job.id) == ["retried", "retried", "dead"]
    assert "max_failures=3" in journal_of(job.id)[-1].note


@pytest.mark.django_db(transaction=True)
def test_worker_wide_max_failures_applies_to_tasks_without_their_own() -> None:
    with override_settings(JOBQUEUE={"MAX_FAILURES": 2, "BACKOFF_BASE": 0, "BACKOFF_CAP": 0}):
        handle = tasks.fail_times.enqueue(times=5)
        run_burst()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert outcomes(handle.id) == ["retried", "dead"]


@pytest.mark.django_db(transaction=True)
def test_max_failures_none_disables_the_backstop() -> None:
    with override_settings(JOBQUEUE={"MAX_FAILURES": 2, "BACKOFF_BASE": 0, "BACKOFF_CAP": 0}):
        handle = tasks.fails_forever.enqueue()
        run_burst(max_jobs=5)
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 5
    assert outcomes(job.id) == ["retried"] * 5


@pytest.mark.django_db(transaction=True)
def test_graceful_release_returns_job_now_without_failure(worker_thread) -> None:  # type: ignore[no-untyped-def]
    handle = tasks.stubborn.enqueue(seconds=3)
    w = worker_thread(shutdown_timeout=0.2)
    wait_for(lambda: Job.objects.filter(id=handle.id, status="claimed").exists())
    w.stop()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 0
    assert job.carry == {}  # last settled carry, not the run's unsaved one
    assert job.visible_at <= timezone.now()
    assert outcomes(job.id) == ["released"]


@pytest.mark.django_db(transaction=True)
def test_expired_lease_is_recovered_with_a_failure_and_backoff() -> None:
    handle = tasks.add.enqueue(1, 1)
    [claimed] = store.claim_jobs(
        worker_id="ghost:1", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind])
    )
    Job.objects.filter(id=handle.id).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    assert store.recover_expired() == 1
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 1
    assert job.claimed_by == ""
    [entry] = journal_of(job.id)
    assert entry.outcome == "stale-recovered"
    assert entry.run_no == claimed.run_count == 1
    assert "ghost:1" in entry.note
    run_burst()
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    assert outcomes(handle.id) == ["stale-recovered", "completed"]


@pytest.mark.django_db(transaction=True)
def test_async_task_runs_on_an_event_loop() -> None:
    handle = tasks.async_add.enqueue(20, 22)
    run_burst()
    assert handle.refresh().status == Status.COMPLETED
    assert handle.result == 42


@pytest.mark.django_db(transaction=True)
def test_unserialisable_return_value_fails_the_run_naming_the_type() -> None:
    handle = enqueue(tasks.returns_unserialisable)
    run_burst(max_jobs=1)
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 1
    [entry] = journal_of(job.id)
    assert entry.outcome == "retried"
    assert "return value is not JSON-serialisable (object)" in entry.note


@pytest.mark.django_db(transaction=True)
def test_payload_that_no_longer_fits_settles_dead_and_the_worker_goes_on() -> None:
    bad = tasks.add.enqueue(1, 2)
    Job.objects.filter(id=bad.id).update(payload={"a": 1, "c": 3})
    good = tasks.add.enqueue(3, 4)
    run_burst()
    assert bad.refresh().status == Status.DEAD
    [entry] = bad.journal()
    assert "payload no longer fits the task" in entry.note
    assert "'c'" in entry.note or "c" in entry.note
    assert good.refresh().status == Status.COMPLETED


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
def test_each_settlement_is_logged_on_one_line_and_claims_at_debug(
    caplog: pytest.LogCaptureFixture, level: int
) -> None:
    handle = tasks.fail_times.enqueue(times=1)
    with caplog.at_level(level, logger="django_jobqueue"):
        run_burst()
    # A turn's settlements come as one record, one line each.
    lines = [
        line
        for r in caplog.records
        for line in r.getMessage().split("\n")
        if str(handle.id) in line and line.startswith(("claimed", "settled"))
    ]
    kind = tasks.fail_times.kind
    claims = [f"claimed job={handle.id} kind={kind} run={n}" for n in (1, 2)]
    if level == logging.DEBUG:
        assert lines[0] == claims[0]
        assert lines[2] == claims[1]
        lines = [lines[1], lines[3]]
    assert lines[0].startswith(f"settled job={handle.id} kind={kind} outcome=retried duration=")
    assert lines[1].startswith(f"settled job={handle.id} kind={kind} outcome=completed duration=")
    assert lines[1].endswith("s")
    assert len(lines) == 2


@pytest.mark.django_db(transaction=True)
def test_a_task_calling_sys_exit_fails_its_run_and_the_worker_goes_on() -> None:
    bad = tasks.exits.enqueue()
    good = tasks.add.enqueue(1, 1)
    run_burst(concurrency=1)
    assert bad.refresh().status == Status.DEAD
    assert "SystemExit: 3" in bad.journal()[0].note
    assert good.refresh().status == Status.COMPLETED


# --- one cancel rule and one backstop for every way a run ends ------------------------------


def _lose_lease(worker: str, kind: str) -> Job:
    [claimed] = store.claim_jobs(
        worker_id=worker, request=store.ClaimRequest(limit=1, kinds=[kind])
    )
    Job.objects.filter(id=claimed.id).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    return Job.objects.get(id=claimed.id)


def test_stale_recovery_of_a_job_asked_to_cancel_ends_it_cancelled() -> None:
    handle = tasks.add.enqueue(1, 1)
    job = _lose_lease("ghost:1", tasks.add.kind)
    django_jobqueue.cancel(job.id, actor="alice")
    assert store.recover_expired() == 1
    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    [entry] = journal_of(handle.id)
    assert entry.outcome == "cancelled"
    assert entry.actor == "alice"
    assert entry.note.startswith("cancelled on request (run ended: stale-recovered)")


def test_stale_recovery_at_the_backstop_is_dead_even_when_asked_to_cancel() -> None:
    """The cancel request overrides only an ending that would send the job back to
    pending, for a recovery as for a worker's settlement: reaching max_failures is dead."""
    handle = tasks.always_fails.enqueue()  # max_failures=3
    Job.objects.filter(id=handle.id).update(failure_count=2)
    job = _lose_lease("ghost:1", tasks.always_fails.kind)
    django_jobqueue.cancel(job.id, actor="alice")
    assert store.recover_expired(policy_for=lambda kind: tasks.always_fails.policy()) == 1
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.failure_count == 3
    [entry] = journal_of(handle.id)
    assert entry.outcome == "dead"
    assert "failure 3 of max_failures=3" in entry.note
    assert "ghost:1" in entry.note
