"""Runs one claimed job and decides its settlement; pure, no database access.

``execute`` turns a run into a ``RunResult``; ``decide`` turns that into a
``Settlement`` using the kind's policy. The worker persists it through ``store``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from django.utils import timezone

from .lifecycle import Policy, Settlement, failure
from .outcomes import Pause, Permanent, RetryAfter
from .states import Outcome, Status
from .task import PayloadMismatch, TaskDef

if TYPE_CHECKING:
    from .context import Context
    from .store import Claimed

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
    cancelled: bool = False  # the run saw ctx.cancelled set before it ended
    retry_in: timedelta | None = None  # a failure's own retry delay (RetryAfter)


def _error_text(exc: BaseException) -> str:
    lines = traceback.format_exception(exc)
    tail = "".join(lines[-12:])
    return f"{type(exc).__name__}: {exc}\n{tail}"[:4000]


def _json_check(value: Any, what: str) -> str | None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"{what} is not JSON-serialisable ({type(value).__name__}): {exc}"
    return None


def execute(defn: TaskDef | None, job: Claimed, ctx: Context) -> RunResult:
    """Run ``job`` and classify how it ended; never raises for the task's own errors."""
    started = timezone.now()
    clock = timezone.now

    def result(end: RunEnd, **kw: Any) -> RunResult:
        return RunResult(
            job=job,
            end=end,
            started_at=started,
            duration=clock() - started,
            carry=ctx.carry,
            attachment=ctx.attachment,
            cancelled=ctx.cancelled.is_set(),
            **kw,
        )

    if defn is None:
        return result("mismatch", note=f"no task is registered under kind {job.kind!r}")
    try:
        value = defn.execute(job.payload, ctx)
    except PayloadMismatch as exc:
        return result("mismatch", note=f"payload no longer fits the task: {exc}")
    except Pause as exc:
        return result("paused", note=exc.note, resume_in=exc.resume_in)
    except Permanent as exc:
        return result("permanent", note=exc.reason or "permanent failure")
    except RetryAfter as exc:
        cause = exc.__cause__ or exc
        if exc.delay is None:
            return result("permanent", note=_error_text(cause))
        return result("failed", note=_error_text(cause), retry_in=exc.delay)
    except (Exception, SystemExit, KeyboardInterrupt, asyncio.CancelledError) as exc:
        # A task calling sys.exit() or a cancelled coroutine is the task failing, not a
        # reason to lose the worker's slot thread. Other BaseExceptions propagate.
        logger.debug("job %s raised", job.id, exc_info=True)
        return result("failed", note=_error_text(exc))
    problem = _json_check(value, "return value")
    if problem is None:
        problem = _json_check(ctx.carry, "ctx.carry")
    if problem is None:
        problem = _json_check(ctx.attachment, "ctx.attach() value")
    if problem is not None:
        bad = result("failed", note=problem)
        # Keep what can be stored: drop what cannot.
        if _json_check(ctx.carry, "") is not None:
            bad.carry = dict(job.carry or {})
        if _json_check(ctx.attachment, "") is not None:
            bad.attachment = None
        return bad
    return result("completed", value=value)


def decide(
    run: RunResult, *, policy: Policy, worker_id: str, now: datetime | None = None
) -> Settlement:
    """The settlement for a run, following the lifecycle table."""
    now = now or timezone.now()
    job = run.job
    common: dict[str, Any] = {
        "job_id": job.id,
        "kind": job.kind,
        "run_no": job.run_count,
        "attachment": run.attachment,
        "started_at": run.started_at,
        "duration": run.duration,
        "worker": worker_id,
    }
    if run.end == "completed":
        return Settlement(
            outcome=Outcome.COMPLETED, status=Status.COMPLETED, result=run.value, **common
        )
    if run.end == "paused":
        return Settlement(
            outcome=Outcome.PAUSED,
            status=Status.PENDING,
            visible_at=now + run.resume_in,
            carry=run.carry,
            note=run.note,
            **common,
        )
    if run.end in ("permanent", "mismatch"):
        return Settlement(
            outcome=Outcome.DEAD,
            status=Status.DEAD,
            failed=True,
            carry=run.carry,
            note=run.note,
            **common,
        )
    return failure(
        failure_count=job.failure_count,
        policy=policy,
        now=now,
        note=run.note,
        carry=run.carry,
        delay=run.retry_in,
        **common,
    )
