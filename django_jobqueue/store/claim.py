"""Claiming: up to the free slots in one statement and one round trip.

``UPDATE … FROM (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING`` the columns a
run needs. The priority floors (a slot that prefers a lower tier, falling back to
higher ones when that tier is empty) and the per-kind caps are folded into the same
statement as materialised CTEs, one per floor, so a claim never costs a second query;
so is the paused-queue check (the small pause table read inside the statement).
The locking subqueries are MATERIALIZED so the planner cannot run them twice.

A kind with a global ``max_in_flight`` is capped the same way, its cap being the limit
less the kind's claimed rows, counted inside the statement: on PostgreSQL by
``django_jobqueue_free_slots``, which first takes the advisory locks of the claim's
limited kinds, in one order (see ``limits``), once the claim meets a pending job of
one of them. Still one
statement; without limited kinds it is exactly the statement it was before.

MySQL 8 and MariaDB 10.6+ have ``SKIP LOCKED`` but neither ``UPDATE … RETURNING`` nor
locking clauses in CTEs: there a claim is one short transaction of a few statements
(``_claim_mysql``): each tier's candidates ``SELECT … FOR UPDATE SKIP LOCKED`` (one
SELECT per capped kind), then the UPDATE of the picked ids and the read of their rows;
a ``max_in_flight`` kind's count is taken under a named lock (``GET_LOCK``) held until
the claim commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Required, TypedDict, Unpack

from django.db import transaction
from django.utils import timezone

from django_jobqueue import conf
from django_jobqueue.models import Status
from django_jobqueue.store import sql
from django_jobqueue.store.limits import LOCK_SPACE, lock_key


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


# Unqualified: SQLite's RETURNING does not know the table's alias.
_RETURNING = (
    "id, kind, queue, payload, priority, visible_at, run_count, failure_count, carry, created_at"
)


class ClaimOptions(TypedDict, total=False):
    """What a claim takes (see ``claim_jobs``)."""

    worker_id: Required[str]
    limit: Required[int]
    kinds: Required[Sequence[str]]
    queues: Sequence[str] | None
    exclude_kinds: Iterable[str]
    kind_limits: Mapping[str, int] | None
    max_in_flight: Mapping[str, int] | None
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
    takes. The lease is ``leases[kind]``, else ``lease``, else the setting; ``now``
    is the clock the claim reads (a test's frozen one).
    """
    prepared = prepare(**claim)
    if prepared is None:
        return []
    return prepared.run()


@dataclass
class ClaimSpec:
    """What a claim selects, as values (the MySQL/MariaDB claim builds its statements
    from them one at a time)."""

    kinds: list[str]
    queues: list[str]
    caps: dict[str, int]
    tiers: list[tuple[int, int]]
    default_expiry: datetime
    limited: dict[str, int] = field(default_factory=dict)  # global max_in_flight per kind


@dataclass
class PreparedClaim:
    """A claim ready to run: its CTEs and UPDATE (apart, so a worker's turn can send them
    with its settlements as one statement), and how to read the rows it returns."""

    dialect: sql.Dialect
    ctes: list[str]
    update: str
    params: list[Any]
    worker_id: str
    now: datetime
    leases: dict[str, timedelta]
    lease: timedelta
    spec: ClaimSpec | None = None

    @property
    def statement(self) -> str:
        return f"WITH {', '.join(self.ctes)} {self.update}"

    def run(self) -> list[Claimed]:
        """Claim: the one statement, or on MySQL/MariaDB its short transaction."""
        if self.dialect.mysql:
            assert self.spec is not None
            return self.read(_claim_mysql(self, self.spec))
        return self.read(self.dialect.run(self.statement, self.params))

    def read(self, rows: Sequence[Sequence[Any]]) -> list[Claimed]:
        """The claimed jobs from the rows of ``RETURNING``, in claim order."""
        d = self.dialect
        claimed = [
            Claimed(
                id=d.read_uuid(r[0]),
                kind=r[1],
                queue=r[2],
                payload=sql.loads(r[3]),
                priority=r[4],
                visible_at=d.read_dt(r[5]) or self.now,
                run_count=r[6],
                failure_count=r[7],
                carry=sql.loads(r[8]) or {},
                claimed_by=self.worker_id,
                claim_expires_at=self.now + self.leases.get(r[1], self.lease),
                created_at=d.read_dt(r[9]),
            )
            for r in rows
        ]
        claimed.sort(key=lambda c: (c.priority, c.visible_at, c.id))
        return claimed


