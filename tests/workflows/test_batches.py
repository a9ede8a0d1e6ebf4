"""Batches: an open set whose callbacks fire once, after the last member, however many
members added members while they ran."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Batch, InvalidTransition, Status, workflow
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def callbacks() -> Batch:
    return Batch(
        on_success=tasks.wf_summary.s(),
        on_failure=tasks.wf_summary.s(),
        on_finish=tasks.wf_summary.s(),
        name="crawl",
    )


def test_a_batch_that_grows_at_run_time_fires_each_callback_once_after_every_member() -> None:
    batch = callbacks()
    batch.add(tasks.wf_crawl.s(page=0, last=3))
    batch.add(tasks.wf_crawl.s(page=10, last=11))
    handle = batch.enqueue()
    run_jobs()
    found = workflow(handle.id)
    steps = found.steps
    members = [h for n, h in steps.items() if not n.startswith("on_")]
    assert sorted(h.result for h in members) == [0, 1, 2, 3, 10, 11]
    assert steps["on_success"].status == Status.COMPLETED
    assert steps["on_success"].run_count == 1
    assert steps["on_success"].result == {"completed": 6}
    assert steps["on_finish"].result == {"completed": 6}
    assert steps["on_failure"].status == Status.CANCELLED
    last_member = max(h.finished_at for h in members)
    assert steps["on_finish"].job.journal.get(outcome="completed").started_at >= last_member
    assert found.status == "completed"
    assert found.workflow.steps_total == 9


def test_a_member_that_dies_fires_on_failure_and_on_finish_not_on_success() -> None:
    batch = callbacks()
    batch.add(tasks.wf_value.s(x=1))
    batch.add(tasks.wf_step.s(label="bad", die=True))
    handle = batch.enqueue()
    run_jobs()
    steps = workflow(handle.id).steps
    assert steps["on_success"].status == Status.CANCELLED
    assert steps["on_failure"].result == {"completed": 1, "dead": 1}
    assert steps["on_finish"].result == {"completed": 1, "dead": 1}
    assert workflow(handle.id).status == "failed"


def test_an_atomic_members_add_commits_with_its_settlement_or_not_at_all() -> None:
    batch = callbacks()
    batch.add(tasks.wf_crawl_atomic.s(page=0, last=2, fail_first=True))
    handle = batch.enqueue()
    run_jobs(now=timezone.now() + timedelta(days=1))
    steps = workflow(handle.id).steps
    members = sorted(
        (h for n, h in steps.items() if not n.startswith("on_")), key=lambda h: h.result
    )
    # Each member's failed first run added a member that rolled back with it.
    assert [h.result for h in members] == [0, 1, 2]
    assert steps["on_success"].run_count == 1
    assert steps["on_success"].result == {"completed": 3}


def test_a_callback_cannot_add_a_member_and_a_finished_batch_takes_none() -> None:
    batch = Batch(on_finish=tasks.wf_value.s(x=0))
    batch.add(tasks.wf_value.s(x=1))
    handle = batch.enqueue()
    run_jobs()
    from django_jobqueue.workflows.batch import BatchContext

    with pytest.raises(InvalidTransition, match="callback"):
        BatchContext(handle.id, step_name="on_finish").add(tasks.wf_value.s(x=2))
    with pytest.raises(InvalidTransition, match="completed"):
        BatchContext(handle.id, step_name="0").add(tasks.wf_value.s(x=2))
    assert Job.objects.filter(workflow_id=handle.id).count() == 2


def test_a_plain_job_and_a_step_outside_a_batch_have_no_batch() -> None:
    from django_jobqueue import chain

    handle = chain(tasks.wf_step.s(label="a")).enqueue()
    run_jobs()
    assert workflow(handle.id).steps["0"].result == {"label": "a", "parents": {}}
