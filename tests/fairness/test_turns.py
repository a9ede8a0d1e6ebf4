"""Per-key rules in a worker's turn and beside other claims (issue 23): the places a
turn's own completions free, FIFO across a retry settled by the same turn, and on
PostgreSQL the lock per key (a key another claim is
claiming is left to it, claims of other keys do not wait, and a claim that holds the
kind's own lock, as the version before took it, is waited for)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_jobqueue import Status, store
from django_jobqueue.models import Job
from django_jobqueue.rules.lifecycle import Run, Settlement, completed
from django_jobqueue.states import Outcome
from django_jobqueue.store import KeyRule
from django_jobqueue.store.limits import KEY_LOCK_SPACE, LOCK_SPACE, lock_key
from tests.helpers import backend_pid, in_thread, postgres_only, wait_for, waits_on_lock_held_by
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

KIND = tasks.keyed.kind
WORKER = "turns-worker"


def enqueue(key: str, count: int) -> list[uuid.UUID]:
    return [h.id for h in tasks.keyed.using(key=key).enqueue_many([{"n": i} for i in range(count)])]


def options(limit: int, rule: KeyRule, **more: Any) -> dict[str, Any]:
    return {"limit": limit, "kinds": [KIND], "per_key": {KIND: rule}, **more}


def claim(limit: int, rule: KeyRule, worker: str = WORKER) -> list[store.Claimed]:
    return store.claim_jobs(worker_id=worker, request=store.ClaimRequest(**options(limit, rule)))


def keys_of(claimed: list[store.Claimed]) -> list[str | None]:
    keys = dict(Job.objects.filter(id__in=[c.id for c in claimed]).values_list("id", "key"))
    return sorted(keys[c.id] or "" for c in claimed)


def run_of(job: store.Claimed) -> Run:
    return Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker=WORKER)


def test_a_turns_completion_frees_its_keys_place_for_the_same_turns_claim() -> None:
    """Most one per key: the turn that completes a key's job claims the key's next one,
    not a turn later (PostgreSQL counts without the jobs its statement completes)."""
    first, second, _ = enqueue("a", 3)
    rule = KeyRule(most=1)
    [job] = claim(2, rule)
    assert job.id == first

    applied, claimed = store.exchange(
        worker_id=WORKER,
        settlements=[completed(run_of(job), result=1)],
        request=store.ClaimRequest(**options(2, rule)),
    )

    assert applied == [True]
    assert [c.id for c in claimed] == [second]
    assert Job.objects.filter(kind=KIND, status=Status.CLAIMED).count() == 1


def test_a_turns_completion_of_another_workers_job_frees_nothing() -> None:
    """Only the turn's own runs are left out of the count: a settlement whose claim was
    lost (the job is another worker's now) writes nothing and frees no place."""
    enqueue("a", 3)
    rule = KeyRule(most=1)
    [job] = claim(2, rule)
    Job.objects.filter(id=job.id).update(claimed_by="someone-else")

    applied, claimed = store.exchange(
        worker_id=WORKER,
        settlements=[completed(run_of(job), result=1)],
        request=store.ClaimRequest(**options(2, rule)),
    )

    assert applied == [False]
    assert claimed == []


def test_an_ordered_keys_next_job_waits_for_a_retry_settled_by_the_same_turn() -> None:
    first, second = enqueue("a", 2)
    rule = KeyRule(ordered=True)
    [job] = claim(2, rule)
    assert job.id == first
    retry = Settlement(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count,
        outcome=Outcome.RETRIED,
        status=Status.PENDING,
        visible_at=timezone.now() + timedelta(minutes=1),
        failed=True,
    )

    applied, claimed = store.exchange(
        worker_id=WORKER, settlements=[retry], request=store.ClaimRequest(**options(2, rule))
    )

    assert applied == [True]
    assert claimed == []  # the head waits for its retry: the key's second job waits too
    assert Job.objects.get(id=second).status == Status.PENDING
    assert claim(2, rule) == []


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_key_another_claim_is_claiming_is_left_to_it_and_no_claim_waits() -> None:
    """Two claims of the kind at once: the second takes the keys the first does not
    hold, without waiting for it to commit, and neither takes a key's place twice."""
    for key in ("a", "b", "c", "d"):
        enqueue(key, 2)
    rule = KeyRule(most=1)
    with transaction.atomic():
        first = claim(2, rule, worker="w:1")
        assert len(first) == 2
        second = in_thread(lambda: claim(4, rule, worker="w:2")).result(10)
        assert len(second) == 2
    assert not set(keys_of(first)) & set(keys_of(second))
    assert claim(4, rule, worker="w:3") == []  # every key at its most
    per_key = Job.objects.filter(kind=KIND, status=Status.CLAIMED).values_list("key", flat=True)
    assert sorted(per_key) == ["a", "b", "c", "d"]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_key_whose_lock_is_held_is_passed_over_until_it_is_released() -> None:
    enqueue("a", 1)
    [b] = enqueue("b", 1)
    rule = KeyRule(most=1)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [KEY_LOCK_SPACE, f"{KIND} a"]
        )
        got = in_thread(lambda: claim(2, rule)).result(10)
        assert [c.id for c in got] == [b]
    assert keys_of(claim(2, rule)) == ["a"]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_waits_for_one_holding_the_kinds_own_lock() -> None:
    """A worker of the version before counts a kind's keys under the kind's lock, held
    alone: a claim of this version takes that lock shared, so it waits for that count's
    claims to commit, and the two never take a key's last place both."""
    enqueue("a", 2)
    rule = KeyRule(most=1)
    holder = backend_pid()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_SPACE, lock_key(KIND)])
        pid: list[int] = []

        def waiting() -> list[store.Claimed]:
            pid.append(backend_pid())
            return claim(2, rule)

        future = in_thread(waiting)
        wait_for(lambda: pid and waits_on_lock_held_by(pid[0], holder))
        assert not future.done()
    assert len(future.result(10)) == 1


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_claims_at_once_of_a_worker_with_key_rules_take_different_plain_jobs() -> None:
    """A worker whose kinds include one with key rules claims the other kinds' jobs from
    a pool of ids: a second claim while the first still holds its rows takes the next
    ones, not none (the pool's parts lock as they read; before, both read the same first
    rows and the second found each of them locked)."""
    plain = {h.id for h in tasks.record.enqueue_many([{"n": i} for i in range(30)])}
    enqueue("a", 2)
    wanted = options(10, KeyRule(most=1), kinds=[KIND, tasks.record.kind])
    with transaction.atomic():
        first = store.claim_jobs(worker_id="w:1", request=store.ClaimRequest(**wanted))
        second = in_thread(
            lambda: store.claim_jobs(worker_id="w:2", request=store.ClaimRequest(**wanted))
        ).result(10)
    assert len(first) == len(second) == 10
    assert not {c.id for c in first} & {c.id for c in second}
    assert {c.id for c in first + second if c.kind == tasks.record.kind} <= plain


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_claims_at_once_of_a_fair_kind_take_different_jobs() -> None:
    """A fair kind without a count per key walks its keys with no lock per key: a second
    claim while the first holds its rows takes other rows of the same keys, not none."""
    for key in ("a", "b", "c", "d"):
        enqueue(key, 10)
    rule = KeyRule(fair=True)
    with transaction.atomic():
        first = claim(8, rule, worker="w:1")
        second = in_thread(lambda: claim(8, rule, worker="w:2")).result(10)
    assert len(first) == len(second) == 8
    assert not {c.id for c in first} & {c.id for c in second}