def prepare(**claim: Unpack[ClaimOptions]) -> PreparedClaim | None:
    """The claim ``claim_jobs`` would run (None when it would claim nothing)."""
    excluded = set(claim.get("exclude_kinds", ()))
    wanted = [k for k in claim["kinds"] if k not in excluded]
    limit = claim["limit"]
    if limit <= 0 or not wanted:
        return None
    worker_id = claim["worker_id"]
    now = claim.get("now") or timezone.now()
    lease = claim.get("lease") or conf.get().lease
    leases = {k: v for k, v in (claim.get("leases") or {}).items() if k in wanted and v != lease}
    limited = {k: n for k, n in (claim.get("max_in_flight") or {}).items() if k in wanted}
    d = sql.dialect()
    if d.mysql:
        spec = ClaimSpec(
            kinds=wanted,
            queues=list(claim.get("queues") or []),
            caps={k: n for k, n in (claim.get("kind_limits") or {}).items() if k in wanted},
            tiers=_tiers(limit, claim.get("floor", 0), claim.get("preferring")),
            default_expiry=now + lease,
            limited=limited,
        )
        return PreparedClaim(d, [], "", [], worker_id, now, leases, lease, spec)
    ctes, update, params = _claim_sql(
        d,
        worker_id=worker_id,
        kinds=wanted,
        queues=list(claim.get("queues") or []),
        caps={k: n for k, n in (claim.get("kind_limits") or {}).items() if k in wanted},
        limited=limited,
        tiers=_tiers(limit, claim.get("floor", 0), claim.get("preferring")),
        now=now,
        leases=leases,
        default_expiry=now + lease,
    )
    return PreparedClaim(d, ctes, update, params, worker_id, now, leases, lease)


def claim_statement(**claim: Unpack[ClaimOptions]) -> tuple[str, list[Any]] | None:
    """The statement and parameters ``claim_jobs(**claim)`` runs, for EXPLAIN (on
    MySQL/MariaDB, the first tier's locking SELECT: the statement that reads the index)."""
    prepared = prepare(**claim)
    if prepared is None:
        return None
    if prepared.spec is not None:
        spec = prepared.spec
        floor, slots = spec.tiers[0]
        return _mysql_select(
            prepared.dialect,
            kinds=[k for k in spec.kinds if k not in spec.caps] or spec.kinds,
            queues=spec.queues,
            floor=floor,
            now=prepared.now,
            exclude=[],
            limit=slots,
        )
    return (prepared.statement, prepared.params)


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


def _claim_sql(
    d: sql.Dialect,
    *,
    worker_id: str,
    kinds: list[str],
    queues: list[str],
    caps: dict[str, int],
    limited: dict[str, int],
    tiers: list[tuple[int, int]],
    now: datetime,
    leases: dict[str, timedelta],
    default_expiry: datetime,
) -> tuple[list[str], str, list[Any]]:
    """The claim: a CTE per tier, then the UPDATE of what they picked."""
    ctes: list[str] = []
    params: list[Any] = []
    cumulative = 0
    for i, (floor, slots) in enumerate(tiers):
        cumulative += slots
        previous = [f"t{j}" for j in range(i)]
        where, where_params = _candidates(d, kinds=kinds, queues=queues, floor=floor, now=now)
        if previous:
            union = " UNION ALL ".join(f"SELECT id FROM {p}" for p in previous)
            where += f" AND j.id NOT IN ({union})"
        if caps or limited:
            capped, capped_params = _capped(
                d,
                caps=caps,
                limited=limited,
                queues=queues,
                floor=floor,
                now=now,
                previous=previous,
            )
            where += capped
            where_params += capped_params
        limit_sql = _remaining(cumulative, previous)
        ctes.append(
            f"t{i} AS {d.materialized}(SELECT j.id, j.kind FROM {sql.JOB} j"
            f" WHERE {where} ORDER BY j.priority, j.visible_at, j.id"
            f" LIMIT {limit_sql}{d.skip_locked})"
        )
        params += where_params
    picked = " UNION ALL ".join(f"SELECT id FROM t{i}" for i in range(len(tiers)))
    # An array, so PostgreSQL looks the few ids up by primary key whatever it guesses of
    # the tiers' row counts (a guessed-large semi-join would scan the table instead).
    chosen = f"j.id = ANY(ARRAY({picked}))" if d.postgres else f"j.id IN ({picked})"
    expiry = "%s"
    expiry_params: list[Any] = []
    if leases:
        whens = " ".join("WHEN %s THEN %s" for _ in leases)
        expiry = f"CASE j.kind {whens} ELSE %s END"
        for kind, lease in leases.items():
            expiry_params += [kind, d.dt(now + lease)]
    expiry_params.append(d.dt(default_expiry))
    if d.postgres:
        expiry = f"({expiry})::timestamptz"
    update = (
        f"UPDATE {sql.JOB} AS j SET status = 'claimed',"
        f" claimed_by = %s, claim_expires_at = {expiry}, run_count = j.run_count + 1"
        f" WHERE {chosen} RETURNING {_RETURNING}"
    )
    return ctes, update, [*params, worker_id, *expiry_params]


