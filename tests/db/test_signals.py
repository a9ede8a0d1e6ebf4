"""job_enqueued, job_started and job_finished: their arguments from a real worker run,
job_enqueued on commit only, filtering by sender, and receivers that raise."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.dispatch import Signal

from django_jobqueue import Status, job_enqueued, job_finished, job_started, periodic, task
from django_jobqueue.models import Job, Schedule
from django_jobqueue.task.handle import JobHandle
from django_jobqueue.task.registry import Registry
from django_jobqueue.testing import run_jobs
from django_jobqueue.worker.services.scheduler import Scheduler
from tests.helpers import run_burst
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

Calls = list[dict[str, Any]]


@pytest.fixture
def heard() -> Iterator[Callable[..., Calls]]:
    """Connect a recording receiver to a signal; disconnected when the test ends."""
    connected: list[tuple[Signal, Callable[..., None]]] = []

    def listen(signal: Signal, sender: object = None) -> Calls:
        calls: Calls = []
        lock = threading.Lock()

        def receiver(**kwargs: Any) -> None:
            kwargs.pop("signal")
            with lock:
                calls.append(kwargs)

        signal.connect(receiver, sender=sender, weak=False)
        connected.append((signal, receiver))
        return calls

    yield listen
    for signal, receiver in connected:
        signal.disconnect(receiver)


def test_a_worker_run_sends_started_and_finished_with_the_documented_arguments(
    heard: Callable[..., Calls],
) -> None:
    started, finished = heard(job_started), heard(job_finished)
    ok = tasks.add.enqueue(2, 3)
    flaky = tasks.fail_times.using(queue="mail").enqueue(times=1)
    doomed = tasks.permanent.enqueue(reason="no")
    run_burst(worker_id="host:42")

    by_job: dict[uuid.UUID, Calls] = {}
    for call in started:
        assert set(call) == {"sender", "job", "kind", "queue", "run_no", "worker"}
        assert isinstance(call["job"], JobHandle)
        assert call["job"].status == Status.CLAIMED
        assert call["worker"] == "host:42"
        by_job.setdefault(call["job"].id, []).append(call)
    assert [(c["run_no"], c["queue"]) for c in by_job[flaky.id]] == [(1, "mail"), (2, "mail")]
    assert by_job[ok.id][0]["sender"] is tasks.add
    assert by_job[ok.id][0]["kind"] == tasks.add.kind

    ended: dict[uuid.UUID, Calls] = {}
    for call in finished:
        assert set(call) == {
            "sender",
            "job",
            "kind",
            "run_no",
            "outcome",
            "duration",
            "note",
            "worker",
        }
        assert call["worker"] == "host:42"
        assert call["duration"] > timedelta(0)
        ended.setdefault(call["job"].id, []).append(call)
    [done] = ended[ok.id]
    assert (done["outcome"], done["job"].status) == ("completed", "completed")
    assert done["job"].result == 5
    assert [(c["run_no"], c["outcome"], c["job"].status) for c in ended[flaky.id]] == [
        (1, "retried", "pending"),
        (2, "completed", "completed"),
    ]
    assert "planned failure 1 of 1" in ended[flaky.id][0]["note"]
    [dead] = ended[doomed.id]
    assert (dead["outcome"], dead["job"].status, dead["note"]) == ("dead", "dead", "no")
    assert dead["sender"] is tasks.permanent
    # The handle reads the row when asked for more than the signal carried.
    assert dead["job"].refresh().failure_count == 1


def test_class_tasks_are_sent_by_their_class_and_a_sender_filter_holds(
    heard: Callable[..., Calls],
) -> None:
    only_sync = heard(job_finished, sender=tasks.Sync)
    tasks.Sync(account_id=1).enqueue()
    tasks.add.enqueue(1, 1)
    run_burst()
    assert [(c["kind"], c["outcome"]) for c in only_sync] == [("tests.sync", "completed")]
    assert only_sync[0]["sender"] is tasks.Sync


def test_job_enqueued_is_sent_on_commit_and_never_for_a_rollback(
    heard: Callable[..., Calls],
) -> None:
    enqueued = heard(job_enqueued)
    with transaction.atomic():
        handle = tasks.add.using(queue="mail").enqueue(1, 2)
        assert enqueued == []  # not before the job is committed
    [call] = enqueued
    assert set(call) == {"sender", "job", "kind", "queue", "disposition"}
    assert call["job"] is handle
    assert (call["kind"], call["queue"], call["disposition"]) == (
        tasks.add.kind,
        "mail",
        "inserted",
    )
    assert call["sender"] is tasks.add

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            tasks.add.enqueue(5, 5)
            raise LookupError("rolled back")

    with pytest.raises(LookupError):
        enqueue_then_fail()
    assert len(enqueued) == 1

    # Autocommit: sent at once. Bulk: one per job. A reused key says so.
    tasks.add.using(idempotency_key="k").enqueue(1, 1)
    tasks.add.using(idempotency_key="k").enqueue(1, 1)
    assert [c["disposition"] for c in enqueued[1:]] == ["inserted", "reused"]
    handles = tasks.add.enqueue_many([{"a": 1, "b": n} for n in range(3)])
    assert [c["job"].id for c in enqueued[3:]] == [h.id for h in handles]


def test_receivers_that_raise_are_logged_and_break_neither_enqueue_nor_worker(
    heard: Callable[..., Calls], caplog: pytest.LogCaptureFixture
) -> None:
    def explode(**kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    for signal in (job_enqueued, job_started, job_finished):
        signal.connect(explode, weak=False)
    try:
        later = heard(job_finished)  # connected after the one that raises: still called
        with caplog.at_level(logging.ERROR, logger="django_jobqueue"):
            handles = [tasks.add.enqueue(n, n) for n in range(3)]
            with transaction.atomic():
                handles.append(tasks.noop.enqueue())
            assert run_burst() == 4
    finally:
        for signal in (job_enqueued, job_started, job_finished):
            signal.disconnect(explode)
    assert [h.refresh().status for h in handles] == [Status.COMPLETED] * 4
    assert len(later) == 4
    failures = [r for r in caplog.records if r.name == "django_jobqueue" and "raised" in r.message]
    assert {r.message.split(" receiver")[0] for r in failures} == {
        "a job_enqueued",
        "a job_started",
        "a job_finished",
    }
    assert len(failures) == 12
    assert "receiver bug" in failures[0].message


def test_run_jobs_sends_started_and_finished_too(heard: Callable[..., Calls]) -> None:
    started, finished = heard(job_started), heard(job_finished)
    handle = tasks.paginate.enqueue(pages=2)
    run_jobs()
    assert [c["run_no"] for c in started] == [1, 2]
    assert [(c["outcome"], c["job"].id) for c in finished] == [
        ("paused", handle.id),
        ("completed", handle.id),
    ]


def test_the_django_tasks_backend_sends_job_enqueued(heard: Callable[..., Calls]) -> None:
    from tests.djtasks import tasks as djtasks

    enqueued = heard(job_enqueued)
    result = djtasks.add.enqueue(1, 2)
    [call] = enqueued
    assert call["job"].id == uuid.UUID(str(result.id))
    assert call["kind"] == call["job"].kind
    assert call["disposition"] == "inserted"


def test_an_atomic_run_that_settles_in_its_own_transaction_is_sent_too(
    heard: Callable[..., Calls],
) -> None:
    finished = heard(job_finished)
    handle = tasks.atomic_effect.enqueue(fail_first=1)
    run_burst(worker_id="host:7")
    assert [(c["run_no"], c["outcome"], c["job"].status, c["worker"]) for c in finished] == [
        (1, "retried", "pending", "host:7"),
        (2, "completed", "completed", "host:7"),
    ]
    assert finished[1]["job"].id == handle.id
    assert finished[1]["job"].result == 2
    assert finished[1]["duration"] > timedelta(0)
    assert finished[1]["sender"] is tasks.atomic_effect

    again = tasks.atomic_effect.enqueue()
    run_jobs()
    assert [(c["job"].id, c["outcome"]) for c in finished[2:]] == [(again.id, "completed")]


def test_a_periodic_tick_sends_job_enqueued(
    heard: Callable[..., Calls], task_registry: Registry
) -> None:
    @task(kind="tests.signals.beat")
    def beat() -> None:
        return None

    schedule = periodic(beat, "* * * * *", timezone="UTC")
    enqueued = heard(job_enqueued)
    t0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    Schedule.objects.create(name=schedule.name, created_at=t0 - timedelta(hours=1))
    Scheduler(lambda call: call(), interval=1.0, schedules=[schedule], clock=lambda: t0).run()
    [job] = Job.objects.filter(kind="tests.signals.beat")
    [call] = enqueued
    assert (call["job"].id, call["kind"], call["disposition"]) == (job.id, job.kind, "inserted")
    assert call["sender"] is beat
