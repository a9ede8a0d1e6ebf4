"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_jobqueue.task.registry import Registry, registry
from tests import reset
from tests.helpers import WorkerThread


def pytest_configure(config: pytest.Config) -> None:
    """Transactional tests reset their databases the cheaper way (tests/reset.py)."""
    reset.install()


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
