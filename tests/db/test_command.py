"""``manage.py jobqueue``: stats, list, show, cancel, requeue, cleanup, bad input, exit codes;
and the RETENTION setting that a running worker applies with the same cleanup."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings
from django.utils import timezone

from django_jobqueue import Status, store
from django_jobqueue.management.arguments import parse_duration
from django_jobqueue.models import Job, JournalEntry, Outcome, WorkerHeartbeat
from django_jobqueue.store.snapshot import PendingCount
from tests.helpers import id_at, journal_of, manage_in_process, run_burst, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite]

ROOT = Path(__file__).resolve().parents[2]
S = timedelta(seconds=1)
ACTOR = f"manage.py jobqueue ({getpass.getuser()})"


def jobqueue(*args: str) -> tuple[str, str]:
    """Run the command in-process; returns (stdout, stderr)."""
    out, err = StringIO(), StringIO()
    call_command("jobqueue", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def jobqueue_fails(*args: str) -> tuple[str, str, str]:
    """Run the command expecting a CommandError; returns (message, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as info:
        call_command("jobqueue", *args, stdout=out, stderr=err)
    return str(info.value), out.getvalue(), err.getvalue()


def make(kind: str, status: str, **fields: Any) -> Job:
    now = timezone.now()
    if "created_at" in fields:  # made in the past: an id of then (random in its ms)
        fields.setdefault("id", id_at(fields["created_at"]))
    fields.setdefault("created_at", now)  # made now: uuid7's id, increasing as enqueues' are
    fields.setdefault("visible_at", fields["created_at"])
    if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
        fields.setdefault("finished_at", now)
    if status == Status.CLAIMED:
        fields.setdefault("claimed_by", "host:1")
        fields.setdefault("claim_expires_at", now + 600 * S)
        fields.setdefault("run_count", 1)
    return Job.objects.create(kind=kind, status=status, **fields)


def listed_ids(output: str) -> list[str]:
    ids = []
    for line in output.splitlines():
        first = line.split(" ", 1)[0]
        try:
            ids.append(str(uuid.UUID(first)))
        except ValueError:
            continue
    return ids


def show_fields(output: str) -> dict[str, str]:
    """The ``label: value`` lines printed by ``show`` above its journal."""
    head = output.split("\nJournal (", 1)[0]
    pairs = (line.split(":", 1) for line in head.splitlines() if line.strip())
    return {label.strip(): value.strip() for label, value in pairs}


def next_cursor(output: str) -> str | None:
    last = output.strip().splitlines()[-1]
    assert last.startswith("next: ")
    if last == "next: (end)":
        return None
    return last.removeprefix("next: --after ").strip("'")


# --- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("45s", timedelta(seconds=45)),
        ("2w", timedelta(weeks=2)),
        ("1h30m", timedelta(minutes=90)),
    ],
)
def test_parse_duration_accepts_units(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


# --- stats ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_stats_table_shows_backlog_dead_workers_and_runs() -> None:
    now = timezone.now()
    for _ in range(3):
        make("shop.mail", Status.PENDING, queue="mail", visible_at=now - 125 * S)
    make("shop.mail", Status.PENDING, visible_at=now + 3600 * S)
    make("shop.report", Status.CLAIMED)
    dead = make("shop.report", Status.DEAD)
    JournalEntry.objects.create(
        job=dead,
        kind="shop.report",
        run_no=1,
        outcome=Outcome.DEAD,
        started_at=now - 3 * S,
        recorded_at=now - 1 * S,
        duration=2 * S,
        worker="host:1",
    )
    WorkerHeartbeat.objects.create(
        id="h1:11:ab",
        host="h1",
        pid=11,
        kinds=["shop.report"],
        concurrency=4,
        last_seen_at=now - 2 * S,
        jobs_done=9,
    )
    WorkerHeartbeat.objects.create(
        id="h2:22:cd",
        host="h2",
        pid=22,
        kinds=["shop.mail"],
        concurrency=2,
        last_seen_at=now - 600 * S,
    )
    out, _ = jobqueue("stats")
    lines = out.splitlines()
    assert "Pending (runnable now): 3   scheduled for later: 1   claimed (running): 1" in lines
    [row] = [line for line in lines if line.split()[:1] == ["shop.mail"]]
    assert row.split() == ["shop.mail", "mail", "3", "2m", "5s"]  # oldest: 125 s
    assert "Dead: 1" in lines
    assert "Pending kinds no live worker serves: shop.mail" in lines
    assert "Workers: 1 alive, 1 gone" in lines
    [alive] = [line for line in lines if line.strip().startswith("h1:11:ab")]
    assert alive.split()[1] == "alive"
    assert alive.split()[-1] == "9"
    [gone] = [line for line in lines if line.strip().startswith("h2:22:cd")]
    assert gone.split()[1] == "gone"
    assert "10m ago" in gone
    assert "Runs in the last 24h:" in lines
    [runs] = [line for line in lines if line.strip().startswith("shop.report") and "%" in line]
    assert runs.split()[1:] == ["1", "dead=1", "2.00s", "2.00s", "100.0%"]


@pytest.mark.django_db
def test_stats_json_matches_store_stats_with_iso_datetimes() -> None:
    make("shop.mail", Status.PENDING)
    make("shop.mail", Status.DEAD)
    WorkerHeartbeat.objects.create(id="h:1:x", host="h", pid=1, kinds=["shop.mail"], concurrency=1)
    out, _ = jobqueue("stats", "--json", "--window", "2h")
    data = json.loads(out)
    expected = store.stats(window=timedelta(hours=2))
    assert data["window_seconds"] == 7200.0
    assert data["pending"] == [{"kind": "shop.mail", "queue": "default", "count": 1}]
    assert expected.pending == (PendingCount(kind="shop.mail", queue="default", count=1),)
    assert list(data) == list(expected.to_dict())
    assert data["dead"] == {"shop.mail": 1}
    assert data["unserved_kinds"] == []
    [worker] = data["workers"]
    assert worker["state"] == "alive"
    assert datetime.fromisoformat(worker["last_seen_at"]) == expected.workers[0].last_seen_at
    assert datetime.fromisoformat(data["at"]) <= timezone.now()


@pytest.mark.django_db
@pytest.mark.parametrize("window", ["24", "7x", "0h", "1.5h", "h"])
def test_stats_bad_window_is_a_usage_error_naming_it(window: str) -> None:
    message, _, _ = jobqueue_fails("stats", "--window", window)
    assert "--window" in message
    assert repr(window) in message


# --- list -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_list_filters_by_kind_status_queue_and_times() -> None:
    now = timezone.now()
    old = make(
        "a.one", Status.COMPLETED, created_at=now - 10 * 86400 * S, finished_at=now - 9 * 86400 * S
    )
    recent_done = make("a.one", Status.COMPLETED, created_at=now - 3600 * S)
    dead = make("b.two", Status.DEAD, queue="slow", created_at=now - 7200 * S)
    pending = make("b.two", Status.PENDING)

    out, _ = jobqueue("list")
    assert listed_ids(out) == [str(j.id) for j in (old, dead, recent_done, pending)]
    assert next_cursor(out) is None

    assert listed_ids(jobqueue("list", "--kind", "a.one")[0]) == [str(old.id), str(recent_done.id)]
    assert listed_ids(jobqueue("list", "--kind", "a.one", "--kind", "b.two")[0]) == [
        str(j.id) for j in (old, dead, recent_done, pending)
    ]
    assert listed_ids(jobqueue("list", "--status", "dead", "--status", "pending")[0]) == [
        str(dead.id),
        str(pending.id),
    ]
    assert listed_ids(jobqueue("list", "--queue", "slow")[0]) == [str(dead.id)]
    assert listed_ids(jobqueue("list", "--created-after", "3h")[0]) == [
        str(j.id) for j in (dead, recent_done, pending)
    ]
    assert listed_ids(jobqueue("list", "--created-before", "90m")[0]) == [
        str(old.id),
        str(dead.id),
    ]
    assert listed_ids(jobqueue("list", "--finished-before", "1w")[0]) == [str(old.id)]
    iso = (now - 86400 * S).isoformat()
    assert listed_ids(jobqueue("list", "--finished-after", iso)[0]) == [
        str(dead.id),
        str(recent_done.id),
    ]
    assert jobqueue("list", "--kind", "nope")[0].splitlines() == ["No jobs match.", "next: (end)"]

    [line] = [x for x in jobqueue("list", "--queue", "slow")[0].splitlines() if str(dead.id) in x]
    assert line.split()[1:5] == ["b.two", "slow", "dead", "normal"]


@pytest.mark.django_db
def test_list_pages_with_cursor_in_both_orders() -> None:
    base = timezone.now() - 3600 * S
    jobs = [make("p.page", Status.PENDING, created_at=base + i * S) for i in range(7)]
    for newest_first, expected in ((False, jobs), (True, jobs[::-1])):
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            args = ["list", "--limit", "3"]
            if newest_first:
                args.append("--newest-first")
            if cursor:
                args += ["--after", cursor]
            out, _ = jobqueue(*args)
            seen += listed_ids(out)
            pages += 1
            cursor = next_cursor(out)
            if cursor is None:
                break
        assert seen == [str(j.id) for j in expected]
        assert pages == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--created-after", "yesterday"], "--created-after"),
        (["--finished-before", "2025-13-45"], "--finished-before"),
        (["--limit", "0"], "--limit"),
        (["--limit", "ten"], "--limit"),
        (["--status", "running"], "--status"),
        (["--after", "not-a-cursor"], "--after"),
        (["--bogus"], "--bogus"),
    ],
)
def test_list_bad_arguments_are_usage_errors_naming_the_argument(
    args: list[str], named: str
) -> None:
    message, _, _ = jobqueue_fails("list", *args)
    assert named in message


