"""Fixtures for the fault campaigns: the concurrency tier's ``runworker`` starter."""

from tests.concurrency.conftest import runworker

__all__ = ["runworker"]
