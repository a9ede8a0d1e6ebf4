"""The raw limit (bench/rawlimit.py): not a queue, the yardstick beside them. Its
enqueue side is ``bench.clients.limit``; its drain worker ``bench.limit_worker``."""

from __future__ import annotations

import sys

from bench.pg import Conn, read_settlements, scalar
from bench.phases import Settlements
from bench.rawlimit import DONE
from bench.systems.base import System

BATCH = 100  # the drain's claim size when the harness starts its worker without options


class RawLimit(System):
    key = "limit"
    slug = "limit"
    aliases = ("raw", "raw-limit")
    packages = ("psycopg",)
    has_bulk = True
    is_limit = True

    def worker_argv(self, concurrency: int) -> list[str]:
        return limit_worker(BATCH)

    def worker_note(self, concurrency: int) -> str:
        return (
            "python -m bench.limit_worker --batch N (raw psycopg 3, no framework: a SKIP "
            "LOCKED claim of N, a no-op call a job, a guarded settlement with a journal row "
            "a job; each batch its own transaction; N = 10 and 100, 2 processes)"
        )

    def remaining(self, conn: Conn, n: int) -> int:
        return n - int(scalar(conn, DONE))

    def settlements(self, conn: Conn) -> Settlements | None:
        return read_settlements(conn, "limit_job", "finished_at", "status = 'done'")


def limit_worker(batch: int) -> list[str]:
    return [sys.executable, "-m", "bench.limit_worker", "--batch", str(batch)]
