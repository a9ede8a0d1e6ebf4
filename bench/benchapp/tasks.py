"""django_jobqueue tasks: a no-op for throughput, a stamp for pickup latency, and a job
of ten memoized no-op steps for the durable-steps measure."""

from __future__ import annotations

import logging
import os

from bench.stamps import write_stamp
from django_jobqueue import Context, task

# ``--run-logs lines``: each no-op logs two INFO lines, kept with its run.
LOGGED = os.environ.get("BENCH_RUN_LOGS") == "lines"
logger = logging.getLogger(__name__)


@task
def noop() -> None:
    """Does nothing, so a drain measures the queue and not the work (with ``--run-logs
    lines``, but for two log lines)."""
    if LOGGED:
        logger.info("no-op started")
        logger.info("no-op done")


@task
def stamp(label: str) -> None:
    """Records when it started, for the pickup-latency measure."""
    write_stamp(label)


def _same(i: int) -> int:
    return i


@task(takes_context=True)
def ten_steps(ctx: Context) -> int:
    """Ten memoized steps of no work: each costs its record's guarded UPDATE."""
    return sum(ctx.step(f"step {i}", _same, i) for i in range(10))
