"""Fixtures for the real-concurrency tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.concurrency.procs import WorkerProcesses


@pytest.fixture
def runworker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcesses]:
    """Start ``runworker`` subprocesses on the test database; all are killed at teardown.

    It depends on ``transactional_db`` so that the children are gone before the
    database is flushed (they would hold locks the flush waits for).
    """
    procs = WorkerProcesses(tmp_path)
    try:
        yield procs
    finally:
        procs.close()
