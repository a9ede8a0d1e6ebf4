"""The claiming half of the dialect interface (see ``dialects.base``): claims, turns and
settlements, the worker's hot path.

The store hands a dialect values (a ``ClaimSpec``: kinds, queues, priority tiers, caps,
leases; ``SettleRow`` s and the run ``Tally``) and gets rows back; how those become
statements is the dialect's. The one-statement claim written here is PostgreSQL's and
SQLite's (their small differences are the hooks at the end); MySQL/MariaDB claim in a
short transaction of their own.

The claim: ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING``
the columns a run needs. The priority floors (a slot that prefers a higher tier, falling
back to lower ones when that tier is empty) and the per-kind caps are folded into the
same statement as MATERIALIZED CTEs, one per floor, so the planner cannot run a locking
subquery twice and a claim never costs a second query; so is the paused-queue check
(the small pause table read inside the statement). A kind with a global
``max_in_flight`` is capped the same way, its cap being the limit less the kind's
claimed rows counted inside the statement (``free_slots``); without limited kinds the
statement is exactly what it was before.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from django_jobqueue.models import Job, QueuePause
from django_jobqueue.store.dialects.base.claimtext import ClaimTexts
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.keyed import KEY, KEY_INDEX_ORDER, KeyedClaims
from django_jobqueue.store.dialects.base.settling import Release, Released, SettleRow, Tally
from django_jobqueue.store.dialects.base.spec import ClaimSpec as ClaimSpec  # re-exported

JOB = Job._meta.db_table
PAUSED = QueuePause._meta.db_table


# What a claim returns of each claimed row, in this order. Unqualified: SQLite's
# RETURNING does not know the table's alias.
class ClaimedRow(NamedTuple):
    """A claimed row as a claim returns it: its fields are the columns it returns, in
    order (``CLAIMED``), so the statement and the reading of its rows are one list."""

    id: Any
    kind: str
    queue: str
    payload: Any  # JSON as the driver returns it (``sql.loads``)
    priority: int
    visible_at: Any
    run_count: int
    failure_count: int
    carry: Any
    created_at: Any
    workflow_id: Any
    trace_context: str | None
    job_key: str | None


CLAIMED = ", ".join(ClaimedRow._fields)
# Claim order: exactly the columns of the partial claim index.
ORDER = "ORDER BY j.priority, j.visible_at, j.id"
# The CTE of a caught-up claim's one scan of every tier (``_every_tier``).
EVERY_TIER = "t_every"


class ClaimingStatements(KeyedClaims):
    """What every database's dialect answers for claims, turns and settlements."""

    # --- the interface ------------------------------------------------------------------

    def claim(self, spec: ClaimSpec) -> list[tuple[Any, ...]]:
        """Claim for ``spec.worker_id``: the claimed rows (``CLAIMED``), in any order.
        The statement is made once per shape of claim (``claimtext``). A caught-up claim
        of several tiers tries them in one scan first (``_at_once``), and claims by its
        tiers only when that scan was full."""
        if self._at_once(spec):
            rows = self.run(*self._claim_texts.statement(spec))
            if not rows or rows[0][0] is not None:
                return rows
            spec = replace(spec, caught_up=False)  # the scan was full: the tiers decide
        return self.run(*self._claim_texts.statement(spec))

    @cached_property
    def _claim_texts(self) -> ClaimTexts:
        return ClaimTexts(self.claim_statement)

    def claim_statement(self, spec: ClaimSpec) -> Fragment:
        """The statement of the claim that reads the claim index (for EXPLAIN): here the
        one statement that is the whole claim (a caught-up claim's: its one scan)."""
        if self._at_once(spec):
            return self.at_once_statement(spec, self._every_tier(spec), self.size(spec.slots))
        ctes, update = self.claim_parts(spec)
        return Fragment.concat("WITH ", Fragment.join(", ", ctes), " ", update)

    def apply_settlements(self, rows: Sequence[SettleRow], tally: Tally) -> set[uuid.UUID]:
        """Apply each row whose guard holds, with its journal entry and its run counted,
        all or nothing; the ids of the jobs it changed. One row per job."""
        raise NotImplementedError

    def settle_statement(self, rows: Sequence[SettleRow], tally: Tally) -> Fragment:
        """The statement that finds and updates the settled rows (for EXPLAIN)."""
        raise NotImplementedError

    def turn(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec
    ) -> tuple[set[uuid.UUID], list[tuple[Any, ...]]]:
        """Settle ``rows``, then claim: the settled jobs' ids and the claimed rows. Here
        two transactions, one after the other."""
        return self.apply_settlements(rows, tally), self.claim(spec)

    def turn_statement(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec
    ) -> Fragment | None:
        """The one statement of a turn (for EXPLAIN); None where a turn is not one."""
        return None

    def turn_releasing(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec, release: Release
    ) -> Released | None:
        """``turn`` for a batch whose workflow steps all completed, their dependents
        released (and claimed, with room) in the same statement. None where the joins
        are not part of the turn (the store then settles them in a transaction of their
        own, and claims after it)."""
        return None

    def releasing_statement(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec, release: Release
    ) -> Fragment | None:
        """The one statement of ``turn_releasing`` (for EXPLAIN); None where there is none."""
        return None

    def use_generic_plans(self) -> None:
        """Have this thread's connection plan its prepared statements once (a worker
        loop's own connection); nothing where statements are not prepared."""

    def unpaused(self) -> str:
        """The claim condition that the row's queue (``j.queue``) is not paused."""
        return f"j.queue NOT IN (SELECT queue FROM {PAUSED})"

    # --- the one-statement claim ----------------------------------------------------------

    def claim_parts(self, spec: ClaimSpec) -> tuple[list[Fragment], Fragment]:
        """The claim as its CTEs (one per tier) and its UPDATE, apart, so that a turn can
        put settlement CTEs before them in one statement. The keyed kinds' CTEs that do
        not depend on the tier come first, made once for all tiers."""
        total = spec.slots
        rooms = {k: self._room(spec, k, []) or self.size(total) for k in spec.keyed}
        ctes: list[Fragment] = self.keyed_ctes(spec, rooms)
        cumulative = 0
        for i, (floor, slots) in enumerate(spec.tiers):
            cumulative += slots
            ctes.append(self._tier(spec, i, floor, cumulative))
        picked = " UNION ALL ".join(f"SELECT id FROM t{i}" for i in range(len(spec.tiers)))
        return ctes, self.claim_update(spec, self.picked_ids(picked))

    def claim_update(self, spec: ClaimSpec, where: Fragment | str) -> Fragment:
        """The claim's UPDATE of the rows ``where`` picks, returning ``CLAIMED``."""
        return Fragment.concat(
            Fragment(
                f"UPDATE {JOB} AS j SET status = 'claimed', claimed_by = %s, claim_expires_at = ",
                [spec.worker_id],
            ),
            self.expiry(spec, "j.kind"),
            ", run_count = j.run_count + 1 WHERE ",
            where,
            f" RETURNING {CLAIMED}",
        )

    def _at_once(self, spec: ClaimSpec) -> bool:
        """Whether the claim first tries every tier in one scan (``_every_tier``): a
        caught-up claim of several tiers, more than one slot (a scan of one is full
        whenever it finds anything) and no caps, limits or key rules, on a dialect
        whose statement can say that the scan was full (``at_once_statement``)."""
        return (
            self.claims_at_once
            and spec.caught_up
            and not spec.settling
            and len(spec.tiers) > 1
            and spec.slots > 1
            and not (spec.caps or spec.limited or spec.keyed)
        )

    def _every_tier(self, spec: ClaimSpec) -> Fragment:
        """The first candidates of the lowest floor, as many as the claim's slots
        (``ClaimSpec.slots``; ``total`` below), locked in one scan: the lowest tier's
        CTE as it would be with every slot and no tier before it (``_locked``).

        When a claim's candidates are no more than its slots, its tiers take every one
        between them: each tier takes what the tiers before it left of its own floor,
        and the last, at the lowest floor, has the room of them all (``_tier``). So when
        this scan finds fewer than ``total`` (every candidate there is, the higher
        floors' too), they are what the tiers would take, and the claim takes them
        (``at_once_statement``); when it finds ``total``, there may be more: it claims
        none, its locks go with its commit, and the tiers' claim follows (``claim``). A
        claimer whose queues were caught up at its last look most often finds a job or
        two, in one scan where the tiers took one each and the subqueries that subtract
        what the tiers before took. Its statement is planned lighter, too: a caught-up
        worker's pickup is a claim's round trip, and each node of a plan costs a server
        woken from sleep more than it does a busy one (performance.md)."""
        locked = self._locked(spec, spec.tiers[-1][0], [], spec.slots)
        return Fragment.concat(f"{EVERY_TIER} AS MATERIALIZED (", locked, ")")

    def candidates(
        self, spec: ClaimSpec, *, kinds: Sequence[str] | Fragment, floor: int
    ) -> Fragment:
        """The condition of a claimable row of ``kinds`` at priority ``floor`` or above;
        ``kinds`` may instead be the condition on the kind column itself (``kind_is``:
        one kind by equality, so that an index led by the kind serves it in its order;
        or a LATERAL's correlated kind)."""
        kind = kinds if isinstance(kinds, Fragment) else Fragment(*self.in_list("j.kind", kinds))
        where: list[Fragment | str] = [
            Fragment("j.status = 'pending' AND j.visible_at <= %s AND ", [self.dt(spec.now)]),
            kind,
            f" AND {self.unpaused()}",
        ]
        if spec.queues:
            where += [" AND ", Fragment(*self.in_list("j.queue", spec.queues))]
        if floor:
            where.append(Fragment(" AND j.priority >= %s", [floor]))
        return Fragment.concat(*where)

    def expiry(self, spec: ClaimSpec, kind: str) -> Fragment:
        """The lease expiry of a claimed row (``kind``: its kind column)."""
        default = Fragment("%s", [self.dt(spec.default_expiry)])
        if not spec.expiries:
            return self.timestamp(default)
        whens = Fragment.join(
            " ", (Fragment("WHEN %s THEN %s", [k, self.dt(at)]) for k, at in spec.expiries.items())
        )
        return self.timestamp(Fragment.concat(f"CASE {kind} ", whens, " ELSE ", default, " END"))

    def _tier(self, spec: ClaimSpec, i: int, floor: int, cumulative: int) -> Fragment:
        """Tier ``i``'s CTE: its candidates, less what earlier tiers picked, up to the
        slots up to and including it."""
        locked = self._locked(spec, floor, [f"t{j}" for j in range(i)], cumulative)
        return Fragment.concat(f"t{i} AS MATERIALIZED (", locked, ")")

    def _locked(
        self, spec: ClaimSpec, floor: int, previous: list[str], cumulative: int
    ) -> Fragment:
        """The locking SELECT of a tier at ``floor``: its candidates less what the
        ``previous`` tiers picked, up to ``cumulative`` less their rows."""
        columns = f"j.id, j.kind, j.{KEY}" if spec.keyed else "j.id, j.kind"
        select: list[Fragment | str] = [
            f"SELECT {columns} FROM {JOB} j WHERE ",
            self.candidates(spec, kinds=spec.kinds, floor=floor),
        ]
        if previous:
            union = " UNION ALL ".join(f"SELECT id FROM {p}" for p in previous)
            select.append(f" AND j.id NOT IN ({union})")
        if spec.keyed:
            select.append(self._pooled(spec, floor, previous, cumulative))
        elif spec.caps or spec.limited:
            select.append(self._capped(spec, floor, previous, cumulative))
        select += [f" {ORDER} LIMIT ", self.size(cumulative)]
        if previous:
            select.append(
                " - (" + " + ".join(f"(SELECT count(*) FROM {p})" for p in previous) + ")"
            )
        return self.skipping_locked(Fragment.concat(*select))

    def _capped(
        self, spec: ClaimSpec, floor: int, previous: list[str], cumulative: int
    ) -> Fragment:
        """Rows of a capped kind only from that kind's first (cap − already picked)
        candidates."""
        kinds = list(dict.fromkeys([*spec.caps, *spec.limited]))
        names = Fragment(*self.in_list("j.kind", kinds))
        branch = Fragment.join(" UNION ALL ", self._branches(spec, floor, previous, cumulative))
        return Fragment.concat(" AND (NOT ", names, " OR j.id IN (", branch, "))")

    def _pooled(
        self, spec: ClaimSpec, floor: int, previous: list[str], cumulative: int
    ) -> Fragment:
        """With keyed kinds: the tier's rows only from a pool of ids, looked up by primary
        key: the first rows of the kinds without caps or key rules in claim order, each
        keyed kind's unkeyed rows (a probe of ``jobqueue_job_key_claim``, which holds
        them first), and each capped or keyed kind's branch. (One condition on the claim
        index's scan would walk past a big key's whole backlog to reach a small key's
        first job; the plain kinds' part still walks past the keyed kinds' rows when the
        plain kinds have fewer runnable jobs than the claim takes.)"""
        parts = self._branches(spec, floor, previous, cumulative)
        special = {*spec.caps, *spec.limited, *spec.keyed}
        plain = [k for k in spec.kinds if k not in special]
        if plain:
            parts.append(self.plain_part(spec, plain, floor, previous, cumulative))
        for kind in spec.keyed:
            if self._room(spec, kind, previous) is None:
                parts.append(self._unkeyed(spec, self.kind_is(kind), floor, previous, cumulative))
        return " AND " + self.pooled_ids(Fragment.join(" UNION ALL ", parts))

    def plain_part(
        self, spec: ClaimSpec, plain: list[str], floor: int, previous: list[str], cumulative: int
    ) -> Fragment:
        """The first rows of the kinds without caps or key rules, in claim order: here one
        walk of the claim index (past the keyed kinds' rows when these have fewer
        runnable jobs than the claim takes)."""
        return self._walk(spec, plain, floor, previous, cumulative)

    def _walk(
        self,
        spec: ClaimSpec,
        kinds: list[str],
        floor: int,
        previous: list[str],
        cumulative: int,
        extra: str = "",
    ) -> Fragment:
        """``kinds``' first candidates in claim order, by the claim index."""
        where = self.candidates(spec, kinds=kinds, floor=floor) + extra
        return self._first_ids(spec, where, ORDER, previous, cumulative)

    def _unkeyed(
        self, spec: ClaimSpec, kind: Fragment, floor: int, previous: list[str], cumulative: int
    ) -> Fragment:
        """A kind's first unkeyed candidates in claim order (``kind``: the condition on
        the kind column, ``kind_is`` or a LATERAL's)."""
        where = self.candidates(spec, kinds=kind, floor=floor) + f" AND j.{KEY} IS NULL"
        return self._first_ids(spec, where, KEY_INDEX_ORDER, previous, cumulative)

    def _first_ids(
        self, spec: ClaimSpec, where: Fragment, order: str, previous: list[str], cumulative: int
    ) -> Fragment:
        """A pool part (``pool_part``): the ids of the first rows meeting ``where`` in
        ``order``, less what earlier tiers picked, up to the slots up to this tier."""
        parts: list[Fragment | str] = [f"SELECT j.id FROM {JOB} j WHERE ", where]
        if previous:
            union = " UNION ALL ".join(f"SELECT id FROM {p}" for p in previous)
            parts.append(f" AND j.id NOT IN ({union})")
        parts += [f" {order} LIMIT ", self.size(cumulative)]
        return Fragment.concat(
            "SELECT id FROM (", self.pool_part(Fragment.concat(*parts)), ") AS p"
        )

    def _branches(
        self, spec: ClaimSpec, floor: int, previous: list[str], cumulative: int
    ) -> list[Fragment]:
        """Each capped kind's ids (its first cap − already picked candidates), and each
        keyed kind's: its keyed rows from its keyed branch, with its unkeyed ones within
        its cap when it has one."""
        branches: list[Fragment] = []
        for kind in dict.fromkeys([*spec.caps, *spec.limited, *spec.keyed]):
            room = self._room(spec, kind, previous)
            if kind not in spec.keyed:
                assert room is not None  # a kind here without key rules has a cap
                branches.append(self._capped_kind(spec, kind, floor, room))
            elif room is None:  # its unkeyed rows go with the plain kinds
                keyed = self.keyed_branch(spec, kind, floor, previous, self.size(cumulative))
                branches.append(keyed)
            else:
                both = Fragment.concat(
                    "SELECT id FROM (",
                    self._capped_kind(spec, kind, floor, room, unkeyed=True),
                    " UNION ALL ",
                    self.keyed_branch(spec, kind, floor, previous, room),
                    ") AS u LIMIT ",
                    room,
                )
                branches.append(Fragment.concat("SELECT id FROM (", both, ") AS w"))
        return branches

    def _room(self, spec: ClaimSpec, kind: str, previous: list[str]) -> Fragment | None:
        """How many rows of ``kind`` this tier may take: this claim's ``caps`` entry, or
        its ``limited`` entry less the kind's claimed rows, or the smaller, less what
        earlier tiers took (None: no cap)."""
        cap = spec.caps.get(kind)
        if cap is None and kind not in spec.limited:
            return None
        if kind in spec.limited:
            free = self.free_slots(spec, kind)
            room = free if cap is None else self.least(Fragment("%s", [cap]), free)
        else:
            room = Fragment("%s", [cap])
        if previous:
            counts = (f"(SELECT count(*) FROM {p} WHERE {p}.kind = %s)" for p in previous)
            taken = Fragment.join(" + ", (Fragment(c, [kind]) for c in counts))
            room = Fragment.concat(room, " - (", taken, ")")
        if kind in spec.limited:  # never below zero: SQLite reads a negative LIMIT as none
            room = self.greatest(room, Fragment("0"))
        return room

    def _capped_kind(
        self, spec: ClaimSpec, kind: str, floor: int, room: Fragment, *, unkeyed: bool = False
    ) -> Fragment:
        """The ids one capped kind may be claimed from: its first ``room`` candidates
        (``unkeyed``: of those without a key)."""
        # Unkeyed: ordered as jobqueue_job_key_claim is, whole (the kind and a NULL key
        # fixed, the same order), so the planner reads that index, never the claim index.
        without = f" AND j.{KEY} IS NULL {KEY_INDEX_ORDER}" if unkeyed else f" {ORDER}"
        return Fragment.concat(
            f"SELECT id FROM (SELECT j.id FROM {JOB} j WHERE ",
            self.candidates(spec, kinds=self.kind_is(kind) if unkeyed else [kind], floor=floor),
            f"{without} LIMIT ",
            room,
            ") AS c",
        )

    # --- the hooks of the one-statement claim ---------------------------------------------

    @staticmethod
    def size(n: int) -> Fragment:
        """A claim's number of jobs: a parameter, so that a worker's turns send one text
        whatever they claim, prepared and planned once per connection. Written out, it
        made a text per size: in a burst of 20,000 no-ops 109 of 193 turns were prepared
        anew (a claim's parse and plan about 0.5 ms, a turn's more), and the server held
        a plan for each until psycopg let it go. The generic plan, which does not know
        the number (PostgreSQL guesses a tenth of the rows), still reads each tier from
        the claim index in order, on a million pending rows too (``tests/db/test_plans``)."""
        return Fragment("%s", [n])

    def pooled_ids(self, pool: Fragment) -> Fragment:
        """The condition that the row is one of the ids ``pool`` selects."""
        return Fragment.concat("j.id IN (", pool, ")")

    def picked_ids(self, union: str) -> str:
        """The UPDATE's condition that the row is one the tiers picked (``union``)."""
        return f"j.id IN ({union})"

    #: Whether a caught-up claim of several tiers tries them in one scan first
    #: (``_every_tier``): a dialect that answers ``at_once_statement``.
    claims_at_once: ClassVar[bool] = False

    def at_once_statement(self, spec: ClaimSpec, scan: Fragment, total: Fragment) -> Fragment:
        """The claim of every row the one scan (``scan``, the CTE ``EVERY_TIER``) found
        when they are fewer than ``total``, returning ``CLAIMED``; when they are not,
        one row whose first column is NULL, and nothing claimed."""
        raise NotImplementedError

    def timestamp(self, value: Fragment) -> Fragment:
        """``value`` as the statement's timestamp type, where it must be said."""
        return value

    def greatest(self, *values: Fragment) -> Fragment:
        return "GREATEST(" + Fragment.join(", ", values) + ")"

    def least(self, *values: Fragment) -> Fragment:
        return "LEAST(" + Fragment.join(", ", values) + ")"

    def free_slots(self, spec: ClaimSpec, kind: str) -> Fragment:
        """How many more rows of the limited ``kind`` may be claimed now, counted in the
        statement so that concurrent claims cannot both take the last slot."""
        raise NotImplementedError
