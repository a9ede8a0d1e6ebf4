"""Durable steps for ``async def`` tasks: ``ctx.astep``, ``ctx.asleep`` and
``ctx.await_event``, on the worker's event loop.

They are the sync ones (``run.durable.StepBook``), reached another way: what a step
record is, how a replay finds it, the sequence and versions it is checked against, the
guarded writes and the parking are the book's, called through ``sync_to_async`` (on
the run's own ORM thread, as the pipeline's other calls of an async run). A step's
function is run one of two ways:

- a coroutine function is awaited on the loop, between the book's ``begin`` and
  ``finish``: its writes commit on their own, before its record (at least once until
  recorded, as a sync step outside a transaction);
- a plain function is run on the ORM thread, as ``sync_to_async`` runs it, inside a
  transaction with its record (as a sync step inside ``transaction.atomic()``): its
  database writes and its record commit together, exactly once.

A sleep or a wait raises ``Parked`` out of the book's thread as it does
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
from django.db import transaction

from django_jobqueue.errors import InvalidStep
from django_jobqueue.run.durable import Begun, StepBook


class AsyncSteps:
    """One run's durable steps as an async task awaits them: its ``StepBook``'s."""

    def __init__(self, book: StepBook) -> None:
        self.book = book

    async def astep(
        self, name: Any, fn: Callable[..., Any], args: Any, kwargs: Any, version: Any
    ) -> Any:
        """``ctx.astep``: ``fn(*args, **kwargs)`` once for the job, ever, recorded as
        ``ctx.step`` records: a coroutine function awaited on the loop, a plain function
        run on the ORM thread in a transaction with its record (see the module)."""
        book = self.book
        book._not_inside(f"ctx.astep({name!r})")  # on the loop: nested, or concurrent
        book.inside = str(name)[:200]  # held from here: a step beside this one is refused
        try:
            if not inspect.iscoroutinefunction(fn):
                return await sync_to_async(self._in_transaction)(name, fn, args, kwargs, version)
            begun = await sync_to_async(book.begin)(name, fn, version, what="ctx.astep", held=True)
            if not isinstance(begun, Begun):
                return begun.result
            book.inside = begun.name
            began = time.monotonic()
            value = await fn(*args, **kwargs)
            await sync_to_async(book.finish)(begun, value, time.monotonic() - began)
            return value
        finally:
            book.inside = None

    def _in_transaction(
        self, name: Any, fn: Callable[..., Any], args: Any, kwargs: Any, version: Any
    ) -> Any:
        """A plain function's step, on the ORM thread: run and recorded in one
        transaction (a lost claim, or a result that cannot be stored, rolls its writes
        back with it)."""
        book = self.book
        begun = book.begin(name, fn, version, what="ctx.astep", held=True)
        if not isinstance(begun, Begun):
            return begun.result
        book.inside = begun.name
        with transaction.atomic(using=book.alias):
            began = time.monotonic()
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()  # never awaited: no "was never awaited" warning
                raise InvalidStep(
                    f"{book.job.kind}: ctx.astep({begun.name!r}, …): fn returned an awaitable "
                    "without being a coroutine function (async def); pass the async def "
                    "function itself",
                    argument=begun.name,
                    job_id=book.job.id,
                )
            book.finish(begun, value, time.monotonic() - began)
        return value

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
