"""Nothing stored can break a reader (issue 17, findings 2 and 3): JSON nested deeper
than ``MAX_JSON_DEPTH`` is refused at enqueue on every path and fails a run that hands
it back; every time a job is scheduled for is clamped to what Python and the database
hold; and a row that cannot be decoded anyway (written by raw SQL) is printed by the
command and settled dead by a worker, which goes on."""

from __future__ import annotations

import importlib
import re
from datetime import datetime, timedelta, timezone
from io import StringIO
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.test import override_settings
from django.utils.timezone import now as timezone_now

import django_jobqueue
from django_jobqueue import InvalidPayload, Status
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import EARLIEST, LATEST
from django_jobqueue.task.options import depth_limit
from django_jobqueue.validation import Undecodable
from tests.djtasks import tasks as djtasks
from tests.helpers import is_mysql, is_postgres, journal_of, postgres_only, run_burst
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

# What a webhook's body parsed by json.loads can be: 1.9 kB nested 960 deep (built
# directly: json.loads itself runs out of stack this deep inside pytest's collection).
DEEP = tasks._nested(959)


def limit(*, own_level: bool = True) -> tuple[int, str]:
    """How deep an argument (or carry value; with ``own_level=False`` a return value or
    attachment) may nest here: MAX_JSON_DEPTH, 100 by default, or MariaDB's 31 levels
    in all."""
    depth, name = depth_limit(own_level=own_level)
    assert (depth, name) == (100, "MAX_JSON_DEPTH") or is_mysql()
    return depth, name


def deep_path(argument: str = "b", *, own_level: bool = True) -> str:
    depth, name = limit(own_level=own_level)
    return re.escape(
        f"{argument}[0][0][0][0]…[0][0] is nested more than {depth} levels deep ({name})"
    )


# "Never" and "at once" as a user writes them: year 10000 and year 0 in UTC.
NEVER = datetime.max.replace(tzinfo=ZoneInfo("America/New_York"))
AT_ONCE = [
    datetime.min.replace(tzinfo=ZoneInfo("Asia/Tokyo")),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),  # as Pacific/Kiritimati now
]


def jobqueue(*args: str) -> str:
    out = StringIO()
    call_command("jobqueue", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def nothing_written() -> bool:
    return not Job.objects.exists() and not JournalEntry.objects.exists()


# --- depth -------------------------------------------------------------------------------


def test_a_960_deep_argument_is_refused_at_enqueue_naming_the_path_and_nothing_is_written() -> None:
    path = deep_path()
    with pytest.raises(InvalidPayload, match=r"argument 'b' cannot be stored: " + path) as e:
        tasks.add.enqueue(1, DEEP)
    assert e.value.argument == "b"  # type: ignore[attr-defined]
    with pytest.raises(InvalidPayload, match=path):
        tasks.add.using(queue="mail", priority=0).enqueue(1, DEEP)
    assert nothing_written()


def test_a_too_deep_argument_leaves_the_callers_transaction_usable() -> None:
    with transaction.atomic():
        first = tasks.add.enqueue(1, 2)
        with pytest.raises(InvalidPayload, match=deep_path()):
            tasks.add.enqueue(1, DEEP)
        second = tasks.add.enqueue(3, 4)
    assert set(Job.objects.values_list("id", flat=True)) == {first.id, second.id}


@pytest.mark.django_db(transaction=True)
def test_an_argument_exactly_as_deep_as_allowed_is_stored_and_runs_one_deeper_is_refused() -> None:
    depth, _ = limit()
    handle = tasks.record.enqueue(n=tasks._nested(depth - 1))
    with pytest.raises(InvalidPayload, match=deep_path("n")):
        tasks.record.enqueue(n=tasks._nested(depth))
    run_burst(concurrency=1)
    assert handle.refresh().status == Status.COMPLETED


def test_enqueue_many_refuses_a_too_deep_item_and_writes_none_of_the_batch() -> None:
    with pytest.raises(InvalidPayload, match=deep_path()):
        tasks.add.enqueue_many([{"a": 1, "b": 2}, {"a": 1, "b": DEEP}])
    with pytest.raises(InvalidPayload, match=deep_path()):
        tasks.add.using(queue="mail").enqueue_many([{"a": 1, "b": DEEP}])
    assert nothing_written()


def test_the_django_tasks_backend_refuses_a_too_deep_argument_naming_it() -> None:
    with pytest.raises(
        InvalidPayload, match=r"argument 'args\[0\]' cannot be stored: " + deep_path("args[0]")
    ):
        djtasks.echo.enqueue(DEEP)
    with pytest.raises(
        InvalidPayload,
        match=r"argument 'body' cannot be stored: body\['items'\]\[0\].* is nested more than",
    ):
        djtasks.echo.enqueue(body={"items": DEEP})
    assert nothing_written()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("result", "the return value cannot be stored: the return value[0][0]"),
        ("carry", "ctx.carry cannot be stored: ctx.carry['deep'][0][0]"),
        ("attachment", "the ctx.attach() value cannot be stored: the ctx.attach() value[0]"),
    ],
)
def test_a_run_handing_back_json_deeper_than_allowed_fails_with_a_note_naming_it(
    where: str, named: str
) -> None:
    depth, name = limit(own_level=where == "carry")
    bad = tasks.deep_output.enqueue(where=where, depth=depth + 1)
    fits = tasks.deep_output.enqueue(where=where, depth=depth)
    run_burst(concurrency=1)
    [entry] = journal_of(bad.id)
    assert bad.refresh().status == Status.DEAD
    assert named in entry.note
    assert f"is nested more than {depth} levels deep ({name})" in entry.note
    assert fits.refresh().status == Status.COMPLETED


