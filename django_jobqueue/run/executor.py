"""Runs one claimed job and decides its settlement; pure, no database access.

``execute`` turns a run into a ``RunResult``; ``decide`` turns that into a
``Settlement`` using the kind's policy. The worker persists it through ``store``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from django_jobqueue import clock, frames, validation
from django_jobqueue.errors import ChildDepthExceeded, StepDivergence
from django_jobqueue.formatting import visible
from django_jobqueue.redaction import redact_text
from django_jobqueue.rules.control import Parked, Pause, Permanent, RetryAfter
from django_jobqueue.rules.lifecycle import (
    NOTE_ADDED_ROOM,
    NOTE_LIMIT,
    Policy,
    Run,
    Settlement,
    completed,
    dead,
    failure,
    later,
    paused,
)
from django_jobqueue.task.options import depth_limit
from django_jobqueue.task.registry import PayloadMismatch, TaskDef

if TYPE_CHECKING:
    from django_jobqueue.run.context import Context
    from django_jobqueue.store import Claimed

logger = logging.getLogger("django_jobqueue")

RunEnd = Literal["completed", "paused", "failed", "permanent", "mismatch"]


@dataclass
class RunResult:
    """What one execution of a job came to."""

    job: Claimed
    end: RunEnd
    started_at: datetime
    duration: timedelta
    carry: dict[str, Any]
    attachment: Any = None
    value: Any = None
    note: str = ""
    resume_in: timedelta = timedelta(0)
    retry_in: timedelta | None = None  # a failure's own retry delay (RetryAfter)
    # Its completion committed in the run's own transaction (atomic tasks, settle_now):
    # nothing is left to write.
    settled: bool = False
    # Its claim was lost (a settlement in its transaction was refused): nothing may be written.
    lost: bool = False
    # The exception that failed it, for its trace span (dropped once recorded there).
    error: BaseException | None = None
    # The paused settlement a durable sleep or wait wrote in its own transaction.
    parked: Settlement | None = None
    # The log lines the run captured (``run.logs``), written with its settlement.
    logs: Any = None


def error_text(exc: BaseException, *, own: str | None = None) -> str:
    """The exception's class and message on one line (the summary operators read
    first), then its traceback trimmed to the note's budget by ``frames.trimmed``: the
    header, the task's own frames (``own`` is the file the task is written in) and the
    frames nearest each raise of the chain. Never raises, even for an exception whose
    ``__str__`` does."""
    try:
        message = str(exc)
    except Exception as problem:
        message = f"<str() of the exception raised {type(problem).__name__}>"
    if len(message) > frames.MESSAGE_LIMIT:
        message = message[: frames.MESSAGE_LIMIT] + "…"
    summary = f"{type(exc).__qualname__}: {message}\n"
    budget = NOTE_LIMIT - NOTE_ADDED_ROOM - len(summary)
    return summary + frames.trimmed(exc, budget, own=own)


def output_problem(value: Any, what: str, limit: int, *, own_level: bool = False) -> str | None:
    """Why a run's output cannot be stored (not JSON, text the databases refuse, too
    large, nested deeper than MAX_JSON_DEPTH), naming it; None when it can. With
    ``own_level`` (the carry) the value's own object is not counted, as a payload's
    is not: each of its keys may hold MAX_JSON_DEPTH levels."""
    try:
        depth, limit_name = depth_limit(own_level=own_level)
        text = validation.dumps(value, max_depth=depth, own_level=own_level, limit_name=limit_name)
    except validation.Unstorable as exc:
        return f"{what} cannot be stored: {what}{exc.path} {exc.problem}"
    except (TypeError, ValueError) as exc:
        return f"{what} is not JSON-serialisable ({type(value).__name__}): {exc}"
    if len(text) > limit:  # ASCII: JSON escapes everything else
        return f"{what} is {len(text):,} bytes of JSON, over MAX_OUTPUT_BYTES ({limit:,})"
    return None


def execute(
    defn: TaskDef | None, job: Claimed, ctx: Context, *, max_output_bytes: int
) -> RunResult:
    """Run ``job`` and classify how it ended; never raises for the task's own errors.

    What the run hands back (return value, carry, attachment) is checked here, so
    that nothing it returns can make its settlement fail: an output that cannot be
    stored fails the run with a note naming it, and is not stored.
    """
    started = clock.now()
    unrunnable = _unrunnable(defn, job, ctx, started)
    if unrunnable is not None or defn is None:
        return unrunnable or _result(job, ctx, started, "mismatch")
    try:
        value = _call(defn, job, ctx)
    except BaseException as exc:
        return ended_by(exc, job, ctx, started, max_output_bytes, own=defn.source_file())
    return _checked(_result(job, ctx, started, "completed", value=value), max_output_bytes)


async def aexecute(
    defn: TaskDef, job: Claimed, ctx: Context, *, max_output_bytes: int
) -> RunResult:
    """``execute`` for an ``async def`` task, awaited on the worker's event loop: the
    same checks and the same classification, the coroutine awaited instead of run."""
    started = clock.now()
    unrunnable = _unrunnable(defn, job, ctx, started)
    if unrunnable is not None:
        return unrunnable
    try:
        value = await defn.call(job.payload, ctx)
    except BaseException as exc:
        return ended_by(exc, job, ctx, started, max_output_bytes, own=defn.source_file())
    return _checked(_result(job, ctx, started, "completed", value=value), max_output_bytes)


def _result(job: Claimed, ctx: Context, started: datetime, end: RunEnd, **kw: Any) -> RunResult:
    return RunResult(
        job=job,
        end=end,
        started_at=started,
        duration=clock.now() - started,
        carry=ctx.carry,
        attachment=ctx.attachment,
        **kw,
    )


def _unrunnable(
    defn: TaskDef | None, job: Claimed, ctx: Context, started: datetime
) -> RunResult | None:
    """A run that cannot start (no such task, a stored value that cannot be read)."""
    if defn is None:
        return _result(
            job, ctx, started, "mismatch", note=f"no task is registered under kind {job.kind!r}"
        )
    unreadable = undecodable(job)
    if unreadable:
        ctx.carry = {}  # the stored one cannot be read, so none is written back
        return _result(job, ctx, started, "mismatch", note=unreadable)
    return None


def ended_by(
    exc: BaseException,
    job: Claimed,
    ctx: Context,
    started: datetime,
    limit: int,
    *,
    own: str | None = None,
) -> RunResult:
    """How a run that raised ``exc`` ended, by the lifecycle's rules. A task calling
    sys.exit() or a cancelled coroutine is the task failing, not a reason to lose the
    worker's slot; other BaseExceptions are raised again. ``own`` is the task's file
    (its frames are kept in the note)."""

    def result(end: RunEnd, **kw: Any) -> RunResult:
        return _checked(_result(job, ctx, started, end, **kw), limit)

    if isinstance(exc, PayloadMismatch):
        return _result(
            job, ctx, started, "mismatch", note=f"payload no longer fits the task: {exc}"
        )
    if isinstance(exc, Pause):
        return result("paused", note=exc.note, resume_in=exc.resume_in)
    if isinstance(exc, Parked):  # its settlement is written: nothing to check
        return _result(job, ctx, started, "paused", note=exc.note)
    if isinstance(exc, Permanent):
        return result("permanent", note=exc.reason or "permanent failure", error=exc)
    # A replay would run on wrong records, or a child could never start: dead now.
    if isinstance(exc, StepDivergence | ChildDepthExceeded):
        return result("permanent", note=error_text(exc), error=exc)
    if isinstance(exc, RetryAfter):
        cause = exc.__cause__ or exc
        if exc.delay is None:
            return result("permanent", note=error_text(cause, own=own), error=cause)
        return result("failed", note=error_text(cause, own=own), retry_in=exc.delay, error=cause)
    if isinstance(exc, Exception | SystemExit | KeyboardInterrupt | asyncio.CancelledError):
        note = error_text(exc, own=own)
        if logger.isEnabledFor(logging.DEBUG):  # bounded as the note will be
            shown = visible(redact_text(validation.clean_text(note, NOTE_LIMIT)))
            logger.debug("job %s raised %s", job.id, shown)
        return result("failed", note=note, error=exc)
    raise exc


def undecodable(job: Claimed) -> str:
    """Why the claimed job's stored payload or carry cannot be read ("" when they can):
    written around the queue, such a job can never run, so it is settled dead."""
    if not isinstance(job.payload, validation.Undecodable) and not isinstance(
        job.carry, validation.Undecodable
    ):
        return ""  # every run asks: the common answer without the join
    stored: tuple[tuple[str, Any], ...] = (("payload", job.payload), ("carry", job.carry))
    return "; ".join(
        f"the stored {what} cannot be decoded ({value.error})"
        for what, value in stored
        if isinstance(value, validation.Undecodable)
    )


def stored_carry(job: Claimed) -> dict[str, Any]:
    """The carry as stored, to fall back on: empty if it could not be decoded."""
    return dict(job.carry) if isinstance(job.carry, dict) else {}


def _call(defn: TaskDef, job: Claimed, ctx: Context) -> Any:
    """The task itself. A child the task forked that returns from it (or raises) exits
    here at once: it must not go on to run the worker's code, on the worker's
    connections, nor linger after the worker has stopped."""
    pid = os.getpid()
    try:
        value = defn.execute(job.payload, ctx)
    except BaseException as exc:
        if os.getpid() != pid:
            _child_exit(exc)
        raise
    if os.getpid() != pid:
        _child_exit(None)
    return value


def _child_exit(exc: BaseException | None) -> NoReturn:
    """End a forked child now, with the status ``sys.exit()`` would have given it."""
    code = 0 if exc is None else 1
    if isinstance(exc, SystemExit):
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def failed_outright(job: Claimed, exc: BaseException, *, note: str | None = None) -> RunResult:
    """A run the executor itself could not classify (a bug of ours, not the task's), or
    that could not start (``note`` says why): a failed run, its carry as stored, so the
    slot thread lives on."""
    now = clock.now()
    return RunResult(
        job=job,
        end="failed",
        started_at=now,
        duration=timedelta(0),
        carry=stored_carry(job),
        note=note or f"the worker could not finish this run ({type(exc).__qualname__})",
    )


def _checked(run: RunResult, limit: int) -> RunResult:
    """The run with what it hands back made storable: an output that cannot be stored
    is dropped (the carry falls back to the one stored) and the run fails, saying why.
    None and an empty carry, most runs' outputs, need no check."""
    problems = []
    if run.end == "completed" and run.value is not None:
        problem = output_problem(run.value, "the return value", limit)
        if problem is not None:
            problems.append(problem)
            run.value = None
    if not isinstance(run.carry, dict):
        problems.append(f"ctx.carry must be a dict, not {type(run.carry).__name__}")
        run.carry = stored_carry(run.job)
    elif run.carry:
        problem = output_problem(run.carry, "ctx.carry", limit, own_level=True)
        if problem is not None:
            problems.append(problem)
            run.carry = stored_carry(run.job)
    if run.attachment is not None:
        problem = output_problem(run.attachment, "the ctx.attach() value", limit)
        if problem is not None:
            problems.append(problem)
            run.attachment = None
    if not problems:
        return run
    if run.end in ("completed", "paused"):
        run.end = "failed"
        run.note = ""
    run.note = "\n".join([*problems, run.note]).strip()
    return run


def run_of(
    job: Claimed,
    *,
    worker: str,
    started_at: datetime | None = None,
    duration: timedelta | None = None,
    attachment: Any = None,
    logs: Any = None,
) -> Run:
    """Which run of a claimed job a settlement ends: the one place a ``Run`` is read off
    a claimed row, so every ending names the run its claim's guard checks."""
    return Run(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count,
        worker=worker,
        started_at=started_at,
        duration=duration,
        attachment=attachment,
        step=job.workflow_id is not None,
        logs=logs,
    )


def decide(
    run: RunResult, *, policy: Policy, worker_id: str, now: datetime | None = None
) -> Settlement:
    """The settlement for a run, following the lifecycle table. Never raises: a run it
    cannot settle as it ended (a bug of ours) is settled as a failed run saying so.
    ``now`` (the clock's by default) is read only for an ending that needs it: a
    completion does not."""
    job = run.job
    which = run_of(
        job,
        worker=worker_id,
        started_at=run.started_at,
        duration=run.duration,
        attachment=run.attachment,
        logs=run.logs,
    )
    try:
        return _decide(run, which, policy, now)
    except Exception as exc:
        logger.exception("job %s: its %s run could not be settled as such", job.id, run.end)
        return failure(
            replace(which, attachment=None),
            failure_count=job.failure_count,
            policy=policy,
            now=now or clock.now(),
            note=f"the worker could not settle this {run.end} run ({type(exc).__qualname__})",
        )


def _decide(run: RunResult, which: Run, policy: Policy, now: datetime | None) -> Settlement:
    if run.end == "completed":
        return completed(which, result=run.value, note=run.note)
    now = now or clock.now()
    if run.end == "paused":
        return paused(which, resume_at=later(now, run.resume_in), carry=run.carry, note=run.note)
    if run.end in ("permanent", "mismatch"):
        return dead(which, carry=run.carry, note=run.note)
    return failure(
        which,
        failure_count=run.job.failure_count,
        policy=policy,
        now=now,
        note=run.note,
        carry=run.carry,
        delay=run.retry_in,
    )
