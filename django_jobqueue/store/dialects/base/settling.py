"""What every dialect's settlement shares: the one row a settlement becomes, and the SQL
that PostgreSQL and SQLite both write around a relation ``s`` of such rows.

``store.settle`` maps each settlement to a ``SettleRow`` once (the *what*: the guard,
the ending an operator's cancel request would choose instead, the tally shard); each
dialect only encodes those rows its own way (a JSON document on PostgreSQL, VALUES on
SQLite, one guarded UPDATE per row on MySQL/MariaDB).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django_jobqueue.models import Job, JournalEntry, RunLog

JOB = Job._meta.db_table
JOURNAL = JournalEntry._meta.db_table
RUN_LOG = RunLog._meta.db_table


@dataclass(slots=True)
class SettleRow:
    """One settlement as the statement applies it (plain Python values; the dialect
    converts them as its driver binds them). Made once per settled run, in the loop's
    turn, and never changed after: not frozen only because a frozen dataclass sets each
    of its 24 fields through ``object.__setattr__``, about 2.5 us more a run (counted
    in docs/explanation/performance.md, "Instructions per no-op")."""

    id: uuid.UUID
    run_no: int
    kind: str
    status: str
    outcome: str
    visible_at: datetime | None  # where a pending job becomes runnable again
    failed: int  # 1: counts a failure
    carry: Any  # None: the row keeps its carry
    result: Any
    note: str
    attachment: Any
    started_at: datetime | None
    micros: int | None  # the run's duration; None for a run released at shutdown
    worker: str  # the guard: the claim must still be this worker's
    recorded_at: datetime
    claimed: str  # the guard: the status a settled row must have (claimed)
    # The ending instead, if an operator asked to cancel (None: the run keeps its own).
    c_status: str | None
    c_outcome: str | None
    c_note: str | None
    shard: int  # the run tally's shard this settlement adds to
    bucket: int | None  # the duration's histogram bucket
    # The run's own log lines (None: none), how many were dropped between their head
    # and tail, and the job's first run whose lines are kept (older runs' are deleted).
    logs: list[Any] | None = None
    dropped: int = 0
    logs_from: int = 0


@dataclass(frozen=True, slots=True)
class Release:
    """What a turn that releases the dependents of the steps it completed writes with
    them (where the dialect folds the joins into the turn): the time of the release, the
    journal note of a batch's ``on_failure`` callback cancelled because no member died,
    the worker that claims what it releases, and the wake-up channel for the rest."""

    now: datetime
    void_note: str
    worker: str
    channel: str


@dataclass(frozen=True, slots=True)
class Released:
    """What such a turn did: the settled ids and the claimed rows. ``claim_after``: it
    claimed nothing, the claim is to follow in a statement of its own, and ``pending``
    are the steps it released (with their queues), whose wake-up it did not send."""

    done: set[uuid.UUID]
    claimed: list[tuple[Any, ...]]
    claim_after: bool = False
    pending: list[tuple[uuid.UUID, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Tally:
    """How a settlement's runs are counted in the run tally, handed in by the store (the
    tally's statements are the monitoring module's): ``insert(relation)`` is the upsert
    of a relation's runs (columns kind, outcome, shard, micros, bucket), ``rows(runs)``
    the upsert of runs counted in Python, (kind, outcome, shard, micros) each."""

    insert: Callable[[str], str]
    rows: Callable[[Iterable[tuple[str, str, int, int | None]]], tuple[str, list[Any]]]


# The columns of ``s``, one row per settlement, with their PostgreSQL types (the batch
# travels as one JSON document there; SQLite gets VALUES). ``duration`` is the journal's
# value: seconds on PostgreSQL (an interval is made of them), microseconds elsewhere.
COLUMNS: dict[str, str] = {
    "id": "uuid",
    "run_no": "int",
    "kind": "text",
    "status": "text",
    "outcome": "text",
    "visible_at": "timestamptz",
    "failed": "int",
    "carry": "jsonb",
    "result": "jsonb",
    "note": "text",
    "attachment": "jsonb",
    "started_at": "timestamptz",
    "duration": "float8",
    "worker": "text",
    "recorded_at": "timestamptz",
    "claimed": "text",
    "c_status": "text",
    "c_outcome": "text",
    "c_note": "text",
    "shard": "int",
    "micros": "bigint",
    "bucket": "int",
}

# ``t`` is the row before the update, ``s`` the settlement.
_OVERRIDE = "(t.cancel_requested AND s.c_status IS NOT NULL)"
_STATUS = f"CASE WHEN {_OVERRIDE} THEN s.c_status ELSE s.status END"
_GOES_PENDING = f"({_STATUS}) = 'pending'"
# A run's live progress (``ctx.progress``) describes that run only: every settlement
# clears it, so a completed job shows no stale partial value beside its badge, and a
# retried, paused or dead one none from a run that is over.
PROGRESS_CLEARED = "progress_done = NULL, progress_total = NULL, progress_note = ''"
SET = (
    f"status = {_STATUS},"
    f" visible_at = CASE WHEN {_GOES_PENDING} THEN s.visible_at ELSE t.visible_at END,"
    f" claimed_by = '', claim_expires_at = NULL, {PROGRESS_CLEARED},"
    " failure_count = t.failure_count + s.failed,"
    " carry = COALESCE(s.carry, t.carry), result = s.result,"
    f" finished_at = CASE WHEN {_GOES_PENDING} THEN NULL ELSE s.recorded_at END,"
    " cancel_requested = FALSE"
)
# The guard of every write a run makes (its settlement, a durable step's record): the
# job is still claimed, by this worker, in this run. Each column, with the field of a
# settlement's document it is compared with; both forms below are built from it.
GUARDED: tuple[tuple[str, str], ...] = (
    ("id", "id"),
    ("status", "claimed"),
    ("claimed_by", "worker"),
    ("run_count", "run_no"),
)
# Against a settlement document ``s``. The status is compared with the document's
# ``claimed`` rather than a literal: a literal would let the planner read every row ever
# claimed through the partial lease index (dead entries included, until vacuum) instead
# of the few ids by primary key.
GUARD = " AND ".join(f"t.{column} = s.{field}" for column, field in GUARDED)
# With parameters, one per column in GUARDED's order: the id, 'claimed', the worker, the
# run's number.
GUARD_PARAMS = " AND ".join(f"{column} = %s" for column, _ in GUARDED)
# ``j`` is the row after the update: it took the alternative ending if its status is that one's.
_OVERRIDDEN = "(s.c_status IS NOT NULL AND j.status = s.c_status)"
JOURNAL_COLUMNS = (
    "job_id, kind, run_no, outcome, started_at, recorded_at, duration, note, attachment,"
    " worker, actor"
)
_OUTCOME = f"CASE WHEN {_OVERRIDDEN} THEN s.c_outcome ELSE s.outcome END"


def journal_select(duration: str) -> str:
    """The journal entries of the applied settlements (``duration``: the expression of
    the journal's duration value from ``s.duration``), to follow with FROM."""
    return (
        f"SELECT s.id, s.kind, s.run_no, {_OUTCOME}, s.started_at, s.recorded_at, {duration},"
        f" CASE WHEN {_OVERRIDDEN} THEN s.c_note ELSE s.note END,"
        f" s.attachment, s.worker, CASE WHEN {_OVERRIDDEN} THEN j.cancel_actor ELSE '' END"
    )


def tallied(joined: str) -> str:
    """Each applied settlement's run, for the tally (``joined``: ``s`` with ``j``, the job
    rows after the update)."""
    return f"SELECT s.kind, {_OUTCOME} AS outcome, s.shard, s.micros, s.bucket FROM {joined}"
