"""What the harness must know about a system: how to start its worker, how to count.

The harness process never imports a system's code (each Django system needs its own
settings, and Django sets up once per process): enqueueing happens in
``bench.agent`` children, working in worker children. This side only builds their
command lines and reads the database.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from bench.pg import Conn
from bench.phases import Settlements


class System(ABC):
    key: ClassVar[str]  # the table's column title and the JSON key
    slug: ClassVar[str]  # database names and the bench.clients module
    aliases: ClassVar[tuple[str, ...]] = ()
    packages: ClassVar[tuple[str, ...]]  # distributions whose versions the report names
    settings_module: ClassVar[str | None] = None  # DJANGO_SETTINGS_MODULE of its children
    has_bulk: ClassVar[bool] = False  # a bulk enqueue API to measure
    has_big_table: ClassVar[bool] = False  # the 1M-pending-rows measure applies
    has_workflows: ClassVar[bool] = False  # the chord and chain measures apply
    listen_prefix: ClassVar[str | None] = None  # its worker's LISTEN, as pg_stat_activity shows
    ready_line: ClassVar[str | None] = None  # what each worker logs once it listens
    uses_postgres: ClassVar[bool] = True  # its workers' statements can be counted
    is_limit: ClassVar[bool] = False  # the raw limit, not a queue: runs only measures for it

    def ready(self, conn: Conn, workers: int) -> bool | None:
        """Whether ``workers`` workers are ready, for a system whose workers the database
        does not show (None: the harness looks at the database's sessions)."""
        return None

    @abstractmethod
    def worker_argv(self, concurrency: int) -> list[str]:
        """The command that runs one worker process until SIGTERM."""

    @abstractmethod
    def worker_note(self, concurrency: int) -> str:
        """How the worker is run, in words for the report."""

    @abstractmethod
    def remaining(self, conn: Conn, n: int) -> int:
        """Of the ``n`` jobs enqueued for a drain, how many are not done yet."""

    def settlements(self, conn: Conn) -> Settlements | None:
        """The drained jobs' settlement timestamps, as its store shows them (None: it
        shows none the harness can read)."""
        return None

    def add_filler(self, conn: Conn, *, total_pending: int, runnable: int) -> None:
        """Pad the table with pending rows no worker will take now (big-table measure)."""
        raise NotImplementedError(f"{self.key} has no big-table measure")