# --- show -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_show_prints_fields_and_journal_of_a_run_job() -> None:
    handle = tasks.fail_times.enqueue(times=1)
    run_burst()
    out, _ = jobqueue("show", str(handle.id))
    lines = out.splitlines()
    fields = show_fields(out)
    assert fields["id"] == str(handle.id)
    assert fields["kind"] == "tests.taskapp.tasks.fail_times"
    assert fields["status"] == "completed"
    assert fields["payload"] == '{"times": 1}'
    assert fields["result"] == '"ok"'
    assert fields["runs"] == "2"
    assert fields["failures"] == "1"
    assert "Journal (2 entries):" in lines
    header = next(line for line in lines if line.strip().startswith("RUN"))
    assert header.split() == [
        "RUN",
        "OUTCOME",
        "STARTED",
        "DURATION",
        "NOTE",
        "ATTACHMENT",
        "ACTOR",
    ]
    rows = lines[lines.index(header) + 1 :]
    assert len(rows) == 2
    assert rows[0].split()[:2] == ["1", "retried"]
    assert "RuntimeError: planned failure 1 of 1" in rows[0]
    assert '{"run": 1}' in rows[0]
    assert rows[1].split()[:2] == ["2", "completed"]
    assert '{"run": 2}' in rows[1]


@pytest.mark.django_db(transaction=True)
def test_show_redacts_secret_fields_that_the_task_still_receives() -> None:
    handle = tasks.record.enqueue(n={"user": "ann", "password": "hunter2"})
    run_burst()
    out, _ = jobqueue("show", str(handle.id))
    assert "hunter2" not in out
    assert show_fields(out)["payload"] == '{"n": {"password": "********", "user": "ann"}}'
    # stored and run as given: the task got the real value
    assert Job.objects.get(id=handle.id).payload == {"n": {"user": "ann", "password": "hunter2"}}
    assert handle.refresh().status == "completed"


