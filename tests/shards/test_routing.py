"""Routing on two queue databases (each a PostgreSQL cluster of its own): a job goes to
its queue's database when QUEUES pins it, else to its key's (a stable crc32, so a
tenant's jobs stay together), a keyless one by its queue; a batch is split by database
and keeps its order; a ROUTE callable decides, and a bad answer writes nothing; a
workflow and its joins live on its root's database; an event goes to its key's."""

from __future__ import annotations

import zlib

import pytest
from django.test import override_settings

from django_jobqueue import Workflow, emit, routing, workflow
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.models import Event, Job, StepEdge
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.testing import run_jobs
from tests.shards import layout
from tests.shards.conftest import DATABASES
from tests.taskapp import tasks

pytestmark = [pytest.mark.shards, pytest.mark.django_db(transaction=True, databases=DATABASES)]


def where(job_id: object) -> list[str]:
    """The queue databases holding a row of job ``job_id``."""
    return [a for a in layout.ALIASES if Job.objects.using(a).filter(id=job_id).exists()]


def by_crc32(text: str) -> str:
    return layout.ALIASES[zlib.crc32(text.encode()) % len(layout.ALIASES)]


def test_a_pinned_queue_goes_to_its_database_and_a_key_to_its_stable_hash(sharded: object) -> None:
    pinned = tasks.add.using(queue=layout.PINNED_QUEUE, key="tenant:1").enqueue(1, 2)
    assert pinned.database == "shard_b"
    assert where(pinned.id) == ["shard_b"]
    keys = [f"tenant:{n}" for n in range(12)]
    assert {by_crc32(k) for k in keys} == set(layout.ALIASES)  # the keys cover both
    for key in keys:
        handle = tasks.add.using(key=key).enqueue(1, 2)
        assert handle.database == by_crc32(key), key
        assert where(handle.id) == [by_crc32(key)], key
        again = tasks.add.using(key=key).enqueue(3, 4)  # the same key: the same database
        assert where(again.id) == [by_crc32(key)]
    keyless = tasks.add.enqueue(1, 1)
    assert where(keyless.id) == [by_crc32("default")]  # by its queue
    assert routing.route(kind="x", queue="reports", key=None) == by_crc32("reports")


def test_a_handle_reads_and_acts_on_its_own_database(sharded: object) -> None:
    key = next(k for k in (f"t{n}" for n in range(50)) if by_crc32(k) != layout.ALIASES[0])
    handle = tasks.add.using(key=key).enqueue(2, 3)
    assert handle.refresh().status == "pending"  # not on HOME (shard_a): found all the same
    found = enqueue_job(handle.id)
    assert found.database == by_crc32(key)
    with routing.using(handle.database):
        run_jobs()
    assert handle.refresh().result == 5
    assert [e.outcome for e in handle.journal()] == ["completed"]


def enqueue_job(job_id: object) -> object:
    from django_jobqueue import job

    return job(str(job_id))


def test_enqueue_many_writes_each_database_its_share_and_keeps_the_order(sharded: object) -> None:
    shops = list(range(10))
    assert {by_crc32(f"shop:{s}") for s in shops} == set(layout.ALIASES)  # both get a share
    handles = tasks.per_shop.enqueue_many([{"shop": s, "seconds": 0} for s in shops])
    assert [h.job.payload["shop"] for h in handles] == shops  # each read on its database
    for shop, handle in zip(shops, handles, strict=True):
        assert handle.database == by_crc32(f"shop:{shop}"), shop
        assert where(handle.id) == [handle.database], shop
    with override_settings(
        JOBQUEUE={"DATABASES": layout.queue_databases(ROUTE="tests.shards.layout.by_kind")}
    ):
        batch = tasks.add.enqueue_many([{"a": 1, "b": n} for n in range(3)])
    assert [where(h.id) for h in batch] == [["shard_b"]] * 3


def test_a_route_callable_decides_and_a_bad_answer_writes_nothing(sharded: object) -> None:
    with override_settings(
        JOBQUEUE={"DATABASES": layout.queue_databases(ROUTE="tests.shards.layout.by_kind")}
    ):
        assert where(tasks.add.enqueue(1, 2).id) == ["shard_b"]
        assert where(tasks.noop.enqueue().id) == ["shard_a"]
    with (
        override_settings(
            JOBQUEUE={"DATABASES": layout.queue_databases(ROUTE="tests.shards.layout.nowhere")}
        ),
        pytest.raises(ConfigurationError, match=r"returned 'elsewhere'.*shard_a, shard_b"),
    ):
        tasks.add.enqueue(1, 2)
    assert (
        sum(Job.objects.using(a).filter(kind__endswith=".add").count() for a in layout.ALIASES) == 1
    )


def test_a_workflow_and_its_joins_live_on_its_root_database(sharded: object) -> None:
    # The root's key picks the database; the later steps' own keys do not move them.
    root_key = next(k for k in (f"r{n}" for n in range(50)) if by_crc32(k) == "shard_b")
    other = next(k for k in (f"o{n}" for n in range(50)) if by_crc32(k) == "shard_a")
    graph = Workflow("fan")
    root = graph.add(tasks.add.using(key=root_key).s(1, 2))
    left = graph.add(tasks.add.using(key=other).s(10, 0), after=[root])
    right = graph.add(tasks.add.s(20, 0), after=[root])
    graph.add(tasks.noop.using(key=other).s(), after=[left, right])  # a join of two
    flow = graph.enqueue()
    assert flow.database == "shard_b"
    assert WorkflowRow.objects.using("shard_b").filter(id=flow.id).exists()
    assert not WorkflowRow.objects.using("shard_a").filter(id=flow.id).exists()
    steps = Job.objects.using("shard_b").filter(workflow_id=flow.id)
    assert steps.count() == 4
    assert not Job.objects.using("shard_a").filter(workflow_id=flow.id).exists()
    assert StepEdge.objects.using("shard_b").filter(workflow_id=flow.id).count() >= 3
    with routing.using(flow.database):
        run_jobs()
    found = workflow(str(flow.id))  # found by its id on whichever database holds it
    assert found.database == "shard_b"
    assert found.status == "completed"
    assert {s.status for s in found.steps.values()} == {"completed"}


def test_an_event_goes_to_its_key_database(sharded: object) -> None:
    key = next(k for k in (f"e{n}" for n in range(50)) if by_crc32(k) == "shard_b")
    assert emit("paid", key=key, payload={"n": 1}) == 0  # no waiter: kept for a later one
    assert Event.objects.using("shard_b").filter(key=key).count() == 1
    assert not Event.objects.using("shard_a").filter(key=key).exists()
    assert emit("paid", key=key, database="shard_a") == 0
    assert Event.objects.using("shard_a").filter(key=key).count() == 1
    with pytest.raises(ConfigurationError, match="'nowhere' is not a queue database"):
        emit("paid", key=key, database="nowhere")
