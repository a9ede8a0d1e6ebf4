"""Durable steps under real workers (``runworker`` children, SIGKILLed): a job killed
after step 2 of 3 resumes without running steps 1 and 2 again; an atomic task's step
writes exist exactly once through a kill; a sleep frees the slot for another job and
the job resumes at its time (within a poll); an emit from another process wakes a
waiting job."""

from __future__ import annotations

import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest

from django_jobqueue import Status, emit
from django_jobqueue.models import Job, JournalEntry
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import recorded, wait_for
from tests.steps.test_memoized import effects
from tests.taskapp import steps_tasks, tasks
from tests.taskapp.models import Effect, Execution

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

POLL = 1.0


def _kill_after_step_two(runworker: WorkerProcesses, task: object) -> object:
    [doomed] = runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = task.enqueue(hold=120)  # type: ignore[attr-defined]
    wait_for(
        lambda: recorded(handle.id) and len(recorded(handle.id)) == 2,
        timeout=60,
    )
    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.CLAIMED
    assert [s["name"] for s in recorded(job.id)] == ["s1", "s2"]
    return handle


def test_a_job_killed_after_step_two_of_three_resumes_without_running_steps_one_and_two(
    runworker: WorkerProcesses,
) -> None:
    handle = _kill_after_step_two(runworker, steps_tasks.three)
    assert effects(handle.id) == {"s1": 1, "s2": 1}  # type: ignore[attr-defined]
    # A second worker recovers the job once its 3 s lease runs out and finishes it.
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)  # type: ignore[attr-defined]
    job = Job.objects.get(id=handle.id)  # type: ignore[attr-defined]
    assert job.run_count == 2
    assert job.failure_count == 1  # the killed run's stale recovery
    assert job.result == ["s1", "s2", "s3"]
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}  # type: ignore[attr-defined]
    assert [s["run"] for s in recorded(job.id)] == [1, 1, 2]
    assert Execution.objects.filter(job_id=job.id).count() == 2  # the code between steps reran


def test_an_atomic_task_s_step_writes_exist_exactly_once_through_a_kill(
    runworker: WorkerProcesses, tmp_path: Path
) -> None:
    [doomed] = runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = steps_tasks.atomic_three.enqueue(hold=120)
    # The run's transaction holds both steps' writes and records: wait until it is
    # sleeping after step 2 (its Effect rows are not visible yet), then kill it.
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.CLAIMED, timeout=60)
    import time

    time.sleep(2)
    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    assert Effect.objects.filter(job_id=handle.id).count() == 0  # rolled back with the run
    assert recorded(handle.id) == []
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}
    assert [s["run"] for s in recorded(handle.id)] == [2, 2, 2]


def test_a_sleep_frees_the_slot_and_the_job_resumes_at_its_time(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    sleeper = steps_tasks.sleeper.enqueue(4)
    wait_for(lambda: Job.objects.get(id=sleeper.id).parked == "sleep", timeout=60)
    parked = Job.objects.get(id=sleeper.id)
    assert parked.status == Status.PENDING
    assert parked.wake_at is not None
    # The one slot is free: another job runs while the first sleeps.
    other = tasks.record.enqueue(n=1)
    wait_for(lambda: Job.objects.get(id=other.id).status == Status.COMPLETED, timeout=30)
    assert Job.objects.get(id=other.id).finished_at < parked.wake_at  # type: ignore[operator]
    wait_for(lambda: Job.objects.get(id=sleeper.id).status == Status.COMPLETED, timeout=60)
    resumed = Execution.objects.filter(job_id=sleeper.id).order_by("id").last()
    assert resumed is not None
    assert resumed.run_no == 2
    late = resumed.started_at - parked.wake_at
    assert timedelta(0) <= late <= timedelta(seconds=POLL + 1), late
    assert effects(sleeper.id) == {"before": 1, "after": 1}
    assert Job.objects.get(id=sleeper.id).failure_count == 0


def test_an_emit_from_another_process_wakes_a_job_a_worker_parked(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "2", "--poll-interval", str(POLL))
    handle = steps_tasks.waiter.enqueue("paid", "order-1", timeout=3600)
    wait_for(lambda: Job.objects.get(id=handle.id).parked == "event", timeout=60)
    assert emit("paid", key="order-1", payload={"amount": 5}) == 1
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=30)
    assert Job.objects.get(id=handle.id).result == {"amount": 5}
    assert effects(handle.id) == {"got": 1}


