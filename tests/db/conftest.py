"""Fixtures of the database tier."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue import Status
from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job
from tests.taskapp import tasks


@dataclass(frozen=True)
class RealisticTable:
    """What a plan test may rely on in the shared table."""

    rows: int
    built_at: datetime


def fill_realistic_table(count: int) -> datetime:
    """``count`` rows: a finished history, a scheduled and a runnable backlog, running jobs.

    A third of the rows completed, a third scheduled an hour ahead, the rest runnable
    (one in fifty claimed by ``w:1``), every fifth with a dedup key: the mix a
    planner has to choose an index in. Analyzed, so the plans are the planner's own.
    """
    now = timezone.now()
    kinds = [tasks.add.kind, tasks.noop.kind, tasks.record.kind]
    rows = []
    for i in range(count):
        status = Status.COMPLETED if i % 3 == 0 else Status.PENDING
        if i % 50 == 2:
            status = Status.CLAIMED
        visible = now + timedelta(hours=1) if i % 3 == 1 else now - timedelta(seconds=i)
        rows.append(
            Job(
                id=uuid7(),
                kind=kinds[i % 3],
                priority=i % 3,
                status=status,
                visible_at=visible,
                claim_expires_at=now + timedelta(seconds=i) if status == Status.CLAIMED else None,
                claimed_by="w:1" if status == Status.CLAIMED else "",
                finished_at=now if status == Status.COMPLETED else None,
                dedup_key=str(i % 100) if i % 5 == 0 else None,
            )
        )
    Job.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        mysql = connection.vendor == "mysql"
        cursor.execute(
            "ANALYZE TABLE django_jobqueue_job" if mysql else "ANALYZE django_jobqueue_job"
        )
        if mysql:
            cursor.fetchall()
    return now


@pytest.fixture(scope="module")
def realistic_table(django_db_setup: None, django_db_blocker: Any) -> Iterator[RealisticTable]:
    """One large analyzed jobs table per module, built once and shared by its plan tests.

    The rows are committed outside any test's transaction (60,000 of them; 15,000 on
    MariaDB/MySQL, enough for its optimizer and four times quicker to insert), so each
    test using it must be a plain ``django_db`` test: whatever it writes (a claim, a
    paused queue) rolls back with the test and the next test sees the same table. The
    rows are deleted when the module is done, leaving the database as it was found.
    """
    count = 15_000 if connection.vendor == "mysql" else 60_000
    with django_db_blocker.unblock():
        built_at = fill_realistic_table(count)
        try:
            yield RealisticTable(rows=count, built_at=built_at)
        finally:
            # One DELETE, not the ORM's cascade that loads 60,000 rows to collect nothing
            # (the fixture writes no journal; a test's own entries rolled back with it).
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {Job._meta.db_table}")
