"""The heartbeat: this worker's row in the worker table, kept fresh."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from django_jobqueue import store

if TYPE_CHECKING:
    pass
from django_jobqueue.worker.services.base import DbCall, Service


class Heartbeat(Service):
    """Record that this worker is alive, and how many jobs it has settled."""

    name = "heartbeat"

    def __init__(
        self, db: DbCall, *, interval: float, worker_id: str, jobs_done: Callable[[], int]
    ) -> None:
        self.db = db
        self.interval = interval
        self.worker_id = worker_id
        self.jobs_done = jobs_done

    def run(self) -> None:
        self.db(partial(store.beat, worker_id=self.worker_id, jobs_done=self.jobs_done()))
