"""Fixtures of the shards tier: two throw-away PostgreSQL clusters (``initdb``, the
chaos tier's ``pgserver``), each holding one queue database, added to DATABASES once
the test database exists and migrated; the tier's DATABASES setting; and runworker
children serving them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from django.test import override_settings

from django_jobqueue.models import WorkerHeartbeat
from tests.chaos import pgserver
from tests.concurrency.procs import STARTUP_TIMEOUT, WorkerProcess, WorkerProcesses, database_url
from tests.shards import layout

DATABASES = ["default", *layout.ALIASES, layout.REPLICA]


def _postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


@pytest.fixture(scope="session")
def clusters(
    django_db_setup: None, django_db_blocker: pytest.FixtureRequest
) -> Iterator[dict[str, pgserver.ThrowawayPostgres]]:
    """The two clusters, started and migrated; stopped and removed at the end."""
    if not _postgres():
        pytest.skip("several queue databases are PostgreSQL clusters here")
    if pgserver.unavailable() is not None:
        pytest.skip(str(pgserver.unavailable()))
    servers: dict[str, pgserver.ThrowawayPostgres] = {}
    try:
        for alias, port in zip(layout.ALIASES, layout.PORTS, strict=True):
            server = servers[alias] = pgserver.ThrowawayPostgres(port=port)
            server.init()
            server.start()
            server.create_database(layout.NAME)
            settings.DATABASES[alias] = {
                **connections["default"].settings_dict,
                "HOST": "127.0.0.1",
                "PORT": str(port),
                "NAME": layout.NAME,
                "USER": "postgres",
                "PASSWORD": "",
                "TEST": {"NAME": layout.NAME, "MIRROR": None},
            }
            with django_db_blocker.unblock():  # type: ignore[attr-defined]
                call_command("migrate", database=alias, verbosity=0)
        settings.DATABASES[layout.REPLICA] = {
            **settings.DATABASES[layout.ALIASES[0]],
            "TEST": {"NAME": layout.NAME, "MIRROR": layout.ALIASES[0]},
        }
        yield servers
    finally:
        for alias in [layout.REPLICA, *servers]:
            if alias in settings.DATABASES:
                connections[alias].close()
                del connections[alias]
                del settings.DATABASES[alias]
        for server in servers.values():
            server.close()


@pytest.fixture
def sharded(
    clusters: dict[str, pgserver.ThrowawayPostgres], transactional_db: None
) -> Iterator[dict[str, pgserver.ThrowawayPostgres]]:
    """The tier's DATABASES setting on for the test (the clusters by alias)."""
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "DATABASES": layout.queue_databases()}):
        yield clusters


class ShardWorkers(WorkerProcesses):
    """runworker children whose settings name both queue databases."""

    def start(self, *args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        shards = {alias: database_url(alias) for alias in layout.ALIASES}
        return super().start(*args, env={"JOBQUEUE_TEST_SHARDS": json.dumps(shards), **(env or {})})

    def close(self) -> None:
        """A supervisor's worker processes too: SIGTERM to each supervisor (it stops its
        children), and what is left is killed."""
        kids = [pid for proc in self.started for pid in proc.children()]
        for proc in self.started:
            if proc.alive():
                proc.send(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(max(0.1, deadline - time.monotonic()))
        for pid in kids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        super().close()


@pytest.fixture
def shard_workers(sharded: object, tmp_path: Path) -> Iterator[ShardWorkers]:
    procs = ShardWorkers(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


def serving(alias: str) -> int:
    """Worker processes registered (and not stopped) on queue database ``alias``."""
    return WorkerHeartbeat.objects.using(alias).filter(stopped_at__isnull=True).count()


def wait_for(
    condition: Callable[[], bool], *, timeout: float, what: str, procs: ShardWorkers
) -> None:
    """Until ``condition`` holds; else fail naming ``what`` and quoting the children."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(p.describe() for p in procs.started)
            pytest.fail(f"{what}: not within {timeout} s\n{logs}")
        time.sleep(0.1)


def wait_serving(procs: ShardWorkers, *, each: int = 1) -> None:
    """Until each queue database has ``each`` worker processes registered."""
    wait_for(
        lambda: all(serving(alias) >= each for alias in layout.ALIASES),
        timeout=STARTUP_TIMEOUT,
        what=f"{each} worker process(es) serving each queue database",
        procs=procs,
    )
