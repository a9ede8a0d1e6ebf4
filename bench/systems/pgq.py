"""pgqueuer: bench.pgq_worker processes (its ``run`` on a small factory), jobs counted
on its queue table.

pgqueuer deletes a job from its queue table when it logs the job finished, so the
rows left are the jobs not done.
"""

from __future__ import annotations

import sys

from bench.pg import Conn, read_settlements, scalar
from bench.phases import Settlements
from bench.systems.base import System


class PgQueuer(System):
    key = "pgqueuer"
    slug = "pgq"
    aliases = ("pgq",)
    packages = ("pgqueuer", "asyncpg")
    has_bulk = True  # Queries.enqueue with lists
    listen_prefix = None  # it LISTENs on the connection it also queries with

    def worker_argv(self, concurrency: int) -> list[str]:
        # pgqueuer's own defaults (batch of 10 per dequeue, no cap on tasks in flight),
        # what `pgq run` gives a user and its fastest shape for no-op jobs here; its
        # async tasks are not threads, so our --concurrency has no equivalent to map.
        return [sys.executable, "-m", "bench.pgq_worker"]

    def worker_note(self, concurrency: int) -> str:
        return (
            "python -m bench.pgq_worker (pgqueuer's defaults: batch size 10, no cap on "
            "concurrent tasks; pgqueuer.run on uvloop, as `pgq run` does: a QueueManager on "
            "one asyncpg connection, async entrypoints; LISTEN/NOTIFY wake-ups, 30 s dequeue "
            "timeout)"
        )

    def remaining(self, conn: Conn, n: int) -> int:
        return int(scalar(conn, "SELECT count(*) FROM pgqueuer"))

    def settlements(self, conn: Conn) -> Settlements | None:
        # Its log's 'successful' rows, ``created`` by the statement that logs a job done
        # (and deletes it from the queue): the settlement as far as the database shows.
        return read_settlements(conn, "pgqueuer_log", "created", "status = 'successful'")
