"""Memoized steps through the public API, in-process (``run_jobs``): a recorded step
never runs again, a run that lost its claim records nothing, and the steps show in the
job's row and journal."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Status, StepError, store
from django_jobqueue.models import Job, JournalEntry, StepRecord
from django_jobqueue.run.context import Context
from django_jobqueue.run.transactional import run as run_job
from django_jobqueue.store import recover_expired
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.helpers import recorded
from tests.taskapp import steps_tasks
from tests.taskapp.models import Effect

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def effects(job_id: object) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in Effect.objects.filter(job_id=job_id).values_list("worker", flat=True):
        counts[step] = counts.get(step, 0) + 1
    return counts


def test_a_job_of_three_steps_runs_each_once_and_records_them_in_order() -> None:
    handle = steps_tasks.three.enqueue()
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result == ["s1", "s2", "s3"]
    steps = recorded(job.id)
    assert [s["name"] for s in steps] == ["s1", "s2", "s3"]
    assert all(s["kind"] == "step" and s["seconds"] >= 0 and s["run"] == 1 for s in steps)
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}
    entry = JournalEntry.objects.get(job_id=handle.id)
    assert "steps recorded: s1 (" in entry.note
    assert "s3 (" in entry.note


def _claim(job_id: object, worker: str = "w-1") -> store.Claimed:
    [claimed] = store.claim_jobs(
        worker_id=worker, request=store.ClaimRequest(limit=1, kinds=["tests.steps.three"])
    )
    assert claimed.id == job_id
    return claimed


def _run(claimed: store.Claimed, worker: str = "w-1") -> object:
    ctx = Context.for_job(claimed)
    return run_job(
        registry.find(claimed.kind),
        claimed,
        ctx,
        alias="default",
        worker_id=worker,
        max_output_bytes=1 << 20,
    )


def test_a_later_run_returns_the_recorded_steps_without_running_them() -> None:
    handle = steps_tasks.three.enqueue()
    # The first run records its three steps but is never settled (its worker "dies"):
    # the lease runs out and another run replays.
    claimed = _claim(handle.id)
    assert _run(claimed).end == "completed"  # type: ignore[attr-defined]
    Job.objects.filter(id=handle.id).update(claim_expires_at=timezone.now() - timedelta(1))
    assert recover_expired() == 1
    Job.objects.filter(id=handle.id).update(visible_at=timezone.now())
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.run_count == 2
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}
    assert [s["run"] for s in recorded(job.id)] == [1, 1, 1]


def test_a_stale_run_whose_job_was_recovered_records_nothing() -> None:
    handle = steps_tasks.three.enqueue()
    stale = _claim(handle.id, "w-stale")
    # Its lease runs out and the job is recovered and claimed by another worker.
    Job.objects.filter(id=handle.id).update(claim_expires_at=timezone.now() - timedelta(1))
    assert recover_expired() == 1
    Job.objects.filter(id=handle.id).update(visible_at=timezone.now())
    fresh = _claim(handle.id, "w-fresh")
    # The stale run now goes on: its first step's record is refused.
    result = _run(stale, "w-stale")
    assert result.lost  # type: ignore[attr-defined]
    assert "ClaimLost" in result.note  # type: ignore[attr-defined]
    job = Job.objects.get(id=handle.id)
    assert recorded(job.id) == []
    assert job.status == Status.CLAIMED
    assert job.claimed_by == "w-fresh"
    # The fresh run records and completes; the stale run's effect is its own (it ran
    # s1's code before the refusal), its record is not there.
    assert _run(fresh, "w-fresh").end == "completed"  # type: ignore[attr-defined]
    job.refresh_from_db()
    assert [s["run"] for s in recorded(job.id)] == [2, 2, 2]


def test_reusing_a_step_name_in_one_run_is_an_error() -> None:
    handle = steps_tasks.plain.enqueue("reuse")
    run_jobs()
    entry = JournalEntry.objects.get(job_id=handle.id)
    assert "StepError" in entry.note
    assert "'a' is used twice in one run" in entry.note


def test_a_step_inside_a_step_is_an_error() -> None:
    handle = steps_tasks.plain.enqueue("nested")
    run_jobs()
    note = JournalEntry.objects.get(job_id=handle.id).note
    assert "StepError" in note
    assert "inside step 'outer'" in note


def test_a_step_result_that_cannot_be_stored_fails_the_run_recording_nothing() -> None:
    handle = steps_tasks.plain.enqueue("unstorable")
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert recorded(job.id) == []
    note = JournalEntry.objects.get(job_id=handle.id).note
    assert "InvalidStep" in note
    assert "the result of step 'bad' is not JSON-serialisable" in note


def test_steps_outside_a_running_job_are_an_error() -> None:
    ctx = Context(job_id=uuid.uuid4(), kind="k", run_count=1, failure_count=0)
    with pytest.raises(StepError, match="this context"):
        ctx.step("a", int)
    with pytest.raises(StepError):
        ctx.sleep(1)
    with pytest.raises(StepError):
        ctx.wait_for("e", key="k")


@pytest.mark.parametrize(
    ("how", "value", "message"),
    [
        ("bad-name", "", "the step name must be a non-empty string of at most 200"),
        ("bad-name", "n" * 201, "the step name must be a non-empty string of at most 200"),
        ("not-callable", "", "fn must be callable, got 42"),
        ("naive", "", "ctx.sleep_until() takes an aware datetime"),
    ],
)
def test_bad_step_input_fails_the_run_naming_it_and_records_nothing(
    how: str, value: str, message: str
) -> None:
    handle = steps_tasks.plain.enqueue(how, value)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert recorded(job.id) == []
    assert job.parked == ""
    note = JournalEntry.objects.get(job_id=handle.id).note
    assert "InvalidStep" in note
    assert message in note


def test_a_sleep_inside_the_task_s_own_transaction_fails_the_run_saying_so() -> None:
    handle = steps_tasks.sleep_in_atomic.enqueue()
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.DEAD  # max_failures=1: no pause loop
    assert job.parked == ""
    assert effects(handle.id) == {}
    note = JournalEntry.objects.get(job_id=handle.id).note
    assert "inside a transaction.atomic() block of the task's own" in note


def test_deleting_a_finished_job_deletes_its_records_and_no_one_else_s() -> None:
    """Records have no database constraint (as the journal): every delete the store
    makes goes through the ORM, which takes a job's records with it."""
    gone, kept = steps_tasks.three.enqueue(), steps_tasks.three.enqueue()
    run_jobs()
    assert len(recorded(gone.id)) == len(recorded(kept.id)) == 3
    assert store.delete_finished(job_ids=[gone.id]) == [gone.id]
    assert not StepRecord.objects.filter(job_id=gone.id).exists()
    assert len(recorded(kept.id)) == 3
    deleted = store.cleanup(finished_before=timezone.now() + timedelta(seconds=1))
    assert deleted == 1
    assert not StepRecord.objects.exists()
