"""django-tasks-db: ``db_worker`` processes, jobs counted on its DBTaskResult table."""

from __future__ import annotations

import sys

from bench.pg import Conn, read_settlements, scalar
from bench.phases import Settlements
from bench.systems.base import System

TABLE = "django_tasks_database_dbtaskresult"  # app label django_tasks_database
INTERVAL = "0"  # seconds between looks at an empty queue: the least it accepts


class TasksDb(System):
    key = "django-tasks-db"
    slug = "tasks_db"
    aliases = ("tasks-db", "tasksdb", "tasks_db", "django_tasks_db")
    packages = ("django-tasks-db", "django-tasks", "django")

    settings_module = "bench.djangoproject.settings_tasksdb"

    def worker_argv(self, concurrency: int) -> list[str]:
        # It runs one task at a time per process, so ``concurrency`` has no equivalent.
        return [
            sys.executable,
            "-m",
            "django",
            "db_worker",
            "--interval",
            INTERVAL,
            "--no-reload",
            "--no-startup-delay",
        ]

    def worker_note(self, concurrency: int) -> str:
        return (
            f"python -m django db_worker --interval {INTERVAL} --no-reload --no-startup-delay "
            "(one task at a time per process; no LISTEN, it polls: interval 0 polls again "
            "at once when the queue is empty, the shortest it allows)"
        )

    def remaining(self, conn: Conn, n: int) -> int:
        done = scalar(conn, f"SELECT count(*) FROM {TABLE} WHERE status = 'SUCCESSFUL'")  # noqa: S608 (a constant)
        return n - int(done)

    def settlements(self, conn: Conn) -> Settlements | None:
        # finished_at: set by the worker (timezone.now()) as it marks the result done.
        return read_settlements(conn, TABLE, "finished_at", "status = 'SUCCESSFUL'")
