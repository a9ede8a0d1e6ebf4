"""The plans of the queue's hot statements on a realistic table: each uses its index.

Every test here reads one shared table (the ``realistic_table`` fixture of
``tests/db/conftest.py``): 60,000 analyzed rows inserted and committed once for the
module, not once per test. The tests are plain ``django_db`` tests, so what one writes
(a claim, a paused queue) rolls back before the next reads the table.

The busy PostgreSQL worker's turn (its settlements and its next claim in one statement,
``store.exchanging``) is checked on the same table: the settling part finds its rows by
primary key, never by the partial lease index (which holds every row ever claimed
until vacuum), and the claiming part reads the partial claim index in claim order,
once per priority tier, with no sort. Checked as the planner plans it for these
values, and as the worker's own connection runs it: prepared, with generic plans
(``use_generic_plans``), where the planner does not see the values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobqueue import Priority, Status, chord, store
from django_jobqueue.models import Job
from django_jobqueue.rules.lifecycle import Run, Settlement, completed
from django_jobqueue.store import ClaimRequest
from django_jobqueue.store.dialects.postgresql.claiming import RELATION
from django_jobqueue.store.exchanging import turn_statement
from django_jobqueue.store.settling import next_wakeup_statement, settle_statement
from django_jobqueue.task.registry import registry
from tests.helpers import mysql_only, postgres_only
from tests.taskapp import tasks

KINDS = registry.kinds

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("realistic_table")]


def _plan(sql: str, params: Sequence[object] | None) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


@postgres_only
@pytest.mark.parametrize(
    "preferring", [{}, {1: 2}, {1: 2, 2: 1}], ids=["one-tier", "two-tiers", "three-tiers"]
)
def test_claim_uses_the_partial_claim_index(preferring: dict[int, int] | None) -> None:
    built = store.claim_statement(
        worker_id="w",
        request=store.ClaimRequest(
            limit=10,
            kinds=KINDS(),
            exclude_kinds=(),
            floor=0,
            preferring=preferring,
            lease=timedelta(minutes=5),
            now=timezone.now(),
        ),
    )
    assert built is not None
    with transaction.atomic():
        plan = _plan(*built)
    # One index scan per tier, each already in claim order: no sort before the LIMIT.
    tiers = 1 + len(preferring or {})
    assert plan.count("jobqueue_job_claim") == tiers, plan
    assert "Sort" not in plan, plan
    assert "Seq Scan on django_jobqueue_job " not in plan, plan
    # The paused queues are read once per tier (a few rows), not once per candidate.
    assert plan.count("Seq Scan on django_jobqueue_queuepause") <= tiers, plan


@mysql_only
def test_claim_on_mariadb_reads_the_status_led_claim_index_in_order() -> None:
    built = store.claim_statement(
        worker_id="w", request=store.ClaimRequest(limit=10, kinds=KINDS(), now=timezone.now())
    )
    assert built is not None
    statement, params = built
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement, params)
        columns = [c[0] for c in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    [job_table] = [r for r in rows if r["table"] == "j"]
    assert job_table["key"] == "jobqueue_job_claim", rows  # status-led there (0008)
    assert job_table["type"] in ("ref", "range"), rows  # entered at status = pending
    assert "filesort" not in (job_table["Extra"] or ""), rows  # read in claim order


@postgres_only
def test_claim_keeps_the_claim_index_while_a_queue_is_paused() -> None:
    store.pause_queue(queue="default")
    store.pause_queue(queue="mail")
    built = store.claim_statement(
        worker_id="w",
        request=store.ClaimRequest(
            limit=10, kinds=KINDS(), lease=timedelta(minutes=5), now=timezone.now()
        ),
    )
    assert built is not None
    with transaction.atomic():
        plan = _plan(*built)
    assert plan.count("jobqueue_job_claim") == 1, plan
    assert "Sort" not in plan, plan
    assert "Seq Scan on django_jobqueue_job " not in plan, plan
    assert (
        store.claim_jobs(worker_id="w", request=store.ClaimRequest(limit=10, kinds=KINDS())) == []
    )  # all paused


@postgres_only
def test_recovery_uses_the_lease_index() -> None:
    expired = Job.objects.filter(status=Status.CLAIMED, claim_expires_at__lt=timezone.now())
    sql, params = expired.order_by("claim_expires_at")[:500].query.sql_with_params()
    assert "jobqueue_job_lease" in _plan(sql, params)


@postgres_only
@pytest.mark.parametrize("queues", [None, ["default"]], ids=["any-queue", "one-queue"])
def test_next_wakeup_reads_the_claim_index_a_priority_at_a_time(queues: list[str] | None) -> None:
    # No index on visible_at alone (migration 0028): each priority's first scheduled job
    # is the first entry past now of its range of the claim index, no sort, no scan.
    statement = next_wakeup_statement(kinds=KINDS(), queues=queues, now=timezone.now())
    plan = _plan(*statement.statement())
    assert plan.count("jobqueue_job_claim") == len(Priority.values), plan
    assert "Sort" not in plan, plan
    assert "Seq Scan on django_jobqueue_job" not in plan, plan
    assert "jobqueue_job_lease" in plan, plan  # the earliest expiry


@mysql_only
def test_next_wakeup_on_mariadb_reads_the_status_led_claim_index_a_priority_at_a_time() -> None:
    statement = next_wakeup_statement(kinds=KINDS(), queues=None, now=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement.sql, list(statement.params))
        columns = [c[0] for c in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    firsts = [r for r in rows if r["key"] == "jobqueue_job_claim"]
    assert len(firsts) == len(Priority.values), rows
    for row in firsts:
        assert row["type"] in ("ref", "range"), rows  # entered at its status and priority
        assert "filesort" not in (row["Extra"] or ""), rows  # read in visible_at order


@postgres_only
def test_next_wakeup_finds_the_first_scheduled_job_of_any_priority() -> None:
    now = timezone.now()
    visible, _ = store.next_wakeup(kinds=KINDS(), now=now)
    first = (
        Job.objects.filter(status=Status.PENDING, visible_at__gt=now, kind__in=KINDS())
        .order_by("visible_at")
        .values_list("visible_at", flat=True)[:1]
    )
    assert visible == first[0]
    soon = now + timedelta(minutes=1)  # before every scheduled job of the table
    Job.objects.create(kind=tasks.add.kind, priority=Priority.LOW, visible_at=soon)
    assert store.next_wakeup(kinds=KINDS(), now=now)[0] == soon
    assert store.next_wakeup(kinds=[tasks.add.kind], queues=["nowhere"], now=now)[0] is None


@postgres_only
def test_the_oldest_due_job_and_the_scheduled_counts_read_the_claim_index() -> None:
    now = timezone.now()
    with CaptureQueriesContext(connection) as oldest:
        due = store.oldest_due(now=now, kinds=KINDS())
    expected = (
        Job.objects.filter(status=Status.PENDING, visible_at__lte=now, kind__in=KINDS())
        .order_by("visible_at")
        .values_list("visible_at", flat=True)[:1]
    )
    assert due == expected[0]
    with CaptureQueriesContext(connection) as gauges:
        store.gauges(now=now)
    # The scheduled count and the parked counts: the pending rows past now.
    scheduled = [q for q in gauges.captured_queries if '"visible_at" >' in q["sql"]]
    assert len(scheduled) == 2, gauges.captured_queries
    for query in [*oldest.captured_queries, *scheduled]:
        plan = _plan(query["sql"], None)
        assert "jobqueue_job_claim" in plan, plan
        assert "Seq Scan on django_jobqueue_job" not in plan, plan
    assert len(oldest.captured_queries) == len(Priority.values)


def _history_plan(**filters: Any) -> str:
    """The plan of the one statement ``store.history(**filters)`` sends."""
    with CaptureQueriesContext(connection) as queries:
        store.history(**filters)
    [query] = queries.captured_queries
    return _plan(query["sql"], None)


@postgres_only
@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "django_jobqueue_job_pkey"),
        ({"newest_first": True}, "django_jobqueue_job_pkey"),
        ({"kind": "tests.rare", "newest_first": True}, "jobqueue_job_kind"),
        # a range of the last hour: offsets from now, made times when the test runs
        (
            {"created_after": -timedelta(hours=1), "created_before": timedelta(0)},
            "django_jobqueue_job_pkey",
        ),
    ],
    ids=["oldest-first", "newest-first", "a-kind", "created-range"],
)
def test_history_and_the_admins_lists_read_the_order_of_creation_from_an_index(
    filters: dict[str, Any], index: str
) -> None:
    """No index holds ``created_at`` (migration 0029): the order of creation is the
    primary key's, a kind's is its index's (a rare kind's; a common one's is read along
    the primary key too), and a creation range is an id range."""
    now = timezone.now()
    filters = {k: now + v if isinstance(v, timedelta) else v for k, v in filters.items()}
    plan = _history_plan(limit=50, **filters)
    assert index in plan, plan
    assert "Sort" not in plan, plan
    assert "Seq Scan" not in plan, plan


@postgres_only
def test_a_workflow_steps_lookup_by_name_reads_the_partial_unique_index() -> None:
    chord([tasks.wf_value.s(x=1)], tasks.wf_total.s()).enqueue()
    step = Job.objects.filter(workflow__isnull=False).latest("created_at")
    lookup = Job.objects.filter(workflow_id=step.workflow_id, step_name=step.step_name)
    plan = _plan(*lookup.query.sql_with_params())
    assert "jobqueue_job_step_name_unique" in plan, plan
    with connection.cursor() as cursor:  # a plain job has no entry in it (migration 0027)
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'jobqueue_job_step_name_unique'"
        )
        [(definition,)] = cursor.fetchall()
    assert definition.endswith("WHERE (workflow_id IS NOT NULL)"), definition


@postgres_only
def test_merge_candidate_lookup_uses_the_dedup_index() -> None:
    candidate = store.merge_candidates(kind=tasks.add.kind, dedup_key="7").select_for_update()[:1]
    with transaction.atomic():
        sql, params = candidate.query.sql_with_params()
        plan = _plan(sql, params)
    assert "jobqueue_job_dedup" in plan, plan


@postgres_only
def test_settling_finds_its_rows_by_primary_key_not_by_the_lease_index() -> None:
    jobs = store.claim_jobs(worker_id="w", request=store.ClaimRequest(limit=8, kinds=KINDS()))
    now = timezone.now()
    batch = [
        Settlement(
            job_id=j.id,
            kind=j.kind,
            run_no=j.run_count,
            outcome="completed",
            status=Status.COMPLETED,
            worker="w",
        )
        for j in jobs
    ]
    with transaction.atomic():
        plan = _plan(*settle_statement(batch, now=now))
        transaction.set_rollback(True)
    assert "django_jobqueue_job_pkey" in plan, plan
    assert "jobqueue_job_lease" not in plan, plan


def _settlements(worker: str, count: int) -> list[Settlement]:
    """What a worker that claimed ``count`` jobs settles at its next turn."""
    jobs = store.claim_jobs(
        worker_id=worker, request=store.ClaimRequest(limit=count, kinds=registry.kinds())
    )
    assert len(jobs) == count
    return [
        completed(Run(job_id=j.id, kind=j.kind, run_no=j.run_count, worker=worker), result=0)
        for j in jobs
    ]


def _turn(preferring: dict[int, int] | None) -> tuple[str, list[Any]]:
    built = turn_statement(
        worker_id="w:2",
        settlements=_settlements("w:2", 8),
        request=ClaimRequest(
            limit=10, kinds=registry.kinds(), preferring=preferring, lease=timedelta(minutes=5)
        ),
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
    assert "Index Scan using django_jobqueue_job_pkey" in ctes["sw"], plan
    # Each tier reads the claim index in claim order: nothing sorted before its LIMIT.
    claims = [ctes[f"t{i}"] for i in range(tiers)]
    assert all("Index Scan using jobqueue_job_claim" in c for c in claims), plan
    assert not any("Sort" in c for c in claims), plan
    # The claim's UPDATE looks the picked ids up by primary key.
    assert "Index Scan using django_jobqueue_job_pkey" in ctes["claimed"], plan
    assert "jobqueue_job_lease" not in plan, plan
    assert "Seq Scan on django_jobqueue_job " not in plan, plan


@postgres_only
@pytest.mark.parametrize("preferring", [{}, {1: 2, 2: 1}], ids=["one-tier", "three-tiers"])
def test_a_busy_workers_turn_settles_by_primary_key_and_claims_by_the_claim_index(
    preferring: dict[int, int] | None,
) -> None:
    with transaction.atomic():
        plan = _explain(*_turn(preferring))
        transaction.set_rollback(True)
    _assert_settles_by_key_and_claims_by_index(plan, 1 + len(preferring or {}))


@postgres_only
@pytest.mark.parametrize("preferring", [{}, {1: 2, 2: 1}], ids=["one-tier", "three-tiers"])
def test_the_turn_keeps_its_plan_as_the_workers_prepared_generic_statement(
    preferring: dict[int, int] | None,
) -> None:
    with transaction.atomic():
        plan = _explain_generic(*_turn(preferring))
        transaction.set_rollback(True)
    _assert_settles_by_key_and_claims_by_index(plan, 1 + len(preferring or {}))


@postgres_only
def test_the_turn_on_the_big_table_settles_and_claims() -> None:
    """The turn whose plan the tests above read, run on the same table: the
    settlements applied and the next claim made (none of the jobs just settled)."""
    settlements = _settlements("w:3", 3)
    applied, claimed = store.exchange(
        worker_id="w:3",
        settlements=settlements,
        request=store.ClaimRequest(limit=4, kinds=registry.kinds()),
    )
    assert applied == [True, True, True]
    assert len(claimed) == 4
    assert not {s.job_id for s in settlements} & {c.id for c in claimed}
    done = Job.objects.filter(id__in=[s.job_id for s in settlements])
    assert set(done.values_list("status", flat=True)) == {Status.COMPLETED}


def _turn_plans() -> tuple[int, int, int]:
    """The prepared turn statements of this session, and the generic and the custom
    plans they ran with."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)"
            " FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"WITH s AS ({RELATION.partition('%s')[0]}%"],
        )
        statements, generic, custom = cursor.fetchone()
    return int(statements), int(generic), int(custom)


