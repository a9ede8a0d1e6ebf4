"""runworker over two queue databases, each on a cluster of its own: a worker started
without ``--database`` serves both (worker processes for each); a key's per-key limit
holds (its jobs are all on its database); each periodic tick is enqueued once across
both; and one cluster stopped mid-drain loses nothing while the other keeps draining,
its worker processes reconnecting when it is back."""

from __future__ import annotations

import json
import zlib
from datetime import datetime

import pytest
from django.core.management import call_command
from django.db import connections

from django_jobqueue import Status, routing
from django_jobqueue.errors import QueueDatabaseUnavailable
from django_jobqueue.models import Job, Schedule
from tests.shards import layout
from tests.shards.conftest import DATABASES, ShardWorkers, serving, wait_for, wait_serving
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.shards, pytest.mark.django_db(transaction=True, databases=DATABASES)]

# Generous: two cores shared with the rest of the suite.
DRAIN_TIMEOUT = 180.0


def by_crc32(text: str) -> str:
    return layout.ALIASES[zlib.crc32(text.encode()) % len(layout.ALIASES)]


def statuses(alias: str, kind: str) -> dict[str, int]:
    rows = Job.objects.using(alias).filter(kind=kind).values_list("status", flat=True)
    found: dict[str, int] = {}
    for status in rows:
        found[status] = found.get(status, 0) + 1
    return found


def drained(alias: str, kind: str, count: int) -> bool:
    return statuses(alias, kind) == {Status.COMPLETED: count}


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def test_a_worker_serves_every_database_and_a_key_limit_holds_on_its_own(
    shard_workers: ShardWorkers,
) -> None:
    shops = list(range(6))
    assert {by_crc32(f"shop:{s}") for s in shops} == set(layout.ALIASES)
    for shop in shops:
        for _ in range(4):
            tasks.per_shop.enqueue(shop=shop, seconds=0.3)  # at most two per shop at once
    expected = {a: 4 * sum(by_crc32(f"shop:{s}") == a for s in shops) for a in layout.ALIASES}
    # Two runworkers, no --database: each supervises a worker process per database.
    for _ in range(2):
        shard_workers.start("--concurrency", "4", "--poll-interval", "0.5")
    wait_serving(shard_workers, each=2)
    wait_for(
        lambda: all(drained(a, "tests.per_shop", expected[a]) for a in layout.ALIASES),
        timeout=DRAIN_TIMEOUT,
        what="both databases drained",
        procs=shard_workers,
    )
    shop_of = {
        job.id: job.key
        for alias in layout.ALIASES
        for job in Job.objects.using(alias).filter(kind="tests.per_shop")
    }
    runs = Execution.objects.filter(kind="tests.per_shop")
    assert runs.count() >= sum(expected.values())
    for shop in shops:
        spans = [
            (r.started_at, r.finished_at)
            for r in runs
            if shop_of[r.job_id] == f"shop:{shop}" and r.finished_at is not None
        ]
        assert len(spans) >= 4
        assert most_at_once(spans) <= 2, f"shop:{shop} had more than two runs at once"
    # The runs were spread over the processes of both databases, each its own.
    pids = {alias: set() for alias in layout.ALIASES}
    for r in runs:
        pids[
            next(a for a in layout.ALIASES if Job.objects.using(a).filter(id=r.job_id).exists())
        ].add(r.pid)
    assert all(pids.values())
    assert not pids["shard_a"] & pids["shard_b"]  # one database per worker process


def test_each_periodic_tick_is_enqueued_once_across_the_databases(
    shard_workers: ShardWorkers,
) -> None:
    name = "shards-beat"
    schedule = [{"kind": "tests.taskapp.tasks.noop", "cron": "* * * * * *", "name": name}]
    env = {"JOBQUEUE_TEST_PERIODIC": json.dumps(schedule)}
    for _ in range(2):  # two workers race for every tick on the schedules' home
        shard_workers.start("--concurrency", "2", "--poll-interval", "0.5", env=env)
    wait_serving(shard_workers, each=2)
    home = layout.ALIASES[0]

    def ticks() -> list[str]:
        return list(
            Job.objects.using(home)
            .filter(idempotency_key__startswith=f"periodic:{name}:")
            .values_list("idempotency_key", flat=True)
        )

    wait_for(lambda: len(ticks()) >= 4, timeout=60, what="four ticks", procs=shard_workers)
    keys = ticks()
    assert len(keys) == len(set(keys))  # each tick once
    other = layout.ALIASES[1]
    assert not Job.objects.using(other).filter(kind="tests.taskapp.tasks.noop").exists()
    assert not Schedule.objects.using(other).exists()
    assert Schedule.objects.using(home).filter(name=name).exists()


def test_a_cluster_stopped_mid_drain_loses_nothing_and_the_other_keeps_draining(
    shard_workers: ShardWorkers, sharded: dict[str, object]
) -> None:
    kind = "tests.taskapp.tasks.timed_sleep"
    keys = {a: [f"k{n}" for n in range(200) if by_crc32(f"k{n}") == a][:30] for a in layout.ALIASES}
    for alias, names in keys.items():
        for key in names:
            assert tasks.timed_sleep.using(key=key).enqueue(seconds=0.2).database == alias
    shard_workers.start("--concurrency", "2", "--poll-interval", "0.5")
    wait_serving(shard_workers)
    down, up = layout.ALIASES[1], layout.ALIASES[0]

    def done(alias: str) -> int:
        return statuses(alias, kind).get(Status.COMPLETED, 0)

    wait_for(lambda: done(down) >= 3, timeout=DRAIN_TIMEOUT, what="a start", procs=shard_workers)
    server = sharded[down]
    server.stop()  # type: ignore[attr-defined]
    connections[down].close()
    try:
        with pytest.raises(QueueDatabaseUnavailable, match=f"'{down}' is unavailable"):
            tasks.timed_sleep.using(key=keys[down][0]).enqueue(seconds=0)
        # The other database drains, and takes new jobs, while this one is down.
        late = tasks.timed_sleep.using(key=keys[up][0]).enqueue(seconds=0)
        assert late.database == up
        wait_for(
            lambda: drained(up, kind, 31),
            timeout=DRAIN_TIMEOUT,
            what=f"{up} drained while {down} is down",
            procs=shard_workers,
        )
    finally:
        server.start()  # type: ignore[attr-defined]
        connections[down].close()
    # Back: its worker processes reconnect and drain it, nothing lost (a run cut by the
    # stop is recovered when its lease ends, and runs again).
    wait_for(
        lambda: drained(down, kind, 30),
        timeout=DRAIN_TIMEOUT,
        what=f"{down} drained once back",
        procs=shard_workers,
    )
    assert serving(down) >= 1
    assert all(p.alive() for p in shard_workers.started)


def test_runworker_database_serves_that_database_only(sharded: object) -> None:
    jobs = {a: tasks.add.using(key=keyed(a)).enqueue(1, 2) for a in layout.ALIASES}
    try:
        call_command("runworker", "--database", "shard_b", "--burst", "--poll-interval", "0.2")
    finally:
        routing.serve(None)  # this process serves no database of its own again
    assert jobs["shard_b"].refresh().status == Status.COMPLETED
    assert jobs["shard_a"].refresh().status == Status.PENDING  # not its database


def keyed(alias: str) -> str:
    return next(k for k in (f"w{n}" for n in range(100)) if by_crc32(k) == alias)
