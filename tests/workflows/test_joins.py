"""The rules of a join, through the public API (run inline with ``run_jobs``): order,
``ctx.parents``, retries, deaths, requeues, a stale run, cancellation, rollback."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from django_jobqueue import (
    InvalidTransition,
    Outcome,
    Status,
    Workflow,
    chain,
    chord,
    group,
    requeue,
    workflow,
)
from django_jobqueue.models import Job, JournalEntry, StepEdge
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.rules.lifecycle import Run, failure
from django_jobqueue.store import ClaimRequest, claim_jobs, settle
from django_jobqueue.task.registry import policy_for
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

LATER = timedelta(days=1)


def diamond() -> Workflow:
    wf = Workflow("diamond")
    a = wf.add(tasks.wf_step.s(label="a"), name="a")
    b = wf.add(tasks.wf_step.s(label="b"), name="b", after=[a])
    c = wf.add(tasks.wf_step.s(label="c"), name="c", after=[a])
    wf.add(tasks.wf_step.s(label="d"), name="d", after=[b, c])
    return wf


def started(job_id: object) -> list:
    return [
        e.started_at
        for e in JournalEntry.objects.filter(job_id=job_id).order_by("id")
        if e.started_at is not None
    ]


def completed_at(job_id: object) -> object:
    return JournalEntry.objects.get(job_id=job_id, outcome=Outcome.COMPLETED).recorded_at


def test_no_step_starts_before_its_parents_finished_and_each_runs_once() -> None:
    handle = diamond().enqueue()
    assert {n: h.status for n, h in handle.steps.items()} == {
        "a": Status.PENDING,
        "b": Status.WAITING,
        "c": Status.WAITING,
        "d": Status.WAITING,
    }
    ran = run_jobs()
    assert len(ran) == 4
    steps = workflow(handle.id).steps
    parents = {"b": ["a"], "c": ["a"], "d": ["b", "c"]}
    for child, names in parents.items():
        [start] = started(steps[child].id)
        for name in names:
            assert start >= completed_at(steps[name].id), f"{child} started before {name}"
    assert workflow(handle.id).status == "completed"
    assert workflow(handle.id).workflow.steps_open == 0


def test_ctx_parents_maps_each_parent_step_name_to_its_result() -> None:
    handle = diamond().enqueue()
    run_jobs()
    d = workflow(handle.id).steps["d"].result
    assert sorted(d["parents"]) == ["b", "c"]
    assert d["parents"]["b"]["parents"] == {"a": {"label": "a", "parents": {}}}


def test_a_chords_callback_reads_every_members_result_and_runs_once() -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(10)], tasks.wf_total.s()).enqueue()
    run_jobs()
    found = workflow(handle.id)
    assert found.steps["callback"].result == sum(range(10))
    assert found.steps["callback"].run_count == 1
    assert found.status == "completed"


def test_a_group_runs_all_at_once_and_a_chain_in_order() -> None:
    g = group(tasks.wf_value.s(x=i) for i in range(3)).enqueue()
    assert all(h.status == Status.PENDING for h in g.steps.values())
    c = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2), tasks.wf_value.s(x=3)).enqueue()
    assert [h.status for h in c.steps.values()] == [Status.PENDING, Status.WAITING, Status.WAITING]
    run_jobs()
    assert workflow(g.id).status == workflow(c.id).status == "completed"
    steps = workflow(c.id).steps
    assert started(steps["2"].id)[0] >= completed_at(steps["1"].id) >= started(steps["1"].id)[0]


def test_a_parent_retried_twice_then_completed_releases_its_child_once() -> None:
    handle = chain(tasks.wf_step.s(label="p", fail_times=2), tasks.wf_step.s(label="c")).enqueue()
    run_jobs(now=timezone.now() + LATER)  # the retries' backoff is past
    steps = workflow(handle.id).steps
    [child_start] = started(steps["1"].id)
    assert child_start >= completed_at(steps["0"].id)
    outcomes = list(
        JournalEntry.objects.filter(job_id=steps["0"].id).values_list("outcome", flat=True)
    )
    assert outcomes == ["retried", "retried", "completed"]
    assert steps["1"].run_count == 1
    assert steps["1"].job.parents_open == 0
    assert workflow(handle.id).status == "completed"


def test_a_dead_parent_cancels_its_dependents_and_theirs_and_finished_ones_run() -> None:
    wf = Workflow("dies")
    a = wf.add(tasks.wf_step.s(label="a", die=True), name="a")
    b = wf.add(tasks.wf_step.s(label="b"), name="b", after=[a])
    wf.add(tasks.wf_step.s(label="c"), name="c", after=[b])
    wf.add(tasks.wf_step.s(label="report"), name="report", after=[a], when="finished")
    handle = wf.enqueue()
    run_jobs()
    found = workflow(handle.id)
    steps = found.steps
    assert {n: h.status for n, h in steps.items()} == {
        "a": Status.DEAD,
        "b": Status.CANCELLED,
        "c": Status.CANCELLED,
        "report": Status.COMPLETED,
    }
    [note_b] = JournalEntry.objects.filter(job_id=steps["b"].id).values_list("note", flat=True)
    assert "'a'" in note_b
    assert str(steps["a"].id) in note_b
    [note_c] = JournalEntry.objects.filter(job_id=steps["c"].id).values_list("note", flat=True)
    assert "'b'" in note_c
    assert steps["report"].result["parents"] == {"a": None}
    assert found.status == "failed"
    assert found.workflow.steps_dead == 1


def test_requeuing_a_dead_step_re_arms_its_cancelled_dependents_and_the_workflow() -> None:
    wf = Workflow("flaky")
    a = wf.add(tasks.wf_flaky.s(label="a"), name="a")
    b = wf.add(tasks.wf_step.s(label="b"), name="b", after=[a])
    wf.add(tasks.wf_step.s(label="c"), name="c", after=[b])
    handle = wf.enqueue()
    run_jobs()
    assert workflow(handle.id).status == "failed"
    requeue(workflow(handle.id).steps["a"].id, actor="ops")
    found = workflow(handle.id)
    assert found.status == "running"
    assert found.steps["b"].status == Status.WAITING
    assert found.steps["b"].job.parents_open == 1
    assert found.steps["c"].status == Status.WAITING
    rearmed = JournalEntry.objects.filter(job_id=found.steps["b"].id, outcome=Outcome.REQUEUED)
    assert rearmed.count() == 1
    run_jobs()
    found = workflow(handle.id)
    assert {n: h.status for n, h in found.steps.items()} == dict.fromkeys("abc", Status.COMPLETED)
    assert found.status == "completed"
    assert found.workflow.steps_dead == 0


def test_retry_dead_steps_continues_the_workflow() -> None:
    handle = chain(tasks.wf_flaky.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    run_jobs()
    assert workflow(handle.id).retry_dead(actor="ops").status == "running"
    run_jobs()
    assert workflow(handle.id).status == "completed"


def test_a_stale_run_releases_nothing_and_the_live_one_releases_once() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    [job] = claim_jobs(worker_id="w:1", request=ClaimRequest(limit=1, kinds=[tasks.wf_value.kind]))
    policy = policy_for(tasks.wf_value.kind)
    lost = failure(
        Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker="w:gone", step=True),
        failure_count=0,
        policy=policy,
        now=timezone.now(),
        note="a stale run",
    )
    assert settle(worker_id="w:gone", settlements=[lost]) == [False]
    child = workflow(handle.id).steps["1"]
    assert child.status == Status.WAITING
    assert child.job.parents_open == 1
    assert workflow(handle.id).workflow.steps_open == 2
    from django_jobqueue.rules.lifecycle import completed

    done = completed(
        Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker="w:1", step=True), result=1
    )
    assert settle(worker_id="w:1", settlements=[done]) == [True]
    assert settle(worker_id="w:1", settlements=[done]) == [False]  # a repeat: refused
    child = workflow(handle.id).steps["1"]
    assert child.status == Status.PENDING
    assert child.job.parents_open == 0
    assert workflow(handle.id).workflow.steps_open == 1


def test_cancelling_a_workflow_cancels_its_unfinished_steps_a_running_one_cooperatively() -> None:
    wf = Workflow("cancel me")
    a = wf.add(tasks.wf_value.s(x=1), name="a")
    wf.add(tasks.wf_value.s(x=2), name="side")
    wf.add(tasks.wf_value.s(x=3), name="b", after=[a])
    handle = wf.enqueue()
    claimed = claim_jobs(
        worker_id="w:1", request=ClaimRequest(limit=1, kinds=[tasks.wf_value.kind])
    )
    [running] = claimed
    handle.cancel(actor="ops")
    steps = workflow(handle.id).steps
    by_id = {h.id: n for n, h in steps.items()}
    running_name = by_id[running.id]
    assert steps[running_name].status == Status.CLAIMED
    assert steps[running_name].job.cancel_requested
    others = {n: h.status for n, h in steps.items() if n != running_name}
    assert set(others.values()) == {Status.CANCELLED}
    assert workflow(handle.id).status == "running"  # until the running step ends
    retry = failure(
        Run(job_id=running.id, kind=running.kind, run_no=1, worker="w:1", step=True),
        failure_count=0,
        policy=policy_for(running.kind),
        now=timezone.now(),
        note="stopped",
    )
    assert settle(worker_id="w:1", settlements=[retry]) == [True]
    found = workflow(handle.id)
    assert found.steps[running_name].status == Status.CANCELLED
    assert found.status == "cancelled"
    assert found.finished_at is not None
    assert run_jobs() == []


def test_cancelling_a_finished_workflow_is_refused() -> None:
    handle = group([tasks.wf_value.s(x=1)]).enqueue()
    run_jobs()
    with pytest.raises(InvalidTransition, match="completed"):
        workflow(handle.id).cancel()


def test_a_workflow_rolled_back_with_its_transaction_leaves_nothing() -> None:
    before = Job.objects.count()

    class Boom(Exception):
        pass

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            diamond().enqueue()
            chord([tasks.wf_value.s(x=1)], tasks.wf_total.s()).enqueue()
            assert WorkflowRow.objects.count() == 2
            raise Boom

    with pytest.raises(Boom):
        enqueue_then_fail()
    assert WorkflowRow.objects.count() == 0
    assert StepEdge.objects.count() == 0
    assert Job.objects.count() == before


def test_a_completed_step_cannot_be_requeued_to_count_twice() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    run_jobs()
    with pytest.raises(InvalidTransition, match="completed workflow step"):
        requeue(workflow(handle.id).steps["0"].id, force=True)


def test_assert_workflow_passes_on_the_outcome_and_names_every_mismatch() -> None:
    from django_jobqueue.testing import assert_workflow

    handle = chain(tasks.wf_value.s(x=1), tasks.wf_step.s(label="b", die=True)).enqueue()
    run_jobs()
    found = assert_workflow(handle, status="failed", steps={"0": "completed", "1": "dead"})
    assert found.steps["0"].result == 1
    assert_workflow(handle.id, steps={"1": "dead"})
    with pytest.raises(AssertionError) as caught:
        assert_workflow(handle, status="completed", steps={"1": "completed", "x": "dead"})
    message = str(caught.value)
    assert "is failed, expected completed" in message
    assert "step '1' is dead, expected completed" in message
    assert "no step named 'x'" in message


def test_the_store_reads_a_workflows_edges_and_a_steps_neighbours() -> None:
    from django_jobqueue.store.workflows import edges_of, neighbours

    handle = diamond().enqueue()
    ids = {n: h.id for n, h in handle.steps.items()}
    names = {v: k for k, v in ids.items()}
    assert sorted((names[p], names[c]) for p, c in edges_of(workflow_id=handle.id)) == [
        ("a", "b"),
        ("a", "c"),
        ("b", "d"),
        ("c", "d"),
    ]
    parents, children = neighbours(job_id=ids["b"])
    assert [j.step_name for j in parents] == ["a"]
    assert [j.step_name for j in children] == ["d"]