@postgres_only
def test_the_workers_turn_is_planned_once_per_connection() -> None:
    """Every turn sends the same text, bound server-side and prepared, whatever it
    settles and however many jobs it claims: later turns run the plan made once
    (generic), the planner never sees the turn again. With this in place planning was
    about 4% of a turn's server time, so a server-side prepared turn is what the worker
    already has (docs/explanation/performance.md). A text per claim size, as when the
    sizes were written out, was prepared and planned again at most turns of a drain
    (109 of 193 in a burst of 20,000 no-ops)."""
    # Earlier tests set plan_cache_mode in transactions that rolled back (undoing it):
    # the worker's connection sets it again rather than trust it still holds.
    before = _turn_plans()
    ended = _settlements("w:5", 4)
    for size in (3, 5, 2):
        applied, jobs = store.exchange(
            worker_id="w:5",
            settlements=ended,
            request=store.ClaimRequest(limit=size, kinds=registry.kinds()),
        )
        assert applied == [True] * len(ended)
        assert len(jobs) == size
        ended = [
            completed(Run(job_id=j.id, kind=j.kind, run_no=j.run_count, worker="w:5"), result=0)
            for j in jobs
        ]
    statements, generic, custom = _turn_plans()
    assert statements - before[0] <= 1
    assert (generic - before[1], custom - before[2]) == (3, 0)


