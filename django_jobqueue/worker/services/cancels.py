"""Operator cancels: the running jobs an operator cancelled are told to stop, and those
an operator terminated are stopped now (``on_terminate``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from django_jobqueue import store

if TYPE_CHECKING:
    pass
from django_jobqueue.worker.services.base import DbCall, Running, Service

logger = logging.getLogger("django_jobqueue")


class CancelChecks(Service):
    """Tell running jobs that an operator asked to cancel them (``ctx.cancelled``); hand
    those an operator terminated to ``on_terminate`` with who asked (a terminate sets
    the cancel request too, so only the jobs asked to cancel are looked up)."""

    name = "cancel"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        running: Mapping[uuid.UUID, Running],
        on_terminate: Callable[[Running, str], None] | None = None,
    ) -> None:
        self.db = db
        self.interval = interval
        self.running = running
        self.on_terminate = on_terminate

    def run(self) -> None:
        if not self.running:
            return
        wanted = self.db(partial(store.cancel_requested, job_ids=list(self.running)))
        if wanted and self.on_terminate is not None:
            self._terminate(wanted)
        for job_id in wanted or ():
            running = self.running.get(job_id)
            if running is not None and not running.ctx.cancelled.is_set():
                logger.info("cancel requested for job=%s", job_id)
                running.ctx.cancelled.set()

    def _terminate(self, wanted: set[uuid.UUID]) -> None:
        asked = self.db(partial(store.terminate_requested, job_ids=wanted)) or {}
        for job_id, (run_no, actor) in asked.items():
            running = self.running.get(job_id)
            if running is not None and running.job.run_count == run_no and not running.ended:
                assert self.on_terminate is not None
                self.on_terminate(running, actor)

    def wake_in(self, since_run: float) -> float | None:
        return self.interval - since_run if self.running else None
