"""Which pool a worker's turn claims for first, when it runs both sync and async kinds
(``Pools.groups``): in a turn that only claims, the group whose last claim found work,
else the roomier one; in a turn that settles, the roomier one, with the settlements."""

from __future__ import annotations

from django_jobqueue.run.pipeline import Pipeline
from django_jobqueue.worker.pools import Pools


def pools(*, async_kinds: set[str]) -> Pools:
    pipe = Pipeline(worker_id="host:1", alias="default", max_output_bytes=1024 * 1024)
    return Pools(
        pipe=pipe,
        on_result=lambda: None,
        concurrency=8,
        async_concurrency=100,
        kinds=["a.sync", "b.sync", "c.async"],
        async_kinds=async_kinds,
    )


def firsts(p: Pools, *, settles: bool = False) -> list[str]:
    return [kinds[0] for kinds, _ in p.groups({}, set(), settles=settles)]


def test_the_roomier_group_goes_first_until_a_claim_finds_work() -> None:
    p = pools(async_kinds={"c.async"})
    assert firsts(p) == ["c.async", "a.sync"]
    p.found(["a.sync", "b.sync"], 0)
    p.found(["c.async"], 0)
    assert firsts(p) == ["c.async", "a.sync"], "claims that found nothing change nothing"


def test_the_group_whose_last_claim_found_work_goes_first() -> None:
    p = pools(async_kinds={"c.async"})
    p.found(["a.sync", "b.sync"], 3)
    assert firsts(p) == ["a.sync", "c.async"], "sync jobs came last: their claim first"
    p.found(["c.async"], 0)
    assert firsts(p) == ["a.sync", "c.async"], "an empty claim of the other keeps the order"
    p.found(["c.async"], 1)
    assert firsts(p) == ["c.async", "a.sync"]


def test_a_turn_that_settles_claims_for_the_roomier_group_first_whatever_was_found() -> None:
    p = pools(async_kinds={"c.async"})
    p.found(["a.sync", "b.sync"], 3)
    assert firsts(p) == ["a.sync", "c.async"]
    assert firsts(p, settles=True) == ["c.async", "a.sync"]


def test_each_group_still_claims_for_its_own_room_whatever_the_order() -> None:
    p = pools(async_kinds={"c.async"})
    before = {kinds[0]: room for kinds, room in p.groups({}, set(), extra=4)}
    p.found(["a.sync"], 2)
    after = {kinds[0]: room for kinds, room in p.groups({}, set(), extra=4)}
    assert before == after == {"a.sync": 12, "c.async": 100}


def test_a_worker_of_sync_kinds_alone_has_one_group() -> None:
    p = pools(async_kinds=set())
    p.found(["a.sync", "b.sync", "c.async"], 5)
    assert p.groups({}, set()) == [(["a.sync", "b.sync", "c.async"], 8)]
