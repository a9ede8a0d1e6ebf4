"""What ``stats()`` and ``gauges()`` return: frozen, typed snapshots of the queue.

The metrics view, the admin dashboard and ``jobqueue stats`` read their attributes, so
a renamed field is an error mypy sees rather than a ``KeyError`` at run time.
``to_dict()`` gives the JSON shape ``jobqueue stats --json`` has always printed (the
same keys in the same order), for scripts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

WorkerState = Literal["alive", "gone"]


def _plain(value: Any) -> Any:
    """A snapshot's value as the dicts and lists ``to_dict()`` is made of."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True)
class PendingCount:
    """Runnable jobs of one kind in one queue."""

    kind: str
    queue: str
    count: int


@dataclass(frozen=True)
class PausedQueue:
    """A queue workers do not claim from, since when and by whom."""

    queue: str
    paused_at: datetime
    paused_by: str


@dataclass(frozen=True)
class WorkerInfo:
    """A worker's heartbeat row; ``alive`` when it beat within a minute and did not stop."""

    id: str
    host: str
    pid: int
    queues: list[str]
    kinds: list[str]
    concurrency: int
    started_at: datetime
    last_seen_at: datetime
    jobs_done: int
    state: WorkerState

    @property
    def alive(self) -> bool:
        return self.state == "alive"


@dataclass(frozen=True)
class KindRuns:
    """One kind's runs over the window: by outcome, p50/p95 seconds, failed share."""

    runs: int
    outcomes: Mapping[str, int]
    p50: float | None
    p95: float | None
    failure_rate: float


@dataclass(frozen=True)
class Gauges:
    """The queue now, without the journal: backlog, workflow steps waiting for their
    parents, claims, dead and cancelled jobs, paused queues, kinds no live worker serves,
    and workers."""

    at: datetime
    pending: tuple[PendingCount, ...]  # by kind, then queue
    pending_total: int
    oldest_pending_seconds: Mapping[str, float]  # by kind
    scheduled: int  # pending, not yet due
    waiting: int  # workflow steps waiting for their parents: never claimed, not backlog
    sleeping: int  # parked by a durable sleep (ctx.sleep), not yet due: not in scheduled
    waiting_for_events: int  # parked by ctx.wait_for, not yet released nor timed out
    claimed: int
    claimed_by_kind: Mapping[str, int]
    dead: Mapping[str, int]  # by kind
    cancelled: int
    paused_queues: tuple[PausedQueue, ...]
    unserved_kinds: tuple[str, ...]
    workers: tuple[WorkerInfo, ...]  # latest seen first

    def to_dict(self) -> dict[str, Any]:
        """Plain dicts and lists, keys in field order: what ``--json`` prints."""
        result: dict[str, Any] = _plain(self)
        return result


@dataclass(frozen=True)
class Stats(Gauges):
    """``Gauges`` and what the journal says over the window: kinds no worker claimed
    lately, and per kind the runs' outcomes and durations."""

    unclaimed_kinds: tuple[str, ...]
    runs: Mapping[str, KindRuns]  # by kind
    window_seconds: float
