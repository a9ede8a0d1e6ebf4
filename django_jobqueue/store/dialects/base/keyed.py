"""Per-key claims (issue 23): the branch of the one-statement claim that picks a keyed
kind's rows, with per-key limits, FIFO per key and round-robin between keys.

A kind with key rules (``KeyRule``) takes its keyed rows only from its branch: each
key's first rows ranked in claim order (``rn``: 1 for a key's first runnable job), or
for an ``ordered`` kind only the key's first pending job in enqueue order (its id, a
UUIDv7), and then:

- ``most`` (``max_in_flight_per_key``): a key's rows only while ``rn`` is within what
  the key has left (``most`` less its claimed jobs, counted by the claim: on PostgreSQL
  under an advisory lock per key, on a snapshot newer than it; SQLite has one writer);
- ``ordered``: ``most`` of one, from the FIFO head only;
- ``fair``: the branch orders by priority, then ``rn`` plus the key's claimed jobs, so
  a claim takes every key's first job before any key's second, and a key already
  running jobs waits behind one that runs none.

Where the ranked rows come from is the dialect's (``key_rows``): here a window over
every runnable row of the kind (SQLite: one writer, a first run's table), on PostgreSQL
a LATERAL index probe per key with pending jobs. A keyed kind's jobs without a key are
claimed as any job is, by the kind's other limits.
"""

from __future__ import annotations

from collections.abc import Sequence

from django_jobqueue.models import Job
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.primitives import Primitives
from django_jobqueue.store.dialects.base.spec import ClaimSpec

JOB = Job._meta.db_table
KEY = Job._meta.get_field("key").column  # job_key: KEY is reserved in MySQL
# Claim order within a key, and enqueue order (FIFO).
KEY_ORDER = "j.priority, j.visible_at, j.id"
FIFO_ORDER = "j.id"
# Claim order within one kind and key written as jobqueue_job_key_claim's whole column list
# (the same order there), so that only that index serves it without a sort.
KEY_INDEX_ORDER = f"ORDER BY j.kind, j.{KEY}, {KEY_ORDER}"


