"""A workflow never stays ``running`` once its last step has settled (issue 30, item 1).

``workflow(id).retry_dead()`` recounted a workflow from its steps: it counted the open
steps, then wrote that count and ``running`` to the workflow's row. A settlement of the
workflow's last step committing between the two (it held the row, so the recount's
write waited for it) had its final status overwritten: the workflow stayed ``running``
with every step terminal, for good. Now a ``retry_dead`` with no dead step writes
nothing, and the recount locks the workflow's row before it counts (so it counts every
settlement that held the row before it) and gives a workflow with no open step the
status a settlement of its last step gives. Migration 0020 repairs workflows already
left so.

Each interleaving is fixed with two sessions, as in ``test_steering_races``: the
settlement held open after its work, the retry run until it finishes or waits on the
settlement's row lock, then the settlement committed.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection

from django_jobqueue import Status, Workflow, chain, store, workflow
from django_jobqueue.models import Job
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.testing import run_jobs
from tests.helpers import row_locking
from tests.taskapp import tasks
from tests.workflows.test_steering_races import Held, _against, _claimed, _ending, _paths, _turn

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

repair_migration = importlib.import_module("django_jobqueue.migrations.0020_repair_stuck_workflows")


@pytest.fixture(params=["fused", "portable"])
def path(request: pytest.FixtureRequest) -> str:
    if request.param not in _paths():
        pytest.skip("the fused turn is PostgreSQL's")
    return str(request.param)


def _row(handle: object) -> tuple[str, int, int]:
    row = WorkflowRow.objects.get(id=handle.id)  # type: ignore[attr-defined]
    return row.status, row.steps_open, row.steps_dead


@row_locking
def test_retry_dead_with_none_dead_while_the_last_step_settles_leaves_it_completed(
    path: str,
) -> None:
    """The last step's completion holds the workflow's row, uncommitted; a
    ``retry_dead()`` then finds nothing dead and writes nothing (it had counted the
    still-claimed step open, then written ``running`` over ``completed``)."""
    handle = chain(tasks.wf_step.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    [first] = _claimed(handle, "0")
    assert _turn(_ending(first, result={"label": "a"}), "portable") == [True]
    [last] = _claimed(handle, "1")

    held = Held(lambda: _turn(_ending(last, result={"label": "b"}), path))
    retried = _against(held, lambda: workflow(handle.id).retry_dead(actor="ops"))
    assert held.commit() == [True]
    retried.result(30)

    assert _row(handle) == ("completed", 0, 0)
    assert workflow(handle.id).status == "completed"


@row_locking
def test_a_retry_counts_a_sibling_settlement_that_held_the_workflows_row(path: str) -> None:
    """``a`` dead, ``b`` claimed; ``b``'s completion holds the workflow's row while
    ``retry_dead`` requeues ``a``. The recount waits for the row before it counts, so it
    counts ``b`` completed: one step open (``a``), and the workflow completes when ``a``
    does (it had counted two, and ``steps_open`` never came back to 0)."""
    wf = Workflow("retry-while-settling")
    wf.add(tasks.wf_flaky.s(label="a"), name="a")
    wf.add(tasks.wf_step.s(label="b"), name="b")
    handle = wf.enqueue()
    a_job, b_job = _claimed(handle, "a", "b")
    assert _turn(_ending(a_job, die=True), "portable") == [True]

    held = Held(lambda: _turn(_ending(b_job, result={"label": "b"}), path))
    retried = _against(held, lambda: store.retry_dead_steps(workflow_id=handle.id, actor="ops"))
    assert held.commit() == [True]
    assert retried.result(30) == [a_job.id]

    assert _row(handle) == ("running", 1, 0)
    run_jobs()
    assert _row(handle) == ("completed", 0, 0)
    assert {h.status for h in workflow(handle.id).steps.values()} == {Status.COMPLETED}


def test_retry_dead_with_no_dead_step_writes_nothing() -> None:
    handle = chain(tasks.wf_step.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    run_jobs()
    before = WorkflowRow.objects.get(id=handle.id)
    assert store.retry_dead_steps(workflow_id=handle.id) == []
    after = WorkflowRow.objects.get(id=handle.id)
    assert (after.status, after.steps_open, after.finished_at) == (
        "completed",
        0,
        before.finished_at,
    )


def _stuck(handle: object) -> None:
    """What the race left: every step terminal, the workflow ``running``, a step still
    counted open."""
    WorkflowRow.objects.filter(id=handle.id).update(  # type: ignore[attr-defined]
        status="running", steps_open=1, finished_at=None
    )


def _repair() -> int:
    return int(repair_migration.repair(apps, SimpleNamespace(connection=connection)))


def test_the_repair_gives_a_stuck_workflow_the_status_its_last_settlement_would() -> None:
    done = chain(tasks.wf_step.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    failed = chain(tasks.wf_step.s(label="a", die=True), tasks.wf_step.s(label="b")).enqueue()
    cancelled = chain(tasks.wf_step.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    workflow(cancelled.id).cancel(actor="ops")
    run_jobs()
    fresh = chain(tasks.wf_step.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    expected = {}
    for handle in (done, failed, cancelled):
        expected[handle.id] = WorkflowRow.objects.get(id=handle.id)
        _stuck(handle)

    assert _repair() == 3
    for wf_id, was in expected.items():
        row = WorkflowRow.objects.get(id=wf_id)
        assert (row.status, row.steps_open, row.steps_dead) == (
            was.status,
            0,
            was.steps_dead,
        )
        last = max(Job.objects.filter(workflow_id=wf_id).values_list("finished_at", flat=True))
        assert row.finished_at == last
    assert WorkflowRow.objects.get(id=done.id).status == "completed"
    assert WorkflowRow.objects.get(id=failed.id).status == "failed"
    assert WorkflowRow.objects.get(id=cancelled.id).status == "cancelled"
    # A workflow with an open step is left alone, and a second run repairs nothing.
    assert _row(fresh) == ("running", 2, 0)
    assert _repair() == 0
