"""The partitioned journal (issue 33, item 1) on a real PostgreSQL: an installation's
journal swapped for a partitioned one and back with every entry and the ids' sequence;
settlements writing into it as before; the maintenance making partitions ahead (the
default partition's strays moved in) and analyzing the parent on schedule; retention
dropping whole partitions, never deleting entries row by row (read from the executed
statements and from the server's own counts); and the plans of the admin's journal
page and of one job's journal pruned to the partitions they need."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.errors import PartitionError
from django_jobqueue.models import Job, JournalEntry, Status
from django_jobqueue.testing import run_jobs
from django_jobqueue.worker.services.partitions import Partitions
from django_jobqueue.worker.services.retention import Retention
from tests.db.test_command import manage
from tests.helpers import manage_in_process, postgres_only
from tests.partitions.conftest import DAY, finished_job_with_entries, midnight
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db, postgres_only]

JOURNAL = JournalEntry._meta.db_table


def call(fn: Callable[[], Any]) -> Any:
    """The worker's guarded database call, as a test makes it: straight through."""
    return fn()


def names() -> list[str]:
    layout = store.journal_layout()
    assert layout is not None
    return [p.name for p in layout.partitions]


def day_name(moment: Any) -> str:
    return f"{JOURNAL}_p{midnight(moment):%Y%m%d}"


def test_convert_keeps_every_entry_and_the_ids_going_and_revert_undoes_it() -> None:
    for _ in range(3):
        tasks.noop.enqueue()
    run_jobs()
    before = list(JournalEntry.objects.order_by("id").values_list("id", "job_id", "outcome"))
    assert len(before) == 3

    copied = store.partition_journal(period="day", ahead=2)

    assert copied == 3
    today = timezone.now()
    assert names() == [
        f"{JOURNAL}_archive",
        day_name(today),
        day_name(today + DAY),
        day_name(today + 2 * DAY),
        f"{JOURNAL}_default",
    ]
    after = list(JournalEntry.objects.order_by("id").values_list("id", "job_id", "outcome"))
    assert after == before
    # A settlement writes its entry through the partitioned parent, into today's partition.
    handle = tasks.noop.enqueue()
    run_jobs()
    entry = JournalEntry.objects.get(job_id=handle.id)
    assert entry.id > before[-1][0]
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT tableoid::regclass::text FROM "{JOURNAL}" WHERE id = %s', [entry.id]
        )
        assert cursor.fetchone()[0] == day_name(entry.recorded_at)
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = %s::regclass AND contype = 'p'",
            [JOURNAL],
        )
        assert cursor.fetchone()[0] == "PRIMARY KEY (id, recorded_at)"

    assert store.unpartition_journal() == 4
    assert store.journal_layout() is None
    assert JournalEntry.objects.count() == 4
    tasks.noop.enqueue()
    run_jobs()
    assert JournalEntry.objects.order_by("-id").first().id > entry.id  # type: ignore[union-attr]


def test_the_maintenance_makes_partitions_ahead_and_moves_the_defaults_strays_in() -> None:
    now = timezone.now()
    store.partition_journal(period="day", ahead=1, now=now)
    # An entry past every partition (a clock far ahead) lands in the default one.
    stray = finished_job_with_entries(now + 5 * DAY, entries=1)
    layout = store.journal_layout()
    assert layout is not None
    default = layout.partitions[-1]
    assert default.default

    service = Partitions(call, interval=60, ahead=6, analyze_every=timedelta(hours=1))
    service.run()

    expected = [day_name(now + n * DAY) for n in range(7)]
    assert [n for n in names() if "_p" in n] == expected
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{JOURNAL}_default"')
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            f'SELECT tableoid::regclass::text FROM "{JOURNAL}" WHERE job_id = %s', [stray.id]
        )
        assert cursor.fetchone()[0] == day_name(now + 5 * DAY)
    service.run()  # nothing missing: nothing made
    assert [n for n in names() if "_p" in n] == expected


def _analyzed_at() -> Any:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE relid = %s::regclass", [JOURNAL]
        )
        return cursor.fetchone()[0]


def test_the_parent_is_analyzed_on_schedule() -> None:
    store.partition_journal(period="week", ahead=1)
    assert _analyzed_at() is None  # autovacuum never analyzes a partitioned parent
    service = Partitions(call, interval=60, ahead=1, analyze_every=timedelta(hours=1))

    service.run()
    first = _analyzed_at()
    assert first is not None
    layout = store.journal_layout()
    assert layout is not None
    assert layout.analyzed_at == first

    service.run()  # within the hour: not again
    assert _analyzed_at() == first
    Partitions(call, interval=60, ahead=1, analyze_every=timedelta(0)).run()  # due at once
    assert _analyzed_at() > first


