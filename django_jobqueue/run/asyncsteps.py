"""Durable steps for ``async def`` tasks: ``ctx.astep``, ``ctx.asleep`` and
``ctx.await_event``, on the worker's event loop.

They are the sync ones (``run.durable.StepBook``), reached another way: what a step
record is, how a replay finds it, the sequence and versions it is checked against, the
guarded writes and the parking are the book's, called through ``sync_to_async`` (on
the run's own ORM thread, as the pipeline's other calls of an async run). Only the
step's own function is awaited on the loop, between the book's ``begin`` and
``finish``. A sleep or a wait raises ``Parked`` out of the book's thread as it does
out of a sync task, and the run ends without a failure, its slot free.

One step at a time: a step awaited while another runs (nested in it, or beside it in
``asyncio.gather``) raises ``StepError``: the sequence a replay checks is the order the
steps were met, which concurrent steps would not keep.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async

from django_jobqueue.run.durable import Begun, StepBook


class AsyncSteps:
    """One run's durable steps as an async task awaits them: its ``StepBook``'s."""

    def __init__(self, book: StepBook) -> None:
        self.book = book

    async def astep(
        self, name: Any, fn: Callable[..., Any], args: Any, kwargs: Any, version: Any
    ) -> Any:
        """``ctx.astep``: ``fn(*args, **kwargs)`` awaited once for the job, ever (a plain
        callable's value is taken as it is), recorded as ``ctx.step`` records."""
        book = self.book
        book._not_inside(f"ctx.astep({name!r})")  # on the loop: nested, or concurrent
        book.inside = str(name)[:200]  # held from here: a step beside this one is refused
        try:
            begun = await sync_to_async(book.begin)(name, fn, version, what="ctx.astep", held=True)
            if not isinstance(begun, Begun):
                return begun.result
            book.inside = begun.name
            began = time.monotonic()
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            await sync_to_async(book.finish)(begun, value, time.monotonic() - began)
            return value
        finally:
            book.inside = None

    async def asleep(self, duration: timedelta | float) -> None:
        """``ctx.asleep``: ``ctx.sleep`` from an async task."""
        self.book._not_inside("ctx.asleep()")
        await sync_to_async(self.book.sleep)(duration)

    async def asleep_until(self, moment: datetime) -> None:
        """``ctx.asleep_until``: ``ctx.sleep_until`` from an async task."""
        self.book._not_inside("ctx.asleep_until()")
        await sync_to_async(self.book.sleep_until)(moment)

    async def await_event(self, name: Any, key: Any, timeout: Any) -> Any:
        """``ctx.await_event``: ``ctx.wait_for`` from an async task."""
        self.book._not_inside(f"ctx.await_event({name!r})")
        return await sync_to_async(self.book.wait_for)(name, key, timeout)

    async def patched(self, change_id: Any, *, deprecated: bool = False) -> bool:
        """``ctx.apatched`` and ``ctx.adeprecate_patch``."""
        return bool(await sync_to_async(self.book.patched)(change_id, deprecated=deprecated))
