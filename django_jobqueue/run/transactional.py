"""Exactly-once database effects: a run's completion written in the run's own transaction.

A task declared ``atomic`` runs inside ``transaction.atomic()`` on the jobs database, on
its slot thread's own connection. When it returns, its guarded settlement (status,
result, journal entry) is written in that same transaction, so the task's writes and
"this job is done" commit together or not at all. ``ctx.settle_now()`` does the same at
a point of the task's choosing, in whatever transaction the task holds open.

A settlement whose guard fails (the lease ran out and another worker took the job, or
the job was released) raises ``ClaimLost`` inside the transaction, which rolls it back,
the task's writes included, and the run is dropped: the run that holds the claim does
the work. A run that ends any other way (a failure, ``Pause``, ``Permanent``) rolls its
writes back and is settled by the worker loop, in a transaction of its own, like any run.

The worker loop keeps its own connection: lease renewal, cancel checks and shutdown never
wait on a run's transaction, except for the moment between a settlement and its commit.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from django_jobqueue import store, validation
from django_jobqueue.errors import ClaimLost, SettleError
from django_jobqueue.rules.lifecycle import NOTE_LIMIT, completed
from django_jobqueue.run import logs
from django_jobqueue.run.asyncsteps import AsyncSteps
from django_jobqueue.run.children import Children
from django_jobqueue.run.context import Context
from django_jobqueue.run.durable import Hooks, StepBook
from django_jobqueue.run.executor import (
    RunResult,
    aexecute,
    execute,
    failed_outright,
    output_problem,
    run_of,
)
from django_jobqueue.store.dialects import for_alias

if TYPE_CHECKING:
    from django_jobqueue.store import Claimed
    from django_jobqueue.task.registry import TaskDef

logger = logging.getLogger("django_jobqueue")

# How a context reaches its run's async steps and child workflows (see ``Context``).
Context.async_steps = AsyncSteps
Context.child_steps = Children

State = Literal["open", "staged", "committed", "lost"]


class InTransaction:
    """One run's completion, written in the transaction the run holds open on the jobs
    database, and known to be done only once that transaction commits."""

    __slots__ = (
        "alias",
        "began",
        "ctx",
        "ending",
        "job",
        "max_output_bytes",
        "settled_value",
        "state",
        "worker_id",
    )

    def __init__(
        self, *, alias: str, worker_id: str, job: Claimed, ctx: Context, max_output_bytes: int
    ) -> None:
        self.alias = alias
        self.worker_id = worker_id
        self.job = job
        self.ctx = ctx
        self.max_output_bytes = max_output_bytes
        self.began = time.monotonic()  # cheaper than a datetime on every run
        self.state: State = "open"
        self.settled_value: Any = None  # the result the completion stored
        # What the staged settlement ends the run as: its completion, or its job parked
        # for a sleep or a wait (``run.durable``).
        self.ending: Literal["completed", "paused"] = "completed"

    def settle_now(self, value: Any = None) -> None:
        """``ctx.settle_now()``: write this run's completion in the open transaction."""
        job = self.job
        conn = connections[self.alias]
        if self.state == "lost":
            raise self._lost()
        if self.state != "open":
            raise SettleError(
                f"{job.kind}: job {job.id} run {job.run_count} is already settled "
                "(settle_now() was called before)",
                kind=job.kind,
                job_id=job.id,
            )
        if not conn.in_atomic_block:
            raise SettleError(
                f"{job.kind}: settle_now() must be called inside "
                f"transaction.atomic(using={self.alias!r}), so that the completion commits "
                "with the task's own writes",
                kind=job.kind,
                job_id=job.id,
            )
        limit = self.max_output_bytes
        problems = [
            p
            for p in (
                output_problem(value, "the settle_now() result", limit),
                output_problem(self.ctx.attachment, "the ctx.attach() value", limit),
            )
            if p is not None
        ]
        if problems:
            raise SettleError(f"{job.kind}: " + "; ".join(problems), kind=job.kind, job_id=job.id)
        duration = timedelta(seconds=time.monotonic() - self.began)
        settlement = completed(
            run_of(
                job,
                worker=self.worker_id,
                started_at=timezone.now() - duration,
                duration=duration,
                attachment=self.ctx.attachment,
                logs=logs.current(),
            ),
            result=value,
            note=self.ctx._steps.summary() if self.ctx._steps is not None else "",
        )
        [applied] = store.settle(worker_id=self.worker_id, settlements=[settlement])
        if not applied:
            self.state = "lost"
            # Even if the task catches ClaimLost, the block it was written in rolls back.
            transaction.set_rollback(True, using=self.alias)
            raise self._lost()
        self.state = "staged"
        self.settled_value = value
        transaction.on_commit(self._committed, using=self.alias)

    def _committed(self) -> None:
        self.state = "committed"

    def pending(self, conn: BaseDatabaseWrapper) -> bool:
        """Whether the staged settlement still waits to commit with the transaction (a
        savepoint that rolled back took it, and its commit hook, with it)."""
        return any(entry[1] == self._committed for entry in conn.run_on_commit)

    def lose(self) -> ClaimLost:
        """A durable step's guarded write found the claim lost: nothing of this run may
        commit (the enclosing transaction, if any, rolls back)."""
        self.state = "lost"
        if connections[self.alias].in_atomic_block:
            transaction.set_rollback(True, using=self.alias)
        return self._lost()

    def parked(self) -> None:
        """A sleep or a wait wrote this run's paused settlement in the open transaction."""
        self.state = "staged"
        self.ending = "paused"
        transaction.on_commit(self._committed, using=self.alias)

    def _lost(self) -> ClaimLost:
        job = self.job
        return ClaimLost(
            f"{job.kind}: job {job.id} run {job.run_count} no longer holds its claim (its "
            "lease ran out and another worker took it, or it was released or cancelled): "
            "nothing of this run may commit",
            kind=job.kind,
            job_id=job.id,
        )

    def done(self, conn: BaseDatabaseWrapper) -> bool:
        """Whether the completion is written for good: committed, or staged in a
        transaction that encloses the run (a test's), whose fate it now shares."""
        if self.state == "committed":
            return True
        return self.state == "staged" and conn.in_atomic_block and self.pending(conn)


