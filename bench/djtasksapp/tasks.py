"""The benchmark's tasks written against Django's Tasks API, run by JobQueueBackend.

The same no-op and stamp as the other systems' apps, so the drains and pickups
measure the django.tasks path through our queue against django-tasks-db's.
"""

from __future__ import annotations

from bench.stamps import write_stamp
from django_jobqueue.backend.compat import task


@task
def noop() -> None:
    """Does nothing, so a drain measures the queue and not the work."""


@task
def stamp(label: str) -> None:
    """Records when it started, for the pickup-latency measure."""
    write_stamp(label)
