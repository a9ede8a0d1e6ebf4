"""Live progress: what running jobs reported with ``ctx.progress``, written about once a
second, on its own.

``ctx.progress`` only holds the value in memory (the task never waits on the
database for it); this service, on the worker's loop thread, writes the latest value
of every run that reported something new since its last write, in one small
statement for all of them (``store.write_progress``), guarded by each run's epoch
(its run number, claimed by this worker), so a run that lost its claim writes
nothing. It is not the settlement's write: the settlement clears the progress
columns itself, so a finished job shows no stale value, and a write that comes after
it matches no row. Like the lease renewal it is a plain row update on the loop
thread: it waits only if another transaction holds the row (an atomic run that
recorded a durable step holds its own row until it commits, and the renewal waits
for it as well), never the task, which only ever touches memory.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from django_jobqueue import store
from django_jobqueue.worker.services.base import DbCall, Running, Service

if TYPE_CHECKING:
    from django_jobqueue.progress import Progress


class ProgressWrites(Service):
    """Write the progress running jobs reported since the last write, at most once per
    ``interval`` (a second by default: prompt for a person watching, one statement a
    second at most for the worker however often its tasks report)."""

    name = "progress"

    def __init__(
        self, db: DbCall, *, interval: float, worker_id: str, running: Mapping[uuid.UUID, Running]
    ) -> None:
        self.db = db
        self.interval = interval
        self.worker_id = worker_id
        self.running = running

    def run(self) -> None:
        runs: dict[uuid.UUID, int] = {}
        progress: dict[uuid.UUID, Progress | None] = {}
        for r in list(self.running.values()):
            changed, value = r.ctx.unwritten_progress()
            if changed and not r.ended:
                runs[r.job.id] = r.job.run_count
                progress[r.job.id] = value
        if not progress:
            return
        call = partial(store.write_progress, worker_id=self.worker_id, runs=runs, progress=progress)
        if self.db(call) is not None:
            for job_id, value in progress.items():
                still = self.running.get(job_id)
                if still is not None:
                    still.ctx.progress_written(value)

    def wake_in(self, since_run: float) -> float | None:
        return self.interval - since_run if self.running else None
