"""Lease extension: the leases of the jobs this worker is running, pushed forward."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timedelta
from functools import partial

from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.worker.services.base import DbCall, Running, Service


class LeaseExtension(Service):
    """Push out the lease of each running job once a third of it is used, so a run
    survives two missed renewals before its lease runs out. (Live progress is written
    on its own, about once a second: ``services.progress``.)"""

    name = "leases"

    def __init__(
        self, db: DbCall, *, interval: float, worker_id: str, running: Mapping[uuid.UUID, Running]
    ) -> None:
        self.db = db
        self.interval = interval
        self.worker_id = worker_id
        self.running = running

    def run(self) -> None:
        now = timezone.now()
        by_lease: dict[timedelta, list[Running]] = {}
        for r in self.running.values():
            if r.expires_at - now < r.lease * 2 / 3:
                by_lease.setdefault(r.lease, []).append(r)
        for lease, group in by_lease.items():
            until = now + lease
            runs = {r.job.id: r.job.run_count for r in group}
            done = self.db(
                partial(store.extend_leases, worker_id=self.worker_id, runs=runs, until=until)
            )
            if done is not None:
                for r in group:
                    r.expires_at = until

    def wake_in(self, since_run: float) -> float | None:
        if not self.running:
            return None
        now = timezone.now()
        due = min(r.expires_at - r.lease * 2 / 3 for r in self.running.values())
        return (due - now).total_seconds()
