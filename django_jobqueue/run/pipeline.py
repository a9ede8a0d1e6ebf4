"""One run's pipeline, from a claimed job to its settlement: the only one there is.

A worker's slot threads and ``testing.run_jobs`` both go through ``Pipeline``:
``run_one`` sends ``job_started``, runs the task (inside a transaction for an atomic
task, as it is otherwise), leaves the thread's connections clean, and decides the
settlement by the lifecycle's rules; ``to_write`` takes the branch of a run that
settled itself in its own transaction or lost its claim there; ``settled`` reports the
settlements once written. What differs between the two callers is only who writes the
settlements, when, and how many at once: the worker batches them in its loop thread's
next turn, the test kit writes each at once. That stays theirs.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from django_jobqueue import conf, sentry, signals, store, tracing, validation
from django_jobqueue.formatting import visible
from django_jobqueue.redaction import redact_text
from django_jobqueue.rules.lifecycle import NOTE_LIMIT, Policy, Settlement, failure
from django_jobqueue.run import announce, logs, transactional
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.context import Context
from django_jobqueue.run.executor import (
    RunResult,
    decide,
    error_text,
    execute,
    failed_outright,
    run_of,
)
from django_jobqueue.states import Outcome
from django_jobqueue.store import Claimed
from django_jobqueue.store import workflows as stored
from django_jobqueue.task.registry import policy_for, registry
from django_jobqueue.workflows.batch import batch_context

logger = logging.getLogger("django_jobqueue")


@dataclass(frozen=True, slots=True)
class Ended:
    """One run as it ended: what it came to, and the settlement left to write (None
    when there is none: it settled itself in its own transaction, or lost its claim)."""

    result: RunResult
    settlement: Settlement | None


@dataclass
class Pipeline:
    """How the runs of one worker (or one ``run_jobs`` call) are run and settled: its
    id (the claims' holder), the jobs database and the bound on a run's output."""

    worker_id: str
    alias: str
    max_output_bytes: int
    # The settings the runs read (RUN_LOGS...), when the pipeline is made.
    settings: conf.Settings = field(default_factory=conf.get, repr=False)
    # Whether Sentry reports the runs (``sentry_sdk.init`` comes before a worker starts).
    sentry_on: bool = field(default_factory=sentry.active, repr=False)
    # Each kind's policy, resolved once (settings are read when the pipeline is made).
    _policies: dict[str, Policy] = field(default_factory=dict, repr=False)
    # The trace spans of runs whose settlement is not written yet (only when tracing),
    # by job and run: ended by ``settled`` (or ``to_write``), from the loop's thread.
    _spans: dict[tuple[uuid.UUID, int], Any] = field(default_factory=dict, repr=False)

    def policy(self, kind: str) -> Policy:
        policy = self._policies.get(kind)
        if policy is None:
            policy = self._policies[kind] = policy_for(kind)
        return policy

    def context(self, job: Claimed) -> Context:
        """The context a claimed job's run is given; it reads its journal (and a step
        its parents' results and its batch) lazily."""
        history = partial(store.journal, job_id=job.id)
        if job.workflow_id is None:
            return Context.for_job(job, history_loader=history)
        return Context.for_job(
            job,
            history_loader=history,
            parents_loader=partial(stored.parent_results, job_id=job.id),
            batch_loader=partial(batch_context, job.id, job.workflow_id),
        )

    def run_one(self, job: Claimed, ctx: Context, guard: ThreadConnections) -> Ended:
        """Run one claimed job on this thread and decide how it ends; never raises for
        the task's errors, nor for ours (a run we could not finish is a failed run).

        ``guard`` holds this thread's connections: what the run left on them is rolled
        back or closed before the settlement is decided, so no settlement waits on the
        run's locks and a transaction left open fails the run.
        """
        try:
            return self._run_one(job, ctx, guard)
        except Exception as exc:
            ended = self.broken(job, exc)
            guard.after_run(ended.result)  # the thread's connections, as after any run
            return ended

    def broken(self, job: Claimed, exc: Exception) -> Ended:
        """A run our own code failed around, outside the task (the executor catches the
        task's errors, and the observers theirs): ended as a counted failure by the
        kind's policy, its note naming the failure. Raised instead, it would end the
        slot thread and leave the job claimed, its lease renewed while the worker lives.
        A settlement the run already wrote (an atomic run's) is not overwritten: the
        store's guard refuses a second one."""
        note = validation.clean_text(
            f"the worker failed around this run: {error_text(exc)}", NOTE_LIMIT
        )
        return self._failed_now(_ours(job, exc), note=note, outcome=Outcome.RETRIED)

    def _run_one(self, job: Claimed, ctx: Context, guard: ThreadConnections) -> Ended:
        worker = self.worker_id
        if signals.job_started.receivers:
            announce.started(job, worker=worker)
        span = self._span(job)
        guard.before_run()
        defn = registry.find(job.kind)
        lines = None
        with sentry.running(
            job, worker_id=worker, carrier=tracing.carrier, on=self.sentry_on
        ) as report:
            try:
                with tracing.current(span), logs.capturing(_module(defn), self.settings) as lines:
                    ctx._run_logs = lines
                    result = transactional.run(
                        defn,
                        job,
                        ctx,
                        alias=self.alias,
                        worker_id=worker,
                        max_output_bytes=self.max_output_bytes,
                    )
            except BaseException as exc:  # the executor catches task errors; this is ours
                result = _ours(job, exc)
            result = guard.after_run(result)
            return self._ended(result, span, report, lines, given_up=ctx._given_up)

    def _span(self, job: Claimed) -> Any:
        """The run's trace span (None when not tracing), held from now: a timeout's
        settlement may come before the run ends."""
        span = tracing.start_run(job, worker_id=self.worker_id)
        if span is not None:
            self._spans[(job.id, job.run_count)] = span
        return span

    def _ended(
        self, result: RunResult, span: Any, report: Any, lines: Any, *, given_up: bool
    ) -> Ended:
        """A run as it ended: its span and its Sentry report told (none for a run the
        worker ``given_up`` on: it reported that), its lines kept with it, its settlement
        decided (none for a run that settled itself or lost its claim)."""
        job = result.job
        if span is not None:
            tracing.ran(span, end=result.end, error=result.error, note=result.note)
        if lines is not None:
            result.logs = lines.captured()
        ended = Ended(result, None)
        if not (result.settled or result.lost):
            settlement = decide(result, policy=self.policy(job.kind), worker_id=self.worker_id)
            ended = Ended(result, settlement)
        if report is not None:
            s = ended.settlement
            outcome = "" if s is None else s.outcome
            report.ended(outcome=outcome, error=result.error, note=result.note, given_up=given_up)
        result.error = None  # its traceback's frames are not kept until the settlement
        return ended

    async def arun_one(self, job: Claimed, ctx: Context) -> Ended:
        """``run_one`` for an ``async def`` task, awaited on the worker's event loop: the
        same steps (``job_started``, the run, the settlement decided by the lifecycle's
        rules) but for the transaction, which an async task cannot hold (``atomic`` is
        refused for one), and the thread's connections, which belong to the threads its
        ORM calls run on. A cancelled run (its timeout, or the worker stopping after its
        release) ends as a failed run; the worker drops a result it no longer waits for.
        """
        try:
            return await self._arun_one(job, ctx)
        except Exception as exc:
            return self.broken(job, exc)

    async def _arun_one(self, job: Claimed, ctx: Context) -> Ended:
        worker = self.worker_id
        if signals.job_started.receivers:
            await sync_to_async(announce.started)(job, worker=worker)
        defn = registry.find(job.kind)
        span = self._span(job)
        lines = None
        with sentry.running(
            job, worker_id=worker, carrier=tracing.carrier, on=self.sentry_on
        ) as report:
            try:
                with tracing.current(span), logs.capturing(_module(defn), self.settings) as lines:
                    ctx._run_logs = lines
                    if defn is None:  # unregistered since the claim: settled dead, saying so
                        result = execute(defn, job, ctx, max_output_bytes=self.max_output_bytes)
                    else:
                        result = await transactional.arun(
                            defn,
                            job,
                            ctx,
                            alias=self.alias,
                            worker_id=worker,
                            max_output_bytes=self.max_output_bytes,
                        )
            except BaseException as exc:  # the executor catches task errors; this is ours
                result = _ours(job, exc)
            return self._ended(result, span, report, lines, given_up=ctx._given_up)

    def died(self, job: Claimed, *, note: str) -> Ended:
        """A run whose process died under it (a process-pool child killed, out of
        memory, crashed): ended as a stale recovery ends a run after its lease, a
        counted failure journalled ``stale-recovered``, at once; ``note`` names why."""
        result = failed_outright(job, RuntimeError(note), note=note)
        return self._failed_now(result, note=note, outcome=Outcome.STALE_RECOVERED)

    def _failed_now(self, result: RunResult, *, note: str, outcome: str) -> Ended:
        """A run ended by the worker rather than by its task (its process died, our code
        failed around it): a counted failure now, journalled ``outcome`` with ``note``,
        retried or dead by its kind's policy."""
        job = result.job
        now = timezone.now()
        run = run_of(job, worker=self.worker_id, started_at=now, duration=timedelta(0))
        policy = self.policy(job.kind)
        settlement = failure(
            run, failure_count=job.failure_count, policy=policy, now=now, note=note, outcome=outcome
        )
        return Ended(result, settlement)

    def to_write(self, ended: Ended) -> Settlement | None:
        """The settlement left to write for a run, or None after reporting a run that
        settled itself (``job_finished`` now that it committed) or lost its claim."""
        if ended.settlement is not None:
            return ended.settlement
        result = ended.result
        job = result.job
        if self._spans:
            tracing.settled(
                self._spans.pop((job.id, job.run_count), None),
                outcome=Outcome.PAUSED if result.end == "paused" else Outcome.COMPLETED,
                applied=not result.lost,
            )
        if result.lost:
            logger.info(
                "dropped run job=%s kind=%s run=%d: its claim was lost, its transaction "
                "rolled back",
                job.id,
                job.kind,
                job.run_count,
            )
            return None
        if result.end == "paused":  # parked for a sleep or a wait (run.durable)
            if result.parked is not None:  # job_finished and the log, as any settlement's
                self.settled([result.parked], [True])
            return None
        if signals.job_finished.receivers:
            announce.finished_in_transaction(
                job, result.value, result.duration, worker=self.worker_id
            )
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "settled job=%s kind=%s outcome=completed duration=%.3fs (in its own transaction)",
                job.id,
                job.kind,
                result.duration.total_seconds(),
            )
        return None

    def settled(self, batch: Sequence[Settlement], applied: Sequence[bool]) -> None:
        """Report settlements once written: ``job_finished`` and the log, for each one
        the guard let through (and end the runs' trace spans, naming their outcome)."""
        if self._spans:
            for s, ok in zip(batch, applied, strict=True):
                span = self._spans.pop((s.job_id, s.run_no), None)
                tracing.settled(span, outcome=s.outcome, applied=ok)
        if signals.job_finished.receivers:
            announce.finished(batch, applied)
        if logger.isEnabledFor(logging.INFO):
            # One line per settlement, but one log record per batch: a record per job
            # cost a quarter of a busy worker's time.
            lines = [
                f"settled job={s.job_id} kind={s.kind} outcome={s.outcome} "
                f"duration={s.duration.total_seconds() if s.duration else 0.0:.3f}s"
                f"{failure_summary(s)}"
                for s, ok in zip(batch, applied, strict=True)
                if ok
            ]
            if lines:
                logger.info("\n".join(lines))


