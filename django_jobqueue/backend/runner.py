"""Running a Django task on a worker: the registry entry the worker finds it by.

The backend registers one ``DjangoTaskDef`` per task function when the task is
defined (Django validates every task with its backend as the module that defines it
is imported, which for a worker is when each app's ``tasks.py`` is autodiscovered).
The worker then claims, runs and settles these jobs like any other; nothing is ever
imported from a path read from the database.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from django_jobqueue import frames, store, validation
from django_jobqueue.backend import results
from django_jobqueue.backend.compat import (
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from django_jobqueue.backend.options import BackendOptions, Backoff, JobQueueTask, tier
from django_jobqueue.errors import StepDivergence
from django_jobqueue.rules.control import Pause, Permanent, RetryAfter
from django_jobqueue.rules.lifecycle import Policy, exhausted
from django_jobqueue.store import Claimed
from django_jobqueue.task.registry import UNSET, PayloadMismatch, TaskDef

if TYPE_CHECKING:
    from django_jobqueue.models import JournalEntry
    from django_jobqueue.run.context import Context

logger = logging.getLogger("django_jobqueue")

TRACEBACK_LIMIT = 20_000  # characters of a failed attempt's traceback kept in the journal

# The run's own failures; other BaseExceptions (GeneratorExit...) propagate, as in the executor.
FAILURES = (Exception, SystemExit, KeyboardInterrupt, asyncio.CancelledError)


class DjangoTaskDef(TaskDef):
    """A Django ``Task`` as a kind of job: the kind is the task's module path."""

    def __init__(self, task: Task[..., Any], *, options: BackendOptions, sender: type) -> None:
        self.task = task
        self.written_as = task.func
        self.options = options
        self.sender = sender  # the backend class: the sender of Django's task signals
        own = task if isinstance(task, JobQueueTask) else None
        self.max_attempts = own.max_attempts if own and own.max_attempts else options.max_attempts
        self.retry_backoff: Backoff | None = (own.backoff if own else None) or options.backoff
        self._set_options(
            kind=task.module_path,
            origin=f"django.tasks:{task.module_path}",
            queue=task.queue_name,
            priority=tier(task.priority),
            max_failures=UNSET if self.max_attempts is None else self.max_attempts,
            lease=own.lease if own else None,
            backoff=None,
            timeout=own.timeout if own else None,
        )
        params = list(inspect.signature(task.func).parameters.values())
        self.signature = inspect.Signature(params[1:] if task.takes_context else params)

    def __repr__(self) -> str:
        return f"<django task {self.kind}>"

    # --- payloads and results -----------------------------------------------------------

    def check_call(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Raise TypeError unless the arguments fit the task function's signature (an
        unexpected keyword named as such, with the parameter it may have meant)."""
        unexpected = validation.unexpected_keywords(self.signature, kwargs)
        if unexpected:
            raise TypeError(unexpected)
        self.signature.bind(*args, **kwargs)

    def positional_names(self, count: int) -> list[str | None]:
        """The parameter each of ``count`` positional arguments binds to (a ``*args``
        parameter's name for those it gathers; None past what the signature takes):
        Django Tasks store positional arguments without names, and redaction matches
        the ``REDACT`` words against these."""
        names: list[str | None] = []
        for param in self.signature.parameters.values():
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                names.extend([param.name] * max(0, count - len(names)))
            elif param.kind in (
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            ):
                names.append(param.name)
        return (names + [None] * count)[:count]

    def unpack(self, payload: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        args, kwargs = payload.get("args"), payload.get("kwargs")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise PayloadMismatch(f"payload {sorted(payload)} has no Django task args/kwargs")
        try:
            self.check_call(args, kwargs)
        except TypeError as exc:
            raise PayloadMismatch(
                f"payload no longer fits {self.kind}{self.signature}: {exc}"
            ) from exc
        return args, kwargs

    def task_for(self, payload: dict[str, Any], queue: str) -> Task[..., Any]:
        """The task as it was enqueued: the registered one (the very object when nothing
        differs) with the job's priority, queue, run_after and backend."""
        base = self.task
        priority = payload.get("priority", base.priority)
        backend = payload.get("backend", base.backend)
        raw_after = payload.get("run_after")
        run_after = parse_datetime(raw_after) if isinstance(raw_after, str) else None
        wanted = (priority, queue, backend, run_after)
        if wanted == (base.priority, base.queue_name, base.backend, base.run_after):
            return base
        try:
            return base.using(
                priority=priority, queue_name=queue, backend=backend, run_after=run_after
            )
        except (InvalidTask, InvalidTaskBackend):
            # The settings changed since enqueue (that queue or backend is gone).
            return base

    def result(
        self,
        job: results.JobView,
        entries: list[JournalEntry],
        *,
        running_since: datetime | None = None,
    ) -> TaskResult[..., Any]:
        return results.build(
            job=job,
            entries=entries,
            task=self.task_for(job.payload, job.queue),
            running_since=running_since,
            lease=self.policy().lease,
        )

    def policy(self) -> Policy:
        policy = super().policy()
        if self.max_attempts is None:
            return policy
        return dataclasses.replace(policy, max_failures=self.max_attempts)

    # --- a run --------------------------------------------------------------------------

    def execute(self, payload: dict[str, Any], ctx: Context) -> Any:
        args, kwargs = self.unpack(payload)
        started = timezone.now()
        # The claim handed over what the result needs; a first run has no earlier
        # attempts to read, so it costs no query at all.
        claimed = ctx.claimed
        if isinstance(claimed, Claimed) and claimed.created_at is not None:
            job = results.JobView.of_claim(claimed)
        else:
            job = results.JobView.of_job(store.get_job(job_id=ctx.job_id))
        entries = list(ctx.history) if ctx.run_count > 1 else []
        result = self.result(job, entries, running_since=started)
        task = result.task
        task_started.send(sender=self.sender, task_result=result)
        try:
            if task.takes_context:
                raw = task.call(StepsContext(task_result=result, jobqueue=ctx), *args, **kwargs)
            else:
                raw = task.call(*args, **kwargs)
            value = self._json(raw)
        except Pause:
            raise  # our own control signal: not a failure, not an ending
        except FAILURES as exc:
            replacement = self._failed(exc, result, ctx)
            if replacement is None:
                raise
            raise replacement from exc
        results.set_fields(
            result,
            status=TaskResultStatus.SUCCESSFUL,
            finished_at=timezone.now(),
            _return_value=value,
        )
        task_finished.send(sender=self.sender, task_result=result)
        return value

    def _json(self, raw: Any) -> Any:
        """The return value as Django stores it; TypeError naming the type if it cannot be."""
        try:
            value = normalize_json(raw)
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{self.kind} returned a {type(raw).__name__}, which is not JSON-serialisable "
                f"({exc}); a Django task's return value must be"
            ) from exc
        return value

    def _failed(
        self, exc: BaseException, result: TaskResult[..., Any], ctx: Context
    ) -> BaseException | None:
        """Record a failed attempt and send ``task_finished`` (inside the caller's
        ``except``, so receivers see the exception). Returns what the run raises instead
        of ``exc`` to choose its retry, or None to let ``exc`` take the policy's."""
        error = TaskError(
            exception_class_path=results.class_path(type(exc)),
            traceback=frames.trimmed(exc, TRACEBACK_LIMIT, own=self.source_file()),
        )
        ctx.attach(
            {
                results.ERROR_PATH: error.exception_class_path,
                results.ERROR_TRACEBACK: error.traceback,
            }
        )
        result.errors.append(error)
        now = timezone.now()
        # A divergence settles dead at once (run.executor): a retry would diverge again.
        final = isinstance(exc, Permanent | StepDivergence) or exhausted(
            ctx.failure_count + 1, self.policy()
        )
        decision: RetryAfter | None = None
        if not final and self.retry_backoff is not None:
            results.set_fields(result, status=TaskResultStatus.FAILED, finished_at=now)
            decision = self._ask_backoff(exc, result)
            final = decision is not None and decision.delay is None
        results.set_fields(
            result,
            status=TaskResultStatus.FAILED if final else TaskResultStatus.READY,
            finished_at=now if final else None,
        )
        task_finished.send(sender=self.sender, task_result=result)
        return decision

    def _ask_backoff(self, exc: BaseException, result: TaskResult[..., Any]) -> RetryAfter | None:
        """The task's backoff decision as a RetryAfter (its delay None: stop retrying), or
        None when the queue's backoff curve applies (backoff() raised or returned junk)."""
        assert self.retry_backoff is not None
        try:
            seconds = self.retry_backoff(exc, result)
        except Exception:
            logger.exception("%s: backoff() raised; the queue's backoff curve applies", self.kind)
            return None
        if seconds is None:
            return RetryAfter(None)
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            logger.error(
                "%s: backoff() returned %r, not seconds or None; the queue's backoff curve applies",
                self.kind,
                seconds,
            )
            return None
        return RetryAfter(timedelta(seconds=seconds))