def _candidates(
    d: sql.Dialect, *, kinds: list[str], queues: list[str], floor: int, now: datetime
) -> tuple[str, list[Any]]:
    kind_sql, kind_params = d.in_list("j.kind", kinds)
    where = f"j.status = 'pending' AND j.visible_at <= %s AND {kind_sql} AND {d.not_paused}"
    params: list[Any] = [d.dt(now), *kind_params]
    if queues:
        queue_sql, queue_params = d.in_list("j.queue", queues)
        where += f" AND {queue_sql}"
        params += queue_params
    if floor:
        where += " AND j.priority >= %s"
        params.append(floor)
    return where, params


def _capped(
    d: sql.Dialect,
    *,
    caps: dict[str, int],
    limited: dict[str, int],
    queues: list[str],
    floor: int,
    now: datetime,
    previous: list[str],
) -> tuple[str, list[Any]]:
    """Rows of a capped kind only from that kind's first (cap − already picked) candidates.

    A kind's cap is this claim's ``caps`` entry, or its ``limited`` entry less the kind's
    claimed rows (counted here, in the statement's snapshot), or the smaller of the two.
    """
    kinds = [*caps, *(k for k in limited if k not in caps)]
    names_sql, names_params = d.in_list("j.kind", kinds)
    # Every limited kind's lock, taken together in one order by the first count.
    lock_keys = sorted({lock_key(k) for k in limited})
    branches: list[str] = []
    params: list[Any] = [*names_params]
    for kind in kinds:
        where, where_params = _candidates(d, kinds=[kind], queues=queues, floor=floor, now=now)
        taken = " + ".join(f"(SELECT count(*) FROM {p} WHERE {p}.kind = %s)" for p in previous)
        cap = caps.get(kind)
        if kind in limited:
            greatest, least = ("GREATEST", "LEAST") if d.postgres else ("max", "min")
            if d.postgres:
                # Locks the kind's claims, then counts on a snapshot newer than the lock.
                free = "django_jobqueue_free_slots(%s, %s, %s, %s::int4[])"
                free_params = [kind, limited[kind], LOCK_SPACE, lock_keys]
            else:  # one writer at a time: the statement's own count is current
                free = (
                    f"%s - (SELECT count(*) FROM {sql.JOB} WHERE status = 'claimed' AND kind = %s)"
                )
                free_params = [limited[kind], kind]
            cap_sql = f"{least}(%s, {free})" if cap is not None else free
            cap_params = [*([cap] if cap is not None else []), *free_params]
            # Never below zero: SQLite reads a negative LIMIT as no limit at all.
            limit = (
                f"{greatest}({cap_sql} - ({taken}), 0)" if previous else f"{greatest}({cap_sql}, 0)"
            )
        else:
            limit = f"%s - ({taken})" if previous else "%s"
            cap_params = [cap]
        branches.append(
            f"SELECT id FROM (SELECT j.id FROM {sql.JOB} j WHERE {where}"
            f" ORDER BY j.priority, j.visible_at, j.id LIMIT {limit}) AS c"
        )
        params += [*where_params, *cap_params, *([kind] * len(previous))]
    return f" AND (NOT {names_sql} OR j.id IN ({' UNION ALL '.join(branches)}))", params


def _remaining(cumulative: int, previous: list[str]) -> str:
    """This tier's LIMIT: the slots up to and including it, less what earlier tiers took."""
    if not previous:
        return str(cumulative)
    taken = " + ".join(f"(SELECT count(*) FROM {p})" for p in previous)
    return f"{cumulative} - ({taken})"


