"""The plan of the statement a busy PostgreSQL worker sends every turn: its settlements
and its next claim in one statement (``store.exchanging``).

On a realistic table (a finished history, a scheduled and a runnable backlog, running
jobs: 60,000 rows, analyzed), the settling part must find its rows by primary key and
never by the partial lease index (which holds every row ever claimed until vacuum),
and the claiming part must read the partial claim index in claim order, once per
priority tier, with no sort and no scan of the jobs table. Checked as the planner
plans it for these values, and as the worker's own connection runs it: prepared, with
generic plans (``use_generic_plans``), where the planner does not see the values.

The table is built once for the module (``big_table``) and committed outside the
tests' transactions; each test is a plain ``django_db`` test, so what it claims rolls
back and the next test sees the same table. The rows are deleted when the module ends.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_jobqueue import Status, store
from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job
from django_jobqueue.run.lifecycle import Run, Settlement, completed
from django_jobqueue.store.exchanging import turn_statement
from django_jobqueue.task.registry import registry
from tests.helpers import postgres_only
from tests.taskapp import tasks

pytestmark = [postgres_only, pytest.mark.django_db]

ROWS = 60_000


def _fill(count: int) -> None:
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
            )
        )
    Job.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobqueue_job")


@pytest.fixture(scope="module")
def big_table(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    with django_db_blocker.unblock():
        _fill(ROWS)
        try:
            yield
        finally:
            # One DELETE, not the ORM's cascade that loads every row to collect nothing
            # (the table's rows have no journal; the tests' own writes rolled back).
            with connection.cursor() as cursor:
                cursor.execute("DELETE FROM django_jobqueue_job")


def _settlements(worker: str, count: int) -> list[Settlement]:
    """What a worker that claimed ``count`` jobs settles at its next turn."""
    jobs = store.claim_jobs(worker_id=worker, limit=count, kinds=registry.kinds())
    assert len(jobs) == count
    return [
        completed(Run(job_id=j.id, kind=j.kind, run_no=j.run_count, worker=worker), result=0)
        for j in jobs
    ]


def _turn(preferring: dict[int, int] | None) -> tuple[str, list[Any]]:
    built = turn_statement(
        worker_id="w:2",
        settlements=_settlements("w:2", 8),
        limit=10,
        kinds=registry.kinds(),
        preferring=preferring,
        lease=timedelta(minutes=5),
    )
    assert built is not None
    return built


def _explain(statement: str, params: Sequence[Any]) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _explain_generic(statement: str, params: Sequence[Any]) -> str:
    """The plan of ``statement`` prepared and run with a generic plan, as the worker's
    connection runs it (the values bound, never seen by the planner)."""
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub("%s", lambda _: f"${next(numbered)}", statement)
    marks = ", ".join(["%s"] * len(params))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE jq_turn AS {prepared}")
        try:
            cursor.execute(f"EXPLAIN EXECUTE jq_turn({marks})", params)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE jq_turn")


def _ctes(plan: str) -> dict[str, str]:
    """The plan of each CTE of the statement, by name."""
    parts = re.split(r"^  CTE (\w+)$", plan, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _assert_settles_by_key_and_claims_by_index(plan: str, tiers: int) -> None:
    ctes = _ctes(plan)
    # The settlement finds its few rows by id, never through the lease index.
    assert "Index Scan using django_jobqueue_job_pkey" in ctes["j"], plan
    # Each tier reads the claim index in claim order: nothing sorted before its LIMIT.
    claims = [ctes[f"t{i}"] for i in range(tiers)]
    assert all("Index Scan using jobqueue_job_claim" in c for c in claims), plan
    assert not any("Sort" in c for c in claims), plan
    # The claim's UPDATE looks the picked ids up by primary key.
    assert "Index Scan using django_jobqueue_job_pkey" in ctes["claimed"], plan
    assert "jobqueue_job_lease" not in plan, plan
    assert "Seq Scan on django_jobqueue_job " not in plan, plan


@pytest.mark.usefixtures("big_table")
@pytest.mark.parametrize("preferring", [None, {1: 2, 2: 1}], ids=["one-tier", "three-tiers"])
def test_a_busy_workers_turn_settles_by_primary_key_and_claims_by_the_claim_index(
    preferring: dict[int, int] | None,
) -> None:
    with transaction.atomic():
        plan = _explain(*_turn(preferring))
        transaction.set_rollback(True)
    _assert_settles_by_key_and_claims_by_index(plan, 1 + len(preferring or {}))


@pytest.mark.usefixtures("big_table")
@pytest.mark.parametrize("preferring", [None, {1: 2, 2: 1}], ids=["one-tier", "three-tiers"])
def test_the_turn_keeps_its_plan_as_the_workers_prepared_generic_statement(
    preferring: dict[int, int] | None,
) -> None:
    with transaction.atomic():
        plan = _explain_generic(*_turn(preferring))
        transaction.set_rollback(True)
    _assert_settles_by_key_and_claims_by_index(plan, 1 + len(preferring or {}))


@pytest.mark.usefixtures("big_table")
def test_the_turn_on_the_big_table_settles_and_claims() -> None:
    """The turn whose plan the tests above read, run on the same table: the
    settlements applied and the next claim made (none of the jobs just settled)."""
    settlements = _settlements("w:3", 3)
    applied, claimed = store.exchange(
        worker_id="w:3", settlements=settlements, limit=4, kinds=registry.kinds()
    )
    assert applied == [True, True, True]
    assert len(claimed) == 4
    assert not {s.job_id for s in settlements} & {c.id for c in claimed}
    done = Job.objects.filter(id__in=[s.job_id for s in settlements])
    assert set(done.values_list("status", flat=True)) == {Status.COMPLETED}
