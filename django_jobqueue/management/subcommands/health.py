"""``jobqueue health``: a container health check. Exit 0 healthy; 1 unhealthy (no fresh
heartbeat, a due job waiting too long, the database unreadable): restart or page;
``UNSERVED_EXIT`` when workers are fine but runnable jobs wait for a kind none of them
runs: a restart would not help. The reason is one line on stderr.

``--tables`` reports the queue tables' health instead (row estimates, dead rows, last
vacuum and analyze, sizes, what holds back the vacuum horizon), and exits 1 when any of
it is past its threshold (HEALTH_HORIZON_AGE, HEALTH_DEAD_RATIO)."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from django.utils import timezone

from django_jobqueue import conf, store
from django_jobqueue.formatting import fmt_age, fmt_bytes
from django_jobqueue.management.arguments import parse_age

NAME = "health"
HELP = (
    "Exit 0 if a worker's heartbeat is fresh (and, with --max-pending-age, no due job has "
    "waited longer); else exit 1 with the reason on one line (for container health "
    "checks); exit 3 if workers are alive but runnable jobs are of kinds no live worker runs."
)
# A health check's stderr is its one-line reason: the system checks' warnings
# (``manage.py check`` reports them) would bury it, and cost it time.
SKIP_CHECKS = True

# The exit status when workers are alive but runnable jobs are of kinds none of them
# runs (1 is unhealthy, 2 a bad command line): a probe can tell it apart.
UNSERVED_EXIT = 3


def arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "--tables",
        action="store_true",
        help="Report the queue tables' health (rows, dead rows, vacuum, analyze, size, "
        "what holds back the vacuum horizon) instead; exit 1 on a warning.",
    )
    p.add_argument(
        "--max-heartbeat-age",
        type=parse_age,
        default=timedelta(seconds=60),
        metavar="S",
        help="Unhealthy when no running worker beat within S seconds (or 2m...; default 60).",
    )
    p.add_argument(
        "--max-pending-age",
        type=parse_age,
        default=None,
        metavar="S",
        help="Also unhealthy when a job due to run (outside paused queues) has waited "
        "longer than S seconds (default: not checked).",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    if options["tables"]:
        tables(command)
        return
    now = timezone.now()
    max_beat: timedelta = options["max_heartbeat_age"]
    max_pending: timedelta | None = options["max_pending_age"]
    try:
        beat = store.freshest_heartbeat()
        due = store.oldest_due(now=now) if max_pending is not None else None
    except DatabaseError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CommandError(f"unhealthy: the jobs database cannot be read: {first}") from exc
    problems = []
    if beat is None:
        problems.append("no running worker has a heartbeat")
    elif now - beat > max_beat:
        problems.append(
            f"no worker heartbeat within {fmt_age(max_beat.total_seconds())} "
            f"(the freshest is {fmt_age((now - beat).total_seconds())} old)"
        )
    if max_pending is not None and due is not None and now - due > max_pending:
        problems.append(
            f"the oldest due pending job has waited {fmt_age((now - due).total_seconds())}"
            f", over {fmt_age(max_pending.total_seconds())}"
        )
    if problems:
        raise CommandError(f"unhealthy: {'; '.join(problems)}")
    unserved = store.unserved_kinds(now=now)
    if unserved:
        shown = ", ".join(f"{kind} ({count})" for kind, count in unserved.items())
        raise CommandError(
            f"unserved: runnable jobs of kind(s) no live worker runs: {shown}",
            returncode=UNSERVED_EXIT,
        )
    waited = (
        "" if due is None else f"; oldest due job waited {fmt_age((now - due).total_seconds())}"
    )
    assert beat is not None
    command.stdout.write(
        f"healthy: worker heartbeat {fmt_age((now - beat).total_seconds())} ago{waited}"
    )


def tables(command: BaseCommand) -> None:
    """Print each table's readings, what holds back the horizon, and the warnings."""
    settings = conf.get()
    try:
        health = store.table_health(
            horizon_age=settings.health_horizon_age, dead_ratio=settings.health_dead_ratio
        )
    except DatabaseError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CommandError(f"the jobs database cannot be read: {first}") from exc
    out = command.stdout
    out.write(f"{'table':<36} {'rows':>12} {'dead':>10} {'size':>10}  last vacuum / analyze")
    for r in health.tables:
        rows = "n/a" if r.rows is None else f"{'' if r.exact else '~'}{r.rows:,}"
        dead = "n/a" if r.dead is None else f"{r.dead:,}"
        size = "n/a" if r.size_bytes is None else fmt_bytes(r.size_bytes)
        out.write(
            f"{r.table:<36} {rows:>12} {dead:>10} {size:>10}  "
            f"{_latest(r.last_vacuum, r.last_autovacuum, known=r.tracks_vacuum)} / "
            f"{_latest(r.last_analyze, r.last_autoanalyze, known=r.tracks_analyze)}"
        )
    if health.holders is None:
        out.write("vacuum horizon: not available on this database")
    elif not health.holders:
        out.write(
            f"vacuum horizon: nothing has held it back for over "
            f"{fmt_age(health.horizon_age.total_seconds())}"
        )
    for note in health.notes:
        out.write(f"note: {note}")
    if health.warnings:
        raise CommandError("\n".join(f"warning: {w}" for w in health.warnings))


def _latest(manual: datetime | None, auto: datetime | None, *, known: bool) -> str:
    """The later of a manual and an automatic run, and which; "never", or "n/a" where
    the database does not record them."""
    done = [(at, how) for at, how in ((manual, ""), (auto, " (auto)")) if at is not None]
    if not done:
        return "never" if known else "n/a"
    at, how = max(done)
    return f"{timezone.localtime(at):%Y-%m-%d %H:%M}{how}"
