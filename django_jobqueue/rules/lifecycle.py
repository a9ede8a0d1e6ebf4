"""How a run ends, as values: the failure policy and the settlement the storage layer applies.

Pure (no database, no Django settings): the executor, the worker and the storage
layer all build settlements here, so a retry, a backstop death, a release and a stale
recovery follow the same rules whichever path produced them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django_jobqueue import validation
from django_jobqueue.rules import backoff
from django_jobqueue.states import Outcome, Status


@dataclass(frozen=True)
class Policy:
    """What a kind's failures and leases cost: resolved from the task and the settings."""

    max_failures: int | None
    lease: timedelta
    backoff_base: timedelta
    backoff_cap: timedelta
    backoff_jitter: float
    timeout: timedelta | None = None  # a run longer than this fails (None: no limit)
    # The process pool's hard limit (the child is killed) and soft one (an exception
    # raised in the task first); ``timeout`` is a hard limit there too.
    time_limit: timedelta | None = None
    soft_time_limit: timedelta | None = None

    def hard_limit(self) -> tuple[timedelta, str] | None:
        """The run's hard limit, the smaller of ``time_limit`` and ``timeout``, with its
        option's name (None: neither is set). Every pool stops a run there, each by the
        strongest means it has (a killed child, a cancelled coroutine, an abandoned
        thread)."""
        # Asked once per dispatched run: no list, no sort (a tie goes to time_limit).
        limit, timeout = self.time_limit, self.timeout
        if limit is None:
            return None if timeout is None else (timeout, "timeout")
        if timeout is None or limit <= timeout:
            return (limit, "time_limit")
        return (timeout, "timeout")


@dataclass(frozen=True, slots=True)
class Settlement:
    """How one run ends: the row's next state and its journal entry.

    The storage layer applies it only if the claim is still this run's: status
    claimed, ``claimed_by`` equal to ``worker`` (the worker that settles; for a stale
    recovery, the worker that was lost) and the same run number.
    """

    job_id: uuid.UUID
    kind: str
    run_no: int
    outcome: str  # an Outcome value
    status: str  # the job's next Status value
    visible_at: datetime | None = None  # for a job going back to pending
    failed: bool = False  # counts as a failure
    carry: dict[str, Any] | None = None  # None keeps the stored carry
    result: Any = None
    note: str = ""
    attachment: Any = None
    started_at: datetime | None = None
    duration: timedelta | None = None
    worker: str = ""
    # A workflow step's: its settlement also releases (or cancels) its dependents.
    step: bool = False
    # The run's own log lines (``run.logs``), kept with the settlement when it is written.
    logs: Any = None


@dataclass(frozen=True, slots=True)
class Run:
    """Which run of which job a settlement ends, and what the run itself recorded."""

    job_id: uuid.UUID
    kind: str
    run_no: int
    worker: str  # the claim's holder (for a stale recovery, the worker that was lost)
    started_at: datetime | None = None
    duration: timedelta | None = None
    attachment: Any = None
    step: bool = False  # the job is a workflow step
    logs: Any = None  # the log lines the run captured (``run.logs.Captured``), if any


# Every note is stored as text the databases accept, and bounded: a run's own words
# (an exception message, a traceback, a Pause note) are whatever the task made them.
NOTE_LIMIT = 10_000
# What a failure's note leaves of NOTE_LIMIT for the line this module adds to it (the
# "(failure n of max_failures=m)" of a dead job), so that line and the traceback's
# last, the exception's, are never the ones cut.
NOTE_ADDED_ROOM = 100

# The range of times a job is scheduled for, the one rule for every time given (run_at,
# run_after, delay, a pause's resume_in, a retry's delay): one outside it is clamped to
# its nearer end. Each end is a day or more inside what Python, every database and any
# time zone's local time can hold (datetime.max in New York is year 10000 in UTC,
# datetime.min in Tokyo year 0), so whatever is stored reads back and displays.
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)


def clamped(moment: datetime) -> datetime:
    """An aware ``moment`` in UTC, clamped to ``EARLIEST``..``LATEST`` (comparing aware
    datetimes never overflows; converting one outside the range would)."""
    if moment > LATEST:
        return LATEST
    if moment < EARLIEST:
        return EARLIEST
    return moment.astimezone(UTC)


def later(now: datetime, delay: timedelta) -> datetime:
    """``now + delay``, or ``LATEST`` where that would overflow."""
    try:
        return min(now + delay, LATEST)
    except OverflowError:
        return LATEST


def _ending(
    run: Run,
    *,
    outcome: str,
    status: str,
    visible_at: datetime | None = None,
    failed: bool = False,
    carry: dict[str, Any] | None = None,
    result: Any = None,
    note: str = "",
) -> Settlement:
    return Settlement(
        job_id=run.job_id,
        kind=run.kind,
        run_no=run.run_no,
        outcome=outcome,
        status=status,
        visible_at=visible_at,
        failed=failed,
        carry=carry,
        result=result,
        note=validation.clean_text(note, NOTE_LIMIT),
        attachment=run.attachment,
        started_at=run.started_at,
        duration=run.duration,
        worker=run.worker,
        step=run.step,
        logs=run.logs,
    )


