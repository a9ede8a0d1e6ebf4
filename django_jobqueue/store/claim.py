"""Claiming: up to the free slots, in one statement where the database allows.

This module holds the *what* of a claim: which kinds and queues, the priority tiers (a
slot that prefers a higher floor, falling back to lower ones when that tier is empty),
this claim's per-kind caps, the global ``max_in_flight`` limits, the leases, and how a
claimed row becomes a ``Claimed``. The dialect (``store.dialects``) holds the *how*:
one ``UPDATE … RETURNING`` on PostgreSQL and SQLite, a short transaction of a few
statements on MySQL/MariaDB (see each dialect's ``claiming`` module).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from django_jobqueue import conf
from django_jobqueue.models import Status
from django_jobqueue.store import sql
from django_jobqueue.store.dialects.base.claiming import ClaimedRow, ClaimSpec
from django_jobqueue.store.dialects.base.spec import KeyRule
from django_jobqueue.store.limits import KEY_LOCK_SPACE, LOCK_SPACE, lock_key


@dataclass(slots=True)
class Claimed:
    """A job as a claim hands it to a run (plain values, not a model instance)."""

    id: uuid.UUID
    kind: str
    queue: str
    payload: dict[str, Any]
    priority: int
    visible_at: datetime
    run_count: int
    failure_count: int
    carry: dict[str, Any]
    claimed_by: str
    claim_expires_at: datetime
    status: str = Status.CLAIMED
    created_at: datetime | None = None  # when it was enqueued
    workflow_id: uuid.UUID | None = None  # a workflow step's workflow (None: a plain job)
    trace_context: str = ""  # the enqueuing code's (``tracing.capture_context``)
    key: str | None = None  # the job's key (per-key rules; None: none)


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """What one claim asks for, one name per idea: built by its caller (the worker's
    ``claiming.claim_request``, ``run_jobs``, a test) and taken whole by the store
    (``claim_jobs``, ``exchange``, the statements shown for EXPLAIN).

    Only ``kinds`` (less ``exclude_kinds``) and, if any, ``queues``. Only priorities >=
    ``floor``; ``preferring`` maps a higher floor to how many of the ``limit`` slots
    prefer it (those slots take that tier first and fall back to the next floor down
    when it has none). ``kind_limits`` caps how many of a kind this claim takes;
    ``max_in_flight`` is each kind's global limit, counted over every worker inside the
    claim; ``per_key`` the kinds with per-key rules, and ``key_after`` for each the key
    after which it looks first (the caller's ``KeyCursor``). The lease is
    ``leases[kind]``, else ``lease``, else the setting; ``now`` is the clock the claim
    reads (a test's frozen one)."""

    limit: int
    kinds: Sequence[str]
    queues: Sequence[str] = ()  # empty: every queue
    exclude_kinds: Collection[str] = frozenset()
    kind_limits: Mapping[str, int] = field(default_factory=dict)
    max_in_flight: Mapping[str, int] = field(default_factory=dict)
    per_key: Mapping[str, KeyRule] = field(default_factory=dict)
    key_after: Mapping[str, str] = field(default_factory=dict)
    floor: int = 0
    preferring: Mapping[int, int] = field(default_factory=dict)
    leases: Mapping[str, timedelta] = field(default_factory=dict)
    lease: timedelta | None = None
    now: datetime | None = None

    @property
    def bounded(self) -> bool:
        """Whether a limit beyond this claim's own rows bounds it (a kind left out at its
        cap, a cap, a global limit): room a settlement beside it frees goes unseen."""
        return bool(self.exclude_kinds or self.kind_limits or self.max_in_flight)


def claim_jobs(*, worker_id: str, request: ClaimRequest) -> list[Claimed]:
    """Claim up to ``request.limit`` runnable jobs for ``worker_id``, in claim order:
    priority, then the time each became runnable, then id (exactly the
    ``jobqueue_job_claim`` partial index)."""
    prepared = prepare(worker_id=worker_id, request=request)
    if prepared is None:
        return []
    return prepared.run()


@dataclass
class PreparedClaim:
    """A claim ready to run (a worker's turn sends it with its settlements), and how to
    read the rows it returns."""

    dialect: sql.Interface
    spec: ClaimSpec
    leases: dict[str, timedelta]
    lease: timedelta

    def run(self) -> list[Claimed]:
        return self.read(self.dialect.claim(self.spec))

    def at(self, now: datetime) -> PreparedClaim:
        """This claim on ``now``'s clock (what is visible, when the leases it takes run
        out): a claim made ready ahead takes its times when it is sent.

        The spec is copied field by field rather than through ``dataclasses.replace``,
        which builds it anew through ``__init__`` from every field: this runs between
        an idle worker's wake-up and its claim, where ``replace`` twice took 50 us of an
        idle pickup (6 us in a hot loop; the copy 0.6)."""
        spec = object.__new__(ClaimSpec)
        spec.__dict__.update(self.spec.__dict__)
        spec.__dict__.update(_clock(now, self.lease, self.leases))
        return PreparedClaim(self.dialect, spec, self.leases, self.lease)

    def read(self, rows: Sequence[Sequence[Any]]) -> list[Claimed]:
        """The claimed jobs from the rows a claim returned (``CLAIMED``), in claim order."""
        d = self.dialect
        now = self.spec.now
        claimed = [
            Claimed(
                id=d.read_uuid(r.id),
                kind=r.kind,
                queue=r.queue,
                payload=sql.loads(r.payload),
                priority=r.priority,
                visible_at=d.read_dt(r.visible_at) or now,
                run_count=r.run_count,
                failure_count=r.failure_count,
                carry=sql.loads(r.carry) or {},
                claimed_by=self.spec.worker_id,
                claim_expires_at=now + self.leases.get(r.kind, self.lease),
                created_at=d.read_dt(r.created_at),
                workflow_id=None if r.workflow_id is None else d.read_uuid(r.workflow_id),
                trace_context=r.trace_context or "",
                key=r.job_key,
            )
            for r in map(ClaimedRow._make, rows)
        ]
        # By the id's integer, as a UUID compares: a bulk load's jobs share their
        # visible_at, and UUID.__lt__ is Python (0.8 us a job of a turn's sort).
        claimed.sort(key=lambda c: (c.priority, c.visible_at, c.id.int))
        return claimed


def prepare(*, worker_id: str, request: ClaimRequest) -> PreparedClaim | None:
    """The claim ``claim_jobs`` would run (None when it would claim nothing)."""
    excluded = set(request.exclude_kinds)
    wanted = [k for k in request.kinds if k not in excluded]
    if request.limit <= 0 or not wanted:
        return None
    now = request.now or timezone.now()
    lease = request.lease or conf.get().lease
    leases = {k: v for k, v in request.leases.items() if k in wanted and v != lease}
    limited = {k: n for k, n in request.max_in_flight.items() if k in wanted}
    keyed = {k: rule for k, rule in request.per_key.items() if k in wanted}
    # A limit per key is counted under the kind's lock, as a max_in_flight is.
    locked = {*limited, *(k for k, rule in keyed.items() if rule.counted)}
    spec = ClaimSpec(
        worker_id=worker_id,
        kinds=wanted,
        queues=list(request.queues),
        tiers=_tiers(request.limit, request.floor, request.preferring),
        **_clock(now, lease, leases),
        caps={k: n for k, n in request.kind_limits.items() if k in wanted},
        limited=limited,
        lock_keys=tuple(sorted({lock_key(k) for k in locked})),
        lock_space=LOCK_SPACE,
        kind_locks={k: lock_key(k) for k in locked},
        key_space=KEY_LOCK_SPACE,
        keyed=keyed,
        key_after={k: after for k, after in request.key_after.items() if k in keyed},
    )
    return PreparedClaim(sql.dialect(), spec, leases, lease)


def _clock(now: datetime, lease: timedelta, leases: Mapping[str, timedelta]) -> dict[str, Any]:
    """A claim's times, read from ``now``: the clock it reads what is visible by, and
    when the leases it takes run out (the kinds in ``leases`` theirs, the rest
    ``lease``). One place for ``prepare`` and for a claim made ready (``PreparedClaim.at``)."""
    return {
        "now": now,
        "default_expiry": now + lease,
        "expiries": {k: now + v for k, v in leases.items()},
    }


def ready_claim(*, worker_id: str, request: ClaimRequest) -> PreparedClaim | None:
    """The claim an idle worker makes ready before its wait, for ``claim_ready`` to send
    when it is woken: what ``prepare`` makes, marked caught up (its claimer found its
    queues caught up: ``ClaimSpec.caught_up``), with its connection made to plan
    generically now rather than after the wake-up (``use_generic_plans``: a look at
    the connection, 40 us of an idle pickup). It reads the database only the first time
    a connection is seen, so the caller guards it as any statement."""
    prepared = prepare(worker_id=worker_id, request=request)
    if prepared is None:
        return None
    prepared.dialect.use_generic_plans()
    return replace(prepared, spec=replace(prepared.spec, caught_up=True))


def claim_ready(ready: PreparedClaim) -> list[Claimed]:
    """Send a claim made ahead (an idle worker's, made before its wait by ``ready_claim``,
    so that a wake-up's claim goes out without the Python that builds it), on the clock
    of now: it claims what a claim prepared now would."""
    return ready.at(timezone.now()).run()


def claim_statement(*, worker_id: str, request: ClaimRequest) -> tuple[str, list[Any]] | None:
    """The statement and parameters ``claim_jobs`` runs for ``request``, for EXPLAIN (on
    MySQL/MariaDB, the first tier's locking SELECT: the statement that reads the index)."""
    prepared = prepare(worker_id=worker_id, request=request)
    if prepared is None:
        return None
    return prepared.dialect.claim_statement(prepared.spec).statement()


def _tiers(limit: int, floor: int, preferring: Mapping[int, int]) -> list[tuple[int, int]]:
    """(floor, slots) from the highest floor down; the last is ``floor`` with the rest."""
    tiers: list[tuple[int, int]] = []
    taken = 0
    for f in sorted(preferring, reverse=True):
        n = min(preferring[f], limit - taken)
        if f > floor and n > 0:
            tiers.append((f, n))
            taken += n
    tiers.append((floor, limit - taken))
    return tiers
