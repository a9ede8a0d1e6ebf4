"""What a worker settles before it runs: its options checked against the settings and
the registry, its maintenance services, and the warnings an operator should see at start."""

from __future__ import annotations

import difflib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

from django.db import DatabaseError

from django_jobqueue import conf, routing, store, validation
from django_jobqueue.task.periodic import schedules
from django_jobqueue.task.registry import registry
from django_jobqueue.worker.services.base import DbCall, Maintenance, Running, Service, Timings
from django_jobqueue.worker.services.cancels import CancelChecks
from django_jobqueue.worker.services.heartbeat import Heartbeat
from django_jobqueue.worker.services.history import HistorySampler
from django_jobqueue.worker.services.leases import LeaseExtension
from django_jobqueue.worker.services.limits import LimitRefresh
from django_jobqueue.worker.services.partitions import Partitions
from django_jobqueue.worker.services.progress import ProgressWrites
from django_jobqueue.worker.services.recovery import Recovery
from django_jobqueue.worker.services.retention import Retention
from django_jobqueue.worker.services.scheduler import Scheduler
from django_jobqueue.worker.services.statistics import StatisticsKeeper
from django_jobqueue.worker.services.timeouts import Timeouts

logger = logging.getLogger("django_jobqueue")


def known_kinds(kinds: Sequence[str] | None) -> list[str]:
    """The kinds a worker runs: those given, each of which must be registered, or all."""
    unknown = sorted(set(kinds or []) - set(registry.kinds()))
    if unknown:
        raise ValueError(
            f"Unknown kind(s) {', '.join(unknown)}; known: {', '.join(registry.kinds())}"
        )
    return list(kinds) if kinds else registry.kinds()


def concurrency(given: int | None, settings: conf.Settings, *, name: str = "concurrency") -> int:
    """A worker's concurrency (or ``async_concurrency``): the setting's unless given."""
    if given is None:
        return int(getattr(settings, name))
    return validation.positive_int(given, name=name, error=ValueError)


def pool(given: str | None, settings: conf.Settings) -> str:
    """Where a worker runs its sync jobs: ``thread`` or ``process`` (the setting's
    ``POOL`` unless given)."""
    value = settings.pool if given is None else given
    if value not in conf.POOLS:
        raise ValueError(f"pool must be one of {', '.join(conf.POOLS)}, got {value!r}")
    return value


def soft_limits_ignored(kinds: Sequence[str], pool: str) -> list[str]:
    """The kinds whose ``soft_time_limit`` this worker cannot raise (only the process
    pool can raise an exception inside a running task): said at start, not silently
    skipped."""
    if pool == "process":
        return []
    return [k for k in kinds if (d := registry.find(k)) is not None and d.soft_time_limit]


def seconds(name: str, default: timedelta, given: float | None, *, allow_zero: bool) -> float:
    """A worker option in seconds (the setting's value unless given), checked."""
    value = default if given is None else given
    return validation.duration(
        value, name=name, error=ValueError, allow_zero=allow_zero
    ).total_seconds()


def warn_at_start(kinds: Sequence[str], queues: Sequence[str] = ()) -> None:
    """Say what makes a worker claim less than its operator expects: no kinds, limits
    on kinds that do not exist, and (from the database) what it will leave stranded."""
    if not kinds:
        logger.warning(
            "no task kinds are registered, so this worker will claim nothing: "
            "is each app's tasks.py in INSTALLED_APPS and importable?"
        )
    unknown = sorted(set(conf.get().limits) - set(registry.kinds()))
    if unknown:
        logger.warning(
            "JOBQUEUE['LIMITS'] names kind(s) no task is registered under, ignored: %s",
            ", ".join(unknown),
        )
    try:
        _warn_stranded(queues)
    except DatabaseError as exc:  # the loop reconnects; these warnings are not worth a stop
        logger.debug("could not look for stranded jobs at start: %s", exc)


