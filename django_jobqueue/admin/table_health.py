"""The dashboard's table-health panel: the queue tables' row estimates, dead rows, last
(auto)vacuum and analyze and sizes, and what holds back the vacuum horizon, with the
warnings ``store.table_health`` finds against HEALTH_HORIZON_AGE and HEALTH_DEAD_RATIO.
What the database does not show reads "not available"."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import DatabaseError

from django_jobqueue import conf, store
from django_jobqueue.admin.common import local
from django_jobqueue.formatting import fmt_age, fmt_bytes

NOT_AVAILABLE = "not available"


def panel() -> dict[str, Any]:
    """The panel's context; ``error``: why the readings could not be taken."""
    settings = conf.get()
    try:
        health = store.table_health(
            horizon_age=settings.health_horizon_age, dead_ratio=settings.health_dead_ratio
        )
    except DatabaseError as exc:
        return {"error": (str(exc).strip().splitlines() or [type(exc).__name__])[0]}
    return {
        "tables": [
            {
                "table": r.table,
                "rows": NOT_AVAILABLE if r.rows is None else f"{'' if r.exact else '~'}{r.rows:,}",
                "dead": NOT_AVAILABLE if r.dead is None else f"{r.dead:,}",
                "vacuum": _when(r.last_vacuum, r.last_autovacuum, known=r.tracks_vacuum),
                "analyze": _when(r.last_analyze, r.last_autoanalyze, known=r.tracks_analyze),
                "size": NOT_AVAILABLE if r.size_bytes is None else fmt_bytes(r.size_bytes),
            }
            for r in health.tables
        ],
        "holders": None if health.holders is None else [store.describe(h) for h in health.holders],
        "warnings": health.warnings,
        "notes": health.notes,
        "free": None if health.free_bytes is None else fmt_bytes(health.free_bytes),
        "horizon_age": fmt_age(health.horizon_age.total_seconds()),
        "dead_ratio": f"{health.dead_ratio:.0%}",
        "dead_min": f"{store.DEAD_MIN_ROWS:,}",
    }


def _when(manual: datetime | None, auto: datetime | None, *, known: bool) -> str:
    done = [(at, how) for at, how in ((manual, ""), (auto, " (auto)")) if at is not None]
    if not done:
        return "never" if known else NOT_AVAILABLE
    at, how = max(done)
    return f"{local(at)}{how}"
