"""What callers hold: a ``JobHandle`` from enqueue, and the ``Pending`` view a merge sees."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Job, JournalEntry
    from .store import Disposition, NewJob
    from .task import Task


class JobHandle:
    """A job as enqueue left it; ``refresh()`` re-reads it, ``journal()`` lists its runs.

    A bulk enqueue hands over only what it wrote (id, kind, pending): ``job`` then reads
    the row on first use.
    """

    def __init__(self, job: Job | NewJob, disposition: Disposition) -> None:
        self._job = job
        self.id: uuid.UUID = job.id
        self.disposition: Disposition = disposition

    @property
    def job(self) -> Job:
        from .models import Job

        if not isinstance(self._job, Job):
            self.refresh()
        assert isinstance(self._job, Job)
        return self._job

    @property
    def kind(self) -> str:
        return self._job.kind

    @property
    def status(self) -> str:
        return self._job.status

    @property
    def result(self) -> Any:
        return self._job.result

    def refresh(self) -> JobHandle:
        from . import store

        self._job = store.get_job(job_id=self.id)
        return self

    def journal(self) -> list[JournalEntry]:
        from . import store

        return store.journal(job_id=self.id)

    def __repr__(self) -> str:
        return f"<JobHandle {self.kind} {self.id} {self.status} ({self.disposition})>"


@dataclass(frozen=True)
class Pending:
    """The pending job an incoming task may merge with."""

    job_id: uuid.UUID
    task: Task
    carry: dict[str, Any]
    run_count: int
    priority: int
    journal: Sequence[JournalEntry] = field(default_factory=list)