class _RollBack(Exception):
    """Leaves the run's transaction, rolling it back."""


def run(
    defn: TaskDef | None,
    job: Claimed,
    ctx: Context,
    *,
    alias: str,
    worker_id: str,
    max_output_bytes: int,
) -> RunResult:
    """Run one job on this thread: an atomic task in a transaction that its completion
    commits with, any other task as it is (``ctx.settle_now()`` works in both)."""
    settler, book = _begun(job, ctx, alias, worker_id, max_output_bytes)
    # An async def task run here (run_jobs awaits it on a loop of its own): its sync
    # durable calls are refused on that loop, as on the worker's.
    ctx._async_run = defn is not None and defn.asynchronous
    try:
        if defn is not None and defn.atomic:
            result = _run_atomic(defn, job, ctx, settler, connections[alias], max_output_bytes)
        else:
            result = execute(defn, job, ctx, max_output_bytes=max_output_bytes)
    finally:
        ctx._settle_now = ctx._steps = None
    return _ended(result, settler, book, alias)


async def arun(
    defn: TaskDef,
    job: Claimed,
    ctx: Context,
    *,
    alias: str,
    worker_id: str,
    max_output_bytes: int,
) -> RunResult:
    """``run`` for an ``async def`` task on the event loop: its durable steps
    (``ctx.astep`` and its twins) write through the same book, from the run's ORM
    thread, each write in a transaction of its own (an async task holds none), so a
    parking is committed by the time the run ends. ``settle_now`` is refused there."""
    settler, book = _begun(job, ctx, alias, worker_id, max_output_bytes)
    ctx._settle_now = None
    ctx._async_run = True
    try:
        result = await aexecute(defn, job, ctx, max_output_bytes=max_output_bytes)
    finally:
        ctx._steps = None
    return _ended(result, settler, book, alias)


