"""An operator's steering of a workflow at the moment one of its steps settles.

Each test fixes one interleaving with two sessions: one side's transaction is held open
(in a thread, after its work, before its commit) while the other side runs, and the held
side commits only once the other has finished or is seen waiting on its row lock. On
PostgreSQL both release paths are driven: a worker's fused turn (``exchange`` with room
to claim: the join in the turn's one statement) and the portable one (``exchange`` with
no room: ``store.joins``); MariaDB always takes the portable one. SQLite has no row
locks and one writer at a time, so any interleaving there is one of the two orders, run
one after the other (``test_on_sqlite_...``).

The race of the re-arm: parent A dead (its ``completed`` dependent C cancelled), parent
B running. The operator's requeue of A re-arms C, counting C's open parents; B's
settlement counts C down if C is waiting. Each must see the other: the re-arm reads the
parents' statuses only under C's row lock, and a settlement locks its waiting *and
cancelled* children (the fused turn too, and it counts on a snapshot taken once it holds
them, so it sees a re-arm committed while it waited). Before that, a settlement skipped
a cancelled child without locking it, the re-arm counted the still-running B as open,
and C waited forever for a parent that had already completed.

The other steering paths, the same way: a workflow's cancel against a step's completion
(a step released, or claimed by the fused turn, a moment before the cancel locks it is
cancelled or asked to stop, not missed; and the two queued behind one row do not
deadlock), and a retry of a workflow's dead steps against a sibling's completion (the
workflow's row locked last, after every re-arm: no deadlock, each counts the other).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction

from django_jobqueue import Batch, Status, Workflow, requeue, store, workflow
from django_jobqueue.models import Job, JournalEntry, Outcome
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.rules.lifecycle import Run, completed, dead
from django_jobqueue.store import ClaimRequest
from django_jobqueue.store.exchanging import exchange
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from django_jobqueue.worker.dbguard import is_connection_error
from django_jobqueue.workflows.batch import BatchContext
from tests.helpers import (
    backend_pid,
    in_thread,
    is_mysql,
    is_postgres,
    row_locking,
    statement_stuck,
    wait_for,
    waits_on_lock_held_by,
)
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

WORKER = "steering-race-worker"
# Room to claim makes PostgreSQL's turn the fused one; none sends it the portable way.
PATHS = {"fused": 50, "portable": 0}


def _paths() -> list[str]:
    return ["fused", "portable"] if is_postgres() else ["portable"]


@pytest.fixture(params=["fused", "portable"])
def path(request: pytest.FixtureRequest) -> str:
    if request.param not in _paths():
        pytest.skip("the fused turn is PostgreSQL's")
    return str(request.param)


def _turn(settlement: Any, path: str, *, claims: bool = False) -> list[bool]:
    """One worker's turn settling ``settlement``; its claim serves a kind nothing here
    has (the steps stay for ``run_jobs``) unless it ``claims``."""
    kinds = registry.kinds() if claims else [tasks.wf_value.kind]
    applied, claimed = exchange(
        worker_id=WORKER,
        settlements=[settlement],
        request=ClaimRequest(limit=PATHS[path], kinds=kinds, leases=registry.leases()),
    )
    assert claims or claimed == []
    return list(applied)


def _sent(turn: Callable[[], list[bool]]) -> list[bool]:
    """``turn()``, sent again after a transient error, as the worker's connection guard
    sends it (on MariaDB a settlement may be a deadlock's victim, rolled back whole:
    there every step's status change takes a shared lock on its workflow's row, through
    the foreign key of the steps' index on workflow and status)."""
    for _ in range(3):
        try:
            return turn()
        except OperationalError as exc:
            if not is_connection_error(exc):
                raise
    return turn()


def _ending(job: store.Claimed, *, result: Any = None, die: bool = False) -> Any:
    run = Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker=WORKER, step=True)
    if die:
        return dead(run, carry=None, note=f"{job.id} dies")
    return completed(run, result=result)


def _claimed(handle: Any, *names: str) -> list[store.Claimed]:
    found = {
        j.id: j
        for j in store.claim_jobs(
            worker_id=WORKER, request=store.ClaimRequest(limit=50, kinds=registry.kinds())
        )
    }
    return [found[handle.steps[n].id] for n in names]


