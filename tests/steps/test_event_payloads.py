"""An event's payload is stored once, in its ``Event`` row: ``emit`` gives each waiting
job a reference, read when the job runs, and the event's row is kept past its retention
while a delivery still points at it."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue import Status, emit
from django_jobqueue.models import Event, Job
from django_jobqueue.store import durable as stored
from django_jobqueue.testing import run_jobs
from tests.helpers import postgres_only
from tests.taskapp import steps_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _parked_waiters(count: int, name: str) -> list[object]:
    ids = [steps_tasks.waiter.enqueue(name, "k").id for _ in range(count)]
    run_jobs()
    assert Job.objects.filter(id__in=ids, parked="event").count() == count
    return ids


def test_emit_delivers_a_reference_and_each_waiter_reads_the_payload_once_run() -> None:
    ids = _parked_waiters(3, "report")
    assert emit("report", key="k", payload={"rows": [1, 2, 3]}) == 3
    event_id = Event.objects.get(name="report").id
    for delivered in Job.objects.filter(id__in=ids).values_list("delivered", flat=True):
        assert delivered == {"event": event_id, "name": "report", "key": "k"}
    run_jobs()
    for job in Job.objects.filter(id__in=ids):
        assert job.status == Status.COMPLETED
        assert job.result == {"rows": [1, 2, 3]}


def test_pruning_keeps_an_event_a_delivered_job_has_not_yet_read() -> None:
    [job_id] = _parked_waiters(1, "kept")
    emit("kept", key="k", payload="the payload")
    after = timezone.now() + timedelta(days=1)
    assert stored.prune_events(emitted_before=after) == 0
    run_jobs()
    job = Job.objects.get(id=job_id)
    assert (job.status, job.result) == (Status.COMPLETED, "the payload")
    assert stored.prune_events(emitted_before=after) == 1  # read: now it may go


@postgres_only
def test_a_1_mb_event_to_1000_waiters_grows_the_jobs_table_by_under_10_mb() -> None:
    _parked_waiters(1000, "big")
    table = Job._meta.db_table

    def size() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size(%s)", [table])
            return int(cursor.fetchone()[0])

    before = size()
    payload = secrets.token_hex(512 * 1024 - 8)  # ~1 MiB of text that does not compress away
    assert emit("big", key="k", payload=payload) == 1000
    grown = size() - before
    assert grown < 10 * 1024 * 1024, f"the jobs table grew {grown:,} bytes"
