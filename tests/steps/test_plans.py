"""The durable steps' lookups use their indexes on a realistic table (PostgreSQL's
EXPLAIN): an emit finds the jobs waiting for its name and key by the partial
``jobqueue_job_waiting_event`` index, and a wait finds an earlier event by
``jobqueue_event_lookup``, never by scanning."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue.models import Event, Job, Status
from tests.helpers import postgres_only
from tests.taskapp import tasks

pytestmark = [postgres_only, pytest.mark.django_db]


def test_emit_and_wait_find_their_rows_by_their_indexes() -> None:
    tasks.noop.enqueue_many([{} for _ in range(20_000)])
    Job.objects.filter(id__in=Job.objects.values("id")[:20]).update(
        parked="event", wait_name="e", wait_key="k"
    )
    now = timezone.now()
    # A week of events, one every 30 seconds, over 500 names.
    Event.objects.bulk_create(
        Event(name=f"n{i % 500}", key=str(i), payload=i, created_at=now - timedelta(seconds=30 * i))
        for i in range(20_000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    waiting = Job.objects.filter(status=Status.PENDING, parked="event", wait_name="e", wait_key="k")
    assert "jobqueue_job_waiting_event" in waiting.values_list("queue").explain()
    found = (
        Event.objects.filter(name="n7", key="7", created_at__gte=now - timedelta(days=7))
        .order_by("created_at", "id")
        .values_list("id", "payload")
    )
    assert "jobqueue_event_lookup" in found[:1].explain()