@pytest.mark.django_db(transaction=True)
def test_show_prints_the_last_items_of_the_jobs_stream_redacted_after_its_journal() -> None:
    from django_jobqueue.management.subcommands.show import STREAM_SHOWN, VALUE_WIDTH
    from tests.taskapp import stream_tasks

    values = [{"n": n, "password": "hunter2"} for n in range(STREAM_SHOWN + 2)]
    values.append({"text": "x" * (VALUE_WIDTH * 2)})
    handle = stream_tasks.writes.enqueue(values=values)
    quiet = tasks.record.enqueue(n=1)
    run_burst()
    assert handle.refresh().status == "completed"
    out, _ = jobqueue("show", str(handle.id))
    assert "hunter2" not in out
    lines = out.splitlines()
    [heading] = [line for line in lines if line.startswith("Stream (")]
    assert heading.startswith(f"Stream ({len(values)} items, ")
    assert heading.endswith(f"of JSON: the last {STREAM_SHOWN} shown):")
    assert lines.index(heading) > lines.index("Journal (1 entry):")
    header = lines[lines.index(heading) + 1]
    assert header.split() == ["OFFSET", "RUN", "STEP", "WRITTEN", "VALUE"]
    rows = lines[lines.index(heading) + 2 : lines.index(heading) + 2 + STREAM_SHOWN]
    # The last items, oldest first: offsets 4 to 13 of 13.
    assert [row.split()[0] for row in rows] == [str(o) for o in range(4, len(values) + 1)]
    assert rows[0].split()[1:3] == ["1", "-"]  # run 1, written outside any step
    assert rows[0].endswith('{"n": 3, "password": "********"}')
    long = rows[-1].split(None, 5)[-1]
    assert long.startswith('{"text": "xxx')
    assert long.endswith("…")
    assert len(long) == VALUE_WIDTH
    # A job that wrote nothing prints no stream section.
    assert not any(
        line.startswith("Stream") for line in jobqueue("show", str(quiet.id))[0].splitlines()
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args",
    [
        ["list", "--kind", "a\x00b"],
        ["list", "--queue", "\x00"],
        ["cleanup", "--older-than", "1d", "--kind", "\x00"],
    ],
)
def test_a_name_the_database_cannot_compare_is_a_command_error(args: list[str]) -> None:
    message, _, _ = jobqueue_fails(*args)
    assert "contains a NUL character" in message


