"""A workflow's edges carry no database keys (their checks were most of a large chord's
write): the steps' own key to their workflow is kept, and every delete the store makes
still takes a step's or a workflow's edges with it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from django_jobqueue import chain, chord
from django_jobqueue.models import Job, StepEdge
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.store import delete_finished
from django_jobqueue.store.pruning import cleanup_workflows
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _point_at(job_id: uuid.UUID, workflow_id: uuid.UUID) -> None:
    """Make a job a step of this workflow, its key checked now (at commit otherwise)."""
    with transaction.atomic():
        Job.objects.filter(id=job_id).update(workflow_id=workflow_id)
        connection.check_constraints(table_names=[Job._meta.db_table])


def _indexed(table: str) -> list[tuple[str, ...]]:
    """The column lists of the table's indexes (unique ones too), its primary key aside."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return sorted(
        tuple(c["columns"])
        for c in found.values()
        if (c["index"] or c["unique"]) and not c["primary_key"]
    )


def test_an_edge_is_not_checked_and_a_step_keeps_its_key_to_its_workflow() -> None:
    ghost = uuid.uuid4()
    with transaction.atomic():
        StepEdge.objects.create(workflow_id=ghost, parent_id=ghost, child_id=ghost)
        connection.check_constraints(table_names=[StepEdge._meta.db_table])
    job = tasks.wf_value.enqueue(x=1)
    with pytest.raises(IntegrityError):
        _point_at(job.id, ghost)
    assert Job.objects.get(id=job.id).workflow_id is None


def test_the_edges_index_each_lookup_once() -> None:
    # parent_id is served by the unique (parent, child), child_id by jobqueue_edge_child:
    # no index of their own beside those.
    assert _indexed(StepEdge._meta.db_table) == [
        ("child_id",),
        ("parent_id", "child_id"),
        ("workflow_id",),
    ]


def test_deleting_a_finished_step_takes_its_edges_both_ways() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2), tasks.wf_value.s(x=3)).enqueue()
    run_jobs()
    middle = handle.steps["1"].id
    assert StepEdge.objects.filter(workflow_id=handle.id).count() == 2
    assert delete_finished(job_ids=[middle]) == [middle]
    assert not StepEdge.objects.filter(parent_id=middle).exists()
    assert not StepEdge.objects.filter(child_id=middle).exists()
    assert not StepEdge.objects.filter(workflow_id=handle.id).exists()
    assert Job.objects.filter(workflow_id=handle.id).count() == 2


def test_deleting_a_workflow_row_takes_its_steps_and_edges() -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(5)], tasks.wf_value.s(x=9)).enqueue()
    other = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    WorkflowRow.objects.filter(id=handle.id).delete()  # as the admin's delete does
    assert not Job.objects.filter(workflow_id=handle.id).exists()
    assert not StepEdge.objects.filter(workflow_id=handle.id).exists()
    assert StepEdge.objects.filter(workflow_id=other.id).count() == 1
    assert Job.objects.filter(workflow_id=other.id).count() == 2


def test_cleanup_of_a_large_finished_chord_leaves_no_edge() -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(30)], tasks.wf_value.s(x=0)).enqueue()
    run_jobs()
    later = timezone.now() + timedelta(minutes=1)
    assert cleanup_workflows(finished_before=later, batch_size=7) == 31
    assert not StepEdge.objects.filter(workflow_id=handle.id).exists()
    assert not StepEdge.objects.exists()