def _ours(job: Claimed, exc: BaseException) -> RunResult:
    """A run the executor could not finish (a bug of ours, not the task's), logged."""
    logger.error(
        "executor failed on job %s: %s", job.id, validation.clean_text(error_text(exc), NOTE_LIMIT)
    )
    return failed_outright(job, exc)


def _module(defn: Any) -> str | None:
    """The module a task is written in (its logger is captured with its runs)."""
    return getattr(getattr(defn, "written_as", None), "__module__", None)


# The most of a failure's first line the INFO line quotes: enough for the exception's
# class and its message, never a screenful.
SUMMARY_LIMIT = 200
_FAILURES = frozenset({Outcome.RETRIED, Outcome.DEAD})


def failure_summary(s: Settlement) -> str:
    """What a retried or dead run's INFO line adds: `` error=`` and the first line of
    its note (the exception's class and message, a ``Permanent`` reason), redacted and
    bounded; "" for any other settlement. The traceback is the executor's DEBUG line."""
    if s.outcome not in _FAILURES or not s.note:
        return ""
    # Escaped: a task's message with ESC or CR in it must not drive the log's terminal.
    first = visible(redact_text(s.note.strip().partition("\n")[0]))
    if len(first) > SUMMARY_LIMIT:
        first = first[: SUMMARY_LIMIT - 1] + "…"
    return f" error={first}"


# How a slot runs one job: ``Pipeline.run_one`` of the worker's pipeline.
RunOne = Callable[[Claimed, Context, ThreadConnections], Ended]
# How the event loop runs one: ``Pipeline.arun_one``.
ARunOne = Callable[[Claimed, Context], Coroutine[Any, Any, Ended]]
