"""Claiming: order, restrictions and the epoch guard (the plans are in test_plans.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_jobqueue import Priority, Status, store
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.run.context import Context
from django_jobqueue.run.executor import decide, execute
from django_jobqueue.task.registry import policy_for, registry
from tests.helpers import journal_of, postgres_only
from tests.taskapp import tasks

KINDS = registry.kinds


@pytest.mark.sqlite
@pytest.mark.django_db
def test_claim_order_is_priority_then_age() -> None:
    low = tasks.add.using(priority=Priority.LOW).enqueue(0, 1)
    normal_old = tasks.add.enqueue(0, 2)
    high = tasks.add.using(priority=Priority.HIGH).enqueue(0, 3)
    normal_new = tasks.add.enqueue(0, 4)
    claimed = store.claim_jobs(worker_id="w:1", request=store.ClaimRequest(limit=10, kinds=KINDS()))
    assert [j.id for j in claimed] == [high.id, normal_old.id, normal_new.id, low.id]
    assert all(j.status == Status.CLAIMED and j.run_count == 1 for j in claimed)
    row = Job.objects.get(id=high.id)
    assert row.claimed_by == "w:1"
    assert row.claim_expires_at is not None
    assert row.claim_expires_at > timezone.now() + timedelta(seconds=50)


@pytest.mark.sqlite
@pytest.mark.django_db
def test_claim_respects_limit_visibility_queue_kind_floor_and_caps() -> None:
    later = tasks.add.using(delay=timedelta(minutes=1)).enqueue(1, 1)
    mail = tasks.add.using(queue="mail").enqueue(1, 2)
    noop = tasks.noop.enqueue()
    low = tasks.add.using(priority=Priority.LOW).enqueue(1, 3)
    caps = [tasks.capped.enqueue(0) for _ in range(3)]

    assert [
        j.id
        for j in store.claim_jobs(
            worker_id="w", request=store.ClaimRequest(limit=5, kinds=KINDS(), queues=["mail"])
        )
    ] == [mail.id]
    assert [
        j.id
        for j in store.claim_jobs(
            worker_id="w", request=store.ClaimRequest(limit=5, kinds=[tasks.noop.kind])
        )
    ] == [noop.id]
    assert [
        j.id
        for j in store.claim_jobs(
            worker_id="w", request=store.ClaimRequest(limit=5, kinds=KINDS(), floor=2)
        )
    ] == [low.id]
    got = store.claim_jobs(
        worker_id="w",
        request=store.ClaimRequest(limit=5, kinds=KINDS(), kind_limits={tasks.capped.kind: 1}),
    )
    assert [j.id for j in got] == [caps[0].id]
    assert (
        store.claim_jobs(
            worker_id="w",
            request=store.ClaimRequest(limit=5, kinds=KINDS(), exclude_kinds=[tasks.capped.kind]),
        )
        == []
    )
    assert Job.objects.get(id=later.id).status == Status.PENDING
    assert store.next_wakeup(kinds=KINDS())[0] == Job.objects.get(id=later.id).visible_at


@pytest.mark.sqlite
@pytest.mark.django_db
def test_task_lease_overrides_the_default_lease() -> None:
    tasks.short_lease_sleep.enqueue(0)
    [job] = store.claim_jobs(
        worker_id="w", request=store.ClaimRequest(limit=1, kinds=KINDS(), leases=registry.leases())
    )
    row = Job.objects.get(id=job.id)
    assert row.claim_expires_at == job.claim_expires_at
    assert job.claim_expires_at is not None
    assert job.claim_expires_at - timezone.now() < timedelta(seconds=3)


def _run(job: Job, worker_id: str) -> list[bool]:
    ctx = Context(job_id=job.id, kind=job.kind, run_count=job.run_count, failure_count=0)
    result = execute(registry.find(job.kind), job, ctx, max_output_bytes=1 << 20)
    settlement = decide(result, policy=policy_for(job.kind), worker_id=worker_id)
    return store.settle(worker_id=worker_id, settlements=[settlement])


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("second_worker", ["w:1", "w:2"])
def test_epoch_guard_a_taken_over_run_cannot_settle(second_worker: str) -> None:
    handle = tasks.add.enqueue(2, 2)
    [first] = store.claim_jobs(worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=KINDS()))
    # The lease runs out (the first run is slow, not dead) and the job is re-claimed,
    # possibly by a worker with the very same host:pid.
    Job.objects.filter(id=handle.id).update(claim_expires_at=timezone.now() - timedelta(seconds=1))
    assert store.recover_expired() == 1
    [second] = store.claim_jobs(
        worker_id=second_worker, request=store.ClaimRequest(limit=1, kinds=KINDS())
    )
    assert second.run_count == 2
    entries_before = JournalEntry.objects.filter(job_id=handle.id).count()

    assert _run(first, "w:1") == [False]
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.CLAIMED
    assert job.run_count == 2
    assert job.result is None
    assert JournalEntry.objects.filter(job_id=handle.id).count() == entries_before

    assert _run(second, second_worker) == [True]
    job.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert job.result == 4
    assert [e.outcome for e in journal_of(job.id)] == ["stale-recovered", "completed"]


@pytest.mark.sqlite
@pytest.mark.django_db
def test_settle_batch_applies_each_guard_separately() -> None:
    a = tasks.add.enqueue(1, 1)
    b = tasks.add.enqueue(2, 2)
    jobs = store.claim_jobs(worker_id="w", request=store.ClaimRequest(limit=2, kinds=KINDS()))
    Job.objects.filter(id=b.id).update(claimed_by="someone-else")
    settlements = []
    for job in jobs:
        ctx = Context(job_id=job.id, kind=job.kind, run_count=1, failure_count=0)
        result = execute(registry.find(job.kind), job, ctx, max_output_bytes=1 << 20)
        settlements.append(decide(result, policy=policy_for(job.kind), worker_id="w"))
    assert store.settle(worker_id="w", settlements=settlements) == [True, False]
    assert Job.objects.get(id=a.id).status == Status.COMPLETED
    assert Job.objects.get(id=b.id).status == Status.CLAIMED
    assert not JournalEntry.objects.filter(job_id=b.id).exists()


@pytest.mark.sqlite
@pytest.mark.django_db
def test_extend_leases_is_guarded_by_run_number() -> None:
    handle = tasks.add.enqueue(1, 1)
    [job] = store.claim_jobs(worker_id="w", request=store.ClaimRequest(limit=1, kinds=KINDS()))
    until = timezone.now() + timedelta(hours=1)
    assert store.extend_leases(worker_id="w", runs={job.id: 1}, until=until) == 1
    assert store.extend_leases(worker_id="w", runs={job.id: 2}, until=until) == 0
    assert store.extend_leases(worker_id="x", runs={job.id: 1}, until=until) == 0
    assert Job.objects.get(id=handle.id).claim_expires_at == until


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_capped_kind_at_the_head_does_not_keep_other_kinds_from_free_slots() -> None:
    capped = [tasks.capped.using(priority=Priority.HIGH).enqueue(0) for _ in range(30)]
    others = [tasks.add.enqueue(n, n) for n in range(3)]
    got = store.claim_jobs(
        worker_id="w",
        request=store.ClaimRequest(limit=4, kinds=KINDS(), kind_limits={tasks.capped.kind: 1}),
    )
    assert [j.id for j in got] == [capped[0].id] + [h.id for h in others]


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_turn_settles_and_claims_and_a_lost_claim_still_writes_nothing() -> None:
    first, second, third = (tasks.add.enqueue(n, n) for n in range(3))
    jobs = store.claim_jobs(worker_id="w", request=store.ClaimRequest(limit=2, kinds=KINDS()))
    assert [j.id for j in jobs] == [first.id, second.id]
    Job.objects.filter(id=second.id).update(claimed_by="someone-else")  # taken over
    settlements = []
    for job in jobs:
        ctx = Context(job_id=job.id, kind=job.kind, run_count=1, failure_count=0)
        settlements.append(
            decide(
                execute(registry.find(job.kind), job, ctx, max_output_bytes=1 << 20),
                policy=policy_for(job.kind),
                worker_id="w",
            )
        )

    applied, claimed = store.exchange(
        worker_id="w", settlements=settlements, request=store.ClaimRequest(limit=2, kinds=KINDS())
    )

    assert applied == [True, False]
    assert [j.id for j in claimed] == [third.id]
    assert Job.objects.get(id=first.id).status == Status.COMPLETED
    assert Job.objects.get(id=second.id).status == Status.CLAIMED
    assert not JournalEntry.objects.filter(job_id=second.id).exists()
    assert Job.objects.get(id=third.id).claimed_by == "w"


@pytest.mark.django_db
def test_a_claim_made_ready_ahead_is_sent_as_one_prepared_at_the_moment_it_is_sent() -> None:
    """An idle worker prepares its claim before it waits and sends it later on the clock
    of that moment (``PreparedClaim.at``): the same spec a claim prepared then would
    carry, its visibility and every lease expiry read from the new clock."""
    made = timezone.now() - timedelta(seconds=10)  # prepared 10 s ago, before a wait
    sent = made + timedelta(seconds=7)
    request = store.ClaimRequest(
        kinds=[tasks.add.kind, tasks.short_lease_step.kind],
        limit=4,
        leases={tasks.short_lease_step.kind: timedelta(seconds=2)},
        now=made,
    )
    ready = store.prepare_claim(worker_id="w", request=request)
    fresh = store.prepare_claim(
        worker_id="w",
        request=store.ClaimRequest(
            kinds=request.kinds, limit=request.limit, leases=request.leases, now=sent
        ),
    )
    assert ready is not None
    assert fresh is not None
    assert ready.at(sent).spec == fresh.spec
    assert ready.spec.now == made, "the ready claim itself is left as it was"
    later = tasks.add.enqueue(a=1, b=2)
    Job.objects.filter(id=later.id).update(visible_at=made + timedelta(seconds=3))
    # Visible 3 s after the claim was made ready: by its sending's clock (now), not by
    # the clock it was made on.
    [claimed] = store.claim_ready(ready)
    assert claimed.id == later.id


@pytest.mark.sqlite
@pytest.mark.django_db
@pytest.mark.parametrize("waiting", [2, 8], ids=["fewer-than-its-slots", "more-than-its-slots"])
def test_a_caught_up_claim_takes_what_its_tiers_would(waiting: int) -> None:
    """A claim made ready by an idle worker (``ready_claim``: its queues were caught up)
    may try its tiers in one scan first (``_every_tier``). With fewer jobs waiting than
    its slots it takes them all, as its tiers would; with more, its tiers decide as
    ever (one slot of five prefers LOW: the first LOW and the first four NORMAL), and
    the job the one scan locked and the tiers left stays pending for the next claim."""
    normal = [tasks.add.enqueue(0, i) for i in range(waiting)]
    low = [tasks.add.using(priority=Priority.LOW).enqueue(1, i) for i in range(waiting)]
    request = store.ClaimRequest(limit=5, kinds=KINDS(), preferring={Priority.LOW: 1})
    ready = store.ready_claim(worker_id="w", request=request)
    assert ready is not None
    assert ready.spec.caught_up
    claimed = {j.id for j in store.claim_ready(ready)}
    if waiting == 2:
        assert claimed == {j.id for j in normal + low}
    else:
        assert claimed == {low[0].id, *(j.id for j in normal[:4])}
    pending = set(Job.objects.filter(status=Status.PENDING).values_list("id", flat=True))
    assert pending == {j.id for j in normal + low} - claimed
    assert all(Job.objects.get(id=i).claimed_by == "w" for i in claimed)


@postgres_only
@pytest.mark.django_db
@pytest.mark.parametrize("waiting", [2, 8], ids=["fewer-than-its-slots", "more-than-its-slots"])
def test_a_caught_up_claim_is_one_scan_that_claims_nothing_when_full(waiting: int) -> None:
    """On PostgreSQL a caught-up claim of several tiers is first one statement that reads
    the claim index once: with fewer jobs waiting than its slots it claims them all;
    with as many or more it claims none, says so (one row of NULLs), and its locks go
    with its commit, for the tiers' claim that follows (the test above)."""
    for i in range(waiting):
        tasks.add.enqueue(0, i)
        tasks.add.using(priority=Priority.LOW).enqueue(1, i)
    request = store.ClaimRequest(limit=5, kinds=KINDS(), preferring={Priority.LOW: 1})
    ready = store.ready_claim(worker_id="w", request=request)
    assert ready is not None
    spec = ready.at(timezone.now()).spec
    statement, params = ready.dialect.claim_statement(spec).statement()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(statement, params)
        rows = cursor.fetchall()
        transaction.set_rollback(True)
    assert plan.count("jobqueue_job_claim") == 1, plan
    if waiting == 2:
        assert len(rows) == 4
        assert all(r[0] is not None for r in rows)
    else:
        assert rows == [(None,) * len(rows[0])]
