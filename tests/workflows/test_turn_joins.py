"""Joins settled by a worker's turn (``store.exchange``), as the worker loop settles them.

On PostgreSQL a turn whose workflow steps all completed releases their dependents in
its one statement (``store/dialects/postgresql/joining.py``); elsewhere, and for any
other ending, the turn settles them the long way (``store.joins``). The rules are the
same either way, so every test here runs on each database: counters moved once per
completion, a stale run releasing nothing, a released step claimed by the turn that
released it when it has room (else left pending), a batch's callbacks decided, the
workflow closed by the turn that ends its last step.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection, transaction

from django_jobqueue import Batch, Workflow, chain, chord, group, store, workflow
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.rules.joins import VOID_NOTE
from django_jobqueue.rules.lifecycle import Run, completed
from django_jobqueue.store import sql
from django_jobqueue.store.exchanging import exchange
from django_jobqueue.task.registry import registry
from tests.helpers import backend_pid, in_thread, postgres_only, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKER = "turn-joins-worker"


def _options(limit: int = 50, **more: Any) -> store.ClaimRequest:
    options = {"limit": limit, "kinds": registry.kinds(), "leases": registry.leases(), **more}
    return store.ClaimRequest(**options)


def _claim(limit: int = 50) -> list[store.Claimed]:
    return store.claim_jobs(worker_id=WORKER, request=_options(limit))


def _done(job: store.Claimed, value: Any = 1, *, run_no: int | None = None) -> Any:
    run = Run(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count if run_no is None else run_no,
        worker=WORKER,
        step=True,
    )
    return completed(run, result=value)


def _row(job_id: uuid.UUID) -> Job:
    return Job.objects.get(id=job_id)


def test_a_turn_completing_every_member_of_a_chord_releases_and_claims_its_callback_once() -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(12)], tasks.wf_total.s()).enqueue()
    members = _claim()
    assert len(members) == 12

    applied, claimed = exchange(
        worker_id=WORKER,
        settlements=[_done(m, i) for i, m in enumerate(members)],
        request=_options(),
    )

    assert applied == [True] * 12
    callback = _row(handle.steps["callback"].id)
    assert [c.id for c in claimed] == [callback.id]
    assert (callback.status, callback.claimed_by, callback.run_count) == ("claimed", WORKER, 1)
    assert callback.parents_open == 0
    assert callback.claim_expires_at is not None
    assert WorkflowRow.objects.get(id=handle.id).steps_open == 1
    assert claimed[0].workflow_id == handle.id


def test_a_turn_completing_some_members_counts_down_the_callback_and_leaves_it_waiting() -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(10)], tasks.wf_total.s()).enqueue()
    members = _claim()

    applied, claimed = exchange(
        worker_id=WORKER,
        settlements=[_done(m) for m in members[:4]],
        request=_options(limit=6),
    )

    assert applied == [True] * 4
    assert claimed == []
    callback = _row(handle.steps["callback"].id)
    assert (callback.status, callback.parents_open) == ("waiting", 6)
    assert WorkflowRow.objects.get(id=handle.id).steps_open == 7


def test_a_stale_run_of_a_member_settles_and_releases_nothing_in_a_turn() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    [first] = _claim()

    applied, claimed = exchange(
        worker_id=WORKER,
        settlements=[_done(first, run_no=first.run_count - 1)],
        request=_options(),
    )

    assert applied == [False]
    assert claimed == []
    child = _row(handle.steps["1"].id)
    assert (child.status, child.parents_open) == ("waiting", 1)
    assert _row(first.id).status == "claimed"
    assert WorkflowRow.objects.get(id=handle.id).steps_open == 2
    assert not JournalEntry.objects.filter(job_id=first.id).exists()


def test_a_turn_claims_what_it_releases_only_up_to_its_room_and_leaves_the_rest_pending() -> None:
    wf = Workflow("fan-out")
    root = wf.add(tasks.wf_value.s(x=0), name="root")
    for i in range(5):
        wf.add(tasks.wf_value.s(x=i), name=f"leaf{i}", after=[root])
    handle = wf.enqueue()
    [job] = _claim()

    applied, claimed = exchange(
        worker_id=WORKER, settlements=[_done(job)], request=_options(limit=2)
    )

    assert applied == [True]
    assert len(claimed) == 2
    leaves = [_row(handle.steps[f"leaf{i}"].id) for i in range(5)]
    statuses = sorted(leaf.status for leaf in leaves)
    assert statuses == ["claimed", "claimed", "pending", "pending", "pending"]
    assert {c.id for c in claimed} == {leaf.id for leaf in leaves if leaf.status == "claimed"}
    assert all(leaf.parents_open == 0 for leaf in leaves)


def test_a_released_step_of_a_paused_queue_or_an_unserved_kind_is_left_pending() -> None:
    paused = tasks.wf_value.using(queue="held")
    wf = Workflow("not-mine")
    root = wf.add(tasks.wf_value.s(x=0), name="root")
    wf.add(paused.s(x=1), name="held", after=[root])
    wf.add(tasks.wf_total.s(), name="other-kind", after=[root])
    handle = wf.enqueue()
    [job] = _claim()
    store.pause_queue(queue="held")
    served = [k for k in registry.kinds() if k != tasks.wf_total.kind]

    _, claimed = exchange(
        worker_id=WORKER, settlements=[_done(job)], request=_options(kinds=served)
    )

    assert claimed == []
    assert _row(handle.steps["held"].id).status == "pending"
    assert _row(handle.steps["other-kind"].id).status == "pending"


def test_a_step_claimed_by_the_turn_that_released_it_settles_under_that_claim() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    [first] = _claim()
    _, [second] = exchange(worker_id=WORKER, settlements=[_done(first, 1)], request=_options())

    applied, claimed = exchange(
        worker_id=WORKER, settlements=[_done(second, 2)], request=_options()
    )

    assert (applied, claimed) == ([True], [])
    found = workflow(handle.id)
    assert found.status == "completed"
    row = WorkflowRow.objects.get(id=handle.id)
    assert (row.steps_open, row.finished_at is not None) == (0, True)
    [entry] = JournalEntry.objects.filter(job_id=second.id)
    assert (entry.outcome, entry.run_no, entry.worker) == ("completed", 1, WORKER)


def test_a_group_completed_over_two_turns_closes_its_workflow_in_the_second() -> None:
    handle = group(tasks.wf_value.s(x=i) for i in range(6)).enqueue()
    members = _claim()

    exchange(
        worker_id=WORKER,
        settlements=[_done(m) for m in members[:3]],
        request=_options(),
    )
    assert workflow(handle.id).status == "running"
    exchange(
        worker_id=WORKER,
        settlements=[_done(m) for m in members[3:]],
        request=_options(),
    )

    assert workflow(handle.id).status == "completed"
    assert WorkflowRow.objects.get(id=handle.id).steps_open == 0


def test_a_batch_whose_members_complete_in_one_turn_runs_on_success_and_voids_on_failure() -> None:
    batch = Batch(on_success=tasks.wf_summary.s(), on_failure=tasks.wf_summary.s())
    for page in range(3):
        batch.add(tasks.wf_value.s(x=page))
    handle = batch.enqueue()
    members = _claim()
    assert len(members) == 3

    _, claimed = exchange(
        worker_id=WORKER,
        settlements=[_done(m) for m in members],
        request=_options(),
    )

    on_success = _row(handle.steps["on_success"].id)
    on_failure = _row(handle.steps["on_failure"].id)
    assert [c.id for c in claimed] == [on_success.id]
    assert on_failure.status == "cancelled"
    assert on_failure.finished_at is not None
    [entry] = JournalEntry.objects.filter(job_id=on_failure.id)
    assert (entry.outcome, entry.note) == ("cancelled", VOID_NOTE)
    # The members and the cancelled callback are closed; on_success is still open.
    assert WorkflowRow.objects.get(id=handle.id).steps_open == 1

    exchange(worker_id=WORKER, settlements=[_done(claimed[0], {})], request=_options())
    assert workflow(handle.id).status == "completed"


def test_a_turn_mixing_plain_jobs_and_steps_settles_both_and_releases_the_steps_children() -> None:
    plain = tasks.wf_value.enqueue(x=9)
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    jobs = _claim()
    assert len(jobs) == 2
    settlements = [
        _done(j) if j.workflow_id else completed(Run(j.id, j.kind, j.run_count, WORKER), result=9)
        for j in jobs
    ]

    applied, claimed = exchange(worker_id=WORKER, settlements=settlements, request=_options())

    assert applied == [True, True]
    assert _row(plain.id).status == "completed"
    assert [c.id for c in claimed] == [handle.steps["1"].id]


@postgres_only
def test_on_postgresql_a_turn_completing_steps_is_one_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(5)], tasks.wf_total.s()).enqueue()
    members = _claim()
    dialect = sql.dialect()
    sent: list[str] = []
    run = type(dialect).run

    def counted(self: Any, statement: str, params: Any) -> Any:
        sent.append(statement)
        return run(self, statement, params)

    monkeypatch.setattr(type(dialect), "run", counted)
    _, claimed = exchange(
        worker_id=WORKER,
        settlements=[_done(m) for m in members],
        request=_options(),
    )

    statements = [s for s in sent if not s.startswith("SET ")]
    assert len(statements) == 1, statements
    assert [c.id for c in claimed] == [handle.steps["callback"].id]


@postgres_only
@pytest.mark.django_db(transaction=True)  # the NOTIFY goes out on a real commit
def test_on_postgresql_a_turn_wakes_workers_only_for_released_steps_it_did_not_claim() -> None:
    listener = connection.get_new_connection(connection.get_connection_params())
    listener.autocommit = True
    try:
        listener.execute('LISTEN "django_jobqueue"')
        mine = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
        wf = Workflow("for-others")
        root = wf.add(tasks.wf_value.s(x=0), name="root")
        wf.add(tasks.wf_value.using(queue="elsewhere").s(x=1), name="leaf", after=[root])
        others = wf.enqueue()
        roots = {j.id: j for j in _claim()}
        first, root_job = roots[mine.steps["0"].id], roots[others.steps["root"].id]
        list(listener.notifies(timeout=0.3))  # the enqueues' own

        _, claimed = exchange(
            worker_id=WORKER,
            settlements=[_done(first)],
            request=_options(queues=["default"]),
        )
        assert [c.id for c in claimed] == [mine.steps["1"].id]
        assert list(listener.notifies(timeout=0.5)) == []  # the worker took it itself

        _, claimed = exchange(
            worker_id=WORKER,
            settlements=[_done(root_job)],
            request=_options(queues=["default"]),
        )
        assert claimed == []
        notes = list(listener.notifies(timeout=1.0, stop_after=1))
        assert [n.payload for n in notes] == ["elsewhere"]
        assert _row(others.steps["leaf"].id).status == "pending"
    finally:
        listener.close()


@postgres_only
@pytest.mark.django_db(transaction=True)  # another turn, in a session of its own
def test_on_postgresql_a_turn_waits_for_another_turns_callback_row_and_counts_its_commit() -> None:
    """Another worker's turn completed two of the four members and has not committed:
    this turn, completing the other two, waits for the callback's row, then counts from
    the committed counter (two open, not the four its statement began with) and so
    releases the callback, and claims it; nothing is deferred or sent again."""
    handle = chord([tasks.wf_value.s(x=i) for i in range(4)], tasks.wf_total.s()).enqueue()
    members = _claim()
    callback_id = handle.steps["callback"].id
    counted, commit = threading.Event(), threading.Event()
    holder: list[int] = []

    def other_turn() -> Any:
        with transaction.atomic():
            found = exchange(
                worker_id=WORKER,
                settlements=[_done(m) for m in members[:2]],
                request=_options(),
            )
            holder.append(backend_pid())
            counted.set()
            commit.wait(30)
        return found

    other = in_thread(other_turn)
    assert counted.wait(10)
    try:
        mine = in_thread(
            lambda: exchange(
                worker_id=WORKER,
                settlements=[_done(m) for m in members[2:]],
                request=_options(),
            )
        )
        assert wait_for(lambda: _blocked_on(holder[0]), timeout=10)
        assert _row(callback_id).parents_open == 4  # neither turn has committed
    finally:
        commit.set()
    assert other.result(10) == ([True, True], [])
    applied, claimed = mine.result(10)
    assert (list(applied), [c.id for c in claimed]) == ([True, True], [callback_id])
    callback = _row(callback_id)
    assert (callback.status, callback.parents_open, callback.claimed_by) == ("claimed", 0, WORKER)
    assert WorkflowRow.objects.get(id=handle.id).steps_open == 1


def _blocked_on(holder: int) -> int | None:
    """A backend waiting on a lock ``holder`` holds, if there is one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [holder]
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])
