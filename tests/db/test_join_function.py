"""The join function of PostgreSQL's turn (``django_jobqueue_count_down``, from
``store/dialects/postgresql/sql/``) decides as the Python rule does (``rules.joins``).

Every small counter state is fed to both, exhaustively: each child's join (``when``,
its open and dead parents, how many of them the turn completed, whether the turn takes
it, whether it is still waiting, whether it is visible yet) against ``join(...,
failed=0)`` (the turn sends only completions), and each workflow's count (its open and
dead steps, an operator's cancel, its status, the steps the turn closed and the
children the call cancelled) against ``outcome`` once its last step closed. One call of
the function with every state at once, as a turn calls it; each row read back.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job, Workflow
from django_jobqueue.rules.joins import join, outcome
from django_jobqueue.states import JoinWhen, Status, WorkflowStatus
from tests.helpers import postgres_only

pytestmark = [pytest.mark.django_db, postgres_only]

WORKER = "w:join-rule"
KIND = "tests.join_rule"
LEASE = timedelta(minutes=1)


@dataclass(frozen=True)
class Child:
    """A child's state before the call, and what the call counts for it."""

    id: uuid.UUID
    when: str
    parents_open: int
    parents_dead: int
    status: str
    visible_at: datetime
    completed: int  # its parents the turn completed
    take: bool  # the turn has room to claim it
    workflow_id: uuid.UUID


@dataclass(frozen=True)
class Flow:
    """A workflow's state before the call, and the steps the turn closed in it."""

    id: uuid.UUID
    steps_open: int
    steps_dead: int
    cancel_requested: bool
    status: str
    closed: int


def _children(at: datetime, workflow_id: uuid.UUID) -> list[Child]:
    """Every state of a child on the grid."""
    grid = itertools.product(
        JoinWhen.values,
        range(4),  # parents open
        range(3),  # parents dead
        (Status.WAITING, Status.CANCELLED),  # a cancelled child is locked, never written
        (at - timedelta(hours=1), at + timedelta(hours=1)),
        range(1, 4),  # parents completed by the turn
        (False, True),
    )
    return [Child(uuid7(), *state, workflow_id=workflow_id) for state in grid]


def _flows() -> list[tuple[Flow, int]]:
    """Every state of a workflow on the grid, each with how many on_failure callbacks
    of it the call releases with no parent dead (which the call cancels)."""
    grid = itertools.product(
        range(4),  # steps open
        range(2),  # steps dead
        (False, True),  # an operator cancelled it
        (WorkflowStatus.RUNNING, WorkflowStatus.CANCELLED),
        range(3),  # steps the turn closed
        range(3),  # its callbacks the call cancels
    )
    return [(Flow(uuid7(), *state), voided) for *state, voided in grid]


def _expected_child(c: Child, at: datetime) -> dict[str, Any]:
    """The child after the call, by the Python rule: ``join`` decides the counters and
    the status; a released child is visible from now on (``store.joins``), and claimed
    by the turn that has room for it; a cancelled one finished now."""
    before = {
        "parents_open": c.parents_open,
        "parents_dead": c.parents_dead,
        "status": c.status,
        "visible_at": c.visible_at,
        "finished_at": None,
        "claimed_by": "",
        "claim_expires_at": None,
        "run_count": 0,
    }
    if c.status != Status.WAITING:
        return before
    j = join(
        when=c.when,
        parents_open=c.parents_open,
        parents_dead=c.parents_dead,
        completed=c.completed,
        failed=0,
    )
    after = {**before, "parents_open": j.parents_open, "parents_dead": j.parents_dead}
    if j.status == Status.CANCELLED:
        return {**after, "status": Status.CANCELLED, "finished_at": at}
    if j.status == Status.WAITING:
        return after
    after["visible_at"] = max(c.visible_at, at)
    if not c.take:
        return {**after, "status": Status.PENDING}
    return {
        **after,
        "status": Status.CLAIMED,
        "claimed_by": WORKER,
        "claim_expires_at": at + LEASE,
        "run_count": 1,
    }


