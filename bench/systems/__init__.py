"""The systems under test, as the harness sees them (no imports of their code)."""

from __future__ import annotations

from bench.systems.base import System
from bench.systems.celery import CeleryRedis
from bench.systems.jobqueue import JobQueue
from bench.systems.jobqueue_tasks import JobQueueTasks
from bench.systems.limit import RawLimit
from bench.systems.pgq import PgQueuer
from bench.systems.tasks_db import TasksDb

SYSTEMS: tuple[System, ...] = (
    JobQueue(),
    JobQueueTasks(),
    TasksDb(),
    PgQueuer(),
    CeleryRedis(),
    RawLimit(),
)


def select(names: str | None) -> tuple[System, ...]:
    """The systems ``--only`` names (by key or alias), in the table's order."""
    if not names:
        return SYSTEMS
    wanted = {name.strip().lower() for name in names.split(",") if name.strip()}
    known = {alias: system for system in SYSTEMS for alias in (system.key, *system.aliases)}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise ValueError(
            f"--only: unknown system(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    chosen = {known[name].key for name in wanted}
    return tuple(system for system in SYSTEMS if system.key in chosen)


__all__ = ["SYSTEMS", "System", "select"]
