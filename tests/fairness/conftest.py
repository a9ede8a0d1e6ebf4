"""Fixtures of the fairness tier: the concurrency tier's ``runworker`` processes."""

from tests.concurrency.conftest import runworker

__all__ = ["runworker"]