class Held:
    """A transaction in a thread, held open after ``work`` until ``commit()``."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.ready, self.go = threading.Event(), threading.Event()
        self.pid = 0

        def run() -> Any:
            with transaction.atomic():
                value = work()
                self.pid = backend_pid()
                self.ready.set()
                assert self.go.wait(30), "never told to commit"
            return value

        self.future = in_thread(run)
        assert self.ready.wait(15), "the held side did not finish its work"

    def commit(self) -> Any:
        self.go.set()
        return self.future.result(30)


def _against(held: Held, other: Callable[[], Any]) -> Future[Any]:
    """Run ``other`` in a session of its own while ``held`` is open; return once it has
    finished or waits on a row lock ``held`` holds."""
    pid: list[int] = []

    def run() -> Any:
        pid.append(backend_pid())
        return other()

    future = in_thread(run)

    def waiting() -> bool:
        if not pid:
            return False
        # MariaDB does not always list a foreign key check's wait among InnoDB's lock
        # waits: there, a statement of these few rows running for a second is waiting.
        return waits_on_lock_held_by(pid[0], held.pid) or (is_mysql() and _blocked(pid[0]))

    wait_for(lambda: future.done() or waiting(), timeout=30)
    return future


def _blocked(pid: int) -> bool:
    """Whether backend ``pid`` waits on a lock, whoever holds it."""
    with connection.cursor() as cursor:
        if is_mysql():
            # A foreign key check's wait is not always listed among InnoDB's lock waits.
            return statement_stuck(pid)
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


def _started(work: Callable[[], Any]) -> Future[Any]:
    """``work`` in a session of its own, once it has finished or waits on a row lock."""
    pid: list[int] = []

    def run() -> Any:
        pid.append(backend_pid())
        return work()

    future = in_thread(run)
    wait_for(lambda: future.done() or (pid and _blocked(pid[0])))
    return future


def _diamond_with_a_dead_parent() -> tuple[Any, store.Claimed, store.Claimed]:
    """``c`` after ``a`` and ``b``; ``a`` dead (``c`` cancelled by it), ``b`` running."""
    wf = Workflow("rearm-race")
    a = wf.add(tasks.wf_flaky.s(label="a"), name="a")
    b = wf.add(tasks.wf_step.s(label="b"), name="b")
    wf.add(tasks.wf_step.s(label="c"), name="c", after=[a, b])
    handle = wf.enqueue()
    a_job, b_job = _claimed(handle, "a", "b")
    assert _turn(_ending(a_job, die=True), "portable") == [True]
    assert Job.objects.get(id=handle.steps["c"].id).status == Status.CANCELLED
    return handle, a_job, b_job


def _assert_c_ran_once_after_both(handle: Any) -> None:
    run_jobs()
    found = workflow(handle.id)
    steps = found.steps
    assert {n: h.status for n, h in steps.items()} == dict.fromkeys("abc", Status.COMPLETED)
    assert found.status == "completed"
    c = steps["c"]
    assert c.run_count == 1
    [ran] = JournalEntry.objects.filter(job_id=c.id, outcome=Outcome.COMPLETED)
    for parent in ("a", "b"):
        done = JournalEntry.objects.get(job_id=steps[parent].id, outcome=Outcome.COMPLETED)
        assert ran.started_at is not None
        assert ran.started_at >= done.recorded_at
    assert c.result == {"label": "c", "parents": {"a": "a", "b": {"label": "b"}}}


@row_locking
def test_a_requeue_while_a_sibling_parents_completion_is_uncommitted_counts_it(
    path: str,
) -> None:
    """B's settlement first, uncommitted: it holds C's row, so the re-arm waits for it
    and then counts B completed (before the fix it read B running, counted it open, and
    C waited forever)."""
    handle, a_job, b_job = _diamond_with_a_dead_parent()
    held = Held(lambda: _turn(_ending(b_job, result={"label": "b"}), path))
    requeued = _against(held, lambda: requeue(a_job.id, actor="ops"))
    assert held.commit() == [True]
    requeued.result(30)

    c = Job.objects.get(id=handle.steps["c"].id)
    assert (c.status, c.parents_open, c.parents_dead) == (Status.WAITING, 1, 0)
    _assert_c_ran_once_after_both(handle)


@row_locking
def test_a_sibling_parents_completion_while_a_requeue_is_uncommitted_counts_the_re_arm_down(
    path: str,
) -> None:
    """The re-arm first, uncommitted (C waiting again on A and B): B's settlement waits
    for C's row and then counts C down (the fused turn counts on a snapshot taken once
    it holds the row: C, cancelled when its statement began, is waiting again)."""
    handle, a_job, b_job = _diamond_with_a_dead_parent()
    held = Held(lambda: requeue(a_job.id, actor="ops"))
    settled = _against(held, lambda: _turn(_ending(b_job, result={"label": "b"}), path))
    held.commit()
    assert settled.result(30) == [True]

    c = Job.objects.get(id=handle.steps["c"].id)
    assert (c.status, c.parents_open, c.parents_dead) == (Status.WAITING, 1, 0)
    _assert_c_ran_once_after_both(handle)


def test_on_sqlite_a_requeue_and_a_sibling_parents_completion_count_in_either_order() -> None:
    """SQLite's writers take turns (``BEGIN IMMEDIATE``): the two orders are all there is."""
    if is_postgres() or is_mysql():
        pytest.skip("row-locking databases run the interleavings above")
    for requeue_first in (True, False):
        handle, a_job, b_job = _diamond_with_a_dead_parent()
        if requeue_first:
            requeue(a_job.id, actor="ops")
        assert _turn(_ending(b_job, result={"label": "b"}), "portable") == [True]
        if not requeue_first:
            requeue(a_job.id, actor="ops")
        _assert_c_ran_once_after_both(handle)


