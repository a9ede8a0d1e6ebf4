"""The public operations on jobs, queues and limits that ``django_jobqueue`` exports:
each a thin call of the store (or the task layer's limits) that hands back public
values (``JobHandle``, ``HistoryPage``, ``KindLimits``). Loaded on first use, like the
rest of the package's API (``__init__``'s ``__getattr__``), so it imports the store at
module level."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Unpack

from django.utils import timezone

from django_jobqueue import routing, store
from django_jobqueue.run import events
from django_jobqueue.task import limiting
from django_jobqueue.task.handle import HistoryPage, JobHandle
from django_jobqueue.task.limiting import UNCHANGED, KindLimits

if TYPE_CHECKING:
    from django_jobqueue.models import DeployMarker
    from django_jobqueue.store.reading import HistoryFilters
    from django_jobqueue.store.snapshot import Stats


def emit(name: str, *, key: str = "", payload: Any = None, database: str | None = None) -> int:
    """Send an event to the jobs waiting for it (``ctx.wait_for(name, key=key)``): it
    joins the caller's transaction on the jobs database, as ``enqueue`` does, and is
    kept for EVENT_RETENTION for a job that waits later; returns how many waiting jobs
    it released. A bad name, key or payload raises ``InvalidEvent``, nothing written.
    With several queue databases it goes to ``database``, else where its waiters are
    (the key's database under ROUTE "key", else every one)."""
    return events.emit(name, key=key, payload=payload, database=database)


@contextmanager
def on_job_database(job_id: uuid.UUID | str) -> Iterator[str]:
    """The block runs on the queue database holding ``job_id`` (with one database, on
    it without a look; a job none holds: the current one, whose read then says so)."""
    if not routing.several():
        yield routing.current()
        return
    try:
        key = store.as_uuid(job_id)
    except Exception:
        found = None
    else:
        found = store.database_of_job(key)
    with routing.using(found or routing.current()) as alias:
        yield alias


def cancel(job_id: uuid.UUID | str, *, actor: str = "") -> JobHandle:
    """Cancel a pending job, or ask the worker running a claimed one to stop it."""
    with on_job_database(job_id) as alias:
        return JobHandle(store.cancel(job_id=job_id, actor=actor), database=alias)


def requeue(job_id: uuid.UUID | str, force: bool = False, *, actor: str = "") -> JobHandle:
    """Send a dead or cancelled job (a completed one with ``force=True``) back to pending."""
    with on_job_database(job_id) as alias:
        return JobHandle(store.requeue(job_id=job_id, force=force, actor=actor), database=alias)


def run_now(job_id: uuid.UUID | str, *, actor: str = "") -> JobHandle:
    """Make a pending job that is scheduled for later runnable now."""
    with on_job_database(job_id) as alias:
        return JobHandle(store.run_now(job_id=job_id, actor=actor), database=alias)


def pause_queue(name: str, *, actor: str = "") -> bool:
    """Stop workers claiming from queue ``name`` (by their next turn); enqueue goes on.

    Returns True if the queue was running until now.
    """
    # On every queue database (a queue's jobs may be on any); all of them, not the first.
    changed = [store.pause_queue(queue=name, actor=actor) for _ in routing.each()]
    return any(changed)


def resume_queue(name: str) -> bool:
    """Let workers claim from queue ``name`` again; True if it was paused."""
    changed = [store.resume_queue(queue=name) for _ in routing.each()]
    return any(changed)


def mark(label: str, *, by: str = "", at: datetime | None = None) -> DeployMarker:
    """Set a marker (a deploy, a config change) on the dashboard's history charts:
    ``label`` (1 to 200 characters), ``by`` who set it, ``at`` when (default now).
    A bad label or author raises InvalidMarker and writes nothing. Markers are kept as
    long as the history (HISTORY_DAYS)."""
    return store.add_marker(label=label, by=by, at=at or timezone.now())


def job(job_id: uuid.UUID | str) -> JobHandle:
    """A handle on an existing job (``.status``, ``.result``, ``.journal()``)."""
    with on_job_database(job_id) as alias:
        return JobHandle(store.get_job(job_id=job_id), database=alias)


def history(**filters: Unpack[HistoryFilters]) -> HistoryPage:
    """A page of jobs matching the filters, oldest first (or ``newest_first``).

    Filters: ``kind`` and ``status`` (one or several), ``queue``, ``created_after``,
    ``created_before``, ``finished_after``, ``finished_before``; paging: ``limit``
    (default 100) and ``after`` (the previous page's ``next_cursor``). Keyset
    pagination on (created at, id), stable while rows come and go.
    """
    page = store.history(**filters)
    return HistoryPage(jobs=[JobHandle(row) for row in page.jobs], next_cursor=page.next_cursor)


def cleanup(
    finished_before: datetime,
    kind: str | None = None,
    status: str | Sequence[str] | None = None,
    *,
    dry_run: bool = False,
) -> int:
    """Delete finished jobs older than ``finished_before`` in short batches; returns the count.

    With ``dry_run``, only counts what would be deleted.
    """
    return store.cleanup(finished_before=finished_before, kind=kind, status=status, dry_run=dry_run)


def stats(window: timedelta = timedelta(hours=24)) -> Stats:
    """A snapshot of backlog, claims, failures, workers and run statistics over ``window``:
    a frozen ``Stats`` whose ``to_dict()`` is what ``jobqueue stats --json`` prints."""
    return store.stats(window=window)


def set_limit(
    kind: str,
    *,
    max_in_flight: int | None = UNCHANGED,
    rate_limit: str | None = UNCHANGED,
    actor: str = "",
    max_in_flight_per_key: int | None = UNCHANGED,
    rate_limit_per_key: str | None = UNCHANGED,
    ordered: bool | None = UNCHANGED,
    fair: bool | None = UNCHANGED,
) -> KindLimits:
    """Set a kind's limits at run time, its own and its per-key ones; they win over
    ``JOBQUEUE["LIMITS"]`` and the task's options. None lifts a limit; a limit not given
    stays as it is. Workers follow within seconds. Returns the limits now in force.
    """
    return limiting.set_limit(
        kind,
        max_in_flight=max_in_flight,
        rate_limit=rate_limit,
        actor=actor,
        max_in_flight_per_key=max_in_flight_per_key,
        rate_limit_per_key=rate_limit_per_key,
        ordered=ordered,
        fair=fair,
    )


def clear_limit(kind: str) -> bool:
    """Remove a kind's run-time limits: the settings and the task's options decide again.
    True if it had any."""
    return limiting.clear_limit(kind)


def limits() -> list[KindLimits]:
    """Every kind with a global limit in force (or a run-time limit set), by kind."""
    return limiting.limits(max_age=0)