# Frozen as Django's TaskContext is at run time (the stubs say it is not, and a dataclass
# cannot unfreeze its parent).
# (TaskContext is generic only in the stubs: not subscriptable at run time.)
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StepsContext(TaskContext):  # type: ignore[misc, type-arg]
    """Django's ``TaskContext`` for a run on this queue, with the queue's durable steps
    as on ``Context`` (``step``, ``sleep``, ``sleep_until``, ``wait_for``, ``patched``,
    ``deprecate_patch``, ``step_workflow``, ``stream``, and an ``async def`` task's
    twins: ``astep``, ``asleep``, ``asleep_until``, ``await_event``, ``apatched``,
    ``adeprecate_patch``, ``astep_workflow``): a Django task that sleeps or waits is
    parked, its result ``READY``, never ``FAILED``."""

    jobqueue: Context

    def step(self, name: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.jobqueue.step(name, fn, *args, **kwargs)

    def sleep(self, duration: timedelta | float) -> None:
        self.jobqueue.sleep(duration)

    def sleep_until(self, moment: datetime) -> None:
        self.jobqueue.sleep_until(moment)

    def wait_for(
        self, name: str, *, key: str = "", timeout: timedelta | float | None = None
    ) -> Any:
        return self.jobqueue.wait_for(name, key=key, timeout=timeout)

    def patched(self, change_id: str) -> bool:
        return self.jobqueue.patched(change_id)

    def deprecate_patch(self, change_id: str) -> None:
        self.jobqueue.deprecate_patch(change_id)

    def step_workflow(self, name: str, child: Any) -> Any:
        return self.jobqueue.step_workflow(name, child)

    @property
    def stream(self) -> Any:
        return self.jobqueue.stream

    async def astep(self, name: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return await self.jobqueue.astep(name, fn, *args, **kwargs)

    async def asleep(self, duration: timedelta | float) -> None:
        await self.jobqueue.asleep(duration)

    async def asleep_until(self, moment: datetime) -> None:
        await self.jobqueue.asleep_until(moment)

    async def await_event(
        self, name: str, *, key: str = "", timeout: timedelta | float | None = None
    ) -> Any:
        return await self.jobqueue.await_event(name, key=key, timeout=timeout)

    async def apatched(self, change_id: str) -> bool:
        return await self.jobqueue.apatched(change_id)

    async def adeprecate_patch(self, change_id: str) -> None:
        await self.jobqueue.adeprecate_patch(change_id)

    async def astep_workflow(self, name: str, child: Any) -> Any:
        return await self.jobqueue.astep_workflow(name, child)