def _journal_statements(seen: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in seen.captured_queries if JOURNAL in q["sql"]]


def _deleted_from_journal() -> int:
    """The rows this transaction deleted from the journal or any of its partitions, as
    the server counted them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(n_tup_del), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname LIKE %s",
            [JOURNAL + "%"],
        )
        return int(cursor.fetchone()[0])


def test_retention_drops_whole_partitions_and_deletes_no_entry_row_by_row() -> None:
    now = timezone.now()
    start = now - 40 * DAY
    store.partition_journal(period="day", ahead=0, now=start)
    store.make_ahead(ahead=1, now=now)
    old = [finished_job_with_entries(now - n * DAY) for n in (39, 30, 20)]
    kept = [finished_job_with_entries(now - n * DAY) for n in (5, 1)]
    keep = timedelta(days=10)

    with CaptureQueriesContext(connection) as seen:
        Retention(call, interval=60, keep={"completed": keep}, journal=keep, history=None).run()

    statements = _journal_statements(seen)
    drops = [s for s in statements if s.startswith("DROP TABLE")]
    # Every day from the conversion's to the one ending before the cut, and the archive.
    cut = midnight(now - keep)
    assert len(drops) == (cut - midnight(start)).days + 1
    assert f'DROP TABLE IF EXISTS "{JOURNAL}_archive"' in drops
    assert f'DROP TABLE IF EXISTS "{day_name(now - 39 * DAY)}"' in drops
    assert not [s for s in statements if re.match(r"\s*(WITH .*\))?\s*DELETE\b", s, re.S)]
    assert _deleted_from_journal() == 0
    # The finished jobs past RETENTION went, their entries with their partitions.
    assert not Job.objects.filter(id__in=[j.id for j in old]).exists()
    assert not JournalEntry.objects.filter(job_id__in=[j.id for j in old]).exists()
    assert Job.objects.filter(id__in=[j.id for j in kept]).count() == 2
    assert JournalEntry.objects.filter(job_id__in=[j.id for j in kept]).count() == 4
    assert names()[0] == day_name(cut)


def test_retention_on_a_one_table_journal_still_deletes_its_entries_with_their_jobs() -> None:
    old = finished_job_with_entries(timezone.now() - 30 * DAY)
    Retention(call, interval=60, keep={"completed": timedelta(days=10)}, journal=None).run()
    assert not Job.objects.filter(id=old.id).exists()
    assert not JournalEntry.objects.filter(job_id=old.id).exists()


def _plans(seen: CaptureQueriesContext) -> list[str]:
    """The plan of each captured statement that reads the journal (its parent)."""
    plans = []
    with connection.cursor() as cursor:
        for sql in _journal_statements(seen):
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN " + sql)
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    return plans


def _partitions_in(plan: str) -> set[str]:
    return set(re.findall(rf"\b({JOURNAL}_(?:p\d{{8}}|archive|default))\b", plan))


@pytest.fixture
def thirty_days() -> list[Job]:
    """A journal partitioned by day over thirty days, one job a day, analyzed."""
    now = timezone.now()
    store.partition_journal(period="day", ahead=0, now=now - 30 * DAY)
    store.make_ahead(ahead=1, now=now)
    jobs = [finished_job_with_entries(now - n * DAY, entries=3) for n in range(30, -1, -1)]
    store.analyze_journal(every=timedelta(0))
    return jobs


def test_the_admin_journal_pages_plan_reads_only_the_partitions_of_its_range(
    thirty_days: list[Job], staff_client: Callable[[], Client]
) -> None:
    client = staff_client()
    now = timezone.localtime(timezone.now())
    since = now - timedelta(days=2)
    query = (
        f"?recorded_at__range__gte_0={since:%Y-%m-%d}&recorded_at__range__gte_1={since:%H:%M:%S}"
    )
    with CaptureQueriesContext(connection) as seen:
        page = client.get(reverse("admin:django_jobqueue_journalentry_changelist") + query)
    assert page.status_code == 200
    plans = _plans(seen)
    assert plans, "the page read no journal"
    wanted = {day_name(since + n * DAY) for n in range(4)}
    for plan in plans:
        read = _partitions_in(plan)
        assert read, plan
        assert read <= wanted | {f"{JOURNAL}_default"}, plan
        assert day_name(now - 10 * DAY) not in read


def test_one_jobs_journal_reads_only_the_partitions_from_its_creation(
    thirty_days: list[Job], staff_client: Callable[[], Client]
) -> None:
    job = thirty_days[-3]  # two days old
    assert job.created_at > timezone.now() - 3 * DAY
    with CaptureQueriesContext(connection) as seen:
        entries = store.journal(job_id=job.id, since=job.created_at)
    assert len(entries) == 3
    (plan,) = _plans(seen)
    read = _partitions_in(plan)
    assert f"{JOURNAL}_archive" not in read
    assert day_name(thirty_days[0].created_at) not in read
    # Only its day (from the hour before its creation, maybe the day before) and after:
    # counted by name, not by number (how many come after depends on the time of day
    # the test runs: one ahead partition more once past midnight).
    earliest = day_name(job.created_at - timedelta(hours=1))
    dated = read - {f"{JOURNAL}_default"}
    assert dated, plan
    assert all(name >= earliest for name in dated), plan

    client = staff_client()
    with CaptureQueriesContext(connection) as seen:
        page = client.get(reverse("admin:django_jobqueue_job_change", args=[job.id]))
    assert page.status_code == 200
    for plan in _plans(seen):
        if "job_id" not in plan:
            continue
        read = _partitions_in(plan)
        assert day_name(thirty_days[0].created_at) not in read, plan
        assert f"{JOURNAL}_archive" not in read, plan


def test_the_admin_job_lists_lookups_run_only_in_the_partitions_from_each_jobs_creation(
    thirty_days: list[Job], staff_client: Callable[[], Client]
) -> None:
    """The list's last run and last failure are read per row, correlated to the job: the
    server prunes at each execution (EXPLAIN ANALYZE shows the pruned partitions as
    never executed)."""
    since = timezone.localtime(timezone.now() - timedelta(days=2))
    query = f"?created_at__range__gte_0={since:%Y-%m-%d}&created_at__range__gte_1={since:%H:%M:%S}"
    with CaptureQueriesContext(connection) as seen:
        page = staff_client().get(reverse("admin:django_jobqueue_job_changelist") + query)
    assert page.status_code == 200
    listing = [s for s in _journal_statements(seen) if s.lstrip().startswith("SELECT")]
    assert listing, "the list read no journal"
    old = {day_name(job.created_at) for job in thirty_days[:20]} | {f"{JOURNAL}_archive"}
    with connection.cursor() as cursor:
        for sql in listing:
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql)
            plan = [row[0] for row in cursor.fetchall()]
            for partition in old:
                scans = [line for line in plan if partition in line]
                assert all("never executed" in line for line in scans), "\n".join(plan)


def test_bad_requests_are_refused_and_change_nothing() -> None:
    with pytest.raises(PartitionError, match="period must be one of day, week, month, not 'year'"):
        store.partition_journal(period="year", ahead=1)
    with pytest.raises(PartitionError, match="ahead must be a whole number"):
        store.partition_journal(period="day", ahead=-1)
    assert store.journal_layout() is None
    with pytest.raises(PartitionError, match="not partitioned"):
        store.unpartition_journal()
    with pytest.raises(PartitionError, match="not partitioned"):
        store.make_ahead(ahead=1)
    with pytest.raises(PartitionError, match="not partitioned"):
        store.drop_older(before=timezone.now())
    assert store.journal_layout() is None
    store.partition_journal(period="month", ahead=1)
    with pytest.raises(PartitionError, match="already partitioned"):
        store.partition_journal(period="day", ahead=1)
    assert store.journal_layout().period == "month"  # type: ignore[union-attr]


def test_the_command_lists_converts_makes_drops_and_refuses_bad_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    call_command("jobqueue", "partitions")
    assert "the journal is one table" in capsys.readouterr().out
    call_command("jobqueue", "partitions", "--convert", "--period", "week")
    assert "journal partitioned by week: 0 entries copied" in capsys.readouterr().out
    call_command("jobqueue", "partitions", "--create-ahead", "3")
    assert "partitions made:" in capsys.readouterr().out
    call_command("jobqueue", "partitions")
    listed = capsys.readouterr().out
    assert "journal partitioned by week; parent analyzed: never" in listed
    assert f"{JOURNAL}_archive" in listed
    assert f"{JOURNAL}_default" in listed
    # Dropped at the age since the archive ended (where this week's partition begins),
    # kept at a day more: a fixed "1d" is more than that age on a Monday, which made
    # this test fail one day in seven.
    age = _seconds_since_the_archive_ended()
    call_command("jobqueue", "partitions", "--drop-older-than", f"{age + 86_400}s")
    assert "partitions dropped: none" in capsys.readouterr().out
    call_command("jobqueue", "partitions", "--drop-older-than", f"{age}s")
    assert f"partitions dropped: {JOURNAL}_archive" in capsys.readouterr().out
    call_command("jobqueue", "partitions", "--analyze")
    assert _analyzed_at() is not None
    with pytest.raises(CommandError, match="--period goes with --convert only"):
        call_command("jobqueue", "partitions", "--period", "day")
    with pytest.raises(CommandError, match="already partitioned"):
        call_command("jobqueue", "partitions", "--convert")
    call_command("jobqueue", "partitions", "--revert")
    assert "journal is one table again" in capsys.readouterr().out
    with pytest.raises(CommandError, match="not partitioned"):
        call_command("jobqueue", "partitions", "--create-ahead", "2")
    assert Job.objects.filter(status=Status.PENDING).count() == 0


def _seconds_since_the_archive_ended() -> int:
    """Whole seconds (one at least) from the archive partition's upper bound to now."""
    layout = store.journal_layout()
    assert layout is not None
    (upper,) = [p.upper for p in layout.partitions if p.name == f"{JOURNAL}_archive"]
    assert upper is not None
    while (seconds := int((timezone.now() - upper).total_seconds())) < 1:
        time.sleep(0.2)  # the first second of a week: an age is a second at least
    return seconds


