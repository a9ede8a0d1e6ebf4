"""What ``jobqueue celery-check`` reports: for each registered Celery-style task and
the current app's settings, what maps, what differs and what is refused."""

from __future__ import annotations

from typing import Any

from django_jobqueue.contrib.celery import config
from django_jobqueue.contrib.celery.runner import CeleryTaskDef
from django_jobqueue.task.registry import registry

OK, DIFFERS, UNSUPPORTED = "maps", "differs", "unsupported"


def _task_lines(defn: CeleryTaskDef) -> list[tuple[str, str, str]]:
    task = defn.task
    name = defn.kind
    lines = [(name, OK, f"a job kind on queue {task.queue or 'by routing / default'}")]
    if task.time_limit or task.soft_time_limit:
        lines.append((name, DIFFERS, f"time_limit {defn.time_limit}, soft_time_limit "
                      f"{defn.soft_time_limit}: as Celery's on runworker --pool process; on "
                      "threads a run past time_limit is settled failed and abandoned, and "
                      "the soft limit is not raised"))  # fmt: skip
    if task.rate_limit:
        lines.append((name, DIFFERS, f"rate_limit {task.rate_limit}: holds across all workers"))
    if task.acks_late is False:
        lines.append((name, DIFFERS, "acks_late=False: acknowledged at settlement (at least once)"))
    if task.autoretry_for or task.retry_backoff:
        lines.append((name, OK, "autoretry_for / retry_backoff: Celery's rules, our retries"))
    return lines


def report() -> list[tuple[str, str, str]]:
    """(subject, verdict, detail) rows, tasks first, then settings."""
    rows: list[tuple[str, str, str]] = []
    for defn in registry:
        if isinstance(defn, CeleryTaskDef) and not defn.kind.startswith("celery."):
            rows += _task_lines(defn)
    conf = config.current().conf
    for key in sorted(conf):
        value: Any = conf[key]
        if key in config.IGNORED:
            rows.append((key, DIFFERS, config.IGNORED[key]))
        elif key in config.DEFAULTS:
            detail = "read by this queue"
            if key in ("task_time_limit", "task_soft_time_limit") and value:
                detail = "the tasks' limits when they set none (killed on --pool process)"
            rows.append((key, OK, detail))
        else:
            rows.append((key, UNSUPPORTED, "not read here: remove it or find its equivalent "
                         "in docs/howto/from-celery.md"))  # fmt: skip
    return rows
