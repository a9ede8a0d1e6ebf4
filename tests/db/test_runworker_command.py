"""``manage.py runworker`` arguments: bad ones fail naming what is wrong; good ones run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_jobqueue import Status
from django_jobqueue.models import Job, WorkerHeartbeat
from django_jobqueue.worker.loop import Worker
from tests.concurrency.procs import database_url
from tests.helpers import manage_in_process, row_locking
from tests.taskapp import tasks

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cap", "tests.capped"], "--cap takes KIND=N"),
        (["--cap", "tests.capped=0"], "--cap tests.capped: N must be a positive integer, got 0"),
        (["--cap", "tests.capped=two"], "--cap tests.capped: N expected a whole number"),
        (["--concurrency", "0"], "--concurrency: must be a positive integer, got 0"),
        (["--max-jobs", "x"], "expected a whole number"),
        (["--shutdown-timeout", "-1"], "must not be negative"),
        (["--poll-interval", "soon"], "expected seconds"),
        (["--poll-interval", "0"], "--poll-interval: must be positive, got 0.0"),
        (["--processes", "0"], "--processes: must be a positive integer, got 0"),
        (["--processes", "many"], "--processes: expected a whole number"),
        (["--processes", "257"], "--processes: must be at most 256 or auto"),
        (["--max-jobs-per-child", "0"], "--max-jobs-per-child: must be a positive integer"),
        (["--max-memory-per-child", "lots"], "--max-memory-per-child: expected a whole number"),
        (["--pool", "prefork"], "--pool: invalid choice: 'prefork'"),
        (["--max-tasks-per-child", "0"], "--max-tasks-per-child: must be a positive integer"),
    ],
)
def test_bad_arguments_are_usage_errors_naming_the_argument(args: list[str], message: str) -> None:
    ran = manage_in_process("runworker", "--burst", *args)
    assert ran.returncode == 2
    assert message in ran.stderr
    assert "usage:" in ran.stderr


def test_a_bad_argument_exits_2_from_a_real_process() -> None:
    """The cases above parse in this process; one goes through a real ``runworker`` child,
    so the exit status and stderr are a process's own."""
    proc = subprocess.run(
        [sys.executable, "-m", "django", "runworker", "--burst", "--concurrency", "0"],
        cwd=ROOT,
        env={
            **_env(),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": "sqlite:///unused.sqlite3",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--concurrency: must be a positive integer, got 0" in proc.stderr


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("args", [["--kind", "no.such.kind"], ["--cap", "no.such.kind=1"]])
def test_unknown_kinds_are_refused(args: list[str]) -> None:
    with pytest.raises(CommandError, match=r"no\.such\.kind: no such task kind"):
        call_command("runworker", "--burst", *args)


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_burst_with_kind_and_queue_filters_runs_only_those_jobs() -> None:
    wanted = tasks.add.using(queue="mail").enqueue(1, 2)
    other_queue = tasks.add.enqueue(3, 4)
    other_kind = tasks.noop.using(queue="mail").enqueue()
    call_command("runworker", "--burst", "--queue", "mail", "--kind", tasks.add.kind, verbosity=0)
    assert Job.objects.get(id=wanted.id).status == Status.COMPLETED
    assert Job.objects.get(id=other_queue.id).status == Status.PENDING
    assert Job.objects.get(id=other_kind.id).status == Status.PENDING


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_max_jobs_stops_after_that_many() -> None:
    for n in range(5):
        tasks.add.enqueue(n, n)
    call_command("runworker", "--burst", "--max-jobs", "2", "--concurrency", "1", verbosity=0)
    assert Job.objects.filter(status=Status.COMPLETED).count() == 2
    assert Job.objects.filter(status=Status.PENDING).count() == 3


def _run_worker(settings: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "django", "runworker", "--burst", "--concurrency", "4"],
        cwd=ROOT,
        env={**_env(), "DJANGO_SETTINGS_MODULE": settings, "DATABASE_URL": database_url()},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stderr


@row_locking
@pytest.mark.django_db(transaction=True)
def test_runworker_logs_one_prefixed_line_per_settlement() -> None:
    handles = tasks.add.enqueue_many([{"a": n, "b": n} for n in range(40)])
    lines = [line for line in _run_worker("tests.settings").splitlines() if "settled job=" in line]
    assert sorted(line.split("settled job=")[1].split()[0] for line in lines) == sorted(
        str(h.id) for h in handles
    )
    # Every line carries the time and level, however many a turn settled at once.
    assert all(
        re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO settled job=", x) for x in lines
    )


@row_locking
@pytest.mark.django_db(transaction=True)
def test_runworker_adds_no_handler_when_the_project_logs_to_root() -> None:
    handles = tasks.add.enqueue_many([{"a": n, "b": n} for n in range(10)])
    lines = [
        line
        for line in _run_worker("tests.settings_rootlog").splitlines()
        if "settled job=" in line
    ]
    # Each settlement once, through the project's handler only (its lines are one record
    # per turn, so a record may hold several).
    ids = [part.split()[0] for line in lines for part in line.split("settled job=")[1:]]
    assert sorted(ids) == sorted(str(h.id) for h in handles)
    assert lines[0].startswith("ROOT INFO ")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a positive integer, got 0"),
        ({"poll_interval": 0}, "poll_interval must be positive, got 0"),
        ({"pool": "prefork"}, "pool must be one of thread, process, got 'prefork'"),
    ],
)
def test_a_worker_refuses_zero_concurrency_and_a_zero_poll_interval(
    options: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Worker(**options)


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_max_tasks_per_child_is_refused_without_the_process_pool_naming_it() -> None:
    with pytest.raises(CommandError, match="--max-tasks-per-child recycles process-pool"):
        call_command("runworker", "--burst", "--max-tasks-per-child", "5")
    assert not WorkerHeartbeat.objects.exists(), "no worker was started"


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_max_jobs_is_refused_beside_processes_naming_the_per_child_limit() -> None:
    with pytest.raises(CommandError, match="use --max-jobs-per-child"):
        call_command("runworker", "--processes", "2", "--max-jobs", "5")
    assert not WorkerHeartbeat.objects.exists(), "no worker process was started"
