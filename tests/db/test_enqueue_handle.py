"""What one enqueue hands back: the values it wrote, and the model instance made of them
on first use without reading the row (``store.WrittenJob``), equal to the row read back
and saved as the row it is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_jobqueue.models import Job
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_a_handles_job_is_the_row_written_without_reading_it() -> None:
    handle = tasks.add.using(priority=2, delay=timedelta(minutes=5), queue="mail").enqueue(2, 3)
    with CaptureQueriesContext(connection) as seen:
        job = handle.job
        assert (handle.queue, handle.run_count, handle.carry) == ("mail", 0, {})
    assert len(seen) == 0

    stored = Job.objects.get(id=handle.id)
    for field in Job._meta.concrete_fields:
        assert getattr(job, field.attname) == getattr(stored, field.attname), field.name
    assert (handle.status, handle.kind, handle.result) == ("pending", tasks.add.kind, None)


def test_a_handles_job_saves_as_the_existing_row() -> None:
    handle = tasks.add.enqueue(1, 1)
    job = handle.job
    job.priority = 0
    job.save(update_fields=["priority"])
    job.save()  # a whole save updates the row too: it is not a new one
    assert Job.objects.filter(id=handle.id).count() == 1
    assert Job.objects.get(id=handle.id).priority == 0
