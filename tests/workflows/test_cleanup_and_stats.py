"""Cleanup removes a finished workflow with its steps and edges, never a part of a
running one; stats count waiting steps apart from the backlog."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Workflow, chain, cleanup, stats
from django_jobqueue.models import Job, JournalEntry, StepEdge
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.store import delete_finished
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

SOON = timedelta(minutes=1)


def test_cleanup_removes_a_finished_workflow_whole_and_leaves_a_running_one() -> None:
    done = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    run_jobs()
    wf = Workflow("running")
    a = wf.add(tasks.wf_value.s(x=3), name="a")
    wf.add(tasks.wf_step.s(label="b"), name="b", after=[a])
    running = wf.enqueue()
    run_jobs(kinds=[tasks.wf_value])  # a completes; b waits to be run
    plain = tasks.wf_value.enqueue(x=4)
    run_jobs(kinds=[tasks.wf_value])
    later = timezone.now() + SOON
    assert cleanup(finished_before=later, dry_run=True) == 3  # two steps and the plain job
    assert cleanup(finished_before=later) == 3
    assert not WorkflowRow.objects.filter(id=done.id).exists()
    assert not Job.objects.filter(workflow_id=done.id).exists()
    assert not StepEdge.objects.filter(workflow_id=done.id).exists()
    assert not Job.objects.filter(id=plain.id).exists()
    kept = Job.objects.filter(workflow_id=running.id)
    assert sorted(kept.values_list("step_name", "status")) == [
        ("a", "completed"),
        ("b", "pending"),
    ]
    assert JournalEntry.objects.filter(job__workflow_id=running.id).exists()
    assert StepEdge.objects.filter(workflow_id=running.id).count() == 1


def test_deleting_chosen_finished_jobs_skips_the_steps_of_a_running_workflow() -> None:
    wf = Workflow("running")
    a = wf.add(tasks.wf_value.s(x=1), name="a")
    wf.add(tasks.wf_step.s(label="b"), name="b", after=[a])
    handle = wf.enqueue()
    run_jobs(kinds=[tasks.wf_value])
    step_a = handle.steps["a"].id
    assert delete_finished(job_ids=[step_a]) == []
    assert Job.objects.filter(id=step_a).exists()


def test_cleanup_filtered_by_kind_leaves_workflows_alone() -> None:
    handle = chain(tasks.wf_value.s(x=1)).enqueue()
    run_jobs()
    assert cleanup(finished_before=timezone.now() + SOON, kind=tasks.wf_value.kind) == 0
    assert WorkflowRow.objects.filter(id=handle.id).exists()


def test_stats_count_waiting_steps_apart_from_the_backlog() -> None:
    chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2), tasks.wf_value.s(x=3)).enqueue()
    s = stats()
    assert s.waiting == 2
    assert s.pending_total == 1
    assert s.scheduled == 0
    assert s.to_dict()["waiting"] == 2