# --- times -------------------------------------------------------------------------------


def clamped_to(when: datetime) -> datetime:
    return LATEST if when is NEVER else EARLIEST


WHEN = pytest.mark.parametrize(
    "when", [NEVER, *AT_ONCE], ids=["max-in-new-york", "min-in-tokyo", "min-at-plus-14"]
)


@WHEN
def test_a_run_at_beyond_what_can_be_stored_is_clamped_and_the_commands_still_read_it(
    when: datetime,
) -> None:
    handle = tasks.add.using(run_at=when).enqueue(1, 2)
    assert Job.objects.get(id=handle.id).visible_at == clamped_to(when)
    assert str(handle.id) in jobqueue("list")
    assert "Pending" in jobqueue("stats")
    day = clamped_to(when).strftime("%Y-%m-%d")
    assert re.search(rf"visible at: +{day} ", jobqueue("show", str(handle.id)))
    for zone in ("Pacific/Kiritimati", "Pacific/Honolulu"):  # UTC+14 and UTC-10
        with override_settings(TIME_ZONE=zone):
            assert "visible at:" in jobqueue("show", str(handle.id))
    jobqueue("cancel", str(handle.id))
    assert handle.refresh().status == Status.CANCELLED


@WHEN
def test_a_django_task_run_after_beyond_what_can_be_stored_is_clamped_the_same(
    when: datetime,
) -> None:
    result = djtasks.add.using(run_after=when).enqueue(1, 2)
    job = Job.objects.get(id=result.id)
    assert job.visible_at == clamped_to(when)
    assert job.payload["run_after"] == clamped_to(when).isoformat()
    assert djtasks.add.get_result(result.id).status == "READY"


@pytest.mark.django_db(transaction=True)
def test_a_job_due_since_year_0_is_claimed_and_run_by_a_worker_that_goes_on() -> None:
    ours = [tasks.add.using(run_at=when).enqueue(1, n) for n, when in enumerate(AT_ONCE)]
    django_task = djtasks.add.using(run_after=AT_ONCE[0]).enqueue(2, 2)
    later = tasks.add.enqueue(5, 5)
    assert run_burst(concurrency=1) == 4
    assert [h.refresh().result for h in ours] == [1, 2]
    assert djtasks.add.get_result(django_task.id).return_value == 4
    assert later.refresh().status == Status.COMPLETED
    never = tasks.add.using(run_at=NEVER).enqueue(1, 1)
    assert run_burst(concurrency=1) == 0
    assert never.refresh().status == Status.PENDING


# --- rows that cannot be decoded ---------------------------------------------------------

# JSON text no reader can decode, as raw SQL or an older version may have stored it.
TOO_DEEP = "[" * 1000 + "]" * 1000
NOT_JSON = '{"a": '


def write_raw(job_id: Any, column: str, text: str, *, model: type[Model] = Job) -> None:
    """Store ``text`` in a JSON column by raw SQL, around the queue's checks and, on
    SQLite and MariaDB, around the column's ``JSON_VALID`` check too (as a row written
    before that check, or restored from a dump without it, may be)."""
    pk = model._meta.pk
    assert pk is not None
    cast = "::jsonb" if is_postgres() else ""
    unchecked = {
        "sqlite": ("PRAGMA ignore_check_constraints = 1", "PRAGMA ignore_check_constraints = 0"),
        "mysql": (
            "SET SESSION check_constraint_checks = 0",
            "SET SESSION check_constraint_checks = 1",
        ),
    }.get(connection.vendor)
    with connection.cursor() as cursor:
        if unchecked:
            cursor.execute(unchecked[0])
        cursor.execute(
            f"UPDATE {model._meta.db_table} SET {column} = %s{cast} WHERE id = %s",
            [text, pk.get_db_prep_value(job_id, connection)],
        )
        if unchecked:
            cursor.execute(unchecked[1])