def _warn_stranded(queues: Sequence[str]) -> None:
    """Pending jobs of kinds no task in this process has (a task moved out of tasks.py,
    or renamed), and ``--queue`` names nothing can ever be in (a typo)."""
    stranded = store.pending_kinds_except(kinds=registry.kinds())
    if stranded:
        shown = ", ".join(f"{kind} ({count})" for kind, count in list(stranded.items())[:20])
        more = f" and {len(stranded) - 20} more" if len(stranded) > 20 else ""
        logger.warning(
            "pending jobs of kind(s) no task is registered under here, which no worker "
            "running this code can run: %s%s; is each such task in an installed app's "
            "tasks.py (or imported by it), or was it renamed?",
            shown,
            more,
        )
    routed = {defn.queue for defn in registry}
    unknown = [q for q in queues if q not in routed]
    used = store.queues_in_use(queues=unknown)
    for queue in unknown:
        if queue in used:
            continue
        near = difflib.get_close_matches(queue, sorted(routed), n=1)
        logger.warning(
            "--queue %s: no registered task routes to it and no pending job is in it, so "
            "this worker will claim nothing from it%s (queues tasks route to: %s)",
            queue,
            f"; did you mean {near[0]}?" if near else "",
            ", ".join(sorted(routed)) or "none",
        )


def upkeep(
    db: DbCall,
    *,
    timings: Timings,
    settings: conf.Settings,
    running: Mapping[uuid.UUID, Running],
    caught_up: Callable[[], bool | None],
) -> list[Service]:
    """The services that keep the queue's tables: retention, the journal's partitions,
    the jobs table's statistics and vacuum, the run history's sampler."""
    found: list[Service] = [
        # Always: the events emit() sent are pruned past EVENT_RETENTION (one query).
        Retention(
            db,
            interval=timings.retention,
            keep=settings.retention,
            events=settings.event_retention,
            history=timedelta(days=settings.history_days),
            journal=settings.journal_retention,
        ),
        # Always: where the journal is one table it costs a catalog read per interval.
        Partitions(
            db,
            interval=timings.retention,
            ahead=settings.journal_partitions_ahead,
            analyze_every=settings.journal_analyze_interval,
        ),
        StatisticsKeeper(db, interval=timings.statistics, running=running, caught_up=caught_up),
    ]
    if settings.history_days:  # HISTORY_DAYS = 0: no history, so no sampler
        found.append(HistorySampler(db, interval=timings.history))
    return found


def services(
    db: DbCall,
    *,
    timings: Timings,
    settings: conf.Settings,
    running: Mapping[uuid.UUID, Running],
    recovery: Recovery,
    limits: LimitRefresh,
    worker_id: str,
    heartbeat_id: str,
    on_timeout: Callable[[Running], None],
    on_terminate: Callable[[Running, str], None],
    jobs_done: Callable[[], int],
    caught_up: Callable[[], bool | None],
) -> Maintenance:
    """Every maintenance service a worker runs, in the order they run each turn."""
    found: list[Service] = [
        limits,
        recovery,
        LeaseExtension(db, interval=timings.lease_check, worker_id=worker_id, running=running),
        CancelChecks(db, interval=timings.cancel_check, running=running, on_terminate=on_terminate),
        ProgressWrites(db, interval=timings.progress, worker_id=worker_id, running=running),
        Timeouts(
            interval=timings.timeout_check,
            running=running,
            on_timeout=on_timeout,
            atomic_warn_after=settings.atomic_warn_after,
        ),
        Heartbeat(db, interval=timings.heartbeat, worker_id=heartbeat_id, jobs_done=jobs_done),
    ]
    found += upkeep(db, timings=timings, settings=settings, running=running, caught_up=caught_up)
    periodic = schedules()
    # None: no scheduler, so no cost. With several queue databases the schedules and
    # their ticks live on HOME alone (each tick once across all of them): only the
    # workers serving it schedule.
    if periodic and routing.is_home():
        found.append(Scheduler(db, interval=timings.schedules, schedules=periodic))
    return Maintenance(found)