def _begun(
    job: Claimed, ctx: Context, alias: str, worker_id: str, max_output_bytes: int
) -> tuple[InTransaction, StepBook]:
    """A run's settler and its durable steps' book, handed to its context."""
    settler = InTransaction(
        alias=alias, worker_id=worker_id, job=job, ctx=ctx, max_output_bytes=max_output_bytes
    )
    ctx._settle_now = settler.settle_now
    book = ctx._steps = StepBook(
        alias=alias,
        worker_id=worker_id,
        job=job,
        ctx=ctx,
        limit=max_output_bytes,
        hooks=Hooks(lost=settler.lose, parked=settler.parked),
    )
    return settler, book


def _ended(result: RunResult, settler: InTransaction, book: StepBook, alias: str) -> RunResult:
    """The run's result once its settler's state is known: lost, settled in its own
    transaction (completed, or parked by a sleep or a wait), or left to the worker."""
    if settler.state == "lost":
        result.lost = True
    elif settler.state != "open" and settler.done(connections[alias]):
        # What the job stores is the value settled, not what the run returned after.
        result = dataclasses.replace(
            result,
            settled=True,
            end=settler.ending,
            value=settler.settled_value,
            note="",
            parked=book.parking if settler.ending == "paused" else None,
        )
    elif settler.ending == "paused":
        result = dataclasses.replace(result, end="failed", note=PARKING_ROLLED_BACK)
    elif book.recorded:
        result.note = "\n".join(p for p in (result.note, book.summary()) if p)
    return result


PARKING_ROLLED_BACK = (
    "ctx.sleep() or ctx.wait_for() parked the job inside a transaction.atomic() block of "
    "the task's own, which rolled the parking back as the run ended through it: call them "
    "outside any transaction the task opens"
)


def _run_atomic(
    defn: TaskDef,
    job: Claimed,
    ctx: Context,
    settler: InTransaction,
    conn: BaseDatabaseWrapper,
    max_output_bytes: int,
) -> RunResult:
    result: RunResult | None = None
    try:
        with for_alias(conn.alias).atomic_run_mode(), transaction.atomic(using=conn.alias):
            result = execute(defn, job, ctx, max_output_bytes=max_output_bytes)
            if settler.ending == "paused" and settler.state == "staged":
                if settler.pending(conn):
                    return result  # parked for a sleep or a wait: its steps commit with it
                raise _RollBack  # a block of the task's own rolled its parking back
            if settler.state == "lost" or result.end != "completed":
                raise _RollBack
            if settler.state == "open":
                if conn.needs_rollback:
                    result = _failed(
                        result,
                        "the task swallowed a database error, so its "
                        "transaction can only roll back",
                    )
                    raise _RollBack
                try:
                    settler.settle_now(result.value)
                except ClaimLost:
                    raise _RollBack from None
    except _RollBack:
        pass
    except DatabaseError as exc:
        text = validation.clean_text(repr(exc), NOTE_LIMIT)
        if result is None:
            # The transaction could not begin (a dead connection): the task never ran.
            logger.warning("job=%s kind=%s: atomic run could not start: %s", job.id, job.kind, text)
            return failed_outright(job, exc, note=f"the run's transaction could not start: {text}")
        # The settlement or the commit failed (a lost connection, a serialization
        # failure): nothing is known to have committed, so the run is settled as failed,
        # through the guard, which refuses it if the commit did reach the server.
        logger.warning("job=%s kind=%s: atomic run could not commit: %s", job.id, job.kind, text)
        result = _failed(result, f"the run's transaction could not commit: {text}")
    assert result is not None
    return result


def _failed(result: RunResult, note: str) -> RunResult:
    return dataclasses.replace(result, end="failed", value=None, note=note)
