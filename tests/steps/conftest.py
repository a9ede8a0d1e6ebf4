"""The durable-steps tests' fixtures: the concurrency tier's ``runworker`` children."""

from __future__ import annotations

from tests.concurrency.conftest import runworker

__all__ = ["runworker"]
