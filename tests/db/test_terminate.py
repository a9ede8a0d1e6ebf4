"""``terminate`` below the worker: what it writes for each state (the store, the handle
and ``manage.py jobqueue terminate``), and what it refuses, writing nothing."""

from __future__ import annotations

import uuid

import pytest
from django.core.management import CommandError

from django_jobqueue import InvalidTransition, JobNotFound, Status, store
from django_jobqueue.models import Job, JournalEntry, Outcome, TerminateRequest
from django_jobqueue.task.handle import JobHandle
from tests.db.test_command import ACTOR, jobqueue, jobqueue_fails, make
from tests.helpers import journal_of

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_terminate_cancels_a_pending_job_at_once_naming_the_operator() -> None:
    job = make("t.one", Status.PENDING)
    out, _ = jobqueue("terminate", str(job.id))
    assert f"{job.id}: cancelled" in out
    job.refresh_from_db()
    assert job.status == Status.CANCELLED
    [entry] = journal_of(job.id)
    assert entry.outcome == Outcome.CANCELLED
    assert entry.actor == ACTOR


def test_terminate_of_a_claimed_job_asks_its_worker_for_that_run_and_renews() -> None:
    job = make("t.one", Status.CLAIMED, run_count=3)
    out, _ = jobqueue("terminate", str(job.id))
    assert f"{job.id}: terminate requested" in out
    job.refresh_from_db()
    assert (job.status, job.cancel_requested, job.cancel_actor) == (Status.CLAIMED, True, ACTOR)
    assert store.terminate_requested(job_ids=[job.id, uuid.uuid4()]) == {job.id: (3, ACTOR)}
    assert not JournalEntry.objects.filter(job_id=job.id).exists(), "the worker writes it"

    JobHandle(job).terminate(actor="ops")  # a second terminate renews the request
    assert store.terminate_requested(job_ids=[job.id]) == {job.id: (3, "ops")}
    assert TerminateRequest.objects.count() == 1


def test_terminate_refuses_finished_jobs_naming_their_state_and_writes_nothing() -> None:
    done = make("t.one", Status.COMPLETED)
    dead = make("t.one", Status.DEAD)
    message, _, err = jobqueue_fails("terminate", str(done.id), str(dead.id))
    assert "2 of 2" in message
    assert f"Job {done.id} is completed; only pending or claimed jobs can be terminated" in err
    assert f"Job {dead.id} is dead" in err
    with pytest.raises(InvalidTransition, match="is completed"):
        store.terminate(job_id=done.id)
    with pytest.raises(JobNotFound):
        store.terminate(job_id=uuid.uuid4())
    assert not TerminateRequest.objects.exists()
    assert not JournalEntry.objects.exists()
    assert set(Job.objects.values_list("status", flat=True)) == {Status.COMPLETED, Status.DEAD}


def test_terminate_of_a_cancelled_job_is_a_no_op_and_without_ids_a_usage_error() -> None:
    job = make("t.one", Status.CANCELLED)
    assert store.terminate(job_id=job.id).status == Status.CANCELLED
    assert not JournalEntry.objects.exists()
    with pytest.raises(CommandError, match="give the ids of the jobs to stop"):
        jobqueue("terminate")


def test_a_terminated_job_deleted_takes_its_request_with_it() -> None:
    job = make("t.one", Status.CLAIMED)
    store.terminate(job_id=job.id, actor="ops")
    Job.objects.filter(id=job.id).update(status=Status.CANCELLED)
    assert store.delete_finished(job_ids=[job.id]) == [job.id]
    assert not TerminateRequest.objects.exists()
