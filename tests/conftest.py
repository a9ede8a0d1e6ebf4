"""Shared fixtures."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connections

from django_jobqueue.store import listening
from django_jobqueue.task.registry import Registry, registry
from tests import reset
from tests.helpers import WorkerThread


def pytest_configure(config: pytest.Config) -> None:
    """Transactional tests reset their databases the cheaper way (tests/reset.py)."""
    reset.install()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's, and before it drops the test databases, no other session left on
    them: the process's listener (``store.listening``) stopped; a runworker child or a
    server thread of the last tests may still be closing on a loaded machine (a CI run's
    DROP DATABASE failed on one such session). Waited for up to 10 s, then ended, saying
    which (a leak shows here, and in its own test)."""
    yield
    listening.stop_all()  # the process's listener (live pages, waits) would reconnect
    with django_db_blocker.unblock():
        for alias in connections:
            if connections[alias].vendor == "postgresql":
                _end_other_sessions(alias)
                # Closed here: in the browser tier the drop that follows left this one
                # open (its own close seemingly reached another connection object, with
                # Playwright's event loop in this thread), and it was the one session
                # the DROP DATABASE found, every run.
                connections[alias].close()


def _end_other_sessions(alias: str) -> None:
    others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    with connections[alias].cursor() as cursor:
        deadline = time.monotonic() + 10
        while True:
            cursor.execute(f"SELECT application_name, state, left(query, 80) {others}")
            left = cursor.fetchall()
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if left:
            print(
                f"sessions left on the test database at its teardown, ended: {left}",
                file=sys.stderr,
            )
            cursor.execute(f"SELECT pg_terminate_backend(pid) {others}")


@pytest.fixture
def task_registry() -> Iterator[Registry]:
    """The registry of kinds, restored when the test ends: tasks a test defines (or
    removes) do not leak into the next test."""
    with registry.isolated() as isolated:
        yield isolated


@pytest.fixture
def worker_thread() -> Iterator[Callable[..., WorkerThread]]:
    """Start workers in threads; they are stopped when the test ends."""
    started: list[WorkerThread] = []

    def start(**options: Any) -> WorkerThread:
        w = WorkerThread(**options).start()
        started.append(w)
        return w

    yield start
    for w in started:
        if w.thread.is_alive():
            w.stop()


@pytest.fixture(autouse=True)
def _fresh_async_thread_connections() -> None:
    """Close the database connections of asgiref's one thread for thread-sensitive
    ``sync_to_async`` calls (async views and readers run their ORM calls there, outside
    any request, so nothing closes them between tests): a test that terminated every
    other backend (tests/concurrency) left that thread a dead connection, and an async
    stream view two tiers later failed on it ("terminating connection due to
    administrator command")."""
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)
