"""``store.cancel_many`` and ``store.run_now_many``, the set-based batches the admin's
filter-wide actions use (issue 30, item 4): the same rows and journal entries as the
one-job operations, only jobs in a state the action allows touched (a job claimed since
it was read is asked to stop, never overwritten), a workflow step's dependents following
its cancellation as with ``cancel``."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Status, Workflow, store, workflow
from django_jobqueue.models import Job, JournalEntry
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def put(job_id: object, **fields: object) -> None:
    Job.objects.filter(id=job_id).update(**fields)


def test_cancel_many_cancels_the_idle_asks_the_claimed_and_leaves_the_rest() -> None:
    now = timezone.now()
    pending = [tasks.add.enqueue(1, n).id for n in range(5)]
    claimed = tasks.add.enqueue(2, 0).id  # read as pending, claimed before the batch
    put(
        claimed,
        status=Status.CLAIMED,
        claimed_by="w:1",
        run_count=1,
        claim_expires_at=now + timedelta(minutes=5),
    )
    stopping = tasks.add.enqueue(2, 1).id
    put(
        stopping,
        status=Status.CLAIMED,
        claimed_by="w:1",
        run_count=1,
        cancel_requested=True,
        cancel_actor="someone",
        claim_expires_at=now + timedelta(minutes=5),
    )
    finished = tasks.add.enqueue(2, 2).id
    put(finished, status=Status.COMPLETED, finished_at=now, run_count=1)

    done = store.cancel_many(job_ids=[*pending, claimed, stopping, finished], actor="ops")

    assert sorted(done) == sorted([*pending, claimed])
    assert Job.objects.filter(id__in=pending, status=Status.CANCELLED).count() == 5
    assert not Job.objects.filter(id__in=pending, finished_at=None).exists()
    notes = JournalEntry.objects.filter(job_id__in=pending).values_list("note", flat=True)
    assert sorted(notes) == ["cancelled while pending by ops"] * 5
    running = Job.objects.get(id=claimed)
    assert (running.status, running.cancel_requested, running.cancel_actor) == (
        Status.CLAIMED,
        True,
        "ops",
    )
    assert Job.objects.get(id=stopping).cancel_actor == "someone"  # asked once, not again
    assert Job.objects.get(id=finished).status == Status.COMPLETED
    assert not JournalEntry.objects.filter(job_id__in=[claimed, stopping, finished]).exists()


def two_steps(name: str) -> uuid.UUID:
    wf = Workflow(name)
    a = wf.add(tasks.wf_step.s(label="a"), name="a")
    wf.add(tasks.wf_step.s(label="b"), name="b", after=[a])
    return wf.enqueue().id


def test_cancel_many_of_a_workflow_step_cancels_its_dependents_as_cancel_does() -> None:
    by_batch, by_one = two_steps("by-batch"), two_steps("by-one")
    plain = tasks.add.enqueue(1, 1).id
    first = workflow(by_batch).steps["a"].id

    done = store.cancel_many(job_ids=[first, plain], actor="ops")
    store.cancel(job_id=workflow(by_one).steps["a"].id, actor="ops")

    assert sorted(done) == sorted([first, plain])
    batch, one = workflow(by_batch), workflow(by_one)
    assert {n: h.status for n, h in batch.steps.items()} == {
        "a": Status.CANCELLED,
        "b": Status.CANCELLED,
    }
    assert {n: h.status for n, h in one.steps.items()} == {
        n: h.status for n, h in batch.steps.items()
    }
    assert batch.status == one.status
    assert JournalEntry.objects.filter(job_id=batch.steps["b"].id).count() == 1


def test_run_now_many_makes_the_scheduled_runnable_and_journals_each() -> None:
    later = [tasks.add.using(delay=timedelta(hours=1)).enqueue(1, n).id for n in range(3)]
    runnable = tasks.add.enqueue(1, 9).id

    done = store.run_now_many(job_ids=[*later, runnable], actor="ops")

    assert sorted(done) == sorted(later)
    assert not Job.objects.filter(id__in=later, visible_at__gt=timezone.now()).exists()
    entries = JournalEntry.objects.filter(job_id__in=later, outcome="run-now")
    assert entries.count() == 3
    assert all(
        n.startswith("run now (was scheduled for ") for n in entries.values_list("note", flat=True)
    )
    assert not JournalEntry.objects.filter(job_id=runnable).exists()
