"""What the admin's live pages read between renders: a stamp per page (a short text
that changes when what the page shows does; the poll of SQLite and MariaDB compares
it), and a workflow's step ids (which settlements its page's event stream passes on).
Each is one small indexed read."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.db.models import Count, Max, Sum

from django_jobqueue.models import Status
from django_jobqueue.store import sql


def _digest(*parts: Any) -> str:
    return hashlib.blake2s(repr(parts).encode(), digest_size=8).hexdigest()


def job_stamp(*, job_id: uuid.UUID | str) -> str:
    """Changes with the job's status, runs, failures, progress and cancel request."""
    row = (
        sql.jobs()
        .filter(id=job_id)
        .values_list(
            "status",
            "run_count",
            "failure_count",
            "progress_done",
            "progress_total",
            "progress_note",
            "cancel_requested",
            "visible_at",
        )
        .first()
    )
    return _digest(row)


def workflow_stamp(*, workflow_id: uuid.UUID | str) -> str:
    """Changes with its steps' statuses (a count per status) and their runs."""
    counts = (
        sql.jobs()
        .filter(workflow_id=workflow_id)
        .values_list("status")
        .annotate(n=Count("id"), runs=Sum("run_count"))
        .order_by("status")
    )
    progress = (
        sql.jobs()
        .filter(workflow_id=workflow_id, status=Status.CLAIMED)
        .aggregate(done=Max("progress_done"))
    )
    return _digest(list(counts), progress["done"])


def dashboard_stamp() -> str:
    """Changes with every settlement (the journal's newest entry), every new job (the
    newest id: ids are time-ordered) and every claim (the claimed count)."""
    entry = sql.journal_entries().order_by("-id").values_list("id", flat=True).first()
    newest = sql.jobs().order_by("-id").values_list("id", flat=True).first()
    claimed = sql.jobs().filter(status=Status.CLAIMED).count()
    return _digest(entry, newest, claimed)


def workflow_step_ids(*, workflow_id: uuid.UUID | str) -> set[str]:
    """Its steps' ids, as the notifications' payloads spell them."""
    return {str(i) for i in sql.jobs().filter(workflow_id=workflow_id).values_list("id", flat=True)}
