"""Durable sleeps and waits for events, in-process (``run_jobs``, which fast-forwards
with ``now``): a sleep parks the job without a failure and it resumes past its steps;
an event emitted before or after the wait is delivered once; a timeout returns None;
one emit wakes every job waiting for its name and key; bad input is refused."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from django_jobqueue import InvalidEvent, Outcome, Status, emit
from django_jobqueue.models import Event, Job, JournalEntry
from django_jobqueue.store import durable as stored
from django_jobqueue.testing import run_jobs
from tests.helpers import recorded
from tests.steps.test_memoized import effects
from tests.taskapp import steps_tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

LATER = timedelta(days=30)


def outcomes(job_id: object) -> list[str]:
    return list(
        JournalEntry.objects.filter(job_id=job_id).order_by("id").values_list("outcome", flat=True)
    )


def test_a_sleep_parks_the_job_without_a_failure_and_it_resumes_past_its_steps() -> None:
    handle = steps_tasks.sleeper.enqueue(3600)
    before = timezone.now()
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.parked == "sleep"
    assert job.failure_count == 0
    assert job.wake_at is not None
    assert before + timedelta(seconds=3599) < job.wake_at == job.visible_at
    assert [s["name"] for s in recorded(job.id)] == ["before", "sleep 1"]
    assert stored.parked_counts(now=timezone.now()) == {"sleep": 1, "event": 0}
    entry = JournalEntry.objects.get(job_id=handle.id)
    assert entry.outcome == Outcome.PAUSED
    assert entry.note.startswith("sleeping until ")
    assert "steps recorded: before (" in entry.note

    run_jobs(now=timezone.now() + LATER)
    job.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert job.result == "woke"
    assert job.parked == ""
    assert effects(handle.id) == {"before": 1, "after": 1}
    assert Execution.objects.filter(job_id=handle.id).count() == 2  # code between steps reruns
    assert outcomes(handle.id) == [Outcome.PAUSED, Outcome.COMPLETED]


@pytest.mark.parametrize("task", [steps_tasks.sleeper, steps_tasks.atomic_sleeper])
def test_the_steps_before_a_sleep_commit_with_its_parking(task: object) -> None:
    handle = task.enqueue(3600)  # type: ignore[attr-defined]
    run_jobs()
    assert effects(handle.id) == {"before": 1}
    run_jobs(now=timezone.now() + LATER)
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    assert effects(handle.id) == {"before": 1, "after": 1}


def test_an_event_emitted_after_the_wait_releases_the_job_and_is_delivered_once() -> None:
    handle = steps_tasks.waiter.enqueue("survey", "7", timeout=3600)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.parked, job.wait_name, job.wait_key) == (
        Status.PENDING,
        "event",
        "survey",
        "7",
    )
    assert stored.parked_counts(now=timezone.now()) == {"sleep": 0, "event": 1}
    assert emit("survey", key="8", payload={"score": 1}) == 0  # another key
    with transaction.atomic():
        assert emit("survey", key="7", payload={"score": 9}) == 1
    run_jobs()
    job.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert job.result == {"score": 9}
    assert (job.parked, job.wait_name, job.delivered) == ("", None, None)
    assert effects(handle.id) == {"got": 1}
    wait = next(s for s in recorded(job.id) if s["kind"] == "wait")
    assert wait["payload"] == {"score": 9}
    assert wait["timed_out"] is False


def test_an_event_emitted_before_the_wait_is_delivered_when_it_waits() -> None:
    emit("survey", key="7", payload={"score": 3})
    handle = steps_tasks.waiter.enqueue("survey", "7")
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result == {"score": 3}
    assert outcomes(handle.id) == [Outcome.COMPLETED]


def test_two_waits_of_one_job_take_two_events_one_each() -> None:
    emit("pair", key="k", payload=1)
    handle = steps_tasks.twice.enqueue("pair", "k")
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.PENDING  # the first event only
    emit("pair", key="k", payload=2)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result == [1, 2]


def test_an_event_past_its_retention_is_not_delivered() -> None:
    emit("old", key="k", payload=1)
    Event.objects.update(created_at=timezone.now() - timedelta(days=8))
    handle = steps_tasks.waiter.enqueue("old", "k")
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.PENDING
    assert stored.prune_events(emitted_before=timezone.now() - timedelta(days=7)) == 1
    assert not Event.objects.exists()


def test_a_wait_that_times_out_returns_none() -> None:
    handle = steps_tasks.waiter.enqueue("never", "k", timeout=60)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.wake_at == job.visible_at
    run_jobs(now=timezone.now() + timedelta(minutes=2))
    job.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert job.result is None
    wait = next(s for s in recorded(job.id) if s["kind"] == "wait")
    assert wait["timed_out"] is True
    assert effects(handle.id) == {"got": 1}


def test_a_job_woken_early_by_run_now_waits_again_until_its_own_deadline() -> None:
    from django_jobqueue import run_now

    handle = steps_tasks.waiter.enqueue("late", "k", timeout=3600)
    run_jobs()
    deadline = Job.objects.get(id=handle.id).wake_at
    run_now(handle.id)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.parked, job.wake_at) == (Status.PENDING, "event", deadline)
    emit("late", key="k", payload="here")
    run_jobs()
    assert Job.objects.get(id=handle.id).result == "here"


def test_one_emit_wakes_all_fifty_jobs_waiting_for_its_name_and_key() -> None:
    handles = [steps_tasks.waiter.enqueue("fan", "out") for _ in range(50)]
    run_jobs()
    assert Job.objects.filter(status=Status.PENDING, parked="event").count() == 50
    assert emit("fan", key="out", payload={"n": 1}) == 50
    run_jobs()
    jobs = Job.objects.filter(id__in=[h.id for h in handles])
    assert {(j.status, str(j.result)) for j in jobs} == {(Status.COMPLETED, "{'n': 1}")}


@pytest.mark.parametrize(
    ("kwargs", "argument", "message"),
    [
        ({"name": "", "key": "k"}, "name", "the event name must be a non-empty string"),
        ({"name": "x" * 201, "key": "k"}, "name", "at most 200 characters"),
        ({"name": "e", "key": "k" * 256}, "key", "at most 255 characters"),
        ({"name": "e", "key": 7}, "key", "must be a string"),
        ({"name": "e", "key": "k", "payload": {1, 2}}, "payload", "not JSON-serialisable"),
        ({"name": "e", "key": "k", "payload": float("nan")}, "payload", r"serialisable \(float\)"),
        ({"name": "e", "key": "k", "payload": {"a": "x\x00"}}, "payload", "cannot be stored"),
    ],
)
def test_emit_refuses_bad_input_naming_it_and_writes_nothing(
    kwargs: dict[str, object], argument: str, message: str
) -> None:
    name = kwargs.pop("name")
    with pytest.raises(InvalidEvent, match=message) as caught:
        emit(name, **kwargs)  # type: ignore[arg-type]
    assert caught.value.argument == argument
    assert not Event.objects.exists()


@pytest.mark.parametrize(
    ("timeout", "message"),
    [("-1", "must not be negative"), ("inf", "finite"), ("nan", "finite")],
)
def test_a_negative_or_non_finite_timeout_fails_the_run_naming_it(
    timeout: str, message: str
) -> None:
    handle = steps_tasks.plain.enqueue("timeout", timeout)
    run_jobs()
    note = JournalEntry.objects.get(job_id=handle.id).note
    assert "InvalidStep" in note
    assert message in note
    assert Job.objects.get(id=handle.id).parked == ""


def test_a_negative_sleep_fails_the_run_naming_it() -> None:
    handle = steps_tasks.plain.enqueue("negative")
    run_jobs()
    note = JournalEntry.objects.get(job_id=handle.id).note
    assert "InvalidStep: ctx.sleep() duration must not be negative" in note


def test_a_parking_run_sends_job_finished_with_its_paused_outcome() -> None:
    from django_jobqueue import job_finished

    seen: list[tuple[str, str]] = []

    def receiver(sender: object, **kw: object) -> None:
        seen.append((str(kw["outcome"]), kw["job"].status))  # type: ignore[attr-defined]

    job_finished.connect(receiver, weak=False)
    try:
        steps_tasks.sleeper.enqueue(3600)
        run_jobs()
    finally:
        job_finished.disconnect(receiver)
    assert seen == [(Outcome.PAUSED, Status.PENDING)]


def test_an_event_no_job_waits_for_is_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """emit() to a name nothing waits for returns 0 and says so in the log, so a name or
    key misspelt at the sender is not silent (issue 30, item 11)."""
    with caplog.at_level(logging.INFO, logger="django_jobqueue"):
        assert emit("nobody-waits", key="k1") == 0
    [record] = [r for r in caplog.records if "nobody-waits" in r.getMessage()]
    assert record.levelno == logging.INFO
    assert "no job waits" in record.getMessage()
