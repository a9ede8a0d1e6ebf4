"""The pgqueuer worker: ``python -m bench.pgq_worker [--batch-size B] [--max-concurrent-tasks C]``.

pgqueuer's quick-start shape: a QueueManager over one asyncpg connection, with a
no-op, a wait (bench/workloads.py) and a stamp entrypoint (async, as its examples
are). ``main`` does what ``pgq run bench.pgq_worker:create`` does (its logger at
INFO, ``pgqueuer.run`` on uvloop when installed) because that command fails before
starting in pgqueuer 1.6.0 with current typer: its ``--log-level`` parser hands a
str where the logger setup expects the enum.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import asyncpg  # type: ignore[import-untyped,unused-ignore]
import pgqueuer
from pgqueuer.core import logconfig
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries

from bench.stamps import write_stamp


@asynccontextmanager
async def create() -> AsyncIterator[QueueManager]:
    connection = await asyncpg.connect(os.environ["DATABASE_URL"])
    qm = QueueManager(Queries(AsyncpgDriver(connection)))

    @qm.entrypoint("noop")
    async def noop(job: Job) -> None:
        """Does nothing, so a drain measures the queue and not the work."""

    @qm.entrypoint("wait")
    async def wait(job: Job) -> None:
        """Awaits the payload's milliseconds, as an HTTP call does (the I/O measures)."""
        await asyncio.sleep(int(job.payload or b"0") / 1000)

    @qm.entrypoint("stamp")
    async def stamp(job: Job) -> None:
        """Records when it started, for the pickup-latency measure."""
        write_stamp((job.payload or b"").decode())

    try:
        yield qm
    finally:
        if not connection.is_closed():
            await connection.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.pgq_worker")
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--max-concurrent-tasks", type=int, default=None)
    p.add_argument("--dequeue-timeout", type=float, default=30.0)
    args = p.parse_args(argv)
    logconfig.setup_fancy_logger(logconfig.LogLevel.INFO)
    work = pgqueuer.run(
        create,
        batch_size=args.batch_size,
        max_concurrent_tasks=args.max_concurrent_tasks,
        dequeue_timeout=timedelta(seconds=args.dequeue_timeout),
    )
    try:
        import uvloop
    except ImportError:
        asyncio.run(work)
    else:
        uvloop.run(work)


if __name__ == "__main__":
    main(sys.argv[1:])