def _releasing_turn() -> tuple[str, list[Any]]:
    """The turn of a worker that completed 8 members of a 200-member chord written on
    the big table: the one statement that settles them and releases their callback. The
    edges table holds 20,000 other workflows' edges as well (analyzed), as a busy one
    would: on the chord's 200 alone a sequential read of it is the cheaper plan."""
    chord([tasks.wf_value.s(x=i) for i in range(200)], tasks.wf_total.s()).enqueue()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO django_jobqueue_stepedge (workflow_id, parent_id, child_id)"
            " SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid()"
            " FROM generate_series(1, 20000)"
        )
        cursor.execute("ANALYZE django_jobqueue_stepedge")
    members = store.claim_jobs(
        worker_id="w:4", request=store.ClaimRequest(limit=8, kinds=[tasks.wf_value.kind])
    )
    assert len(members) == 8
    built = turn_statement(
        worker_id="w:4",
        settlements=[
            completed(Run(j.id, j.kind, j.run_count, "w:4", step=True), result=0) for j in members
        ],
        request=ClaimRequest(limit=10, kinds=registry.kinds(), lease=timedelta(minutes=5)),
    )
    assert built is not None
    return built


def _assert_releases_by_key(plan: str) -> None:
    _assert_settles_by_key_and_claims_by_index(plan, 1)
    ctes = _ctes(plan)
    # The completed steps' edges by their parent's index, and their children by primary
    # key (never by scanning the steps' index; the function that counts them down takes
    # them by key too). The edges' and the children's CTEs are planned into ``ranked``.
    ranked = ctes["ranked"]
    assert "Index Cond: (parent_id = ANY" in ranked, plan
    assert "Index Scan using django_jobqueue_job_pkey" in ranked, plan
    for table in ("django_jobqueue_job", "django_jobqueue_stepedge"):
        assert f"Seq Scan on {table} " not in ranked, plan


