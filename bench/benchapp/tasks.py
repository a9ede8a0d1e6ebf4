"""django_jobqueue tasks: a no-op for throughput, a stamp for pickup latency, and a job
of ten memoized no-op steps for the durable-steps measure."""

from __future__ import annotations

from bench.stamps import write_stamp
from django_jobqueue import Context, task


@task
def noop() -> None:
    """Does nothing, so a drain measures the queue and not the work."""


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
