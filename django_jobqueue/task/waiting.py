"""Waiting for a job to finish (``JobHandle.wait`` and ``await_result``).

On PostgreSQL the waiter subscribes to the settlements' channel of the process's one
listener (``store.listening``) and reads its job once at start, once after each
notification naming it (or after a reconnect, which may have missed one) and once at
the timeout: no query loop. Elsewhere, and while the listener cannot connect, it polls,
backing off from ``FIRST_POLL`` to ``LAST_POLL`` seconds (or every ``interval``).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async

from django_jobqueue.states import TERMINAL
from django_jobqueue.store import listening
from django_jobqueue.store.dialects.base.wakeups import SETTLED_CHANNEL

if TYPE_CHECKING:
    from django_jobqueue.store.listening import Note, Subscription

#: The first pause between two reads of a polling wait, and the longest (each is half
#: again the one before).
FIRST_POLL = 0.05
LAST_POLL = 1.0
#: While listening, how often a waiter whose listener lost its connection looks again.
UNLISTENED = 0.5


def checked(timeout: float | None, interval: float | None) -> None:
    """Refuse a timeout or interval that is not a number of seconds (clear errors)."""
    for name, value, least in (("timeout", timeout, 0.0), ("interval", interval, None)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise TypeError(f"{name} must be a number of seconds or None, not {value!r}")
        if (least is None and value <= 0) or (least is not None and value < least):
            bound = "greater than 0" if least is None else "0 or more"
            raise ValueError(f"{name} must be {bound} seconds, not {value!r}")


def timed_out(job_id: uuid.UUID, timeout: float | None) -> TimeoutError:
    return TimeoutError(f"job {job_id} did not finish within {timeout} seconds")


class Waiter:
    """One wait: ``done`` reads the job (True once it is finished)."""

    def __init__(
        self,
        job_id: uuid.UUID,
        done: Callable[[], bool],
        timeout: float | None,
        interval: float | None,
    ) -> None:
        checked(timeout, interval)
        self.job_id = job_id
        self.done = done
        self.timeout = timeout
        self.interval = interval
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.pause = interval or FIRST_POLL

    def left(self) -> float | None:
        return None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)

    def next_pause(self) -> float:
        """How long a polling wait sleeps now (within what is left of the timeout)."""
        pause = self.pause
        if self.interval is None:
            self.pause = min(self.pause * 1.5, LAST_POLL)
        left = self.left()
        return pause if left is None else min(pause, left)

    def names_me(self, note: Note | None) -> bool:
        """Whether ``note`` may concern the job: names it, or says "read again"."""
        return note is not None and (note.channel == "" or str(self.job_id) in note.payload)

    def listened(self, sub: Subscription) -> bool:
        """Wait on ``sub``: True once finished; False at the timeout (read last)."""
        if self.done():
            return True
        while True:
            left = self.left()
            if left == 0.0:
                return self.done()
            if not sub.live:  # the listener is reconnecting: look meanwhile
                note = sub.get(UNLISTENED if left is None else min(left, UNLISTENED))
                if self.done():
                    return True
                continue
            note = sub.get(left)
            if note is None:
                return self.done()
            if self.names_me(note) and self.done():
                return True

    def polled(self) -> bool:
        while not self.done():
            if self.left() == 0.0:
                return False
            time.sleep(self.next_pause())
        return True

    def run(self) -> None:
        """Block until finished; ``TimeoutError`` when the timeout passes first."""
        if listening.supported():
            with listening.subscribe([SETTLED_CHANNEL]) as sub:
                finished = self.listened(sub)
        else:
            finished = self.polled()
        if not finished:
            raise timed_out(self.job_id, self.timeout)

    async def arun(self) -> None:
        """``run`` for a coroutine: waits on the event loop, each read in a thread."""
        read = sync_to_async(self.done, thread_sensitive=True)
        if listening.supported():
            sub = await sync_to_async(listening.subscribe, thread_sensitive=False)(
                [SETTLED_CHANNEL]
            )
            with sub:
                finished = await self._alistened(sub, read)
        else:
            finished = await self._apolled(read)
        if not finished:
            raise timed_out(self.job_id, self.timeout)

    async def _alistened(self, sub: Subscription, read: Callable[[], object]) -> bool:
        if await read():  # type: ignore[misc]
            return True
        while True:
            left = self.left()
            if left == 0.0:
                return bool(await read())  # type: ignore[misc]
            wait = left if sub.live else (UNLISTENED if left is None else min(left, UNLISTENED))
            note = await sub.aget(wait)
            if note is None and sub.live:
                return bool(await read())  # type: ignore[misc]
            if (note is None or self.names_me(note)) and await read():  # type: ignore[misc]
                return True

    async def _apolled(self, read: Callable[[], object]) -> bool:
        import asyncio

        while not await read():  # type: ignore[misc]
            if self.left() == 0.0:
                return False
            await asyncio.sleep(self.next_pause())
        return True


def finished(status: str) -> bool:
    return status in TERMINAL
