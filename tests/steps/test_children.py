"""Child workflows awaited from a durable step (``ctx.step_workflow``,
``ctx.astep_workflow``): enqueued once, the parent parked without a slot until the
child finishes, the child's result returned (a job's, a chord's callback's), a child's
failure raised as ``ChildFailed``, cancelling the parent cancels its children, nesting
bounded by MAX_CHILD_DEPTH; in-process through ``run_jobs`` and under a real worker of
concurrency 1 (which could never run a 100-member chord if the parent held its slot)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from django_jobqueue import InvalidArguments, Status, cancel, workflow
from django_jobqueue.models import Job, JournalEntry, Workflow
from django_jobqueue.run.children import NOTIFY_KIND
from django_jobqueue.store.children import PARENT_STEP
from django_jobqueue.testing import run_jobs
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import recorded, wait_for
from tests.steps.test_memoized import effects
from tests.taskapp import steps_tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.sqlite]

POLL = 1.0


def _outcomes(job_id: object) -> list[str]:
    rows = JournalEntry.objects.filter(job_id=job_id).order_by("id")
    return list(rows.values_list("outcome", flat=True))


def _child_of(job_id: object) -> Workflow:
    [record] = [r for r in recorded(job_id) if r["kind"] == "child"]
    return Workflow.objects.get(id=record["workflow"])


@pytest.mark.django_db
def test_a_parent_gets_its_child_job_s_result_and_the_child_is_enqueued_once() -> None:
    handle = steps_tasks.parent.enqueue()
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, 7)
    assert _outcomes(job.id) == ["paused", "completed"]
    assert Execution.objects.filter(job_id=job.id).count() == 2  # parked once, then joined
    assert [(r["kind"], r["name"]) for r in recorded(job.id)] == [
        ("child", "child"),
        ("joined", "child"),
        ("step", "after"),
    ]
    child = _child_of(job.id)
    assert child.status == "completed"
    steps = workflow(child.id).steps
    assert sorted(steps) == ["job", PARENT_STEP]
    assert steps[PARENT_STEP].kind == NOTIFY_KIND
    assert Workflow.objects.count() == 1
    assert effects(job.id) == {"after": 1}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("shape", "expected"),
    [("group", [0, 1, 2]), ("sinks", {"m0": 0, "m1": 1, "m2": 2})],
    ids=["group-in-order", "no-output-sinks-by-name"],
)
def test_a_child_s_result_is_its_workflow_s_own(shape: str, expected: Any) -> None:
    """A group's members' results in order (the step that tells the parent is none of
    them); a workflow with no output step, its sink steps' results by name."""
    handle = steps_tasks.parent.enqueue(n=3, shape=shape)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, expected)


@pytest.mark.django_db
def test_a_parent_gets_a_chord_s_result_its_callback_s() -> None:
    handle = steps_tasks.parent.enqueue(n=10)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, 45)
    assert _child_of(job.id).steps_total == 12  # ten members, the callback, the notifier


@pytest.mark.django_db
def test_an_async_parent_gets_a_chord_s_result() -> None:
    handle = steps_tasks.aparent.enqueue(n=5)
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, 10)
    assert effects(job.id) == {"after": 1}


@pytest.mark.django_db
def test_a_child_s_failure_raises_child_failed_in_the_parent_naming_the_step() -> None:
    handle = steps_tasks.parent.enqueue(fail="disk full")
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.COMPLETED
    assert job.result["failed"] == "job"
    assert job.result["status"] == "dead"
    assert "ValueError: disk full" in job.result["error"]
    assert _child_of(job.id).status == "failed"
    [joined] = [r for r in recorded(job.id) if r["kind"] == "joined"]
    assert joined["failed"] is True


@pytest.mark.django_db
def test_cancelling_a_waiting_parent_cancels_its_child_workflow_journalled() -> None:
    handle = steps_tasks.parent.enqueue(n=3)
    run_jobs(kinds=[steps_tasks.parent])  # the parent parks; the chord's members wait
    assert Job.objects.get(id=handle.id).parked == "event"
    child = _child_of(handle.id)
    cancel(handle.id, actor="ops")
    child.refresh_from_db()
    assert (child.status, child.cancel_requested) == ("cancelled", True)
    steps = Job.objects.filter(workflow_id=child.id)
    assert set(steps.values_list("status", flat=True)) == {Status.CANCELLED}
    notes = JournalEntry.objects.filter(job_id__in=steps.values("id")).values_list("note", "actor")
    assert len(notes) == 5
    assert set(notes) == {
        (f"cancelled with its workflow by ops (its parent job {handle.id} was cancelled)", "ops")
    }
    assert Job.objects.get(id=handle.id).status == Status.CANCELLED


@pytest.mark.django_db
def test_cancel_cascades_to_grandchildren() -> None:
    """Each level parks on a child of itself until MAX_CHILD_DEPTH (the notifiers are
    not run, so no parent wakes): cancelling the top job cancels every level's child."""
    top = steps_tasks.deep.enqueue(0)
    run_jobs(kinds=[steps_tasks.deep])
    flows = Workflow.objects.all()
    assert flows.count() == 5
    assert set(flows.values_list("status", flat=True)) == {"running"}
    cancel(top.id)
    assert set(flows.values_list("cancel_requested", flat=True)) == {True}
    unfinished = Job.objects.exclude(status__in=[Status.CANCELLED, Status.DEAD])
    assert list(unfinished) == []