# --- the other steering paths ----------------------------------------------------------


def _chain_with_a_running_step() -> tuple[Any, store.Claimed]:
    """``b`` running, ``c`` waiting for it."""
    wf = Workflow("cancel-race")
    b = wf.add(tasks.wf_step.s(label="b"), name="b")
    wf.add(tasks.wf_step.s(label="c"), name="c", after=[b])
    handle = wf.enqueue()
    [b_job] = _claimed(handle, "b")
    return handle, b_job


def _assert_cancelled_and_c_never_ran(handle: Any, c_claimed: bool) -> None:
    c = Job.objects.get(id=handle.steps["c"].id)
    if c_claimed:  # a running step is cancelled cooperatively: asked to stop
        assert (c.status, c.cancel_requested) == (Status.CLAIMED, True)
        return
    assert c.status == Status.CANCELLED
    assert run_jobs() == []
    found = workflow(handle.id)
    assert found.status == "cancelled"
    assert found.steps["b"].status == Status.COMPLETED
    assert found.workflow.steps_open == 0
    [entry] = JournalEntry.objects.filter(job_id=c.id)
    assert (entry.outcome, entry.note) == (Outcome.CANCELLED, "cancelled with its workflow by ops")


@row_locking
@pytest.mark.parametrize("claims", [False, True], ids=["releases", "releases-and-claims"])
def test_a_workflow_cancelled_while_a_steps_completion_is_uncommitted_cancels_what_it_released(
    path: str, claims: bool
) -> None:
    """B's completion first, uncommitted (C released, or claimed by the fused turn that
    released it): the cancel waits for B's row, then finds C pending and cancels it, or
    claimed and asks it to stop."""
    if claims and path != "fused":
        pytest.skip("only the fused turn claims what it releases")
    handle, b_job = _chain_with_a_running_step()
    held = Held(lambda: _turn(_ending(b_job, result={"label": "b"}), path, claims=claims))
    cancelled = _against(held, lambda: store.cancel_workflow(workflow_id=handle.id, actor="ops"))
    assert held.commit() == [True]
    cancelled.result(30)
    _assert_cancelled_and_c_never_ran(handle, c_claimed=claims)


@row_locking
def test_a_steps_completion_while_a_workflow_cancel_is_uncommitted_releases_nothing(
    path: str,
) -> None:
    """The cancel first, uncommitted (B asked to stop, C cancelled): B's settlement waits
    for B's row and completes B; C stays cancelled and the workflow ends cancelled."""
    handle, b_job = _chain_with_a_running_step()
    held = Held(lambda: store.cancel_workflow(workflow_id=handle.id, actor="ops"))
    settled = _started(lambda: _turn(_ending(b_job, result={"label": "b"}), path))
    held.commit()
    assert settled.result(30) == [True]
    _assert_cancelled_and_c_never_ran(handle, c_claimed=False)


@row_locking
def test_a_workflow_cancel_and_a_fused_turn_queued_on_the_same_step_do_not_deadlock() -> None:
    """A third session holds B's row (as a lease renewal or a cancel of B would); the
    workflow's cancel and a worker's fused turn completing B both queue behind it. The
    turn locks B before C (as the portable path's guarded UPDATE does), so it holds
    nothing while it waits; before, it held C and the workflow's row and waited for B,
    which the cancel got first, then waited for C: a deadlock."""
    if not is_postgres():
        pytest.skip("the fused turn is PostgreSQL's")
    handle, b_job = _chain_with_a_running_step()
    held = Held(lambda: Job.objects.select_for_update().get(id=b_job.id))
    cancelled = _against(held, lambda: store.cancel_workflow(workflow_id=handle.id, actor="ops"))
    settled = _started(lambda: _turn(_ending(b_job, result={"label": "b"}), "fused"))
    held.commit()
    cancelled.result(30)
    assert settled.result(30) == [True]
    _assert_cancelled_and_c_never_ran(handle, c_claimed=False)