def test_table_health_reads_a_partitioned_journal_as_its_partitions() -> None:
    """A partitioned parent holds nothing itself (its own size is 0): table health reads
    its partitions' sizes and rows, and the parent's own last ANALYZE."""
    store.partition_journal(period="day", ahead=1)
    for n in range(3):
        finished_job_with_entries(timezone.now() - n * DAY)
    store.analyze_journal(every=timedelta(0))
    health = store.table_health(horizon_age=timedelta(hours=1), dead_ratio=1)
    journal = {r.table: r for r in health.tables}[JOURNAL]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size(%s::regclass), sum(pg_total_relation_size(relid))"
            " FROM pg_partition_tree(%s::regclass) WHERE isleaf",
            [JOURNAL, JOURNAL],
        )
        own, leaves = cursor.fetchone()
    assert own == 0
    assert journal.size_bytes == leaves > 0
    assert journal.rows is not None
    assert journal.last_analyze is not None


@pytest.mark.django_db(transaction=True)
def test_the_command_as_a_process_exits_2_on_a_bad_option_and_1_on_a_refusal() -> None:
    bad = manage_in_process("jobqueue", "partitions", "--convert", "--period", "fortnight")
    assert bad.returncode == 2
    assert "argument --period: invalid choice: 'fortnight'" in bad.stderr
    refused = manage_in_process("jobqueue", "partitions", "--create-ahead", "2")
    assert refused.returncode == 1
    assert "the journal is not partitioned (jobqueue partitions --convert)" in refused.stderr
    ahead = manage_in_process("jobqueue", "partitions", "--convert", "--period", "day")
    assert ahead.returncode == 0, ahead.stderr
    try:
        negative = manage_in_process("jobqueue", "partitions", "--create-ahead", "-1")
        assert negative.returncode == 1
        assert "ahead must be a whole number of periods (0 or more), not -1" in negative.stderr
        child = manage("partitions")  # a real child process reads what this one made
        assert child.returncode == 0, child.stderr
        assert "journal partitioned by day" in child.stdout
    finally:
        assert manage_in_process("jobqueue", "partitions", "--revert").returncode == 0
    assert store.journal_layout() is None


