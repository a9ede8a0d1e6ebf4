"""PostgreSQL's turn that completes a workflow step wakes the workers for the steps it
releases and leaves pending, and for no step it claims itself, whichever of its two
forms it takes: the one statement that settles, releases and claims, or, for a claim
that ranks its candidates (a slot preferring a lower priority tier, fair keys), the
statement that settles and releases followed by the claim (``joining.orders_candidates``),
where the store sends the wake-ups for what the claim left."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from django_jobqueue import conf
from django_jobqueue.store import wakeups
from django_jobqueue.store.dialects.base.wakeups import Wakeups
from django_jobqueue.store.dialects.postgresql.claiming import NO_CLAIM
from django_jobqueue.store.exchanging import turn_statement
from django_jobqueue.workflows import chain
from tests.conformance.harness import PARENT, MatrixWorker, status
from tests.conformance.rules import LOW_SLOT
from tests.helpers import is_postgres
from tests.taskapp import matrix_tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listening() -> Iterator[Wakeups]:
    if not is_postgres():
        pytest.skip("the one-statement turn and its wake-ups are PostgreSQL's")
    connection = wakeups.listen(conf.get().database)
    yield connection
    connection.close()


def _completed_parent(me: MatrixWorker) -> tuple[uuid.UUID, uuid.UUID]:
    """A chain parent -> subject, the parent claimed by ``me``."""
    handle = chain(matrix_tasks.parent.s(), matrix_tasks.subject.s()).enqueue()
    parent, child = handle.steps["0"].id, handle.steps["1"].id
    assert me.turn(1) == [parent]
    return parent, child


def _turn(me: MatrixWorker, parent: uuid.UUID, *, ranking: bool) -> list[uuid.UUID]:
    settlement = me.run(parent)
    assert settlement is not None
    statement = turn_statement(
        worker_id=me.worker_id, settlements=[settlement], request=me.wanted(1)
    )
    assert statement is not None
    assert (NO_CLAIM in statement[0]) is ranking, "the turn's form is not the expected one"
    return me.turn(1, settle=[settlement])


@pytest.mark.parametrize("ranking", [False, True], ids=["one_statement", "claim_after"])
def test_a_turn_that_claims_the_step_it_releases_wakes_nobody(
    listening: Wakeups, ranking: bool
) -> None:
    me = MatrixWorker("wake:me")
    parent, child = _completed_parent(me)
    list(listening.payloads(timeout=0.3))  # the enqueue's own wake-up
    me.slot = LOW_SLOT if ranking else 0  # a slot that prefers a lower tier ranks
    assert _turn(me, parent, ranking=ranking) == [child]
    assert list(listening.payloads(timeout=1.0)) == []


@pytest.mark.parametrize("ranking", [False, True], ids=["one_statement", "claim_after"])
def test_a_turn_that_leaves_the_step_it_releases_pending_wakes_the_workers(
    listening: Wakeups, ranking: bool
) -> None:
    me = MatrixWorker("wake:me", kinds=(PARENT,))  # it does not serve the subject's kind
    parent, child = _completed_parent(me)
    list(listening.payloads(timeout=0.3))
    me.slot = LOW_SLOT if ranking else 0
    assert _turn(me, parent, ranking=ranking) == []
    assert status(child) == "pending"
    assert list(listening.payloads(timeout=2.0)) == [matrix_tasks.subject.queue]
