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
        "name": name,
        "kind": row["task"],
        "cron": cron,
        "args": json.loads(row.get("args") or "[]"),
        "kwargs": json.loads(row.get("kwargs") or "{}"),
    }
    zone = (row.get("crontab") or {}).get("timezone")
    if zone:
        entry["timezone"] = str(zone)
    return entry


def rows_of_django_celery_beat() -> list[dict[str, Any]]:
    """The enabled ``django_celery_beat`` ``PeriodicTask`` rows as dicts (``LookupError``
    when that app is not installed)."""
    from django.apps import apps

    label = "django_celery_beat"  # an optional app: named apart, unknown to the type stubs
    model: Any = apps.get_model(label, "PeriodicTask")
    rows = []
    for task in model.objects.filter(enabled=True).select_related("crontab", "interval"):
        row: dict[str, Any] = {
            "name": task.name, "task": task.task, "args": task.args, "kwargs": task.kwargs,
        }  # fmt: skip
        if task.crontab_id:
            c = task.crontab
            row["crontab"] = {
                "minute": c.minute, "hour": c.hour, "day_of_week": c.day_of_week,
                "day_of_month": c.day_of_month, "month_of_year": c.month_of_year,
                "timezone": str(c.timezone),
            }  # fmt: skip
        elif task.interval_id:
            row["interval"] = {"every": task.interval.every, "period": task.interval.period}
        rows.append(row)
    return rows


def periodic_setting(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``JOBQUEUE["PERIODIC"]`` entries of ``rows``, and a line per row that does not
    map (naming it and why)."""
    entries: list[dict[str, Any]] = []
    refused: list[str] = []
    for row in rows:
        try:
            entries.append(periodic_of_row(row))
        except Unsupported as exc:
            refused.append(str(exc))
    return entries, refused
