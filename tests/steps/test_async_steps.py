"""Durable steps in ``async def`` tasks (``ctx.astep``, ``ctx.asleep``,
``ctx.await_event``): in-process through ``run_jobs``, and under real workers on their
event loop (``runworker`` children, one SIGKILLed after step 2 of 3): each step's side
effect once, sleeps and waits parking the job without a failure, and every misuse a
clear error."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Status, emit
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.testing import run_jobs
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import recorded, wait_for
from tests.steps.test_memoized import effects
from tests.taskapp import steps_tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.sqlite]

LATER = timedelta(days=30)
POLL = 1.0


def _outcomes(job_id: object) -> list[str]:
    rows = JournalEntry.objects.filter(job_id=job_id).order_by("id")
    return list(rows.values_list("outcome", flat=True))


@pytest.mark.django_db
def test_an_async_task_s_steps_run_once_each_and_are_recorded_in_order() -> None:
    handle = steps_tasks.athree.enqueue()
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, ["s1", "s2", "s3"])
    assert effects(job.id) == {"s1": 1, "s2": 1, "s3": 1}
    assert [(s["name"], s["seq"], s["run"]) for s in recorded(job.id)] == [
        ("s1", 0, 1),
        ("s2", 1, 1),
        ("s3", 2, 1),
    ]
    assert "steps recorded: s1 (" in JournalEntry.objects.get(job_id=job.id).note


@pytest.mark.django_db
def test_an_async_sleep_parks_the_job_and_it_resumes_past_its_steps() -> None:
    handle = steps_tasks.asleeper.enqueue(3600)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.parked, job.failure_count) == (Status.PENDING, "sleep", 0)
    assert [s["name"] for s in recorded(job.id)] == ["before", "sleep 1"]
    run_jobs(now=timezone.now() + LATER)
    job.refresh_from_db()
    assert (job.status, job.result) == (Status.COMPLETED, "woke")
    assert effects(job.id) == {"before": 1, "after": 1}
    assert _outcomes(job.id) == ["paused", "completed"]


@pytest.mark.django_db
def test_an_async_wait_gets_the_event_s_payload_once() -> None:
    handle = steps_tasks.awaiter.enqueue("paid", "order-9", timeout=3600)
    run_jobs()
    assert Job.objects.get(id=handle.id).parked == "event"
    assert emit("paid", key="order-9", payload={"amount": 3}) == 1
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, {"amount": 3})
    assert effects(job.id) == {"got": 1}
    assert [s["kind"] for s in recorded(job.id)] == ["wait", "step"]


@pytest.mark.django_db
def test_an_async_wait_that_times_out_returns_none() -> None:
    handle = steps_tasks.awaiter.enqueue("never", "k", timeout=60)
    run_jobs()
    run_jobs(now=timezone.now() + LATER)
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, None)


@pytest.mark.django_db(transaction=True)
def test_a_plain_function_s_writes_commit_with_its_async_step_s_record() -> None:
    """``astep`` with a plain function runs it on the run's ORM thread in a transaction
    with its record: a step whose record cannot be written leaves no write behind."""
    handle = steps_tasks.aplain.enqueue("rolled-back")
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert effects(handle.id) == {}
    assert recorded(handle.id) == []


@pytest.mark.django_db
def test_versions_and_patches_are_kept_by_async_steps() -> None:
    handle = steps_tasks.aplain.enqueue("versioned")
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, 4)
    by_name = {s["name"]: s for s in recorded(job.id)}
    assert (by_name["v"]["version"], by_name["change"]["result"]) == (2, True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("how", "message"),
    [
        (
            "sync-step",
            "ctx.step() is called on an event loop (an async def task): there, "
            "use await ctx.astep()",
        ),
        ("sync-sleep", "use await ctx.asleep()"),
        ("nested", "ctx.astep('inner') is called inside step 'outer'"),
        ("gather", "is called inside step 'a'"),
        ("reuse", "step 'a' is used twice in one run"),
        ("unstorable", "the result of step 'bad' is not JSON-serialisable"),
        ("awaitable", "fn returned an awaitable without being a coroutine function"),
        ("rolled-back", "the result of step 'bad' is not JSON-serialisable"),
    ],
)
def test_a_misuse_of_async_steps_fails_the_job_naming_it(how: str, message: str) -> None:
    handle = steps_tasks.aplain.enqueue(how)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.DEAD
    note = JournalEntry.objects.get(job_id=job.id).note
    assert message in note, note
    if how in ("nested", "gather"):
        assert "StepError" in note
        assert [s["name"] for s in recorded(job.id)] == []
    if how == "rolled-back":  # a plain function's writes roll back with its record
        assert effects(job.id) == {}


@pytest.mark.django_db(transaction=True)
def test_an_async_task_killed_after_step_two_of_three_resumes_at_the_third(
    runworker: WorkerProcesses,
) -> None:
    [doomed] = runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = steps_tasks.athree.enqueue(hold=120)
    wait_for(lambda: len(recorded(handle.id)) == 2, timeout=60)
    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    assert Job.objects.get(id=handle.id).status == Status.CLAIMED
    assert effects(handle.id) == {"s1": 1, "s2": 1}
    # A second worker recovers the job once its 3 s lease runs out and finishes it.
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)
    job = Job.objects.get(id=handle.id)
    assert (job.run_count, job.failure_count) == (2, 1)
    assert job.result == ["s1", "s2", "s3"]
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}
    assert [s["run"] for s in recorded(job.id)] == [1, 1, 2]
    assert Execution.objects.filter(job_id=job.id).count() == 2  # the code between reran


@pytest.mark.django_db(transaction=True)
def test_an_async_sleep_frees_the_event_loop_and_the_job_resumes_under_a_worker(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready(
        "--concurrency", "1", "--async-concurrency", "1", "--poll-interval", str(POLL)
    )
    sleeper = steps_tasks.asleeper.enqueue(4)
    wait_for(lambda: Job.objects.get(id=sleeper.id).parked == "sleep", timeout=60)
    # The one place on the loop is free: another async job runs while the first sleeps.
    other = steps_tasks.athree.enqueue()
    wait_for(lambda: Job.objects.get(id=other.id).status == Status.COMPLETED, timeout=30)
    assert Job.objects.get(id=sleeper.id).status == Status.PENDING
    wait_for(lambda: Job.objects.get(id=sleeper.id).status == Status.COMPLETED, timeout=60)
    job = Job.objects.get(id=sleeper.id)
    assert (job.result, job.failure_count, job.run_count) == ("woke", 0, 2)
    assert effects(sleeper.id) == {"before": 1, "after": 1}
    assert _outcomes(sleeper.id) == ["paused", "completed"]


@pytest.mark.django_db(transaction=True)
def test_an_emit_wakes_an_async_job_a_worker_parked(runworker: WorkerProcesses) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = steps_tasks.awaiter.enqueue("shipped", "parcel-1", timeout=3600)
    wait_for(lambda: Job.objects.get(id=handle.id).parked == "event", timeout=60)
    assert emit("shipped", key="parcel-1", payload={"carrier": "x"}) == 1
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=30)
    assert Job.objects.get(id=handle.id).result == {"carrier": "x"}
    assert effects(handle.id) == {"got": 1}
    assert _outcomes(handle.id) == ["paused", "completed"]
