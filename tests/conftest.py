"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers import WorkerThread


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
