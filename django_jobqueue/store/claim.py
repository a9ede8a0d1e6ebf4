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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Required, TypedDict, Unpack

from django.utils import timezone

from django_jobqueue import conf
from django_jobqueue.models import Status
from django_jobqueue.store import sql
from django_jobqueue.store.dialects.base.claiming import ClaimSpec
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


class ClaimOptions(TypedDict, total=False):
    """What a claim takes (see ``claim_jobs``)."""

    worker_id: Required[str]
    limit: Required[int]
    kinds: Required[Sequence[str]]
    queues: Sequence[str] | None
    exclude_kinds: Iterable[str]
    kind_limits: Mapping[str, int] | None
    max_in_flight: Mapping[str, int] | None
    per_key: Mapping[str, KeyRule] | None
    floor: int
    preferring: Mapping[int, int] | None
    leases: Mapping[str, timedelta] | None
    lease: timedelta | None
    now: datetime | None


def claim_jobs(**claim: Unpack[ClaimOptions]) -> list[Claimed]:
    """Claim up to ``limit`` runnable jobs for ``worker_id``, in claim order.

    Only ``kinds`` (less ``exclude_kinds``) and, if given, ``queues``. Order is
    priority, then the time each became runnable, then id: exactly the
    ``jobqueue_job_claim`` partial index. Only priorities >= ``floor`` are taken.
    ``preferring`` maps a higher floor to how many of the ``limit`` slots prefer it:
    those slots take jobs of priority >= that floor first and fall back to the next
    floor down when it has none. ``kind_limits`` caps how many of a kind this call
    takes. ``per_key`` gives the kinds with per-key rules (``KeyRule``: a most per key,
    FIFO per key, round-robin between keys). The lease is ``leases[kind]``, else
    ``lease``, else the setting; ``now`` is the clock the claim reads (a test's frozen
    one).
    """
    prepared = prepare(**claim)
    if prepared is None:
        return []
    return prepared.run()


@dataclass
class PreparedClaim:
    """A claim ready to run (a worker's turn sends it with its settlements), and how to
    read the rows it returns."""

    dialect: sql.Dialect
    spec: ClaimSpec
    leases: dict[str, timedelta]
    lease: timedelta

    def run(self) -> list[Claimed]:
        return self.read(self.dialect.claim(self.spec))

    def read(self, rows: Sequence[Sequence[Any]]) -> list[Claimed]:
        """The claimed jobs from the rows a claim returned (``CLAIMED``), in claim order."""
        d = self.dialect
        now = self.spec.now
        claimed = [
            Claimed(
                id=d.read_uuid(r[0]),
                kind=r[1],
                queue=r[2],
                payload=sql.loads(r[3]),
                priority=r[4],
                visible_at=d.read_dt(r[5]) or now,
                run_count=r[6],
                failure_count=r[7],
                carry=sql.loads(r[8]) or {},
                claimed_by=self.spec.worker_id,
                claim_expires_at=now + self.leases.get(r[1], self.lease),
                created_at=d.read_dt(r[9]),
                workflow_id=None if r[10] is None else d.read_uuid(r[10]),
                trace_context=r[11] or "",
            )
            for r in rows
        ]
        claimed.sort(key=lambda c: (c.priority, c.visible_at, c.id))
        if self.spec.keyed:
            served = [(r[1], r[12]) for r in rows if r[12] is not None and r[1] in self.spec.keyed]
            for kind in {k for k, _ in served}:
                _served[kind] = max(key for k, key in served if k == kind)
        return claimed


# Per keyed kind, the greatest key this process's last claim of it served: the next claim
# looks at the keys after it first (a claim looks at a bounded number of keys).
_served: dict[str, str] = {}


def prepare(**claim: Unpack[ClaimOptions]) -> PreparedClaim | None:
    """The claim ``claim_jobs`` would run (None when it would claim nothing)."""
    excluded = set(claim.get("exclude_kinds", ()))
    wanted = [k for k in claim["kinds"] if k not in excluded]
    limit = claim["limit"]
    if limit <= 0 or not wanted:
        return None
    now = claim.get("now") or timezone.now()
    lease = claim.get("lease") or conf.get().lease
    leases = {k: v for k, v in (claim.get("leases") or {}).items() if k in wanted and v != lease}
    limited = {k: n for k, n in (claim.get("max_in_flight") or {}).items() if k in wanted}
    keyed = {k: rule for k, rule in (claim.get("per_key") or {}).items() if k in wanted}
    # A limit per key is counted under the kind's lock, as a max_in_flight is.
    locked = {*limited, *(k for k, rule in keyed.items() if rule.counted)}
    spec = ClaimSpec(
        worker_id=claim["worker_id"],
        kinds=wanted,
        queues=list(claim.get("queues") or []),
        tiers=_tiers(limit, claim.get("floor", 0), claim.get("preferring")),
        now=now,
        default_expiry=now + lease,
        expiries={k: now + v for k, v in leases.items()},
        caps={k: n for k, n in (claim.get("kind_limits") or {}).items() if k in wanted},
        limited=limited,
        lock_keys=tuple(sorted({lock_key(k) for k in locked})),
        lock_space=LOCK_SPACE,
        kind_locks={k: lock_key(k) for k in locked},
        key_space=KEY_LOCK_SPACE,
        keyed=keyed,
        key_after={k: _served[k] for k in keyed if k in _served},
    )
    return PreparedClaim(sql.dialect(), spec, leases, lease)


def claim_statement(**claim: Unpack[ClaimOptions]) -> tuple[str, list[Any]] | None:
    """The statement and parameters ``claim_jobs(**claim)`` runs, for EXPLAIN (on
    MySQL/MariaDB, the first tier's locking SELECT: the statement that reads the index)."""
    prepared = prepare(**claim)
    if prepared is None:
        return None
    return prepared.dialect.claim_statement(prepared.spec).statement()


def _tiers(limit: int, floor: int, preferring: Mapping[int, int] | None) -> list[tuple[int, int]]:
    """(floor, slots) from the highest floor down; the last is ``floor`` with the rest."""
    tiers: list[tuple[int, int]] = []
    taken = 0
    for f in sorted((preferring or {}), reverse=True):
        n = min(preferring[f], limit - taken) if preferring else 0
        if f > floor and n > 0:
            tiers.append((f, n))
            taken += n
    tiers.append((floor, limit - taken))
    return tiers
