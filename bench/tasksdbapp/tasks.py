"""Django Tasks tasks: a no-op for throughput and a stamp for pickup latency.

``django.tasks`` from Django 6 on, the ``django_tasks`` backport before it.
"""

from __future__ import annotations

try:
    from django.tasks import task  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    from django_tasks import task  # type: ignore[no-redef,unused-ignore]

from bench.stamps import write_stamp


@task
def noop() -> None:
    """Does nothing, so a drain measures the queue and not the work."""


@task
def stamp(label: str) -> None:
    """Records when it started, for the pickup-latency measure."""
    write_stamp(label)
