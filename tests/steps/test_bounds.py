"""A job's durable steps are bounded: MAX_STEPS records and MAX_STEPS_BYTES of JSON in
all. A step past either is refused with InvalidStep naming the bound, the step and the
numbers, nothing of it recorded, and the run fails as on any exception."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry, StepRecord
from django_jobqueue.testing import run_jobs
from tests.helpers import recorded
from tests.taskapp import steps_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _settled(job_id: object) -> tuple[Job, str]:
    job = Job.objects.get(id=job_id)
    note = JournalEntry.objects.filter(job_id=job_id).order_by("-id").values_list("note", flat=True)
    return job, note.first() or ""


def test_a_step_past_max_steps_is_refused_naming_the_bound_and_records_nothing_of_it() -> None:
    handle = steps_tasks.many.enqueue(5)
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_STEPS": 3}):
        run_jobs()
    job, note = _settled(handle.id)
    assert job.status == Status.DEAD  # max_failures=1
    assert [r["name"] for r in recorded(job.id)] == ["s0", "s1", "s2"]
    assert "InvalidStep" in note
    assert "recording step 's3' would make 4 recorded steps, over MAX_STEPS (3)" in note


def test_a_step_past_max_steps_bytes_is_refused_naming_the_sizes() -> None:
    handle = steps_tasks.many.enqueue(4, size=1000)
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_STEPS_BYTES": 2500}):
        run_jobs()
    job, note = _settled(handle.id)
    assert job.status == Status.DEAD
    assert [r["name"] for r in recorded(job.id)] == ["s0", "s1"]
    assert "InvalidStep" in note
    assert "recording step 's2'" in note
    assert "over MAX_STEPS_BYTES (2,500)" in note


def test_steps_within_both_bounds_complete() -> None:
    handle = steps_tasks.many.enqueue(3, size=10)
    with override_settings(
        JOBQUEUE={**settings.JOBQUEUE, "MAX_STEPS": 3, "MAX_STEPS_BYTES": 10_000}
    ):
        run_jobs()
    job, _ = _settled(handle.id)
    assert job.status == Status.COMPLETED
    assert len(recorded(job.id)) == 3


def test_a_sleep_counts_against_max_steps_and_is_refused_before_it_parks() -> None:
    handle = steps_tasks.plain.enqueue("step-then-sleep")
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_STEPS": 1}):
        run_jobs()
    job, note = _settled(handle.id)
    assert (job.status, job.parked) == (Status.DEAD, "")  # refused before its parking was written
    assert [r["name"] for r in recorded(job.id)] == ["before"]
    assert "recording sleep 'sleep 1' would make 2 recorded steps, over MAX_STEPS (1)" in note


def test_a_stored_record_that_cannot_be_read_stops_the_replay_naming_it() -> None:
    """A record written around the queue (or carried over by migration 0022 from a list
    that could not be read) is never guessed past: the run fails with StepError, and
    nothing more is recorded."""
    handle = steps_tasks.many.enqueue(2)
    StepRecord.objects.create(job_id=handle.id, record={"unreadable": "[1, 2"}, size=25)
    run_jobs()
    job, note = _settled(handle.id)
    assert job.status == Status.DEAD
    assert "StepError" in note
    assert "stored steps cannot be read (a record {'unreadable': '[1, 2'})" in note
    assert recorded(job.id) == [{"unreadable": "[1, 2"}]
