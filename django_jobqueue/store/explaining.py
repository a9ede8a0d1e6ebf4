"""The facts behind "why is this job not running" (``task.explain`` decides and words
them): where a pending job stands in claim order, who holds its kind's or its key's
slots, its key's FIFO head, its queue's pause, the live workers that would claim it.

Each fact is read by the rule the claim itself applies, never a second statement of
it: the position counts rows meeting the dialect's own claim condition
(``candidates``: pending, due, queue not paused) ahead of the job in the claim index's
order (``ORDER``); a key's head is its first pending job in enqueue order
(``FIFO_ORDER``, as an ``ordered`` claim takes it); a worker serves a job as
``stranded.served`` says. Reads only, each bounded (a few rows, or one count).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from django_jobqueue.models import Job, QueuePause, Status, WorkerHeartbeat
from django_jobqueue.store import sql
from django_jobqueue.store.dialects.base.claiming import ORDER
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.keyed import FIFO_ORDER, KEY
from django_jobqueue.store.dialects.base.spec import ClaimSpec
from django_jobqueue.store.statistics import _workers, serves

# How many holders of a limit are named (the count says how many there are).
HOLDERS_NAMED = 3
# The claim index's columns, in its order (``ORDER``: "ORDER BY j.priority, …").
CLAIM_COLUMNS = ORDER.removeprefix("ORDER BY ")


@dataclass(frozen=True)
class Holder:
    """A claimed job holding a slot: who runs it and until when its lease runs."""

    id: uuid.UUID
    claimed_by: str
    lease_until: datetime | None
    key: str | None


@dataclass(frozen=True)
class Held:
    """The claimed jobs of a kind (or of one of its keys): how many, and the first few
    by lease end (the one whose lease ends first is the oldest claim or renewal)."""

    count: int
    holders: tuple[Holder, ...]


@dataclass(frozen=True)
class Position:
    """Where a runnable job stands in its queue's claim order: the claimable jobs ahead
    of it (for a worker of ``kinds``), and how many of those have a higher priority."""

    ahead: int
    higher: int


def pause_of(*, queue: str) -> QueuePause | None:
    """The queue's pause (who, since when), or None when it runs."""
    return QueuePause.objects.using(sql.alias()).filter(queue=queue).first()


def live_workers(*, now: datetime) -> list[WorkerHeartbeat]:
    """The workers alive now (a fresh heartbeat, not stopped), as the dashboard counts."""
    _, live = _workers(now)
    return live


def serving_kinds(live: list[WorkerHeartbeat], *, kind: str, queue: str) -> list[str]:
    """The kinds the ``live`` workers that serve ``kind`` in ``queue`` claim (empty: no
    live worker serves it): ``statistics.serves``, as the dashboard's unserved kinds."""
    kinds: set[str] = set()
    for w in live:
        if serves(w, kind, queue):
            kinds.update(w.kinds)
    return sorted(kinds)


def held(*, kind: str, key: str | None = None) -> Held:
    """The claimed jobs of ``kind`` (of its ``key`` when given)."""
    claimed = sql.jobs().filter(status=Status.CLAIMED, kind=kind)
    if key is not None:
        claimed = claimed.filter(key=key)
    count = claimed.count()
    rows = claimed.order_by("claim_expires_at", "id").values_list(
        "id", "claimed_by", "claim_expires_at", "key"
    )[:HOLDERS_NAMED]
    return Held(count=count, holders=tuple(Holder(*row) for row in rows))


def key_head(*, kind: str, key: str) -> Job | None:
    """``key``'s FIFO head among ``kind``'s pending jobs: the one an ``ordered`` claim
    takes next (runnable or not: a key whose head waits, waits)."""
    order = [c.strip().removeprefix("j.") for c in FIFO_ORDER.split(",")]
    return sql.jobs().filter(status=Status.PENDING, kind=kind, key=key).order_by(*order).first()


def position(
    *, job: Job, kinds: list[str], now: datetime, full: list[str], key_most: int | None
) -> Position:
    """How many jobs a claim by a worker of ``kinds`` in the job's queue takes before
    it: rows meeting the claim's own condition, before it in the claim index's order,
    less those no claim takes now: of the ``full`` kinds (at their ``max_in_flight``)
    and, with ``key_most``, of the job's kind's keys with that many claimed."""
    d = sql.dialect()
    spec = ClaimSpec(
        worker_id="", kinds=kinds, queues=[job.queue], tiers=[], now=now, default_expiry=now
    )
    condition = d.candidates(spec, kinds=kinds or [job.kind], floor=0)
    me = [job.priority, d.dt(job.visible_at), d.job_id(job.id)]
    parts: list[Fragment | str] = [
        "SELECT count(*), coalesce(sum(CASE WHEN ",
        Fragment("j.priority < %s", [job.priority]),
        f" THEN 1 ELSE 0 END), 0) FROM {sql.JOB} j WHERE ",
        condition,
        " AND ",
        Fragment(f"({CLAIM_COLUMNS}) < (%s, %s, %s)", me),
    ]
    if full:
        parts += [" AND NOT ", Fragment(*d.in_list("j.kind", full))]
    if key_most is not None:
        parts.append(
            Fragment(
                f" AND NOT (j.kind = %s AND j.{KEY} IN (SELECT c.{KEY} FROM {sql.JOB} c"
                f" WHERE c.status = 'claimed' AND c.kind = %s AND c.{KEY} IS NOT NULL"
                f" GROUP BY c.{KEY} HAVING count(*) >= %s))",
                [job.kind, job.kind, key_most],
            )
        )
    [(ahead, above)] = d.run(*Fragment.concat(*parts).statement())
    return Position(ahead=int(ahead), higher=int(above or 0))


@dataclass(frozen=True)
class KeyTurns:
    """A ``fair`` kind's keys as its claim takes turns between them: the keys with
    runnable jobs that run fewer than this key (served before it), and when this key's
    last job finished (None: none stored)."""

    before: int
    last_finished: datetime | None


def key_turns(*, kind: str, key: str, running: int, now: datetime) -> KeyTurns:
    """How many other keys of ``kind`` a fair claim serves before ``key`` (which runs
    ``running`` jobs): those with a runnable job and fewer claimed."""
    jobs = sql.jobs().filter(kind=kind, key__isnull=False).exclude(key=key)
    runnable = jobs.filter(status=Status.PENDING, visible_at__lte=now)
    keys = set(runnable.values_list("key", flat=True).distinct()[:1000])
    busy = {
        row["key"]: row["n"]
        for row in jobs.filter(status=Status.CLAIMED, key__in=keys)
        .values("key")
        .annotate(n=Count("*"))
        .order_by("key")
    }
    before = sum(1 for k in keys if busy.get(k, 0) < running)
    last = (
        sql.jobs()
        .filter(Q(kind=kind, key=key, finished_at__isnull=False))
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    return KeyTurns(before=before, last_finished=last)


__all__ = [
    "Held",
    "Holder",
    "KeyTurns",
    "Position",
    "held",
    "key_head",
    "key_turns",
    "live_workers",
    "pause_of",
    "position",
    "serving_kinds",
]