@pytest.mark.django_db(transaction=True)
def test_two_workers_making_the_same_partitions_at_once_make_each_once_and_both_go_on() -> None:
    store.partition_journal(period="day", ahead=0)
    try:
        start = threading.Barrier(2)

        def make() -> list[Any] | None:
            start.wait()
            try:
                return store.make_ahead(ahead=10)
            finally:
                connection.close()

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda _: make(), range(2)))
        # Each made some (or met the other's lock and left the rest for its next run).
        assert all(r is None or isinstance(r, list) for r in results)
        store.make_ahead(ahead=10)
        now = timezone.now()
        assert [n for n in names() if "_p" in n] == [day_name(now + n * DAY) for n in range(11)]
    finally:
        store.unpartition_journal()


def test_a_failed_upkeep_is_logged_and_never_ends_the_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store.partition_journal(period="day", ahead=0)
    with connection.cursor() as cursor:  # a period jobqueue never wrote
        cursor.execute(
            f'COMMENT ON TABLE "{JOURNAL}" IS %s', ["django_jobqueue partitions: fortnight"]
        )
    with caplog.at_level(logging.WARNING, logger="django_jobqueue"):
        Partitions(call, interval=60, ahead=3, analyze_every=timedelta(hours=1)).run()
        Retention(call, interval=60, keep={}, journal=timedelta(days=1)).run()
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(failed) == 2
    assert all("not by jobqueue (no period in its comment: 'fortnight')" in m for m in failed)