def _claim_mysql(prepared: PreparedClaim, spec: ClaimSpec) -> list[tuple[Any, ...]]:
    """The claim on MySQL/MariaDB, in one transaction: lock each tier's candidates with
    ``FOR UPDATE SKIP LOCKED`` (capped kinds each by a SELECT of their own, limited to
    what is left of the cap), mark the picked rows claimed, read them back.

    Candidates a tier locked beyond its slots stay locked (not claimed) until the commit
    a moment later; a concurrent claim skips them meanwhile, as it would on PostgreSQL.
    """
    d = prepared.dialect
    if not spec.limited:
        return _claim_mysql_locked(prepared, spec)
    # max_in_flight: each limited kind's named lock (server-wide, so the database's name
    # is in it), taken in one order so two claims never wait in a circle, held until the
    # claim has committed; the kind's claimed rows are counted under it.
    database = str(d.conn.settings_dict["NAME"])[:40]
    names = [f"jq:{database}:{key}" for key in sorted({lock_key(k) for k in spec.limited})]
    taken: list[str] = []
    try:
        for name in names:
            [(got,)] = d.run("SELECT GET_LOCK(%s, 30)", [name])
            if got != 1:
                return []  # not within 30 s: claim nothing this turn
            taken.append(name)
        return _claim_mysql_locked(prepared, spec)
    finally:
        for name in taken:
            d.run("SELECT RELEASE_LOCK(%s)", [name])


def _claim_mysql_locked(prepared: PreparedClaim, spec: ClaimSpec) -> list[tuple[Any, ...]]:
    d = prepared.dialect
    now = prepared.now
    picked: list[tuple[Any, str]] = []  # (id as the database gave it, kind)
    with transaction.atomic(using=sql.alias()):
        if spec.limited:
            kinds_sql, kinds_params = d.in_list("kind", list(spec.limited))
            running = dict(
                d.run(
                    f"SELECT kind, count(*) FROM {sql.JOB} WHERE status = 'claimed'"
                    f" AND {kinds_sql} GROUP BY kind",
                    kinds_params,
                )
            )
            caps = dict(spec.caps)
            for kind, most in spec.limited.items():
                room = max(0, most - int(running.get(kind, 0)))
                caps[kind] = min(caps.get(kind, room), room)
            spec = replace(spec, caps=caps)
        cumulative = 0
        for floor, slots in spec.tiers:
            cumulative += slots
            want = cumulative - len(picked)
            if want <= 0:
                continue
            taken: dict[str, int] = {}
            for _, kind in picked:
                taken[kind] = taken.get(kind, 0) + 1
            groups: list[tuple[list[str], int]] = []
            free = [k for k in spec.kinds if k not in spec.caps]
            if free:
                groups.append((free, want))
            for kind, cap in spec.caps.items():
                room = min(want, cap - taken.get(kind, 0))
                if room > 0:
                    groups.append(([kind], room))
            found: list[tuple[Any, ...]] = []
            for kinds, room in groups:
                statement, params = _mysql_select(
                    d,
                    kinds=kinds,
                    queues=spec.queues,
                    floor=floor,
                    now=now,
                    exclude=[job_id for job_id, _ in picked],
                    limit=room,
                )
                found += d.run(statement, params)
            if len(groups) > 1:
                found.sort(key=lambda r: (r[2], d.read_dt(r[3]), d.read_uuid(r[0])))
            picked += [(r[0], r[1]) for r in found[:want]]
        if not picked:
            return []
        ids = [job_id for job_id, _ in picked]
        chosen, id_params = d.in_list("id", ids)
        expiry = "%s"
        expiry_params: list[Any] = []
        if prepared.leases:
            whens = " ".join("WHEN %s THEN %s" for _ in prepared.leases)
            expiry = f"CASE kind {whens} ELSE %s END"
            for kind, lease in prepared.leases.items():
                expiry_params += [kind, d.dt(now + lease)]
        expiry_params.append(d.dt(spec.default_expiry))
        d.run(
            f"UPDATE {sql.JOB} SET status = 'claimed', claimed_by = %s,"
            f" claim_expires_at = {expiry}, run_count = run_count + 1 WHERE {chosen}",
            [prepared.worker_id, *expiry_params, *id_params],
        )
        return d.run(f"SELECT {_RETURNING} FROM {sql.JOB} WHERE {chosen}", id_params)


def _mysql_select(
    d: sql.Dialect,
    *,
    kinds: list[str],
    queues: list[str],
    floor: int,
    now: datetime,
    exclude: list[Any],
    limit: int,
) -> tuple[str, list[Any]]:
    """One locking candidate SELECT of the MySQL/MariaDB claim, in claim order."""
    where, params = _candidates(d, kinds=kinds, queues=queues, floor=floor, now=now)
    if exclude:
        excluded, excluded_params = d.in_list("j.id", exclude)
        where += f" AND NOT {excluded}"
        params += excluded_params
    statement = (
        f"SELECT j.id, j.kind, j.priority, j.visible_at FROM {sql.JOB} j WHERE {where}"
        f" ORDER BY j.priority, j.visible_at, j.id LIMIT %s{d.skip_locked}"
    )
    return statement, [*params, limit]
