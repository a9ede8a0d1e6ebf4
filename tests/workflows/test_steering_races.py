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
cancelled* children (the fused turn skips a locked one and sends the step again, and
defers a step whose child changed since its statement's snapshot). Before that, a
settlement skipped a cancelled child without locking it, the re-arm counted the
still-running B as open, and C waited forever for a parent that had already completed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from django.db import transaction

from django_jobqueue import Status, Workflow, requeue, store, workflow
from django_jobqueue.models import Job, JournalEntry, Outcome
from django_jobqueue.run.lifecycle import Run, completed, dead
from django_jobqueue.store.exchanging import exchange
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.helpers import (
    backend_pid,
    in_thread,
    is_mysql,
    is_postgres,
    row_locking,
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


def _turn(settlement: Any, path: str) -> list[bool | None]:
    # The turn's claim serves a kind nothing here has, so the steps stay for run_jobs.
    options = {"kinds": [tasks.wf_value.kind], "leases": registry.leases()}
    applied, claimed = exchange(
        worker_id=WORKER, settlements=[settlement], limit=PATHS[path], **options
    )
    assert claimed == []
    return list(applied)


def _ending(job: store.Claimed, *, result: Any = None, die: bool = False) -> Any:
    run = Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker=WORKER, step=True)
    if die:
        return dead(run, carry=None, note=f"{job.id} dies")
    return completed(run, result=result)


def _claimed(handle: Any, *names: str) -> list[store.Claimed]:
    found = {j.id: j for j in store.claim_jobs(worker_id=WORKER, limit=50, kinds=registry.kinds())}
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
    wait_for(lambda: future.done() or (pid and waits_on_lock_held_by(pid[0], held.pid)))
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
    for C's row (the fused turn skips it and defers B's settlement to its next turn) and
    then counts C down."""
    handle, a_job, b_job = _diamond_with_a_dead_parent()
    held = Held(lambda: requeue(a_job.id, actor="ops"))
    settled = _against(held, lambda: _turn(_ending(b_job, result={"label": "b"}), path))
    held.commit()
    applied = settled.result(30)
    if path == "fused":
        assert applied == [None]  # deferred: C's row was held; the worker sends it again
        applied = _turn(_ending(b_job, result={"label": "b"}), path)
    assert applied == [True]

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
