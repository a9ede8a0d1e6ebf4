"""What callers hold: a ``JobHandle`` (from enqueue, ``job()``, ``cancel()``,
``requeue()`` and ``history()`` pages), and a page of history."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django_jobqueue import routing, store
from django_jobqueue.models import Job
from django_jobqueue.progress import Progress, live
from django_jobqueue.task import waiting
from django_jobqueue.task.explain import Explanation, explain
from django_jobqueue.task.streaming import Stream

if TYPE_CHECKING:
    from django_jobqueue.models import Job, JournalEntry
    from django_jobqueue.store import Disposition, NewJob, WrittenJob


class JobHandle:
    """A job as it was read or written; ``refresh()`` re-reads it, ``journal()`` lists
    its runs.

    ``disposition`` says what an enqueue did (``inserted``, ``merged`` or ``reused``);
    it is None on a handle that no enqueue made. A bulk enqueue hands over only what
    it wrote (id, kind, pending): ``job`` then reads the row on first use. One
    enqueue hands over the values it wrote: ``job`` makes the model instance of them on
    first use, without a read.

    ``database`` is the queue database the job lives on (with several, every read
    and action of the handle goes there).
    """

    def __init__(
        self,
        job: Job | NewJob | WrittenJob,
        disposition: Disposition | None = None,
        *,
        database: str | None = None,
    ) -> None:
        self._job = job
        self.id: uuid.UUID = job.id
        self.disposition: Disposition | None = disposition
        self.database: str = routing.current() if database is None else database

    @property
    def job(self) -> Job:
        if isinstance(self._job, store.WrittenJob):
            self._job = self._job.model(self.database)
        elif not isinstance(self._job, Job):
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

    @property
    def queue(self) -> str:
        return self.job.queue

    @property
    def created_at(self) -> datetime:
        return self.job.created_at

    @property
    def finished_at(self) -> datetime | None:
        return self.job.finished_at

    @property
    def run_count(self) -> int:
        return self.job.run_count

    @property
    def failure_count(self) -> int:
        return self.job.failure_count

    @property
    def carry(self) -> dict[str, Any]:
        """The stored carry; empty when there is none, or when what is stored cannot be
        decoded (as the task's own ``ctx.carry`` then starts empty)."""
        carry = self.job.carry
        return dict(carry) if isinstance(carry, dict) else {}

    @property
    def progress(self) -> Progress | None:
        """The live progress its running job last reported (``ctx.progress``), as its
        worker last wrote it (about once a second) and as this handle read it
        (``refresh()`` re-reads); None when the job is not running or its run reported
        none (``progress.live``)."""
        job = self.job
        return live(job.status, job.progress_done, job.progress_total, job.progress_note)

    def refresh(self) -> JobHandle:
        with routing.using(self.database):
            self._job = store.get_job(job_id=self.id)
        return self

    def wait(self, timeout: float | None = None, *, interval: float | None = None) -> JobHandle:
        """Block until the job is finished (completed, dead or cancelled), then return
        this handle, refreshed. ``TimeoutError`` (naming the job and the timeout) when
        ``timeout`` seconds pass first; None waits as long as it takes.

        On PostgreSQL the wait is woken by the settlement's notification (through the
        process's one listener: no query while nothing happens, and it returns within
        milliseconds of the settlement's commit); on SQLite and MariaDB it polls, every
        ``interval`` seconds if given, else backing off from 50 ms to 1 s.
        """
        with routing.using(self.database):
            waiting.Waiter(self.id, self._finished, timeout, interval).run()
        return self

    async def await_result(self, timeout: float | None = None) -> Any:
        """``wait`` for async code (the event loop is never blocked: the reads run in a
        thread); returns the job's ``result``."""
        with routing.using(self.database):
            await waiting.Waiter(self.id, self._finished, timeout, None).arun()
        return self.result

    def _finished(self) -> bool:
        return waiting.finished(self.refresh().status)

    def rerun_from(self, step: str, *, actor: str = "") -> JobHandle:
        """Discard the job's recorded steps from ``step`` on and make it pending again:
        its earlier steps replay from their records, ``step`` and what follows run anew
        (after a bug fix). Refused while a run holds the job (``InvalidTransition``);
        ``InvalidStep`` if it recorded no such step. Journalled with ``actor``."""
        with routing.using(self.database):
            self._job = store.rerun_from(job_id=self.id, step=step, actor=actor)
        return self.refresh()

    def stream(self, *, after: int = 0, timeout: float | None = None) -> Stream:
        """Follow the job's stream (what its runs wrote with ``ctx.stream.write``): the
        items after offset ``after``, each a ``StreamItem(offset, value)``, in order and
        each once, with ``for`` or ``async for``, waiting for new ones until the job is
        finished and all are read, or until ``timeout`` seconds have passed (None: no
        limit; 0: only what is there). ``JobNotFound`` if the job is gone."""
        with routing.using(self.database):
            return Stream(self.id, after=after, timeout=timeout)

    def terminate(self, *, actor: str = "") -> JobHandle:
        """Stop this job now: a pending (or waiting) one is cancelled; a claimed one's
        worker stops its run within a second by the strongest means its pool has (its
        process-pool child killed, its coroutine cancelled, its thread abandoned) and
        settles it ``cancelled``, the journal naming ``actor`` and the means. Raises
        ``InvalidTransition`` for a completed or dead job."""
        with routing.using(self.database):
            self._job = store.terminate(job_id=self.id, actor=actor)
        return self

    def journal(self) -> list[JournalEntry]:
        with routing.using(self.database):
            return store.journal(job_id=self.id)

    def explain(self) -> Explanation:
        """Why the job is where it is now, in one line (a reason code, its message, the
        place where it can be changed and the action that lifts it): the job is read
        again first, as the answer is about now."""
        job = self.refresh().job
        with routing.using(self.database):
            return explain(job)

    def __repr__(self) -> str:
        how = f" ({self.disposition})" if self.disposition else ""
        return f"<JobHandle {self.kind} {self.id} {self.status}{how}>"


@dataclass(frozen=True)
class HistoryPage:
    """One page of ``history()``; pass ``next_cursor`` back as ``after`` for the next."""

    jobs: list[JobHandle]
    next_cursor: str | None
