"""The worker's settlements off the beaten path: one refused with its batch, settled
alone; and the runs still going at shutdown, handed back."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import DatabaseError

from django_jobqueue import store
from django_jobqueue.rules.lifecycle import Policy, Settlement, released, settlement_refused
from django_jobqueue.run.executor import run_of
from django_jobqueue.run.logs import captured
from django_jobqueue.worker.dbguard import is_connection_error
from django_jobqueue.worker.services.base import Running

logger = logging.getLogger("django_jobqueue")


def settle_alone(
    s: Settlement, *, worker_id: str, failure_count: int, policy: Policy, now: datetime
) -> bool:
    """Settle one run by itself; if the database refuses it again, as a failed run
    saying why. No settlement can take the worker down; a connection error is raised
    for the worker's guard to handle (the run stays unsettled until the next turn)."""
    try:
        return store.settle(worker_id=worker_id, settlements=[s])[0]
    except DatabaseError as exc:
        if is_connection_error(exc):
            raise
        refused = settlement_refused(
            s, failure_count=failure_count, policy=policy, now=now, error=str(exc)
        )
    try:
        return store.settle(worker_id=worker_id, settlements=[refused])[0]
    except DatabaseError as exc:
        if is_connection_error(exc):
            raise
        logger.exception("job=%s: even its failure could not be settled", s.job_id)
        return False  # still claimed: recovered when its lease runs out


def handed_back(
    running: Iterable[Running], *, worker_id: str, now: datetime, note: str = "worker shut down"
) -> list[Settlement]:
    """The runs still going at shutdown (or buffered, never started), released: pending
    now, no failure counted, with how long each had run (none for one never started)."""
    return [
        released(
            run_of(
                r.job,
                worker=worker_id,
                started_at=r.started_at,
                duration=None if r.started_at is None else max(now - r.started_at, timedelta(0)),
                logs=captured(r.ctx._run_logs),  # what it logged before it was released
            ),
            now=now,
            note=note,
        )
        for r in running
    ]
