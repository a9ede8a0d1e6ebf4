"""django_jobqueue through Django's Tasks API: the same ``runworker`` and table as ours,
the jobs enqueued with ``noop.enqueue()`` of a ``django.tasks`` ``@task`` and run by
JobQueueBackend (TaskResult, signals and all)."""

from __future__ import annotations

from bench.pg import Conn
from bench.phases import Settlements
from bench.systems.base import System
from bench.systems.jobqueue import JobQueue

_OURS = JobQueue()


class JobQueueTasks(System):
    key = "django_jobqueue.backend"
    slug = "jobqueue_tasks"
    aliases = ("backend", "ours-tasks", "jobqueue-tasks", "jobqueue_tasks")
    packages = ("django-jobqueue", "django-tasks", "django", "psycopg")
    settings_module = "bench.djangoproject.settings_jobqueue_tasks"
    # django.tasks has no bulk enqueue; the big-table measure is ours, measured once.
    ready_line = _OURS.ready_line

    def worker_argv(self, concurrency: int) -> list[str]:
        return _OURS.worker_argv(concurrency)

    def worker_note(self, concurrency: int) -> str:
        return f"the same runworker as django_jobqueue: {_OURS.worker_note(concurrency)}"

    def remaining(self, conn: Conn, n: int) -> int:
        return _OURS.remaining(conn, n)

    def settlements(self, conn: Conn) -> Settlements | None:
        return _OURS.settlements(conn)
