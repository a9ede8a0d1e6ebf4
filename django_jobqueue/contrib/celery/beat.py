"""Celery's ``beat_schedule`` entries as our periodic schedules (every worker runs
them, each tick enqueued once), and ``django_celery_beat``'s ``PeriodicTask`` rows as
``JOBQUEUE["PERIODIC"]`` entries."""

from __future__ import annotations

import json
import warnings
from typing import Any

from django_jobqueue.contrib.celery.exceptions import DifferentHere, Unsupported
from django_jobqueue.contrib.celery.schedules import cron_of, crontab


def register_beat(entries: dict[str, Any], *, timezone: Any = None) -> list[Any]:
    """Register each entry (``task``, ``schedule``, ``args``, ``kwargs``, ``options``)."""
    from django_jobqueue.task.periodic import periodic

    made = []
    for name, entry in (entries or {}).items():
        unknown = sorted(set(entry) - {"task", "schedule", "args", "kwargs", "options", "relative"})
        if unknown:
            raise Unsupported(f"beat entry {name!r}: {unknown[0]} is not supported",
                              option=unknown[0])  # fmt: skip
        if entry.get("options"):
            warnings.warn(
                f"beat entry {name!r}: options {sorted(entry['options'])} are not applied: "
                "a tick runs with its task's own queue and priority (set them on the task)",
                DifferentHere,
                stacklevel=2,
            )
        made.append(
            periodic(
                entry["task"],
                cron_of(entry["schedule"], entry=name),
                args=tuple(entry.get("args") or ()),
                kwargs=dict(entry.get("kwargs") or {}),
                timezone=timezone,
                name=name,
            )
        )
    return made


PERIODS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


def periodic_of_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ``django_celery_beat`` ``PeriodicTask`` row (as a dict: ``name``, ``task``,
    ``args``/``kwargs`` as JSON text, and ``crontab`` or ``interval`` as dicts of their
    fields) as a ``JOBQUEUE["PERIODIC"]`` entry; ``Unsupported`` naming what cannot be."""
    name = row["name"]
    if row.get("crontab"):
        fields = row["crontab"]
        cron = crontab(**{k: fields.get(k, "*") for k in
                          ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")}
                       ).expression  # fmt: skip
    elif row.get("interval"):
        interval = row["interval"]
        if interval["period"] not in PERIODS:
            raise Unsupported(f"periodic task {name!r}: period {interval['period']!r}",
                              option="interval")  # fmt: skip
        cron = cron_of(interval["every"] * PERIODS[interval["period"]], entry=name)
    else:
        raise Unsupported(
            f"periodic task {name!r}: only crontab and interval schedules map (solar and "
            "clocked ones do not: run a clocked one once with .apply_async(eta=...))",
            option="schedule",
        )
    entry: dict[str, Any] = {
        "task": row["task"],
        "cron": cron,
        "args": json.loads(row.get("args") or "[]"),
        "kwargs": json.loads(row.get("kwargs") or "{}"),
    }
    zone = (row.get("crontab") or {}).get("timezone")
    if zone:
        entry["timezone"] = str(zone)
    return entry
