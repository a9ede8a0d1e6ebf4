"""Following a job's stream: ``JobHandle.stream(after=, timeout=)``, iterated with
``for`` in sync code and ``async for`` in async code.

A reader reads the items after its offset in order, and when there are none waits for
more: woken by a notification on PostgreSQL (through the process's one listener,
``store.listening``, subscribed when it first has to wait), polling elsewhere (from 50 ms,
backing off to 1 s). Either way it looks again at least once a second, which is how it
learns that the job finished: the iteration ends once the job is finished (completed,
dead or cancelled) and every item it wrote was read, or when ``timeout`` seconds have
passed (None: as long as the job runs). The last offset read (``Stream.offset``) is
where a later reader resumes.

Reads are plain queries on the jobs database: in a transaction of REPEATABLE READ
(MariaDB's default) they would see no item written after it began, so follow a
stream outside one.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from django_jobqueue import routing
from django_jobqueue.errors import InvalidArguments, JobNotFound
from django_jobqueue.states import TERMINAL
from django_jobqueue.store import listening, wakeups
from django_jobqueue.store import streams as stored

BATCH = 500  # items read per query
FIRST_PAUSE = 0.05  # polling: the first pause, in seconds, growing by half each time
LONGEST_PAUSE = 1.0  # and the longest, which a woken reader also waits at most


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One item of a job's stream: its offset (1, 2, …) and the value written."""

    offset: int
    value: Any


class Stream:
    """A job's stream followed from ``after``; iterate it once, with ``for`` or
    ``async for`` (see the module)."""

    def __init__(self, job_id: uuid.UUID, *, after: Any = 0, timeout: Any = None) -> None:
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            raise InvalidArguments(
                f"stream(after=…) takes an offset, an int of 0 or more, got {after!r:.80}",
                argument="after",
            )
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout < 0
        ):
            raise InvalidArguments(
                f"stream(timeout=…) takes seconds (0 or more) or None, got {timeout!r:.80}",
                argument="timeout",
            )
        self.job_id = job_id
        self.database = routing.current()  # the job's queue database: every look is there
        self.offset: int = after
        self.timeout: float | None = timeout
        self.finished = False  # the job finished and every item was read
        self._listening: listening.Subscription | None = None

    # --- one look, and one wait ------------------------------------------------------

    def _look(self) -> tuple[str, list[tuple[int, Any]]]:
        """The job's status, then the items after the offset (the status first, so a
        finished job's last items are among them)."""
        with routing.using(self.database):
            status = stored.status_of(job_id=self.job_id)
            if status is None:
                raise JobNotFound(f"No job with id {self.job_id}", job_id=self.job_id)
            return status, stored.read(job_id=self.job_id, after=self.offset, limit=BATCH)

    def _took(self, status: str, rows: list[tuple[int, Any]]) -> list[StreamItem]:
        if rows:
            self.offset = rows[-1][0]
        elif status in TERMINAL:
            self.finished = True
        return [StreamItem(offset, value) for offset, value in rows]

    def _wait(self, seconds: float) -> None:
        """Until this job's stream is notified (or the listener says read again), or
        ``seconds`` pass."""
        assert self._listening is not None
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            note = self._listening.get(left)
            if note is None or self._wakes(note):
                return

    async def _await(self, seconds: float) -> None:
        """``_wait`` on the event loop, holding no thread."""
        assert self._listening is not None
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            note = await self._listening.aget(left)
            if note is None or self._wakes(note):
                return

    def _wakes(self, note: listening.Note) -> bool:
        return note == listening.RESYNC or note.payload == str(self.job_id)

    def _subscribe(self) -> listening.Subscription:
        with routing.using(self.database):
            return listening.subscribe([wakeups.STREAM_CHANNEL])

    def _supported(self) -> bool:
        with routing.using(self.database):
            return listening.supported()

    def _close(self) -> None:
        if self._listening is not None:
            subscription, self._listening = self._listening, None
            subscription.close()

    def _left(self, deadline: float | None) -> float:
        return math.inf if deadline is None else deadline - time.monotonic()

    # --- sync ------------------------------------------------------------------------

    def __iter__(self) -> Iterator[StreamItem]:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        pause = FIRST_PAUSE
        try:
            while True:
                found = self._took(*self._look())
                yield from found
                if found:
                    pause = FIRST_PAUSE
                    continue
                left = self._left(deadline)
                if self.finished or left <= 0:
                    return
                if self._listening is None and self._supported():
                    self._listening = self._subscribe()
                    continue  # look again now that no notification can be missed
                if self._listening is not None:
                    self._wait(min(left, LONGEST_PAUSE))
                else:
                    time.sleep(min(left, pause))
                    pause = min(pause * 1.5, LONGEST_PAUSE)
        finally:
            self._close()

    # --- async -----------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._follow()

    async def _follow(self) -> AsyncIterator[StreamItem]:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        pause = FIRST_PAUSE
        look = sync_to_async(self._look)
        try:
            while True:
                found = self._took(*await look())
                for item in found:
                    yield item
                if found:
                    pause = FIRST_PAUSE
                    continue
                left = self._left(deadline)
                if self.finished or left <= 0:
                    return
                if self._listening is None and await sync_to_async(self._supported)():
                    self._listening = await asyncio.to_thread(self._subscribe)
                    continue
                if self._listening is not None:
                    await self._await(min(left, LONGEST_PAUSE))
                else:
                    await asyncio.sleep(min(left, pause))
                    pause = min(pause * 1.5, LONGEST_PAUSE)
        finally:
            self._close()

    def __repr__(self) -> str:
        return f"<Stream of job {self.job_id} after {self.offset}>"