class KeyedClaims(Primitives):
    """The keyed kinds' branch of the claim; the dialect says where rows come from."""

    def skipping_locked(self, select: Fragment) -> Fragment:
        """``select`` locking the rows it reads, skipping those another claim holds."""
        return select + " FOR UPDATE SKIP LOCKED"

    def pool_part(self, select: Fragment) -> Fragment:
        """A part of a keyed claim's pool of ids (``_pooled``) that any claim may take
        from: as read here, unlocked. Two claims at once may read the same first rows
        then, and the second finds them all taken by the first at the tier's lock; a
        dialect whose claims run side by side locks them here instead (PostgreSQL)."""
        return select

    def keyed_branch(
        self, spec: ClaimSpec, kind: str, floor: int, previous: list[str], room: Fragment
    ) -> Fragment:
        """The ids of ``kind``'s keyed rows this tier may claim, at most ``room``."""
        rule = spec.keyed[kind]
        claims = self.key_claims_source(spec, kind)
        claimed = "COALESCE(cl.n, 0)"
        if previous:  # what earlier tiers of this claim took of the key
            taken = " + ".join(
                f"(SELECT count(*) FROM {p} WHERE {p}.kind = %s AND {p}.{KEY} = c.{KEY})"
                for p in previous
            )
            claimed_now = Fragment(f"{claimed} + {taken}", [kind] * len(previous))
        else:
            claimed_now = Fragment(claimed)
        where: list[Fragment | str] = []
        limit = rule.per_key
        if limit is not None:
            where = [" WHERE c.rn <= ", Fragment("%s - (", [limit]), claimed_now, ")"]
        # Fair: by rank, then the keys after the last one served before those wrapped to.
        rank = "c.rn + COALESCE(cl.n, 0), c.part, " if rule.fair else ""
        return Fragment.concat(
            "SELECT id FROM (SELECT c.id FROM (",
            self.key_rows(spec, kind, floor, previous, room),
            ") AS c LEFT JOIN ",
            claims,
            f" AS cl ON cl.{KEY} = c.{KEY}",
            *where,
            f" ORDER BY c.priority, {rank}c.visible_at, c.id LIMIT ",
            room,
            ") AS kb",
        )

    def keyed_ctes(self, spec: ClaimSpec, rooms: dict[str, Fragment]) -> list[Fragment]:
        """CTEs the claim puts before its tiers, made once for all of them (``rooms``: the
        most each keyed kind's claim takes). None here."""
        return []

    def key_claims_source(self, spec: ClaimSpec, kind: str) -> Fragment:
        """The source of the ``(job_key, n)`` rows the branch joins (``key_claims``).
        Here the count itself, inline."""
        return Fragment.concat("(", self.key_claims(spec, kind), ")")

    def key_claims(self, spec: ClaimSpec, kind: str) -> Fragment:
        """``(job_key, n)``: the kind's claimed jobs per key. One writer at a time here,
        so the statement's own count is current."""
        return Fragment(
            f"SELECT {KEY}, count(*) AS n FROM {JOB} WHERE status = 'claimed' AND kind = %s"
            f" AND {KEY} IS NOT NULL{self.settled_apart(spec)} GROUP BY {KEY}",
            [kind],
        )

    def settled_apart(self, spec: ClaimSpec) -> str:
        """A condition (`` AND …``) leaving out of ``key_claims`` the claimed rows the
        claim's own statement settles for good: none here, where a claim never shares a
        statement with settlements."""
        return ""

    def key_rows(
        self, spec: ClaimSpec, kind: str, floor: int, previous: list[str], room: Fragment
    ) -> Fragment:
        """``(id, job_key, priority, visible_at, rn, part)``: the kind's runnable keyed
        rows, each ranked within its key (``rn`` from 1; ``part`` 1 for a key a claim
        wrapped round to, else 0). Here a window over all of them: every pending row of
        the kind is read, once per claim."""
        rule = spec.keyed[kind]
        runnable = self.key_candidates(spec, kind, floor, previous)
        after = spec.key_after.get(kind)
        part = (
            Fragment("0 AS part")
            if after is None
            else Fragment(f"CASE WHEN j.{KEY} > %s THEN 0 ELSE 1 END AS part", [after])
        )
        if not rule.ordered:
            return Fragment.concat(
                f"SELECT j.id, j.{KEY}, j.priority, j.visible_at, ROW_NUMBER() OVER"
                f" (PARTITION BY j.{KEY} ORDER BY {KEY_ORDER}) AS rn, ",
                part,
                f" FROM {JOB} j WHERE ",
                runnable,
            )
        # The FIFO head of each key (runnable or not: a key whose head waits, waits),
        # then kept only if it is runnable now.
        heads = Fragment(
            f"SELECT j.id, j.{KEY}, j.priority, j.visible_at, 1 AS rn, 0 AS part FROM"
            f" (SELECT h.id FROM (SELECT j.id, ROW_NUMBER() OVER (PARTITION BY j.{KEY}"
            f" ORDER BY {FIFO_ORDER}) AS rn FROM {JOB} j WHERE j.status = 'pending'"
            f" AND j.kind = %s AND j.{KEY} IS NOT NULL) AS h WHERE h.rn = 1) AS f"
            f" JOIN {JOB} j ON j.id = f.id WHERE ",
            [kind],
        )
        return heads + runnable

    def key_candidates(
        self, spec: ClaimSpec, kind: str, floor: int, previous: list[str]
    ) -> Fragment:
        """A keyed row of ``kind`` this tier may take (``j``): claimable now, with a key,
        not taken by an earlier tier."""
        parts: list[Fragment | str] = [self.candidates(spec, kinds=self.kind_is(kind), floor=floor)]
        parts.append(f" AND j.{KEY} IS NOT NULL")
        if previous:
            union = " UNION ALL ".join(f"SELECT id FROM {p}" for p in previous)
            parts.append(f" AND j.id NOT IN ({union})")
        return Fragment.concat(*parts)

    def candidates(
        self, spec: ClaimSpec, *, kinds: Sequence[str] | Fragment, floor: int
    ) -> Fragment:
        """The claim's condition of a runnable row (``ClaimingStatements`` says it)."""
        raise NotImplementedError

    @staticmethod
    def kind_is(kind: str) -> Fragment:
        """The condition of a row of one kind, by equality (see ``candidates``)."""
        return Fragment("j.kind = %s", [kind])
