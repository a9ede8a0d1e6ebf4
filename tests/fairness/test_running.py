"""Unique while running (issue 23, item 4): ``.using(dedup_key=..., while_running=...)``
extends the dedup merge to a running sibling. ``"drop"``: the new job merges into the
running one (nothing new written, a ``merged`` entry on its run); ``"wait"``: the new job
waits until the running one finishes (one at a time, held by the kind's per-key limit of
one, its key being the dedup key). Claims and settlements here are the queue's own, one
at a time, on every database; ``test_running_workers`` runs real workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_jobqueue import InvalidOption, Outcome, Status
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.store import ClaimRequest, claim_jobs, settle
from django_jobqueue.task import limiting
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

KIND = tasks.keyed.kind
ONE_A_KEY = {"LIMITS": {KIND: {"max_in_flight_per_key": 1}}}


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiting.forget()
    yield
    limiting.forget()


def claim(kind: str = KIND, limit: int = 10) -> list[Any]:
    """A worker's claim of ``kind``, with the per-key rules in force (as a worker's)."""
    _, rules = limiting.claim_limits([kind], max_age=0)
    return claim_jobs(worker_id="w", request=ClaimRequest(limit=limit, kinds=[kind], per_key=rules))


def complete(claimed: Any) -> None:
    done = Settlement(
        job_id=claimed.id,
        kind=claimed.kind,
        run_no=claimed.run_count,
        outcome=Outcome.COMPLETED,
        status=Status.COMPLETED,
    )
    assert settle(worker_id="w", settlements=[done]) == [True]


def test_drop_merges_into_the_running_sibling_and_writes_no_job() -> None:
    bound = tasks.keyed.using(dedup_key="user:1", while_running="drop")
    first = bound.enqueue(n=1)
    [running] = claim()
    second = bound.enqueue(n=2)
    assert second.id == first.id == running.id
    assert second.disposition == "merged"
    assert Job.objects.count() == 1
    entry = JournalEntry.objects.get(job_id=first.id, outcome=Outcome.MERGED)
    assert entry.run_no == running.run_count
    assert "running" in entry.note
    assert entry.attachment == {"incoming": {"n": 2}}
    # The running job's row is as its claim left it, and its run settles as usual.
    assert Job.objects.get(id=first.id).status == Status.CLAIMED
    complete(running)
    # Once it has finished, the next enqueue is a job of its own.
    third = bound.enqueue(n=3)
    assert third.id != first.id
    assert third.disposition == "inserted"


def test_drop_merges_into_a_pending_sibling_first() -> None:
    bound = tasks.keyed.using(dedup_key="user:1", while_running="drop")
    bound.enqueue(n=1)
    [running] = claim()
    queued = tasks.keyed.using(dedup_key="user:1").enqueue(n=2)  # no while_running
    assert queued.id != running.id  # the default: a new job beside the running one
    merged = bound.enqueue(n=3)
    assert merged.id == queued.id
    assert merged.disposition == "merged"
    assert not JournalEntry.objects.filter(job_id=running.id, outcome=Outcome.MERGED).exists()


def test_drop_passes_over_a_running_sibling_of_another_idempotency_key() -> None:
    tasks.keyed.using(dedup_key="user:1", idempotency_key="a").enqueue(n=1)
    [running] = claim()
    other = tasks.keyed.using(dedup_key="user:1", idempotency_key="b", while_running="drop")
    handle = other.enqueue(n=2)
    assert handle.id != running.id
    assert handle.disposition == "inserted"


def test_drop_into_a_sibling_that_settled_inserts_instead() -> None:
    bound = tasks.keyed.using(dedup_key="user:1", while_running="drop")
    first = bound.enqueue(n=1)
    [running] = claim()
    complete(running)
    second = bound.enqueue(n=2)
    assert second.id != first.id
    assert second.disposition == "inserted"
    assert not JournalEntry.objects.filter(job_id=first.id, outcome=Outcome.MERGED).exists()


def test_drop_with_a_class_tasks_own_dedup_key() -> None:
    first = tasks.Sync(7, items=["a"]).using(while_running="drop").enqueue()
    [running] = claim(tasks.Sync.kind)
    second = tasks.Sync(7, items=["b"]).using(while_running="drop").enqueue()
    assert second.id == first.id == running.id
    assert second.disposition == "merged"
    entry = JournalEntry.objects.get(job_id=first.id, outcome=Outcome.MERGED)
    assert entry.attachment["incoming"]["items"] == ["b"]


def test_drop_in_a_bulk_enqueue() -> None:
    bound = tasks.keyed.using(dedup_key="user:1", while_running="drop")
    first = bound.enqueue(n=1)
    claim()
    handles = bound.enqueue_many([{"n": 2}, {"n": 3}])
    assert [h.id for h in handles] == [first.id, first.id]
    assert Job.objects.count() == 1


@override_settings(JOBQUEUE=ONE_A_KEY)
def test_wait_holds_the_new_job_until_the_running_one_finishes() -> None:
    bound = tasks.keyed.using(dedup_key="user:1", while_running="wait")
    first = bound.enqueue(n=1)
    [running] = claim()
    second = bound.enqueue(n=2)
    third = bound.enqueue(n=3)
    assert second.id != first.id
    assert second.disposition == "inserted"
    assert third.id == second.id
    assert third.disposition == "merged"
    assert Job.objects.get(id=second.id).key == "user:1"  # keyed by the dedup key
    assert claim() == []  # one at a time: held while its sibling runs
    other = bound.using(dedup_key="user:2").enqueue(n=4)  # another dedup key runs at once
    assert [c.id for c in claim()] == [other.id]
    complete(running)
    assert [c.id for c in claim()] == [second.id]


@override_settings(JOBQUEUE=ONE_A_KEY)
def test_wait_in_a_bulk_enqueue_keys_each_job_by_the_dedup_key() -> None:
    handles = tasks.keyed.using(dedup_key="user:1", while_running="wait").enqueue_many(
        [{"n": 1}, {"n": 2}]
    )
    assert {Job.objects.get(id=h.id).key for h in handles} == {"user:1"}


def test_wait_with_an_ordered_kind() -> None:
    handle = tasks.in_order.using(dedup_key="shop:1", while_running="wait").enqueue(
        shop=1, seq=0, seconds=0
    )
    assert Job.objects.get(id=handle.id).key == "shop:1"


KEYED = ("keyed", {"n": 1})
PER_SHOP = ("per_shop", {"shop": 1, "seconds": 0})
IN_ORDER = ("in_order", {"shop": 1, "seq": 0, "seconds": 0})


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        (KEYED, {"dedup_key": "a", "while_running": "later"}, "one of 'drop', 'wait'"),
        (KEYED, {"dedup_key": "a", "while_running": True}, "one of 'drop', 'wait'"),
        (KEYED, {"while_running": "drop"}, "while_running needs a dedup_key"),
        (KEYED, {"dedup_key": "a", "while_running": "wait"}, "no limit per key"),
        (PER_SHOP, {"dedup_key": "a", "key": "a", "while_running": "wait"}, "most per key is 2"),
        (IN_ORDER, {"dedup_key": "a", "key": "b", "while_running": "wait"}, "its key is 'b'"),
        # the task's key callable gives another key than the dedup key
        (IN_ORDER, {"dedup_key": "a", "while_running": "wait"}, "its key is 'shop:1'"),
    ],
)
def test_bad_while_running_is_refused_and_nothing_is_written(
    target: tuple[str, dict[str, Any]], options: dict[str, Any], message: str
) -> None:
    name, arguments = target
    with pytest.raises(InvalidOption, match=message) as caught:
        getattr(tasks, name).using(**options).enqueue(**arguments)
    assert caught.value.option == "while_running"
    assert not Job.objects.exists()


def test_bad_while_running_in_a_bulk_enqueue_writes_nothing() -> None:
    with pytest.raises(InvalidOption, match="no limit per key"):
        tasks.keyed.using(dedup_key="a", while_running="wait").enqueue_many([{"n": 1}])
    # an item whose key (from the task's key callable) is not the dedup key is named
    bound = tasks.in_order.using(dedup_key="shop:1", while_running="wait")
    with pytest.raises(InvalidOption, match=r"item 1: .*its key is 'shop:2'") as caught:
        bound.enqueue_many(
            [{"shop": 1, "seq": 0, "seconds": 0}, {"shop": 2, "seq": 0, "seconds": 0}]
        )
    assert caught.value.option == "while_running"
    assert not Job.objects.exists()


def test_no_while_running_keeps_todays_merge() -> None:
    bound = tasks.keyed.using(dedup_key="user:1")
    first = bound.enqueue(n=1)
    claim()
    second = bound.enqueue(n=2)
    assert second.id != first.id
    assert second.disposition == "inserted"
    assert Job.objects.get(id=second.id).key is None