@pytest.mark.django_db
def test_nesting_deeper_than_max_child_depth_is_refused_naming_it() -> None:
    with override_settings(JOBQUEUE={"MAX_CHILD_DEPTH": 2}):
        top = steps_tasks.deep.enqueue(0)
        run_jobs()
    levels = Job.objects.filter(kind=steps_tasks.deep.kind).order_by("id")
    assert [j.payload["level"] for j in levels] == [0, 1, 2]
    bottom = levels.last()
    assert bottom is not None
    assert bottom.status == Status.DEAD
    note = JournalEntry.objects.filter(job_id=bottom.id).last().note  # type: ignore[union-attr]
    assert "ChildDepthExceeded" in note
    assert "deeper than MAX_CHILD_DEPTH (2)" in note
    assert recorded(bottom.id) == []  # nothing enqueued, nothing recorded
    # Each level above got its child's failure as ChildFailed, and died of it.
    assert Job.objects.get(id=top.id).status == Status.DEAD
    assert "ChildFailed" in JournalEntry.objects.filter(job_id=top.id).last().note  # type: ignore[union-attr]


@pytest.mark.django_db
def test_a_child_that_is_neither_a_workflow_nor_a_signature_is_refused() -> None:
    from django_jobqueue.run.children import _as_workflow

    with pytest.raises(InvalidArguments, match=r"the child must be a workflow .* got 42"):
        _as_workflow("x", 42)


@pytest.mark.django_db(transaction=True)
def test_a_parent_awaiting_a_100_member_chord_holds_no_slot_and_gets_its_result(
    runworker: WorkerProcesses,
) -> None:
    """One worker of concurrency 1: the members can only run once the parent has
    given its slot back, parked."""
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = steps_tasks.parent.enqueue(n=100)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=180)
    job = Job.objects.get(id=handle.id)
    assert job.result == sum(range(100))
    assert (job.failure_count, _outcomes(job.id)) == (0, ["paused", "completed"])
    child = _child_of(job.id)
    assert (child.status, child.steps_total) == ("completed", 102)
    parked_until = JournalEntry.objects.filter(job_id=job.id).first()
    members = Job.objects.filter(workflow_id=child.id, kind=steps_tasks.member.kind)
    assert members.count() == 100
    assert parked_until is not None
    # Every member ran after the parent parked: it held no slot while they ran.
    first_member = min(m.finished_at for m in members if m.finished_at)
    assert parked_until.recorded_at <= first_member
    assert effects(job.id) == {"after": 1}


@pytest.mark.django_db(transaction=True)
def test_a_worker_cancels_the_children_of_a_parent_cancelled_while_it_waits(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready(
        "--concurrency", "1", "--poll-interval", str(POLL), "--kind", steps_tasks.parent.kind
    )
    handle = steps_tasks.parent.enqueue(n=3)
    wait_for(lambda: Job.objects.get(id=handle.id).parked == "event", timeout=60)
    child = _child_of(handle.id)
    cancel(handle.id)
    child.refresh_from_db()
    assert child.status == "cancelled"
    assert Job.objects.filter(workflow_id=child.id).exclude(status=Status.CANCELLED).count() == 0


@pytest.mark.django_db
def test_rerun_from_a_child_step_cancels_the_child_waited_for_and_enqueues_a_new_one() -> None:
    handle = steps_tasks.parent.enqueue(n=3)
    run_jobs(kinds=[steps_tasks.parent])  # parked on its child
    first = _child_of(handle.id)
    handle.rerun_from("child", actor="ops")
    first.refresh_from_db()
    assert first.status == "cancelled"
    run_jobs()
    job = Job.objects.get(id=handle.id)
    assert (job.status, job.result) == (Status.COMPLETED, 3)
    second = _child_of(job.id)
    assert second.id != first.id
    assert second.status == "completed"


@pytest.mark.django_db
def test_cancelling_a_workflow_cancels_the_children_its_steps_await() -> None:
    top = steps_tasks.deep.enqueue(0)
    run_jobs(kinds=[steps_tasks.deep])  # five levels, each parked on the next
    first = _child_of(top.id)
    workflow(first.id).cancel(actor="ops")
    below = Workflow.objects.exclude(id=first.id)
    assert below.count() == 4
    assert set(below.values_list("cancel_requested", flat=True)) == {True}
    assert Job.objects.get(id=top.id).status == Status.PENDING  # its parent is not cancelled


@pytest.mark.django_db
def test_the_job_page_shows_the_child_and_its_failure_with_one_re_run_button() -> None:
    from django.test import Client

    from tests.admin.conftest import make_user

    handle = steps_tasks.parent.enqueue(fail="disk full")
    run_jobs()
    child = _child_of(handle.id)
    operator = Client()
    operator.force_login(make_user("ops", ["view_job", "requeue_job"]))
    page = operator.get(f"/admin/django_jobqueue/job/{handle.id}/change/").content.decode()
    assert str(child.id) in page
    assert "disk full" in page
    assert page.count('class="job-rerun"') == 2  # the child's step and "after"