def test_an_emit_racing_each_job_s_wait_is_never_lost_and_delivered_once(
    runworker: WorkerProcesses,
) -> None:
    """Each job waits (no timeout) for an event of its own key; the test emits each key
    the moment it sees that job's run start, so the emit races the wait's check and
    parking: every job must get its event, once, whichever side came first."""
    runworker.start_ready("--concurrency", "4", "--poll-interval", str(POLL), count=2)
    handles = {f"k{i}": steps_tasks.waiter.enqueue("race", f"k{i}") for i in range(40)}
    pending = dict(handles)
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        started = set(
            Execution.objects.filter(job_id__in=[h.id for h in pending.values()]).values_list(
                "job_id", flat=True
            )
        )
        for key, handle in list(pending.items()):
            if handle.id in started:
                emit("race", key=key, payload={"key": key})
                del pending[key]
        time.sleep(0.01)
    assert not pending, "some jobs never started"
    ids = [h.id for h in handles.values()]
    wait_for(lambda: Job.objects.filter(id__in=ids, status=Status.COMPLETED).count() == 40, 90)
    for key, handle in handles.items():
        job = Job.objects.get(id=handle.id)
        assert job.result == {"key": key}
        [wait] = [s for s in recorded(job.id) if s["kind"] == "wait"]
        assert wait["event_id"] is not None
        assert effects(handle.id) == {"got": 1}


def test_a_stale_run_that_goes_on_after_its_job_was_recovered_records_nothing(
    runworker: WorkerProcesses,
) -> None:
    """A worker frozen (SIGSTOP) after step 2 loses its 3 s lease; a second worker
    recovers the job and completes it; the first, thawed (SIGCONT), runs on into step
    3: its record is refused by the guard, its step's writes roll back with it, and it
    settles nothing."""
    [stale] = runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = steps_tasks.three_in_transactions.enqueue(hold=8)
    wait_for(lambda: len(recorded(handle.id)) == 2, timeout=60)
    stale.send(signal.SIGSTOP)
    try:
        runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
        wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)
    finally:
        stale.send(signal.SIGCONT)
    done = Job.objects.get(id=handle.id)
    assert done.run_count == 2
    assert [s["run"] for s in recorded(done.id)] == [1, 1, 2]
    # The thawed run reaches step 3 once its 8 s are up, and is refused there.
    time.sleep(9)
    job = Job.objects.get(id=handle.id)
    assert recorded(job.id) == recorded(done.id)
    assert (job.status, job.result, job.run_count) == (Status.COMPLETED, ["s1", "s2", "s3"], 2)
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}
    outcomes = list(
        JournalEntry.objects.filter(job_id=handle.id)
        .order_by("id")
        .values_list("run_no", "outcome")
    )
    assert outcomes == [(1, "stale-recovered"), (2, "completed")]
    assert stale.alive()


def test_fifty_jobs_parked_by_workers_all_wake_on_one_emit(runworker: WorkerProcesses) -> None:
    runworker.start_ready("--concurrency", "4", "--poll-interval", str(POLL), count=2)
    ids = [steps_tasks.waiter.enqueue("fan", "out").id for _ in range(50)]
    parked = Job.objects.filter(id__in=ids, status=Status.PENDING, parked="event")
    wait_for(lambda: parked.count() == 50, timeout=90)
    assert emit("fan", key="out", payload={"go": True}) == 50
    done = Job.objects.filter(id__in=ids, status=Status.COMPLETED)
    wait_for(lambda: done.count() == 50, timeout=90)
    assert {str(j.result) for j in done} == {"{'go': True}"}
    assert all(effects(i) == {"got": 1} for i in ids)