@postgres_only
def test_a_turn_that_releases_finds_every_row_by_key() -> None:
    with transaction.atomic():
        plan = _explain(*_releasing_turn())
        transaction.set_rollback(True)
    _assert_releases_by_key(plan)


@postgres_only
def test_a_turn_that_releases_keeps_its_plan_as_the_workers_prepared_generic_statement() -> None:
    with transaction.atomic():
        plan = _explain_generic(*_releasing_turn())
        transaction.set_rollback(True)
    _assert_releases_by_key(plan)


@postgres_only
@pytest.mark.parametrize(
    "rule",
    [store.KeyRule(most=2, fair=True), store.KeyRule(ordered=True)],
    ids=["fair-most-per-key", "ordered"],
)
def test_a_keyed_claim_reads_each_key_by_the_key_indexes(rule: store.KeyRule) -> None:
    """Per-key rules (issue 23): the keys by a skip scan and each key's first jobs by a
    probe of the key indexes, the tier's rows then by primary key: no scan of the table,
    and no walk of the claim index for the keyed kind's rows."""
    for key in ("tenant:a", "tenant:b", "tenant:c"):
        tasks.keyed.using(key=key).enqueue_many({"n": i} for i in range(300))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobqueue_job")
    built = store.claim_statement(
        worker_id="w",
        request=store.ClaimRequest(
            limit=10, kinds=[tasks.keyed.kind], per_key={tasks.keyed.kind: rule}
        ),
    )
    assert built is not None
    with transaction.atomic():
        plan = _plan(*built)
    index = "jobqueue_job_key_fifo" if rule.ordered else "jobqueue_job_key_claim"
    assert index in plan, plan
    assert "jobqueue_job_claim " not in plan, plan  # the keyed kind's rows: never walked
    assert "Seq Scan on django_jobqueue_job " not in plan, plan
    assert "django_jobqueue_job_pkey" in plan, plan
