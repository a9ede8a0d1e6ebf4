"""The ways a job becomes claimable, one ``Way`` each: how the cell's subject is brought
to the moment before (``prepare``), and the event that makes it claimable followed by
the turn of the worker the rule binds (``trigger``, returning what that turn claimed)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone

from django_jobqueue import RateLimited, Status, chain, emit
from django_jobqueue.models import Job
from django_jobqueue.store import claim
from django_jobqueue.store.dialects.postgresql.claiming import NO_CLAIM
from django_jobqueue.store.dialects.postgresql.joining import orders_candidates
from django_jobqueue.store.exchanging import turn_statement
from tests.conformance.harness import MatrixWorker, status
from tests.helpers import is_postgres
from tests.taskapp import matrix_tasks


@dataclass
class Cell:
    """One cell's world: the worker the rule binds (``me``), another worker holding
    what takes a place (``other``), one that runs the subject's or a parent's earlier
    run (``runner``); the subject's enqueue options and the room of ``me``'s turns."""

    using: dict[str, Any]
    room: int
    me: MatrixWorker = field(default_factory=lambda: MatrixWorker("matrix:me"))
    other: MatrixWorker = field(default_factory=lambda: MatrixWorker("matrix:other"))
    runner: MatrixWorker = field(default_factory=lambda: MatrixWorker("matrix:runner"))
    x: uuid.UUID | None = None  # the subject: the job the way makes claimable
    parent: uuid.UUID | None = None  # its workflow parent (the join ways)
    blocker: uuid.UUID | None = None  # what takes the place the rule bounds, if any
    later: uuid.UUID | None = None  # a job enqueued after the subject, if any
    refused: RateLimited | None = None  # the subject's enqueue, refused

    def said(self, claims: list[uuid.UUID]) -> str:
        """A failed check's message: what the turn claimed, each job by its part here."""
        parts = [(self.x, "subject"), (self.parent, "parent"), (self.blocker, "blocker")]
        names = {job: name for job, name in [*parts, (self.later, "later job")] if job}
        keys = dict(Job.objects.filter(id__in=claims).values_list("id", "key"))
        return f"claimed {[names.get(c) or f'a job of key {keys.get(c)!r}' for c in claims]}"

    def enqueue(self, how: str = "", **using: Any) -> uuid.UUID:
        return matrix_tasks.subject.using(**{**self.using, **using}).enqueue(how=how).id


@dataclass(frozen=True)
class Way:
    name: str
    prepare: Callable[[Cell], None]
    trigger: Callable[[Cell], list[uuid.UUID]]


# --- (a) enqueued ------------------------------------------------------------------------


def _nothing(cell: Cell) -> None:
    return None


def _enqueue(cell: Cell) -> list[uuid.UUID]:
    try:
        cell.x = cell.enqueue()
    except RateLimited as exc:
        cell.refused = exc
    return cell.me.turn(cell.room)


# --- (b), (c) released by a join -----------------------------------------------------------


def _joined(by: Callable[[Cell], MatrixWorker]) -> Callable[[Cell], None]:
    """A chain of the parent and the subject, the parent claimed by ``by(cell)``."""

    def prepare(cell: Cell) -> None:
        flow = chain(matrix_tasks.parent.s(), matrix_tasks.subject.using(**cell.using).s())
        handle = flow.enqueue()
        cell.parent, cell.x = handle.steps["0"].id, handle.steps["1"].id
        assert by(cell).turn(1) == [cell.parent]
        assert status(cell.x) == Status.WAITING

    return prepare


def _long_way(cell: Cell) -> list[uuid.UUID]:
    """Another worker's parent completes through the ordinary settlement path (a turn
    that claims nothing: ``store.joins``, in a transaction of its own); then ``me``
    claims."""
    assert cell.parent is not None
    assert cell.x is not None
    cell.runner.finish(cell.parent)
    assert status(cell.x) != Status.WAITING
    return cell.me.turn(cell.room)


def _in_a_turn(cell: Cell) -> list[uuid.UUID]:
    """``me`` completes the parent in the turn that claims: on PostgreSQL one statement
    settles it, releases the subject and claims (``dialects/postgresql/joining.py``,
    which writes a released step claimed itself when the claim may take it), unless the
    claim has a rule that ranks candidates (``joining.orders_candidates``: fair keys, a
    preferred priority tier): then the statement settles and releases only, and the
    claim follows it. SQLite and MariaDB have no such statement: there the same call
    settles the long way and claims after it, their equivalent; the cell checks which
    path was taken."""
    assert cell.parent is not None
    settlement = cell.me.run(cell.parent)
    assert settlement is not None
    wanted = cell.me.wanted(cell.room)
    one_statement = turn_statement(
        worker_id=cell.me.worker_id, settlements=[settlement], request=wanted
    )
    assert (one_statement is not None) == is_postgres(), "the turn's path is PostgreSQL's only"
    if one_statement is not None:
        ranks = orders_candidates(claim.prepare(worker_id=cell.me.worker_id, request=wanted).spec)
        claims_in_it = NO_CLAIM not in one_statement[0]
        assert claims_in_it != ranks, "a ranking claim follows the statement, others are in it"
    return cell.me.turn(cell.room, settle=[settlement])


# --- (d) retried, (e) woken --------------------------------------------------------------


def _ran_once(how: str, parked: str) -> Callable[[Cell], None]:
    """The subject enqueued and run once by the runner: it fails (a retry an hour
    later), sleeps or waits; pending, not claimable."""

    def prepare(cell: Cell) -> None:
        cell.x = cell.enqueue(how)
        assert cell.runner.turn(1) == [cell.x]
        cell.runner.finish(cell.x)
        row = Job.objects.get(id=cell.x)
        assert (row.status, row.parked) == (Status.PENDING, parked)
        assert row.visible_at > timezone.now() + timedelta(minutes=30)

    return prepare


def _time_passes(cell: Cell) -> list[uuid.UUID]:
    """The backoff or the sleep runs out: the job's time moved to a second ago (the
    cell's clock, instead of waiting an hour)."""
    assert cell.x is not None
    past = timezone.now() - timedelta(seconds=1)
    row = Job.objects.get(id=cell.x)
    Job.objects.filter(id=cell.x).update(
        visible_at=past, wake_at=None if row.wake_at is None else past
    )
    return cell.me.turn(cell.room)


def _emitted(cell: Cell) -> list[uuid.UUID]:
    assert emit(matrix_tasks.EVENT, key=str(cell.x), payload={"n": 1}) == 1
    return cell.me.turn(cell.room)


WAYS = [
    Way("enqueued", _nothing, _enqueue),
    Way("released_the_long_way", _joined(lambda cell: cell.runner), _long_way),
    Way("released_in_a_turn", _joined(lambda cell: cell.me), _in_a_turn),
    Way("retried", _ran_once("fail", ""), _time_passes),
    Way("woken_from_a_sleep", _ran_once("sleep", "sleep"), _time_passes),
    Way("woken_by_an_event", _ran_once("wait", "event"), _emitted),
]
