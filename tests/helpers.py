"""Test helpers: run a worker in a thread or in bursts, wait for conditions, know the database."""

from __future__ import annotations

import contextlib
import io
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.conf import settings
from django.core.management import get_commands, load_command_class
from django.db import connections

import django_jobqueue
from django_jobqueue.ids import uuid7, uuid7_floor
from django_jobqueue.models import JournalEntry
from django_jobqueue.store import Claimed
from django_jobqueue.store.dialects.base.settling import SettleRow
from django_jobqueue.worker.loop import Worker


def id_at(moment: datetime) -> uuid.UUID:
    """A job id as its enqueuer would have drawn it at ``moment``: a row given a
    ``created_at`` of the past gets an id of then, as every job's id is of its creation
    (the primary key is the order of creation; ``store.created_ids``)."""
    # The floor of its millisecond, with its 12 + 62 random bits (RFC 9562's rand_a, rand_b).
    return uuid.UUID(
        int=uuid7_floor(moment).int | random.getrandbits(12) << 64 | random.getrandbits(62)
    )


def journal_of(job_id: uuid.UUID | str) -> list[JournalEntry]:
    """A job's journal as users read it: through the public ``job(id).journal()``."""
    return django_jobqueue.job(job_id).journal()


def recorded(job_id: uuid.UUID | str) -> list[Any]:
    """A job's recorded durable steps, oldest first (``StepRecord`` rows)."""
    from django_jobqueue import store

    return store.step_records(job_id=uuid.UUID(str(job_id)))


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


class WorkerThread:
    """A Worker running in a background thread of the test process."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("poll_interval", 0.5)
        self.worker = Worker(**options)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-worker", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc
            raise

    def start(self) -> WorkerThread:
        self.thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.worker.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "worker did not stop"
        if self.error is not None:
            raise self.error


def run_burst(**options: Any) -> int:
    """Run a worker in this thread until nothing is claimable; returns jobs settled."""
    options.setdefault("poll_interval", 0.2)
    return Worker(burst=True, **options).run()


def is_postgres() -> bool:
    return "postgresql" in settings.DATABASES["default"]["ENGINE"]


postgres_only = pytest.mark.skipif(
    "postgresql" not in settings.DATABASES["default"]["ENGINE"], reason="PostgreSQL only"
)


def is_mysql() -> bool:
    return str(settings.DATABASES["default"]["ENGINE"]).endswith("mysql")


mysql_only = pytest.mark.skipif(not is_mysql(), reason="MySQL/MariaDB only")

# Tests of sessions waiting on one another's row locks: PostgreSQL and MySQL/MariaDB
# (SQLite has no row locks; its writers take turns).
# What a worker on threads says at start of the test app's tests.runaway (its soft time
# limit is raised only on the process pool): a warning of its own in every worker's
# start-up, which a test that wants a quiet worker sets apart.
SOFT_LIMIT_NOTICE = "soft_time_limit of tests.runaway:"


row_locking = pytest.mark.skipif(
    not (is_postgres() or is_mysql()), reason="PostgreSQL or MySQL/MariaDB only"
)


T = TypeVar("T")


def in_thread(fn: Callable[[], T]) -> Future[T]:
    """Run ``fn`` on a thread of its own (its own database connection, closed after)."""

    def wrapped() -> T:
        try:
            return fn()
        finally:
            connections.close_all()

    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(wrapped)
    pool.shutdown(wait=False)
    return future


def backend_pid() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT CONNECTION_ID()" if is_mysql() else "SELECT pg_backend_pid()")
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def statement_stuck(pid: int) -> bool:
    """MySQL/MariaDB: whether session ``pid`` has run one statement for over a second."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.processlist"
            " WHERE id = %s AND command = 'Query' AND time_ms >= 1000",
            [pid],
        )
        return cursor.fetchone() is not None


