"""The partitioned journal's tier (PostgreSQL): each test partitions the journal inside
its own transaction (DDL is transactional on PostgreSQL), so its rollback restores the
one-table journal for the next test and for every other tier of the same session."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from django_jobqueue.models import Job, JournalEntry, Status
from django_jobqueue.states import Outcome
from tests.taskapp import tasks

DAY = timedelta(days=1)


def midnight(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def finished_job_with_entries(at: datetime, entries: int = 2) -> Job:
    """A completed job created and finished at ``at``, with ``entries`` journal entries
    recorded then (what a day of the journal holds, made without waiting for the day)."""
    handle = tasks.noop.enqueue()
    Job.objects.filter(id=handle.id).update(
        status=Status.COMPLETED, created_at=at, finished_at=at, run_count=entries
    )
    JournalEntry.objects.bulk_create(
        JournalEntry(
            job_id=handle.id,
            kind=tasks.noop.kind,
            run_no=n + 1,
            outcome=Outcome.COMPLETED if n == entries - 1 else Outcome.RETRIED,
            recorded_at=at + timedelta(minutes=n),
        )
        for n in range(entries)
    )
    return Job.objects.get(id=handle.id)


@pytest.fixture
def staff_client() -> Callable[[], Client]:
    def make() -> Client:
        user = User.objects.create_superuser("pat", password="pw")
        client = Client()
        client.force_login(user)
        return client

    return make
