"""Each run's own log lines (``RunLog`` rows): written with the settlements that carry
them, read for the job page and ``jobqueue show --logs``, deleted with their job.

On PostgreSQL the settlement's own statement writes a run's lines (and deletes older
runs'), for the rows its guard let through (``dialects.postgresql.claiming``). Elsewhere
``written_with`` wraps a batch's settlement in one transaction (a savepoint in the
caller's) with its runs' lines, written by ``keep`` for the settlements the guard let
through: they commit with it or not at all. A batch with no lines (capture off, or runs
that logged nothing) is left as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import Q, QuerySet

from django_jobqueue import conf
from django_jobqueue.models import RunLog
from django_jobqueue.redaction import redact_text
from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.store import sql

T = TypeVar("T")


def _logs() -> QuerySet[RunLog]:
    return RunLog.objects.using(sql.alias())


def written_with(
    settlements: Sequence[Settlement],
    write: Callable[[], T],
    applied: Callable[[T], Sequence[bool]],
) -> T:
    """``write()`` (the batch's guarded settlement), and in its transaction the lines of
    each run it applied (``applied(result)``: per settlement, whether the guard let it
    through)."""
    if not any(s.logs is not None for s in settlements) or sql.dialect().settles_run_logs:
        return write()
    with transaction.atomic(using=sql.alias()):
        result = write()
        keep(settlements, applied(result))
    return result


def keep(settlements: Sequence[Settlement], applied: Sequence[bool]) -> int:
    """Write the lines of the applied runs that carry some, and delete the lines of each
    such job's runs before its last ``RUN_LOGS_RUNS``; in the caller's transaction.
    Returns the runs written."""
    kept = [s for s, ok in zip(settlements, applied, strict=True) if ok and s.logs is not None]
    if not kept:
        return 0
    _logs().bulk_create(
        [
            RunLog(
                job_id=s.job_id, run_no=s.run_no, lines=list(s.logs.lines), dropped=s.logs.dropped
            )
            for s in kept
        ]
    )
    runs = conf.get().run_logs_runs
    older = Q()
    for s in kept:
        if s.run_no > runs:
            older |= Q(job_id=s.job_id, run_no__lte=s.run_no - runs)
    if older:
        _logs().filter(older).delete()
    return len(kept)


@dataclass(frozen=True)
class Line:
    """One line as shown: its time (None if unreadable), level, logger and message, the
    message through ``redact_text``."""

    at: datetime | None
    level: str
    logger: str
    message: str


@dataclass(frozen=True)
class RunLines:
    """One run's lines as stored; ``shown()`` gives them as every page shows them."""

    run_no: int
    lines: list[dict[str, Any]]
    dropped: int

    def shown(self) -> list[Line]:
        """The lines, oldest first, each message redacted (``REDACT``)."""
        return [
            Line(
                at=_time(line.get("at")),
                level=str(line.get("level", "")),
                logger=str(line.get("logger", "")),
                message=redact_text(str(line.get("message", ""))),
            )
            for line in self.lines
        ]


def _time(stored: Any) -> datetime | None:
    """A line's time as stored (seconds since the epoch), None if it cannot be read."""
    if isinstance(stored, bool) or not isinstance(stored, int | float):
        return None
    try:
        return datetime.fromtimestamp(stored, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def of(*, job_id: uuid.UUID | str, limit: int | None = None) -> list[RunLines]:
    """A job's runs' lines, newest run first (``limit``: that many runs at most)."""
    rows = _logs().filter(job_id=job_id).order_by("-run_no", "-id")
    if limit is not None:
        rows = rows[:limit]
    return [
        RunLines(
            run_no=r.run_no,
            lines=[line for line in r.lines if isinstance(line, dict)]
            if isinstance(r.lines, list)
            else [],
            dropped=r.dropped,
        )
        for r in rows
    ]
