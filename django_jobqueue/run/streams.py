"""``ctx.stream``: what a run writes to its job's stream, each write at most once.

- **Inside a durable step** (``ctx.step``) a write is held until the step's record is
  written, and stored by that same guarded write: a step that raises stores none of
  its writes (its next run writes them again), and a replay, which returns the
  step's record without running it, writes nothing.
- **Outside any step** a write is stored at once, by a guarded write, and keyed by its
  position among the run's writes outside steps (0, 1, …). Code outside steps runs
  again in a later run of the job (after a retry, a sleep, a wait, a recovery): its
  write at a position the job already holds stores nothing, so the stream keeps the
  first run's item there. Such code must write the same things in the same order
  each time (as the code between steps must call the same steps); what may differ
  from run to run belongs in a step.

Readers see each stored item once, in the order written, offsets 1, 2, … without
gaps. A run that lost its claim stores nothing (``ClaimLost``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from django_jobqueue import conf, validation
from django_jobqueue.errors import InvalidStreamItem, StepError, StreamFull
from django_jobqueue.run.executor import output_problem
from django_jobqueue.store import streams as stored


class Book(Protocol):
    """What a writer reads of its run's durable steps (``run.durable.StepBook``): the
    job, this worker, the bound of one value, the step running now (None outside one)
    and the hook that makes the error of a lost claim."""

    job: Any
    worker_id: str
    limit: int
    inside: str | None

    @property
    def lost(self) -> Callable[[], Exception]: ...


class StreamWriter:
    """One run's ``ctx.stream``: its writes outside steps so far, the current step's
    held writes, and what the job's stream held when the run first wrote."""

    def __init__(self, book: Book) -> None:
        self.book = book
        self.outside = 0  # the next write outside steps' position
        self.held: list[stored.NewItem] = []  # the running step's writes
        self._count = -1  # the stream's items and bytes, read on the first write
        self._size = 0
        self._positions: set[int] = set()  # the outside positions the job holds

    def write(self, value: Any) -> None:
        """Append ``value`` (JSON) to the job's stream (see the module for when it is
        stored). A value that cannot be stored raises ``InvalidStreamItem``, a full
        stream ``StreamFull`` (MAX_STREAM_ITEMS, MAX_STREAM_BYTES); either writes
        nothing."""
        job = self.book.job
        _not_on_an_event_loop(job.kind)
        problem = output_problem(value, "the stream item", self.book.limit)
        if problem is not None:
            raise InvalidStreamItem(f"{job.kind}: {problem}", argument="value", job_id=job.id)
        size = len(validation.dumps(value))
        self._load()
        if self.book.inside is not None:
            self._within_bound(size)
            self.held.append(stored.NewItem(value, size, step=self.book.inside))
            return
        position = self.outside
        self.outside += 1
        if position in self._positions:
            return  # a replay's write: stored by an earlier run of the job
        self._within_bound(size)
        if not stored.append(
            job_id=job.id,
            run_no=job.run_count,
            worker_id=self.book.worker_id,
            item=stored.NewItem(value, size, write_no=position),
        ):
            raise self.book.lost()
        self._positions.add(position)
        self._count += 1
        self._size += size

    def take(self) -> list[stored.NewItem]:
        """The running step's writes, for its record's write (see ``stored``)."""
        held, self.held = self.held, []
        return held

    def stored(self, items: list[stored.NewItem]) -> None:
        """A step's writes were stored with its record."""
        self._count += len(items)
        self._size += sum(i.size for i in items)

    def _load(self) -> None:
        if self._count < 0:
            found = stored.totals(job_id=self.book.job.id)
            self._count, self._size = found.count, found.size
            self._positions = set(stored.positions(job_id=self.book.job.id))

    def _within_bound(self, size: int) -> None:
        """Refuse a write that would take the stream past its bounds, counting the
        running step's held writes."""
        job, settings = self.book.job, conf.get()
        count = self._count + len(self.held) + 1
        if count > settings.max_stream_items:
            raise StreamFull(
                f"{job.kind}: writing to job {job.id}'s stream would make {count:,} items, "
                f"over MAX_STREAM_ITEMS ({settings.max_stream_items:,})",
                job_id=job.id,
            )
        total = self._size + sum(i.size for i in self.held) + size
        if total > settings.max_stream_bytes:
            raise StreamFull(
                f"{job.kind}: writing {size:,} bytes to job {job.id}'s stream would make "
                f"{total:,} bytes of JSON, over MAX_STREAM_BYTES "
                f"({settings.max_stream_bytes:,})",
                job_id=job.id,
            )


def _not_on_an_event_loop(kind: str) -> None:
    """``ctx.stream.write`` stores by a blocking query: refused (``StepError``) on an
    event loop, where an ``async def`` task runs."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise StepError(
        f"ctx.stream works in a run of a sync task; {kind} is an async def task, whose "
        "runs have no stream yet",
        kind=kind,
    )