@pytest.mark.django_db
def test_show_unknown_and_malformed_ids_fail() -> None:
    missing = uuid.uuid4()
    message, _, _ = jobqueue_fails("show", str(missing))
    assert f"No job with id {missing}" in message
    message, _, _ = jobqueue_fails("show", "12345")
    assert "ID" in message
    assert "'12345' is not a job id" in message


# --- cancel / requeue -----------------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_acts_on_every_known_id_then_fails_for_the_unknown_one() -> None:
    first = make("c.one", Status.PENDING)
    second = make("c.one", Status.PENDING)
    running = make("c.one", Status.CLAIMED)
    missing = uuid.uuid4()
    message, out, err = jobqueue_fails(
        "cancel", str(first.id), str(missing), str(second.id), str(running.id)
    )
    assert "1 of 4" in message
    assert str(missing) in message
    assert f"{missing}: no such job" in err
    assert f"{first.id}: cancelled" in out
    assert f"{second.id}: cancelled" in out
    assert f"{running.id}: cancel requested" in out
    for job in (first, second):
        job.refresh_from_db()
        assert job.status == Status.CANCELLED
        [entry] = journal_of(job.id)
        assert entry.outcome == Outcome.CANCELLED
        assert entry.actor == ACTOR
    running.refresh_from_db()
    assert running.status == Status.CLAIMED
    assert running.cancel_requested
    assert running.cancel_actor == ACTOR


