"""Fibonacci retry backoff with deterministic jitter.

The n-th failure waits ``min(base × (fib(n + 2) − 1), cap)``: base × 1, 2, 4, 7, 12, 20…
Jitter shortens that by up to ``jitter`` of itself, derived from the job id and the
attempt so a retry schedule is reproducible (no RNG) yet spread across jobs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from django_jobqueue import validation


def fib(n: int) -> int:
    """fib(1) = fib(2) = 1."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@dataclass(frozen=True)
class Backoff:
    """A task's retry curve; ``None`` fields fall back to the worker-wide settings."""

    base: timedelta | None = None
    cap: timedelta | None = None

    def __post_init__(self) -> None:
        for name in ("base", "cap"):
            value = getattr(self, name)
            if value is not None:
                # Seconds or a timedelta, as everywhere else; stored as a timedelta.
                value = validation.duration(value, name=f"Backoff {name}", error=ValueError)
                object.__setattr__(self, name, value)
        if self.base is not None and self.cap is not None and self.cap < self.base:
            raise ValueError(f"Backoff cap ({self.cap}) must not be below its base ({self.base})")


def _unit(job_id: object, attempt: int) -> float:
    digest = hashlib.sha256(f"{job_id}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def delay(
    failures: int, *, base: timedelta, cap: timedelta, jitter: float, job_id: object
) -> timedelta:
    """Delay before the retry that follows failure number ``failures`` (1-based)."""
    if failures < 1:
        return timedelta(0)
    # fib grows past any cap quickly; stop computing once it is clearly capped, and
    # compare in seconds first: base x fib(n) overflows timedelta long before n = 90.
    steps = fib(min(failures + 2, 90)) - 1
    if not base:
        full = timedelta(0)
    elif base.total_seconds() * steps >= cap.total_seconds():
        full = cap
    else:
        full = base * steps
    return full * (1 - jitter * _unit(job_id, failures))
