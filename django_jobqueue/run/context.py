"""The Context a running job sees: who it is, its history, its carry, and a cancel flag."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django_jobqueue import progress as progress_
from django_jobqueue.errors import SettleError, StepError
from django_jobqueue.loops import on_event_loop

# The logger every task's ``ctx.logger`` is a child of; a run captures it by default.
TASK_LOGGER = "django_jobqueue.task"

# Guards the making of a context's cancel flag, which two threads may ask for at once.
_FLAG_LOCK = threading.Lock()


class Context:
    """Handed to a task's run; everything on it is about this one run of one job."""

    # How a run's durable steps (its ``run.durable.StepBook``) are awaited by an async
    # task (``run.asyncsteps.AsyncSteps``) and start child workflows
    # (``run.children.Children``): set once by ``run.transactional``, which this module,
    # the vocabulary's, sits below; made on use, so a run that uses neither pays nothing.
    async_steps: ClassVar[Callable[[Any], Any]]
    child_steps: ClassVar[Callable[[Any], Any]]

    def __init__(
        self,
        *,
        job_id: uuid.UUID,
        kind: str,
        run_count: int,
        failure_count: int,
        carry: dict[str, Any] | None = None,
        history_loader: Callable[[], Sequence[Any]] | None = None,
        cancelled: threading.Event | None = None,
        parents_loader: Callable[[], Mapping[str, Any]] | None = None,
        batch_loader: Callable[[], Any] | None = None,
    ) -> None:
        self.job_id = job_id
        self.kind = kind
        self.run_count = run_count
        self.failure_count = failure_count
        # A stored carry that could not be decoded (not a dict) starts the run empty.
        self.carry: dict[str, Any] = dict(carry) if isinstance(carry, dict) else {}
        self._cancelled = cancelled
        self._history_loader = history_loader
        self._history: Sequence[Any] | None = None
        # A workflow step's parents' results and its batch, read on first use (the
        # loaders are the store's, handed in: this module knows no database).
        self._parents_loader = parents_loader
        self._parents: Mapping[str, Any] | None = None
        self._batch_loader = batch_loader
        self._batch: Any = None
        self.attachment: Any = None
        # The job as the claim handed it over (``store.Claimed``; set by ``for_job``), for
        # task wrappers that need more of it than the fields above (the Django Tasks
        # backend reads its enqueue time and claimant instead of the row).
        self._claimed: Any = None
        # Set by the worker for each run it starts (see ``atomic.InTransaction``).
        self._settle_now: Callable[[Any], None] | None = None
        # This run's durable steps (``run.durable.StepBook``), set with ``_settle_now``.
        self._steps: Any = None
        # Set while an ``async def`` task's run is awaited (``transactional.arun``): its
        # sync durable calls are refused on the loop. Not a running loop alone: a sync
        # task run by ``run_jobs`` in a thread that runs one (Playwright's, Jupyter's)
        # is still a sync run.
        self._async_run = False
        # The latest ctx.progress() value, and the one last written. A run starts with
        # none written: every settlement clears the columns (``PROGRESS_CLEARED``).
        self._progress: progress_.Progress | None = None
        self._progress_written: progress_.Progress | None = None
        # This run's log capture (``run.logs.Capture``; None: off), set by the pipeline:
        # a run the worker gives up on (its timeout) is settled with its lines so far.
        self._run_logs: Any = None
        # Set by the worker when it gives up on this run (its hard limit, a terminate)
        # and settles it itself: what the run comes to afterwards is dropped, and its
        # Sentry report with it (the worker reported the run when it gave up on it).
        self._given_up = False

    @classmethod
    def for_job(
        cls,
        job: Any,
        *,
        history_loader: Callable[[], Sequence[Any]] | None = None,
        parents_loader: Callable[[], Mapping[str, Any]] | None = None,
        batch_loader: Callable[[], Any] | None = None,
    ) -> Context:
        """The context for a claimed job's run (``job`` as ``store.claim_jobs`` returns it)."""
        ctx = cls(
            job_id=job.id,
            kind=job.kind,
            run_count=job.run_count,
            failure_count=job.failure_count,
            carry=job.carry,
            history_loader=history_loader,
            parents_loader=parents_loader,
            batch_loader=batch_loader,
        )
        ctx._claimed = job
        return ctx

    @property
    def logger(self) -> logging.Logger:
        """The task's logger, ``django_jobqueue.task.<kind>``: what it logs at
        ``RUN_LOGS``'s level or above is kept with the run and shown on its job page."""
        return logging.getLogger(f"{TASK_LOGGER}.{self.kind}")

    @property
    def cancelled(self) -> threading.Event:
        """Set when the run should stop (an operator's cancel, a shutdown, a timeout).
        Made on first use: most runs never look, and an Event (a Condition and its
        locks) per job was a tenth of the worker loop's own work on short jobs."""
        flag = self._cancelled
        if flag is None:
            with _FLAG_LOCK:
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                flag = self._cancelled
        return flag

    @property
    def claimed(self) -> Any:
        """The claimed job this run belongs to, as the worker holds it (None outside one)."""
        return self._claimed

    @property
    def history(self) -> Sequence[Any]:
        """The job's earlier journal entries, oldest first (loaded on first use)."""
        if self._history is None:
            self._history = list(self._history_loader()) if self._history_loader else []
        return self._history

    @property
    def parents(self) -> Mapping[str, Any]:
        """A workflow step's parents' results by step name (one query, on first use;
        empty for a plain job or a step without parents)."""
        if self._parents is None:
            self._parents = dict(self._parents_loader()) if self._parents_loader else {}
        return self._parents

    @property
    def batch(self) -> Any:
        """In a step of a batch, its ``BatchContext`` (``add`` a member, read
        ``members()``); None elsewhere."""
        if self._batch is None and self._batch_loader is not None:
            self._batch = self._batch_loader()
            self._batch_loader = None
        return self._batch

    def settle_now(self, result: Any = None) -> None:
        """Complete this run inside the transaction open on the jobs database, now.

        The job's completion (status, ``result``, journal entry) is written in the current
        ``transaction.atomic()`` block and commits with the task's own writes there, or
        not at all: a long task does its slow work first, then opens a short transaction
        for its writes and ends it with this. If the claim was lost meanwhile, raises
        ``ClaimLost``, which rolls the transaction back; let it propagate. Once the
        transaction commits, what the run returns is not stored.
        """
        if self._settle_now is None:
            raise SettleError(
                f"{self.kind}: settle_now() settles a run a worker started; this context "
                "belongs to none"
            )
        self._settle_now(result)

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        version: int | str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run ``fn(*args, **kwargs)`` once for this job, ever: its result (JSON) is
        recorded in the job by a guarded write, and any later run of the job gets the
        recorded result back without calling ``fn``. Inside a transaction (an atomic
        task) the step's writes commit with its record. The record keeps the step's
        position and ``version`` (not passed to ``fn``): a replay that meets another
        order or version raises ``StepDivergence``. See docs/howto/durable-steps.md."""
        return self._book("ctx.step()").step(name, fn, args, kwargs, version)

    def patched(self, change_id: str) -> bool:
        """True if this run takes the new code of ``change_id``: a job that started
        after the change, or that had not yet recorded anything past this point; False
        for a run recorded before it. Decided once per job and recorded, so every
        replay decides the same (``if ctx.patched("x"): new() else: old()``)."""
        return bool(self._book("ctx.patched()").patched(change_id))

    def deprecate_patch(self, change_id: str) -> None:
        """Mark ``change_id``'s old code path as removed once no job recorded before the
        change remains: the decision is still recorded (so a worker of the previous
        release, still calling ``patched``, takes the new path), and a run recorded
        before the change raises ``StepDivergence`` instead of running the new code."""
        self._book("ctx.deprecate_patch()").patched(change_id, deprecated=True)

    def sleep(self, duration: timedelta | float) -> None:
        """End this run for ``duration`` (no failure, the slot freed); the job runs again
        then, replays its recorded steps and carries on after this call."""
        self._book("ctx.sleep()").sleep(duration)

    def sleep_until(self, moment: datetime) -> None:
        """``sleep`` until an aware datetime."""
        self._book("ctx.sleep_until()").sleep_until(moment)

    def wait_for(
        self, name: str, *, key: str = "", timeout: timedelta | float | None = None
    ) -> Any:
        """Park the job until ``emit(name, key=key, …)``, then return that event's
        payload (an event emitted earlier, within EVENT_RETENTION, counts); None once
        ``timeout`` has passed without one (None: wait as long as it takes)."""
        return self._book("ctx.wait_for()").wait_for(name, key, timeout)

    @property
    def stream(self) -> Any:
        """This job's stream: ``ctx.stream.write(value)`` appends a JSON value that
        readers follow (``JobHandle.stream``, ``streams.stream_response``), each write
        stored at most once even when the job's run is replayed (``run.streams``; see
        docs/howto/durable-steps.md)."""
        return self._book("ctx.stream").stream

    def step_workflow(self, name: str, child: Any) -> Any:
        """Enqueue ``child`` (a workflow, or a signature: a job) once for this job, ever,
        park this job (its slot free) until the child has finished, and return its
        result: a job's result, or a workflow's sink steps' results by step name. A
        child that did not complete raises ``ChildFailed``. Recorded as a step: every
        replay finds the same child, then its recorded outcome. Cancelling this job
        cancels the child. See docs/howto/durable-steps.md#child-workflows."""
        return self._children("ctx.step_workflow()").step_workflow(name, child)

    async def astep_workflow(self, name: str, child: Any) -> Any:
        """``step_workflow`` for an ``async def`` task."""
        return await self._children("ctx.astep_workflow()", True).astep_workflow(name, child)

    def _children(self, what: str, asynchronous: bool = False) -> Any:
        """The run's ``run.children.Children`` (set with ``_steps``)."""
        return Context.child_steps(self._book(what, asynchronous=asynchronous))

    # --- async twins (``async def`` tasks; see ``run.asyncsteps``) ---------------------

    async def astep(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        version: int | str | None = None,
        **kwargs: Any,
    ) -> Any:
        """``step`` for an ``async def`` task: ``fn(*args, **kwargs)`` once for this job,
        ever, recorded and replayed as ``step``'s. A coroutine function is awaited on
        the loop; a plain function runs on the run's ORM thread in a transaction with its
        record (its writes commit with it). One step at a time: a step awaited inside
        another, or beside it (``asyncio.gather``), raises ``StepError``."""
        return await self._abook("ctx.astep()").astep(name, fn, args, kwargs, version)

    async def asleep(self, duration: timedelta | float) -> None:
        """``sleep`` for an ``async def`` task: the run ends (no failure, its place on the
        event loop freed) and the job runs again after ``duration``."""
        await self._abook("ctx.asleep()").asleep(duration)

    async def asleep_until(self, moment: datetime) -> None:
        """``asleep`` until an aware datetime."""
        await self._abook("ctx.asleep_until()").asleep_until(moment)

    async def await_event(
        self, name: str, *, key: str = "", timeout: timedelta | float | None = None
    ) -> Any:
        """``wait_for`` for an ``async def`` task: park the job until ``emit(name,
        key=key, …)`` and return the event's payload (None once ``timeout`` passed)."""
        return await self._abook("ctx.await_event()").await_event(name, key, timeout)

    async def apatched(self, change_id: str) -> bool:
        """``patched`` for an ``async def`` task."""
        return bool(await self._abook("ctx.apatched()").patched(change_id))

    async def adeprecate_patch(self, change_id: str) -> None:
        """``deprecate_patch`` for an ``async def`` task."""
        await self._abook("ctx.adeprecate_patch()").patched(change_id, deprecated=True)

    def _abook(self, what: str) -> Any:
        """The run's ``run.asyncsteps.AsyncSteps`` (set with ``_steps``)."""
        return Context.async_steps(self._book(what, asynchronous=True))

    def _book(self, what: str, *, asynchronous: bool = False) -> Any:
        if self._steps is None:
            raise StepError(
                f"{what} works in a run of a task that a worker (or run_jobs) started; "
                f"this context ({self.kind}) belongs to none",
                kind=self.kind,
            )
        if not asynchronous and self._async_run and on_event_loop():
            twin = {
                "ctx.step()": "ctx.astep()",
                "ctx.wait_for()": "ctx.await_event()",
                "ctx.step_workflow()": "ctx.astep_workflow()",
                "ctx.stream": None,  # no async twin (yet): its writes block on the store
            }.get(what, what.replace("ctx.", "ctx.a", 1))
            how = (
                f"there, use await {twin}, whose store calls do not block the loop"
                if twin
                else f"{what} works in a run of a sync task only"
            )
            raise StepError(
                f"{what} is called on an event loop (an async def task): {how}",
                kind=self.kind,
                job_id=self.job_id,
            )
        return self._steps

    def progress(self, done: float, total: float | None = None, note: str | None = None) -> None:
        """Report how far this run is: ``done`` of ``total`` (None: no known end), and
        what it is doing (``note``, up to 200 characters).

        Only held in memory, so call it as often as you like, from a sync or an
        ``async`` task: the worker writes the latest value about once a second, in one
        statement for all its runs, and the run's settlement clears it. A bad value
        raises ``InvalidProgress``, naming the argument."""
        self._progress = progress_.checked(done, total, note)

    @property
    def reported(self) -> progress_.Progress | None:
        """The progress this run last reported (None: none yet)."""
        return self._progress

    def unwritten_progress(self) -> tuple[bool, progress_.Progress | None]:
        """For the worker's progress writes: whether there is progress to write, and
        what."""
        current = self._progress
        return current is not self._progress_written, current

    def progress_written(self, value: progress_.Progress | None) -> None:
        """``value`` was written: the next write is only of a newer report."""
        self._progress_written = value

    def attach(self, value: Any) -> None:
        """Record JSON evidence on this run's journal entry; the last call wins."""
        self.attachment = value

    def __repr__(self) -> str:
        return f"<Context {self.kind} {self.job_id} run {self.run_count}>"
