"""Operator cancels: the running jobs an operator cancelled are told to stop."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from django_jobqueue import store

if TYPE_CHECKING:
    pass
from django_jobqueue.worker.services.base import DbCall, Running, Service

logger = logging.getLogger("django_jobqueue")


class CancelChecks(Service):
    """Tell running jobs that an operator asked to cancel them (``ctx.cancelled``)."""

    name = "cancel"

    def __init__(
        self, db: DbCall, *, interval: float, running: Mapping[uuid.UUID, Running]
    ) -> None:
        self.db = db
        self.interval = interval
        self.running = running

    def run(self) -> None:
        if not self.running:
            return
        wanted = self.db(partial(store.cancel_requested, job_ids=list(self.running)))
        for job_id in wanted or ():
            running = self.running.get(job_id)
            if running is not None and not running.ctx.cancelled.is_set():
                logger.info("cancel requested for job=%s", job_id)
                running.ctx.cancelled.set()

    def wake_in(self, since_run: float) -> float | None:
        return self.interval - since_run if self.running else None
