"""Test helpers: run a worker in a thread or in bursts, wait for conditions, know the database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings

from django_jobqueue.worker import Worker


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