@pytest.mark.django_db
def test_cancel_of_a_finished_job_says_why_and_fails() -> None:
    done = make("c.one", Status.COMPLETED)
    message, _, err = jobqueue_fails("cancel", str(done.id))
    assert "only pending or claimed jobs can be cancelled" in err
    assert str(done.id) in message


@pytest.mark.django_db(transaction=True)
def test_requeue_dead_job_runs_again_and_completed_needs_force() -> None:
    dead = make("tests.taskapp.tasks.add", Status.DEAD, payload={"a": 1, "b": 2}, failure_count=3)
    done = make("tests.taskapp.tasks.add", Status.COMPLETED, payload={"a": 2, "b": 2}, result=4)
    out, _ = jobqueue("requeue", str(dead.id))
    assert out.strip() == f"{dead.id}: requeued (pending now)"
    dead.refresh_from_db()
    assert dead.status == Status.PENDING
    assert dead.failure_count == 0
    [entry] = journal_of(dead.id)
    assert (entry.outcome, entry.actor) == (Outcome.REQUEUED, ACTOR)

    message, _, err = jobqueue_fails("requeue", str(done.id))
    assert "force" in err
    assert str(done.id) in message
    done.refresh_from_db()
    assert done.status == Status.COMPLETED

    jobqueue("requeue", "--force", str(done.id))
    run_burst()
    dead.refresh_from_db()
    done.refresh_from_db()
    assert (dead.status, dead.result) == (Status.COMPLETED, 3)
    assert (done.status, done.result) == (Status.COMPLETED, 4)


# --- cleanup --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_cleanup_counts_dry_run_then_deletes_by_status_and_kind() -> None:
    now = timezone.now()
    old = now - 10 * 86400 * S
    for _ in range(3):
        make("k.one", Status.COMPLETED, finished_at=old)
    make("k.two", Status.COMPLETED, finished_at=old)
    make("k.one", Status.DEAD, finished_at=old)
    old_cancelled = make("k.one", Status.CANCELLED, finished_at=old)
    JournalEntry.objects.create(job=old_cancelled, kind="k.one", outcome=Outcome.CANCELLED)
    fresh = make("k.one", Status.COMPLETED, finished_at=now - 86400 * S)
    pending = make("k.one", Status.PENDING, created_at=old)

    out, _ = jobqueue("cleanup", "--older-than", "7d", "--dry-run")
    assert out.startswith("6 job(s) finished before ")
    assert out.strip().endswith("would be deleted (dry run)")
    assert Job.objects.count() == 8

    out, _ = jobqueue("cleanup", "--older-than", "7d", "--status", "completed", "--kind", "k.one")
    assert out.startswith("3 completed k.one job(s) finished before ")
    assert out.strip().endswith(" deleted")
    assert Job.objects.count() == 5

    out, _ = jobqueue("cleanup", "--older-than", "1w")
    assert out.startswith("3 job(s) finished before ")
    assert sorted(Job.objects.values_list("id", flat=True)) == sorted([fresh.id, pending.id])
    assert not JournalEntry.objects.filter(job_id=old_cancelled.id).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--older-than", "7"], "--older-than"),
        (["--older-than", "7 days"], "--older-than"),
        (["--older-than", "0d"], "--older-than"),
        ([], "--older-than"),
        (["--older-than", "7d", "--status", "pending"], "--status"),
    ],
)
def test_cleanup_bad_arguments_are_usage_errors_naming_the_argument(
    args: list[str], named: str
) -> None:
    message, _, _ = jobqueue_fails("cleanup", *args)
    assert named in message


@pytest.mark.django_db
def test_missing_or_unknown_subcommand_is_a_usage_error() -> None:
    message, _, _ = jobqueue_fails()
    assert "SUBCOMMAND" in message
    message, _, _ = jobqueue_fails("explode")
    assert "explode" in message


# --- a real process: exit codes -------------------------------------------------------------