def _expected_flow(f: Flow, cancelled_children: int, at: datetime) -> dict[str, Any]:
    """The workflow after the call: the steps the turn closed and the children the call
    cancelled are closed; the one that closes its last open step gives a running
    workflow its final status (``outcome``)."""
    steps_open = max(f.steps_open - f.closed - cancelled_children, 0)
    if steps_open == 0 and f.status == WorkflowStatus.RUNNING:
        final = outcome(cancel_requested=f.cancel_requested, steps_dead=f.steps_dead)
        return {"steps_open": 0, "steps_dead": f.steps_dead, "status": final, "finished_at": at}
    return {
        "steps_open": steps_open,
        "steps_dead": f.steps_dead,
        "status": f.status,
        "finished_at": None,
    }


def _store(children: list[Child], flows: list[Flow]) -> None:
    Workflow.objects.bulk_create(
        Workflow(
            id=f.id,
            name="join rule",
            steps_open=f.steps_open,
            steps_dead=f.steps_dead,
            cancel_requested=f.cancel_requested,
            status=f.status,
        )
        for f in flows
    )
    Job.objects.bulk_create(
        Job(
            id=c.id,
            kind=KIND,
            status=c.status,
            visible_at=c.visible_at,
            join_when=c.when,
            parents_open=c.parents_open,
            parents_dead=c.parents_dead,
            workflow_id=c.workflow_id,
            step_name=str(c.id),
        )
        for c in children
    )


def _count_down(children: list[Child], flows: list[Flow], at: datetime) -> set[uuid.UUID]:
    """One call, as a turn makes it; the ids of the children it returns (written)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id FROM django_jobqueue_count_down(%s::uuid[], %s::int4[],"
            " %s::bool[], %s::timestamptz[], %s::uuid[], %s::int4[], %s, %s) AS c",
            [
                [c.id for c in children],
                [c.completed for c in children],
                [c.take for c in children],
                [at + LEASE for _ in children],
                [f.id for f in flows],
                [f.closed for f in flows],
                at,
                WORKER,
            ],
        )
        return {row[0] for row in cursor.fetchall()}


def test_the_join_function_decides_as_the_join_rule_for_every_small_state() -> None:
    at = timezone.now()
    home = Flow(uuid7(), 100_000, 0, False, WorkflowStatus.RUNNING, 1)  # the grid's children's
    children = _children(at, home.id)
    flows = [home]
    for flow, voided in _flows():
        flows.append(flow)
        # A batch's on_failure callbacks whose last parent the turn completes, none dead.
        children += [
            Child(uuid7(), JoinWhen.FAILED, 1, 0, Status.WAITING, at, 1, True, flow.id)
            for _ in range(voided)
        ]
    _store(children, flows)

    written = _count_down(children, flows, at)

    wanted = {c.id: _expected_child(c, at) for c in children}
    rows = Job.objects.filter(id__in=wanted).values("id", *wanted[children[0].id])
    got = {row.pop("id"): row for row in rows}
    wrong = [(c, got[c.id], wanted[c.id]) for c in children if got[c.id] != wanted[c.id]]
    assert not wrong, f"{len(wrong)} children differ, the first: {wrong[:3]}"
    assert written == {c.id for c in children if c.status == Status.WAITING}

    cancelled = dict.fromkeys((f.id for f in flows), 0)
    for c in children:
        if c.status == Status.WAITING and wanted[c.id]["status"] == Status.CANCELLED:
            cancelled[c.workflow_id] += 1
    expected = {f.id: _expected_flow(f, cancelled[f.id], at) for f in flows}
    rows = Workflow.objects.filter(id__in=expected).values("id", *expected[home.id])
    got = {row.pop("id"): row for row in rows}
    wrong_flows = [(f, got[f.id], expected[f.id]) for f in flows if got[f.id] != expected[f.id]]
    assert not wrong_flows, f"{len(wrong_flows)} workflows differ, the first: {wrong_flows[:3]}"
    # The grid reached every outcome of both rules (it is not vacuous).
    assert {w["status"] for w in wanted.values()} == {
        Status.WAITING,
        Status.PENDING,
        Status.CLAIMED,
        Status.CANCELLED,
    }
    assert {e["status"] for e in expected.values()} == set(WorkflowStatus.values)