def test_a_batch_cancel_and_a_fused_turn_completing_a_later_member_do_not_deadlock() -> None:
    """A member a running member added has a later id than the batch's callback. A
    third session holds that member's row; a worker's fused turn completing it queues
    behind, then the batch's cancel. The turn, once it has the member, waits for the
    callback's row; the cancel takes the claimed steps before the others (as a
    settlement takes its own rows before their children), so it waits for the member
    before it holds the callback. Before, it held the callback (first in id order) and
    waited for the member: a deadlock, one of the two rolled back after a second."""
    if not is_postgres():
        pytest.skip("the fused turn is PostgreSQL's")
    batch = Batch(on_success=tasks.wf_summary.s(), name="cancel-race")
    batch.add(tasks.wf_value.s(x=1))
    handle = batch.enqueue()
    late = BatchContext(handle.id, step_name="0").add(tasks.wf_value.s(x=2))
    callback = handle.steps["on_success"].id
    assert late.id > callback
    [job] = [
        j
        for j in store.claim_jobs(
            worker_id=WORKER, request=store.ClaimRequest(limit=50, kinds=registry.kinds())
        )
        if j.id == late.id
    ]
    held = Held(lambda: Job.objects.select_for_update().get(id=job.id))
    settled = _against(held, lambda: _turn(_ending(job, result=2), "fused"))
    cancelled = _started(lambda: store.cancel_workflow(workflow_id=handle.id, actor="ops"))
    held.commit()
    assert settled.result(30) == [True]
    cancelled.result(30)
    assert Job.objects.get(id=callback).status == Status.CANCELLED
    # The first member still runs (asked to stop): the workflow ends when it does.
    assert WorkflowRow.objects.get(id=handle.id).cancel_requested


@row_locking
def test_retrying_dead_steps_while_a_sibling_completes_neither_deadlocks_nor_strands(
    path: str,
) -> None:
    """``a1`` and ``a2`` dead (``c1`` after ``a1``, ``c2`` after ``a2`` and ``b``
    cancelled), ``b`` running. A third session holds the workflow's row while the
    retry (the admin's action) re-arms ``c1`` and B's settlement locks ``c2``: both
    then want the workflow's row. The retry locks it only after its last re-arm (as a
    settlement locks job rows first), so it never holds it while waiting for ``c2``,
    which B's settlement holds while it waits for the workflow: no deadlock, and each
    counts the other."""
    wf = Workflow("retry-race")
    a1 = wf.add(tasks.wf_flaky.s(label="a1"), name="a1")
    a2 = wf.add(tasks.wf_flaky.s(label="a2"), name="a2")
    b = wf.add(tasks.wf_step.s(label="b"), name="b")
    wf.add(tasks.wf_step.s(label="c1"), name="c1", after=[a1])
    wf.add(tasks.wf_step.s(label="c2"), name="c2", after=[a2, b])
    handle = wf.enqueue()
    assert handle.steps["a1"].id < handle.steps["a2"].id  # the order the retry takes them
    a1_job, a2_job, b_job = _claimed(handle, "a1", "a2", "b")
    for job in (a1_job, a2_job):
        assert _turn(_ending(job, die=True), "portable") == [True]

    held = Held(lambda: WorkflowRow.objects.select_for_update().get(id=handle.id))
    retried = _against(held, lambda: store.retry_dead_steps(workflow_id=handle.id, actor="ops"))
    settled = _started(lambda: _sent(lambda: _turn(_ending(b_job, result={"label": "b"}), path)))
    held.commit()
    assert sorted(retried.result(30)) == sorted([a1_job.id, a2_job.id])
    assert settled.result(30) == [True]

    c2 = Job.objects.get(id=handle.steps["c2"].id)
    assert (c2.status, c2.parents_open, c2.parents_dead) == (Status.WAITING, 1, 0)
    run_jobs()
    found = workflow(handle.id)
    assert found.status == "completed"
    assert {h.status for h in found.steps.values()} == {Status.COMPLETED}
    ran = JournalEntry.objects.get(job_id=c2.id, outcome=Outcome.COMPLETED)
    for parent in ("a2", "b"):
        done = JournalEntry.objects.get(job_id=found.steps[parent].id, outcome=Outcome.COMPLETED)
        assert ran.started_at is not None
        assert ran.started_at >= done.recorded_at
    assert found.steps["c2"].run_count == 1
