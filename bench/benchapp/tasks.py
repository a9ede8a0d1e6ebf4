"""django_jobqueue tasks: a no-op for throughput and a stamp for pickup latency."""

from __future__ import annotations

from bench.stamps import write_stamp
from django_jobqueue import task


@task
def noop() -> None:
    """Does nothing, so a drain measures the queue and not the work."""


@task
def stamp(label: str) -> None:
    """Records when it started, for the pickup-latency measure."""
    write_stamp(label)