def _subprocess_env() -> dict[str, str]:
    """Point a child process at this test's database."""
    db = connections["default"].settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        url = f"sqlite:///{db['NAME']}"
    else:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        scheme = "mysql" if db["ENGINE"].endswith("mysql") else "postgres"
        url = f"{scheme}://{auth}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env = dict(os.environ)
    env.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(ROOT))
    return env


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "django", "jobqueue", *args],
        cwd=ROOT,
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.django_db(transaction=True)
def test_exit_codes_for_unknown_id_and_bad_argument() -> None:
    """As a process exits: each command line parsed and run the way ``manage.py`` runs it
    (in this process; the test below runs a real child)."""
    job = make("x.one", Status.PENDING)
    missing = uuid.uuid4()

    result = manage_in_process("jobqueue", "show", str(missing))
    assert result.returncode == 1
    assert f"No job with id {missing}" in result.stderr

    result = manage_in_process("jobqueue", "cleanup", "--older-than", "7x")
    assert result.returncode == 2
    assert "argument --older-than" in result.stderr
    assert "usage:" in result.stderr

    result = manage_in_process("jobqueue", "show", str(job.id))
    assert result.returncode == 0, result.stderr
    assert show_fields(result.stdout)["status"] == "pending"


@pytest.mark.django_db(transaction=True)
def test_process_exit_code_for_an_unknown_id_among_known_ones() -> None:
    job = make("x.one", Status.PENDING)
    missing = uuid.uuid4()

    result = manage("cancel", str(missing), str(job.id))
    assert result.returncode == 1, result.stderr
    assert f"{missing}: no such job" in result.stderr
    assert f"{job.id}: cancelled" in result.stdout
    job.refresh_from_db()
    assert job.status == Status.CANCELLED  # the known id was still processed


# --- retention ------------------------------------------------------------------------------


def retention(**extra: Any) -> dict[str, Any]:
    return {**settings.JOBQUEUE, "RETENTION": {"completed": timedelta(days=7)}, **extra}


@pytest.mark.django_db(transaction=True)
def test_retention_burst_worker_deletes_old_completed_jobs_at_start() -> None:
    now = timezone.now()
    old = make("r.kind", Status.COMPLETED, finished_at=now - 8 * 86400 * S)
    JournalEntry.objects.create(job=old, kind="r.kind", outcome=Outcome.COMPLETED)
    young = make("r.kind", Status.COMPLETED, finished_at=now - 6 * 86400 * S)
    old_dead = make("r.kind", Status.DEAD, finished_at=now - 30 * 86400 * S)
    # An interval longer than this host's monotonic clock has run: retention must still
    # run when the worker starts, not only once the interval has passed since boot.
    interval = time.monotonic() + 3600
    with override_settings(JOBQUEUE=retention(RETENTION_INTERVAL=interval)):
        handle = tasks.add.enqueue(1, 1)
        run_burst()
    assert not Job.objects.filter(id=old.id).exists()
    assert not JournalEntry.objects.filter(job_id=old.id).exists()
    remaining = set(Job.objects.values_list("id", flat=True))
    assert remaining == {young.id, old_dead.id, handle.id}


@pytest.mark.django_db(transaction=True)
def test_retention_running_worker_keeps_pruning_every_interval(worker_thread: Any) -> None:
    now = timezone.now()
    young = make("r.kind", Status.COMPLETED, finished_at=now - 6 * 86400 * S)
    with override_settings(JOBQUEUE=retention(RETENTION_INTERVAL=0.5)):
        worker = worker_thread(concurrency=1)
        wait_for(lambda: WorkerHeartbeat.objects.filter(id=worker.worker.heartbeat_id).exists())
        # Finished long ago, but written after the worker's first sweep.
        late = make("r.kind", Status.COMPLETED, finished_at=now - 9 * 86400 * S)
        wait_for(lambda: not Job.objects.filter(id=late.id).exists(), timeout=15)
        handle = tasks.add.enqueue(2, 3)
        wait_for(lambda: handle.refresh().status == Status.COMPLETED)
        worker.stop()
    assert set(Job.objects.values_list("id", flat=True)) == {young.id, handle.id}
