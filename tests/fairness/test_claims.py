"""Per-key rules inside the claim (issue 23), one claim at a time on each database: a most
per key, FIFO per key, round-robin between keys, and how they meet a kind's own caps."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import Priority, Status
from django_jobqueue.models import Job
from django_jobqueue.store import ClaimRequest, KeyRule, claim_jobs
from django_jobqueue.worker.claiming import KeyCursor
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

KIND = tasks.keyed.kind


def enqueue(key: str | None, count: int) -> list[Any]:
    bound = tasks.keyed.using(key=key) if key is not None else tasks.keyed
    return [h.id for h in bound.enqueue_many([{"n": i} for i in range(count)])]


def claim(
    limit: int, rule: KeyRule | None, cursor: KeyCursor | None = None, **options: Any
) -> list[Any]:
    """Claim as a worker does; with ``cursor``, starting where its last claim stopped."""
    per_key = {KIND: rule} if rule is not None else {}
    after = cursor.after() if cursor is not None else {}
    request = ClaimRequest(limit=limit, kinds=[KIND], per_key=per_key, key_after=after, **options)
    got = claim_jobs(worker_id="w", request=request)
    if cursor is not None:
        cursor.served(got, per_key)
    return got


def keys_of(claimed: list[Any]) -> Counter[str | None]:
    rows = dict(Job.objects.filter(id__in=[c.id for c in claimed]).values_list("id", "key"))
    return Counter(rows[c.id] for c in claimed)


def finish(job_ids: list[Any]) -> None:
    Job.objects.filter(id__in=job_ids).update(status=Status.COMPLETED, claimed_by="")


def test_the_key_is_stored_from_using_or_from_the_tasks_key_callable() -> None:
    given = tasks.keyed.using(key="tenant:42").enqueue(n=1)
    computed = tasks.per_shop.enqueue(shop=7, seconds=0)
    bulk = tasks.per_shop.enqueue_many([{"shop": 8, "seconds": 0}, {"shop": 9, "seconds": 0}])
    plain = tasks.keyed.enqueue(n=2)
    keys = dict(Job.objects.values_list("id", "key"))
    assert keys[given.id] == "tenant:42"
    assert keys[computed.id] == "shop:7"
    assert [keys[h.id] for h in bulk] == ["shop:8", "shop:9"]
    assert keys[plain.id] is None
    # .using(key=...) wins over the callable
    assert (
        Job.objects.get(id=tasks.per_shop.using(key="x").enqueue(shop=1, seconds=0).id).key == "x"
    )


def test_max_in_flight_per_key_takes_at_most_that_many_of_each_key() -> None:
    enqueue("a", 5)
    enqueue("b", 5)
    rule = KeyRule(most=2)
    first = claim(10, rule)
    assert keys_of(first) == {"a": 2, "b": 2}
    assert claim(10, rule) == []  # both keys at their most: nothing more
    finish([c.id for c in first if keys_of([c]) == {"a": 1}][:1])
    again = claim(10, rule)
    assert keys_of(again) == {"a": 1}


def test_fair_claims_round_robin_across_keys_and_unfair_ones_follow_the_backlog() -> None:
    enqueue("big", 30)
    enqueue("small", 3)
    assert keys_of(claim(4, None)) == {"big": 4}  # off: claim order, the big key first
    fair = claim(4, KeyRule(fair=True))
    # on: a key ranks by its next job plus its claimed ones, so the small key, behind by
    # four, gets all three of its jobs before the big key its fifth
    assert keys_of(fair) == {"small": 3, "big": 1}


def test_fair_claims_alternate_between_keys_with_nothing_claimed() -> None:
    enqueue("big", 30)
    enqueue("small", 3)
    enqueue("third", 1)
    assert keys_of(claim(5, KeyRule(fair=True))) == {"big": 2, "small": 2, "third": 1}


def test_fairness_keeps_priority_first() -> None:
    enqueue("a", 3)
    urgent = tasks.keyed.using(key="b", priority=Priority.HIGH).enqueue(n=0)
    got = claim(1, KeyRule(fair=True))
    assert [c.id for c in got] == [urgent.id]


def test_ordered_takes_one_per_key_in_enqueue_order_and_waits_for_its_head() -> None:
    a = enqueue("a", 3)
    b = enqueue("b", 2)
    rule = KeyRule(ordered=True)
    first = claim(10, rule)
    assert sorted(c.id for c in first) == sorted([a[0], b[0]])
    assert claim(10, rule) == []  # one at a time per key
    # the head of "a" retries later: "a" waits for it (FIFO), "b" goes on
    Job.objects.filter(id=a[0]).update(
        status=Status.PENDING, claimed_by="", visible_at=timezone.now() + timedelta(hours=1)
    )
    finish([b[0]])
    assert [c.id for c in claim(10, rule)] == [b[1]]


def test_jobs_without_a_key_are_claimed_by_the_kinds_other_limits() -> None:
    enqueue("a", 3)
    plain = enqueue(None, 2)
    got = claim(10, KeyRule(most=1))
    assert keys_of(got) == {"a": 1, None: 2}
    assert {c.id for c in got} >= set(plain)


def test_a_kinds_cap_and_its_most_per_key_hold_together() -> None:
    enqueue("a", 5)
    enqueue("b", 5)
    enqueue(None, 5)
    got = claim(10, KeyRule(most=2, fair=True), kind_limits={KIND: 3})
    assert len(got) == 3
    assert all(n <= 2 for k, n in keys_of(got).items() if k is not None)


def test_a_global_max_in_flight_and_a_most_per_key_hold_together() -> None:
    enqueue("a", 5)
    enqueue("b", 5)
    rule = KeyRule(most=2)
    got = claim(10, rule, max_in_flight={KIND: 3})
    assert len(got) == 3
    assert max(keys_of(got).values()) <= 2
    assert claim(10, rule, max_in_flight={KIND: 3}) == []


def test_priority_tiers_count_what_earlier_tiers_took_of_a_key() -> None:
    enqueue("a", 4)
    tasks.keyed.using(key="a", priority=Priority.LOW).enqueue(n=9)
    tasks.keyed.using(key="a", priority=Priority.LOW).enqueue(n=9)
    got = claim(6, KeyRule(most=2), preferring={Priority.LOW: 3})
    assert keys_of(got) == {"a": 2}
    assert {c.priority for c in got} == {Priority.LOW}  # the low tier went first


def test_claims_take_turns_through_more_keys_than_one_claim_looks_at() -> None:
    """On PostgreSQL a claim looks at a bounded number of keys, starting after the last key
    its claimer served (the worker's ``KeyCursor``): with 80 keys every key is still
    served, in few claims."""
    for k in range(80):
        enqueue(f"k{k:02d}", 2)
    served: set[str | None] = set()
    cursor = KeyCursor()
    for _ in range(12):
        got = claim(8, KeyRule(most=1, fair=True), cursor)
        served.update(keys_of(got))
        finish([c.id for c in got])
    assert len(served) == 80