def waits_on_lock_held_by(pid: int, holder: int) -> bool:
    """Whether backend ``pid`` is blocked on a heavyweight lock that ``holder`` holds."""
    if is_mysql():
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM sys.innodb_lock_waits WHERE waiting_pid = %s AND blocking_pid = %s",
                [pid, holder],
            )
            if cursor.fetchone() is not None:
                return True
            # The view joins InnoDB's lock tables, which do not always list a wait (CI
            # runs on MariaDB timed out here, on a unique index's duplicate check and on a
            # foreign key's): the waiting transaction's own state may say it, and else a
            # test's statement of a few rows still running after a second is waiting.
            cursor.execute(
                "SELECT 1 FROM information_schema.innodb_trx"
                " WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'",
                [pid],
            )
            return cursor.fetchone() is not None or statement_stuck(pid)
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT wait_event_type, %s = ANY(pg_blocking_pids(pid)) "
            "FROM pg_stat_activity WHERE pid = %s",
            [holder, pid],
        )
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock" and bool(row[1])


@dataclass(frozen=True)
class Ran:
    """What ``manage.py`` left behind: its exit status and its two streams."""

    returncode: int
    stdout: str
    stderr: str


def manage_in_process(*argv: str) -> Ran:
    """``manage.py *argv`` as its process runs it (the command line parsed, a usage error
    exiting 2 with the usage, a ``CommandError`` printed and exiting 1, system checks,
    every connection closed at the end), here: a child's Django start-up costs seconds of
    CPU on a shared machine. Each command keeps one test of a real child process."""
    name = argv[0]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        command = load_command_class(get_commands()[name], name)
        try:
            command.run_from_argv(["manage.py", *argv])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        else:
            code = 0
    return Ran(code, out.getvalue(), err.getvalue())


def claimed(
    kind: str = "k",
    *,
    payload: dict[str, Any] | None = None,
    at: datetime | None = None,
    lease: timedelta = timedelta(minutes=1),
    **fields: Any,
) -> Claimed:
    """A job as a claim hands it to a worker, for the tests of what runs and settles it:
    its first run, claimed ``at`` (now by default) for ``lease``, nothing failed or
    carried yet; ``fields`` set any other of ``Claimed``'s."""
    now = at or datetime.now(UTC)
    values: dict[str, Any] = {
        "id": uuid7(),
        "kind": kind,
        "queue": "default",
        "payload": payload or {},
        "priority": 1,
        "visible_at": now,
        "run_count": 1,
        "failure_count": 0,
        "carry": {},
        "claimed_by": "host:1",
        "claim_expires_at": now + lease,
    }
    return Claimed(**(values | fields))


def run_program(program: str, **env: str) -> None:
    """Run ``program`` in a fresh interpreter from the repository's root (what a process
    imports at start, apart from this test run's): it must exit 0 and print only "ok"."""
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=Path(__file__).resolve().parents[1],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


SETTLED_AT = datetime(2026, 12, 5, 12, 0, 0, 123456, tzinfo=UTC)


def settlement_row(**changes: Any) -> SettleRow:
    """A settlement with every field set (a retry that an operator's cancel overrides,
    with a carry, an attachment and log lines), but for ``changes``."""
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "run_no": 3,
        "kind": "shop.tasks.charge",
        "status": "pending",
        "outcome": "retried",
        "visible_at": SETTLED_AT + timedelta(seconds=30),
        "failed": 1,
        "carry": {"cursor": 9},
        "result": None,
        "note": 'boom "quoted" \\ déjà',
        "attachment": {"traceback": "line 1\nline 2"},
        "started_at": SETTLED_AT - timedelta(seconds=2),
        "micros": 1_500_001,
        "worker": "host:1:abc",
        "recorded_at": SETTLED_AT,
        "claimed": "claimed",
        "c_status": "cancelled",
        "c_outcome": "cancelled",
        "c_note": "cancelled while retried",
        "shard": 5,
        "bucket": 8,
        "logs": [{"level": "INFO", "message": "hello"}],
        "dropped": 2,
        "logs_from": 1,
    }
    values.update(changes)
    return SettleRow(**values)
