"""``manage.py jobqueue health``: exit codes and one-line reasons, in-process and as a real
process, for worker heartbeats and the oldest due pending job."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

import django_jobqueue
from django_jobqueue.management.subcommands.health import UNSERVED_EXIT
from django_jobqueue.models import Job, WorkerHeartbeat
from django_jobqueue.task.registry import registry
from tests.concurrency.procs import database_url
from tests.helpers import WorkerThread, manage_in_process, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

ROOT = Path(__file__).resolve().parents[2]


def health(*args: str) -> str:
    out = StringIO()
    call_command("jobqueue", "health", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def unhealthy(*args: str) -> str:
    with pytest.raises(CommandError) as info:
        health(*args)
    assert info.value.returncode == 1
    message = str(info.value)
    assert "\n" not in message
    return message


def worker(
    seen_ago: timedelta,
    *,
    stopped: bool = False,
    name: str = "w",
    kinds: list[str] | None = None,
    queues: list[str] | None = None,
) -> WorkerHeartbeat:
    """A worker row as runworker writes it: by default running every registered kind."""
    now = timezone.now()
    return WorkerHeartbeat.objects.create(
        id=f"host:1:{name}",
        host="host",
        pid=1,
        queues=queues or [],
        kinds=registry.kinds() if kinds is None else kinds,
        concurrency=1,
        started_at=now - seen_ago - timedelta(minutes=1),
        last_seen_at=now - seen_ago,
        stopped_at=now - seen_ago if stopped else None,
    )


def test_no_worker_at_all_is_unhealthy() -> None:
    assert unhealthy() == "unhealthy: no running worker has a heartbeat"


def test_a_stopped_worker_does_not_count() -> None:
    worker(timedelta(seconds=1), stopped=True)
    assert unhealthy() == "unhealthy: no running worker has a heartbeat"


def test_a_fresh_heartbeat_is_healthy_and_a_stale_one_is_not() -> None:
    # The command reads the real clock, which moves on between writing the row and each
    # call (seconds on a loaded machine): the ages are matched to the second's window.
    worker(timedelta(seconds=90), name="old")
    assert re.fullmatch(
        r"unhealthy: no worker heartbeat within 1m \(the freshest is 1m 3\ds old\)", unhealthy()
    )
    assert re.match(r"healthy: worker heartbeat 1m 3\ds ago", health("--max-heartbeat-age", "120"))
    assert health("--max-heartbeat-age", "2m").startswith("healthy:")
    worker(timedelta(seconds=2), name="new")
    assert re.fullmatch(r"healthy: worker heartbeat \ds ago\n", health())


def test_the_oldest_due_job_is_checked_only_when_asked_and_paused_queues_are_left_out() -> None:
    worker(timedelta(seconds=1))
    ten_minutes_ago = timezone.now() - timedelta(minutes=10)
    tasks.add.using(run_at=ten_minutes_ago).enqueue(1, 1)
    tasks.add.using(delay=timedelta(hours=1)).enqueue(1, 1)  # not due: never counts
    assert health().startswith("healthy:")
    # "10m", or "10m 1s" once the real clock moved on a second (a loaded machine).
    assert re.fullmatch(
        r"unhealthy: the oldest due pending job has waited 10m( \ds)?, over 5m",
        unhealthy("--max-pending-age", "300"),
    )
    assert "oldest due job waited 10m" in health("--max-pending-age", "1h")

    django_jobqueue.pause_queue("default")
    assert health("--max-pending-age", "300").startswith("healthy:")
    django_jobqueue.resume_queue("default")

    WorkerHeartbeat.objects.all().delete()
    assert re.fullmatch(
        r"unhealthy: no running worker has a heartbeat; "
        r"the oldest due pending job has waited 10m( \ds)?, over 5m",
        unhealthy("--max-pending-age", "300"),
    )


def unserved(*args: str) -> str:
    with pytest.raises(CommandError) as info:
        health(*args)
    assert info.value.returncode == UNSERVED_EXIT == 3  # apart from 1 and argparse's 2
    return str(info.value)


def test_runnable_jobs_no_live_worker_runs_exit_with_their_own_code() -> None:
    add, noop = tasks.add.kind, tasks.noop.kind
    worker(timedelta(seconds=1), kinds=[add])
    tasks.add.enqueue(1, 1)
    tasks.noop.using(delay=timedelta(hours=1)).enqueue()  # not due: not waiting yet
    assert health().startswith("healthy:")
    tasks.noop.enqueue()
    tasks.noop.enqueue()
    assert unserved() == f"unserved: runnable jobs of kind(s) no live worker runs: {noop} (2)"
    # A kind no process has any more (renamed, or moved out of tasks.py) is unserved too.
    renamed = tasks.add.enqueue(2, 2)
    Job.objects.filter(id=renamed.id).update(kind="shop.renamed_task")
    assert "shop.renamed_task (1)" in unserved()
    # A paused queue's jobs wait on purpose.
    django_jobqueue.pause_queue("default")
    assert health().startswith("healthy:")
    django_jobqueue.resume_queue("default")
    # A worker serves a job only if it reads the job's queue too.
    worker(timedelta(seconds=1), name="all-kinds", queues=["other"])
    assert noop in unserved()
    worker(timedelta(seconds=1), name="everything")
    assert unserved() == (
        "unserved: runnable jobs of kind(s) no live worker runs: shop.renamed_task (1)"
    )
    # No heartbeat at all is the graver reason: unhealthy, exit 1.
    WorkerHeartbeat.objects.all().delete()
    assert unhealthy() == "unhealthy: no running worker has a heartbeat"


@pytest.mark.parametrize("bad", ["0", "-5", "abc", "nan", "inf"])
def test_bad_thresholds_are_refused_naming_the_option(bad: str) -> None:
    with pytest.raises(CommandError, match="argument --max-pending-age"):
        health("--max-pending-age", bad)


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_makes_it_healthy() -> None:
    w = WorkerThread().start()
    try:
        wait_for(lambda: WorkerHeartbeat.objects.filter(stopped_at__isnull=True).exists())
        assert health().startswith("healthy:")
    finally:
        w.stop()
    assert unhealthy() == "unhealthy: no running worker has a heartbeat"


def _env(database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="tests.settings", PYTHONPATH=str(ROOT)
    )
    return env


def _this_database_url() -> str:
    return database_url()  # the test database's, on PostgreSQL, SQLite or MariaDB


def manage_health(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "django", "jobqueue", "health", *args],
        cwd=ROOT,
        env=_env(database_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.django_db(transaction=True)
def test_exit_codes() -> None:
    """As a process exits (the command line run the way ``manage.py`` runs it, in this
    process; the unreachable database below is a real child's)."""
    result = manage_in_process("jobqueue", "health")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "CommandError: unhealthy: no running worker has a heartbeat"
    ]
    worker(timedelta(seconds=1))
    result = manage_in_process("jobqueue", "health")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("healthy:")
    result = manage_in_process("jobqueue", "health", "--max-heartbeat-age", "soon")
    assert result.returncode == 2
    assert "argument --max-heartbeat-age" in result.stderr


def test_an_unreachable_database_is_unhealthy_in_one_line() -> None:
    if _this_database_url().startswith("postgres"):
        nowhere = "postgres://postgres@127.0.0.1:1/nowhere"  # no server on port 1
    elif _this_database_url().startswith("mysql"):
        nowhere = "mysql://root@127.0.0.1:1/nowhere"
    else:
        nowhere = "sqlite:////no-such-directory/jobs.sqlite3"
    result = manage_health(nowhere)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("CommandError: unhealthy: the jobs database cannot be read: ")


def show(job_id: object) -> str:
    out = StringIO()
    call_command("jobqueue", "show", str(job_id), stdout=out)
    return out.getvalue()


def test_show_says_when_no_live_worker_runs_the_job_s_kind() -> None:
    """A pending job whose kind no live worker runs (a task outside tasks.py, say) is
    flagged by ``show`` too, from the same fact as health and stats (issue 30, item 11)."""
    handle = tasks.noop.enqueue()
    worker(timedelta(seconds=1), kinds=["some.other.kind"])
    assert "no live worker runs kind" in show(handle.id)
    worker(timedelta(seconds=1), name="all")  # a live worker running every kind
    assert "no live worker runs kind" not in show(handle.id)