def completed(run: Run, *, result: Any, note: str = "") -> Settlement:
    """The run returned: completed, its value stored as the result (``note``: the durable
    steps it recorded, if any)."""
    return _ending(
        run, outcome=Outcome.COMPLETED, status=Status.COMPLETED, result=result, note=note
    )


def paused(run: Run, *, resume_at: datetime, carry: dict[str, Any], note: str) -> Settlement:
    """The run raised ``Pause``: pending again at ``resume_at``, carry kept, no failure."""
    return _ending(
        run,
        outcome=Outcome.PAUSED,
        status=Status.PENDING,
        visible_at=resume_at,
        carry=carry,
        note=note,
    )


def dead(run: Run, *, carry: dict[str, Any] | None, note: str) -> Settlement:
    """The job can never succeed (``Permanent``, a payload that no longer fits): dead now."""
    return _ending(
        run, outcome=Outcome.DEAD, status=Status.DEAD, failed=True, carry=carry, note=note
    )


def exhausted(failures: int, policy: Policy) -> bool:
    """Whether ``failures`` counted failures reach the policy's backstop (the job dies)."""
    return policy.max_failures is not None and failures >= policy.max_failures


def failure(
    run: Run,
    *,
    failure_count: int,
    policy: Policy,
    now: datetime,
    note: str,
    carry: dict[str, Any] | None = None,
    outcome: str = Outcome.RETRIED,
    delay: timedelta | None = None,
) -> Settlement:
    """A counted failure: back to pending after backoff, or dead once max_failures is reached.

    ``failure_count`` is the count before this failure; ``outcome`` is what a retry is
    journalled as (``retried`` after a run, ``stale-recovered`` after a lost lease);
    ``delay``, when given, replaces the backoff curve for this one retry.
    """
    failures = failure_count + 1
    if exhausted(failures, policy):
        note = f"{note}\n(failure {failures} of max_failures={policy.max_failures})".strip()
        return dead(run, carry=carry, note=note)
    if delay is None:
        delay = backoff.delay(
            failures,
            base=policy.backoff_base,
            cap=policy.backoff_cap,
            jitter=policy.backoff_jitter,
            job_id=run.job_id,
        )
    return _ending(
        run,
        outcome=outcome,
        status=Status.PENDING,
        visible_at=later(now, delay),
        failed=True,
        carry=carry,
        note=note,
    )


def timed_out(
    run: Run,
    *,
    failure_count: int,
    policy: Policy,
    now: datetime,
    means: str = "its thread abandoned and whatever it returns dropped",
) -> Settlement:
    """A run that outlasted its task's hard limit (``timeout`` or ``time_limit``): a
    counted failure, like any other, whose note names the limit and how the run was
    stopped (``means``)."""
    limit, name = policy.hard_limit() or (policy.timeout, "timeout")
    return failure(
        replace(run, duration=limit),
        failure_count=failure_count,
        policy=policy,
        now=now,
        note=f"timed out after {limit} (the task's {name}): the run was given up, {means}",
    )


def terminated(run: Run, *, actor: str, means: str) -> Settlement:
    """A run an operator terminated: its job ends cancelled now, no failure counted, the
    note naming who asked and how the run was stopped (``means``)."""
    who = f" by {actor}" if actor else ""
    return _ending(
        run,
        outcome=Outcome.CANCELLED,
        status=Status.CANCELLED,
        note=f"terminated{who}: the run was stopped, {means}",
    )


def settlement_refused(
    s: Settlement, *, failure_count: int, policy: Policy, now: datetime, error: str
) -> Settlement:
    """What a run ends as when the database refused its own settlement: a counted
    failure saying why, with nothing of what the run handed back."""
    return failure(
        Run(
            job_id=s.job_id,
            kind=s.kind,
            run_no=s.run_no,
            worker=s.worker,
            started_at=s.started_at,
            duration=s.duration,
            step=s.step,
        ),
        failure_count=failure_count,
        policy=policy,
        now=now,
        note=f"the database refused this run's settlement ({s.outcome}): {error}",
    )


def released(run: Run, *, now: datetime, note: str) -> Settlement:
    """A graceful hand-back at shutdown: pending now, no failure counted, carry as last settled."""
    return _ending(run, outcome=Outcome.RELEASED, status=Status.PENDING, visible_at=now, note=note)


def on_cancel_request(s: Settlement) -> Settlement | None:
    """How a run ends instead when an operator asked to cancel its job while it ran.

    A run that would send its job back to pending (a retry, a pause, a release, a stale
    recovery) ends it ``cancelled``, journalled ``cancelled`` with the run's own ending
    in the note; a run that completed or died keeps its ending (None). The storage
    layer applies this alternative only if the request is there when it settles.
    """
    if s.status != Status.PENDING:
        return None
    return replace(
        s,
        outcome=Outcome.CANCELLED,
        status=Status.CANCELLED,
        visible_at=None,
        note=f"cancelled on request (run ended: {s.outcome})\n{s.note}".strip(),
    )