NOT_ON_POSTGRES = pytest.mark.skipif(is_postgres(), reason="jsonb holds only valid JSON")
UNDECODABLE = pytest.mark.parametrize(
    ("column", "text"),
    [
        pytest.param("payload", TOO_DEEP, id="payload-too-deep"),
        pytest.param("carry", TOO_DEEP, id="carry-too-deep"),
        pytest.param("payload", NOT_JSON, id="payload-not-json", marks=NOT_ON_POSTGRES),
        pytest.param("carry", NOT_JSON, id="carry-not-json", marks=NOT_ON_POSTGRES),
    ],
)


@UNDECODABLE
def test_a_row_that_cannot_be_decoded_is_read_as_such_and_the_commands_print_it(
    column: str, text: str
) -> None:
    bad = tasks.add.enqueue(1, 2)
    write_raw(bad.id, column, text)
    value = getattr(Job.objects.get(id=bad.id), column)
    assert isinstance(value, Undecodable)
    # A handle reads it too: an undecodable carry as an empty one, as the task would.
    assert django_jobqueue.job(bad.id).carry == {}
    assert f"{column}:" in (shown := jobqueue("show", str(bad.id)))
    assert f"(undecodable: {value.error})" in shown
    assert str(bad.id) in jobqueue("list")
    assert "Pending" in jobqueue("stats")


@pytest.mark.django_db(transaction=True)
@UNDECODABLE
@pytest.mark.skipif(
    is_mysql(),
    reason="MariaDB checks JSON_VALID on every update of the row, the claim's too: such a "
    "row cannot be claimed, only written with the checks off",
)
def test_a_worker_claiming_a_row_that_cannot_be_decoded_settles_it_dead_and_goes_on(
    column: str, text: str
) -> None:
    bad = tasks.add.enqueue(1, 2)
    write_raw(bad.id, column, text)
    good = tasks.add.enqueue(3, 4)
    assert run_burst(concurrency=1, worker_id="w:1") == 2
    [entry] = journal_of(bad.id)
    assert entry.outcome == "dead"
    assert f"the stored {column} cannot be decoded" in entry.note
    assert Job.objects.get(id=bad.id).status == Status.DEAD
    assert good.refresh().result == 7
    assert "Journal (1 entry)" in jobqueue("show", str(bad.id))


# --- times written around the queue (PostgreSQL holds years Python cannot) ----------------

OUT_OF_RANGE = ["10000-01-01 00:00:00+00", "0001-12-31 10:00:00+00 BC"]


def write_time(job_id: Any, text: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Job._meta.db_table} SET visible_at = %s::timestamptz WHERE id = %s",
            [text, job_id],
        )


@postgres_only
@pytest.mark.django_db(transaction=True)  # the refused INSERT aborts the transaction it is in
@pytest.mark.parametrize("text", OUT_OF_RANGE, ids=["year-10000", "year-0"])
def test_raw_sql_cannot_store_a_time_python_cannot_read(text: str) -> None:
    handle = tasks.add.enqueue(1, 2)
    with pytest.raises(IntegrityError, match="jobqueue_job_times_readable"):
        write_time(handle.id, text)
    assert Job.objects.get(id=handle.id).visible_at <= timezone_now()


@pytest.mark.django_db(transaction=True)
@postgres_only
def test_the_migration_clamps_rows_an_older_version_stored_out_of_range_then_checks() -> None:
    migration = importlib.import_module("django_jobqueue.migrations.0009_job_times_readable")
    never, at_once = tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {Job._meta.db_table} DROP CONSTRAINT {migration.CONSTRAINT}")
    try:
        write_time(never.id, OUT_OF_RANGE[0])
        write_time(at_once.id, OUT_OF_RANGE[1])
    finally:
        with connection.schema_editor() as editor:
            migration.create(None, editor)
    assert Job.objects.get(id=never.id).visible_at == LATEST
    assert Job.objects.get(id=at_once.id).visible_at == EARLIEST
    assert str(never.id) in jobqueue("list")
    assert run_burst(concurrency=1) == 1
    assert at_once.refresh().result == 7
