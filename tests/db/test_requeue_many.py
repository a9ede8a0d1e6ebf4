"""``store.requeue_many``: many jobs requeued a batch per transaction, each exactly as
``store.requeue`` would (the same row, the same journal entry), the ones whose state
does not allow it left out; workflow steps and jobs with an idempotency key go through
``requeue`` itself (dependents re-armed, a key another active job holds refused alone).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Status, Workflow, store
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def finished(status: str, **fields: object) -> Job:
    handle = tasks.add.enqueue(1, 2)
    Job.objects.filter(id=handle.id).update(
        status=status, finished_at=timezone.now(), run_count=2, failure_count=2, **fields
    )
    return Job.objects.get(id=handle.id)


def test_plain_jobs_are_requeued_as_requeue_does_and_the_others_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(store.operations, "REQUEUE_BATCH", 2)  # three batches
    dead = finished("dead", result={"x": 1})
    cancelled = finished("cancelled", cancel_requested=True, cancel_actor="a")
    completed = finished("completed")
    pending = tasks.add.enqueue(3, 4)
    by_one = finished("dead")
    store.requeue(job_id=by_one.id, actor="admin:ann")
    ids = [dead.id, cancelled.id, completed.id, pending.id]
    done = store.requeue_many(job_ids=ids, actor="admin:ann")
    assert sorted(done) == sorted([dead.id, cancelled.id])
    fields = ("status", "failure_count", "finished_at", "cancel_requested", "cancel_actor")
    one = Job.objects.values(*fields, "result").get(id=by_one.id)
    for job_id in done:
        assert Job.objects.values(*fields, "result").get(id=job_id) == one
    entry = JournalEntry.objects.get(job_id=dead.id, outcome="requeued")
    same = JournalEntry.objects.get(job_id=by_one.id, outcome="requeued")
    assert (entry.note, entry.actor, entry.run_no) == (same.note, same.actor, same.run_no)
    assert Job.objects.get(id=completed.id).status == Status.COMPLETED  # force was not given
    assert not JournalEntry.objects.filter(job_id=pending.id, outcome="requeued").exists()


def test_force_requeues_a_completed_plain_job_but_never_a_completed_step() -> None:
    completed = finished("completed")
    assert store.requeue_many(job_ids=[completed.id], force=True, actor="t") == [completed.id]
    wf = Workflow("w")
    first = wf.add(tasks.add.s(1, 2), name="first")
    wf.add(tasks.add.s(3, 4), name="second", after=[first])
    wf.enqueue()
    run_jobs()
    step = Job.objects.get(step_name="first")
    assert store.requeue_many(job_ids=[step.id], force=True, actor="t") == []


def test_a_dead_step_is_requeued_through_requeue_and_its_dependents_wait_again() -> None:
    wf = Workflow("w")
    check = wf.add(tasks.always_fails.s(), name="check")
    wf.add(tasks.add.s(3, 4), name="report", after=[check])
    wf.enqueue()
    run_jobs(now=timezone.now() + timedelta(days=1))
    step = Job.objects.get(step_name="check")
    assert step.status == Status.DEAD
    assert Job.objects.get(step_name="report").status == Status.CANCELLED
    assert store.requeue_many(job_ids=[step.id], actor="t") == [step.id]
    assert Job.objects.get(step_name="check").status == Status.PENDING
    assert Job.objects.get(step_name="report").status == Status.WAITING  # re-armed
