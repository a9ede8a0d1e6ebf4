"""PostgreSQL's half of the keyed claims (``dialects.base.keyed``, issue 23): which keys a
claim looks at, how a limit per key is counted, and where each key's rows come from.

- **Keys**: a skip scan of ``jobqueue_job_key_claim`` (one index probe a key), from the
  key after the one this process last served, round to the start, so that every key gets
  its turn however many there are.
- **A limit per key**: ``django_jobqueue_key_slots`` (migration 0018) makes that walk
  itself, once per statement for all its priority tiers (``kc_i``). It counts the kind's
  claimed jobs per key on a snapshot of its own, passes over the keys at their limit,
  and tries each other key's advisory lock, leaving a key another claim holds now to
  that claim (as ``SKIP LOCKED`` leaves a row), until the keys it holds have room for
  the claim or it has passed ``KEY_STEPS`` keys; it then counts their claimed jobs again,
  on a snapshot newer than the locks. Two claims never both take a key's last place, and
  two workers' claims of the kind run side by side, on different keys, instead of one
  after the other under the kind's lock (as before migration 0018).
- **Rows**: each key's first rows in claim order (``ordered``: its FIFO head, from
  ``jobqueue_job_key_fifo``), no more than it has room for, by LATERAL index probes: a
  claim reads a few rows per key, never a key's whole backlog. They are read on the
  statement's snapshot, older than the count: rows another claim took since (``kc``'s
  ids) are passed over, so that they do not stand in for the key's next ones.

In a worker's turn, which settles its ended runs and claims in one statement, both counts
leave out the jobs the turn settles for good (completed, dead, cancelled): the statement
commits those with its claims, and a worker's finished jobs no longer hold their keys'
places until its next turn.
"""

from __future__ import annotations

from django_jobqueue.states import TERMINAL
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.keyed import (
    JOB,
    KEY,
    KEY_INDEX_ORDER,
    KEY_ORDER,
    KeyedClaims,
)
from django_jobqueue.store.dialects.base.spec import ClaimSpec

# The most keys of one kind a claim reads the rows of.
KEYS_PER_CLAIM = 64
# The most keys one claim's walk passes, those at their limit or another claim's included
# (a probe of the key index each): the next claim goes on from where this one stopped.
KEY_STEPS = 256

# A kind's first key with pending jobs ({after}: a condition on the key, k.job_key), in
# the order of jobqueue_job_key_claim, whole, so that no other index on the key serves it.
_FIRST = (
    f"SELECT k.{KEY} FROM {JOB} k WHERE k.status = 'pending' AND k.kind = %s"
    f" AND k.{KEY} IS NOT NULL{{after}} ORDER BY k.kind, k.{KEY}, k.priority,"
    " k.visible_at, k.id LIMIT 1"
)

# The settlements of a turn that free their places in the same statement.
_FOR_GOOD = "s.status IN (" + ", ".join(f"'{s.value}'" for s in TERMINAL) + ")"


class PostgreSQLKeyed(KeyedClaims):
    """Keyed claims on PostgreSQL (see the module's docstring)."""

    def pool_part(self, select: Fragment) -> Fragment:
        # Locked as read, skipping what another claim holds (which EvalPlanQual also
        # passes over once that claim has committed): two workers' claims at once take
        # different rows instead of the same first ones, of which the second then gets
        # none. A row read here but left out by the tier's LIMIT stays locked until the
        # statement commits: at most the claim's size per part.
        return self.skipping_locked(select)

    def keyed_ctes(self, spec: ClaimSpec, rooms: dict[str, Fragment]) -> list[Fragment]:
        """For each kind with a limit per key, made once for all the claim's tiers: the
        keys with room whose locks the claim holds, each with its claimed jobs (``kc_i``)."""
        ctes: list[Fragment] = []
        for kind in spec.keyed:
            if spec.keyed[kind].counted:
                ctes += self._counted(spec, kind, rooms[kind])
        return ctes

    def key_claims_source(self, spec: ClaimSpec, kind: str) -> Fragment:
        if not spec.keyed[kind].counted:
            return super().key_claims_source(spec, kind)
        return Fragment(f"kc_{_name(spec, kind)}")

    def _counted(self, spec: ClaimSpec, kind: str, room: Fragment) -> list[Fragment]:
        """``keyed_ctes`` of one kind: ``kc_i``, the keys with room the claim holds the
        locks of, each with its claimed jobs (see the module's docstring)."""
        kind_lock = None if kind in spec.limited else spec.kind_locks.get(kind)
        slots = Fragment.concat(
            Fragment(
                "SELECT * FROM django_jobqueue_key_slots(%s, %s, %s, (",
                [kind, spec.keyed[kind].per_key, spec.key_after.get(kind)],
            ),
            room,
            Fragment(
                ")::int4, %s, %s, %s, %s, %s, ",
                [KEYS_PER_CLAIM, KEY_STEPS, spec.lock_space, kind_lock, spec.key_space],
            ),
            self._settling(spec),
            ")",
        )
        return [Fragment.concat(f"kc_{_name(spec, kind)} AS MATERIALIZED (", slots, ")")]

    def settled_apart(self, spec: ClaimSpec) -> str:
        """``key_claims`` counts on the statement's snapshot: in a turn, less the jobs it
        settles for good (claimed by this worker in that snapshot)."""
        if not spec.settling:
            return ""
        return f" AND NOT (id = ANY(ARRAY(SELECT s.id FROM s WHERE {_FOR_GOOD})))"

    def _settling(self, spec: ClaimSpec) -> Fragment:
        """The function's last three arguments: the worker, and the ids and run numbers
        of the jobs the turn settles for good (none outside a turn)."""
        if not spec.settling:
            return Fragment("%s, '{}', '{}'", [spec.worker_id])
        return Fragment(
            f"%s, ARRAY(SELECT s.id FROM s WHERE {_FOR_GOOD}),"
            f" ARRAY(SELECT s.run_no FROM s WHERE {_FOR_GOOD})",
            [spec.worker_id],
        )

    def key_rows(
        self, spec: ClaimSpec, kind: str, floor: int, previous: list[str], room: Fragment
    ) -> Fragment:
        """``(id, job_key, priority, visible_at, rn, part)`` of the keys' first rows (see
        the module's docstring)."""
        rule = spec.keyed[kind]
        runnable = self.key_candidates(spec, kind, floor, previous)
        keys = self._held(spec, kind) if rule.counted else self._found(spec, kind, room)
        if rule.ordered:
            head = Fragment(
                f" CROSS JOIN LATERAL (SELECT h.id FROM {JOB} h WHERE h.status = 'pending'"
                f" AND h.kind = %s AND h.{KEY} = ks.{KEY} ORDER BY h.kind, h.{KEY}, h.id"
                " LIMIT 1) AS f"
                f" JOIN {JOB} j ON j.id = f.id WHERE ",
                [kind],
            )
            return Fragment.concat(
                f"SELECT j.id, j.{KEY}, j.priority, j.visible_at, 1 AS rn, ks.part FROM ",
                keys,
                head,
                runnable,
            )
        rows = Fragment.concat(
            f"SELECT j.id, j.priority, j.visible_at FROM {JOB} j WHERE ",
            runnable,
            f" AND j.{KEY} = ks.{KEY} AND NOT (j.id = ANY(ks.ids)) {KEY_INDEX_ORDER} LIMIT ks.free",
        )
        if not rule.counted:
            # Keys found by the walk alone (no lock per key): two claims at once walk
            # the same keys, so their rows lock as read, as the pool's other parts do.
            rows = self.pool_part(rows)
        return Fragment.concat(
            f"SELECT r.id, ks.{KEY}, r.priority, r.visible_at, r.rn, ks.part FROM ",
            keys,
            " CROSS JOIN LATERAL (SELECT j.id, j.priority, j.visible_at, ROW_NUMBER() OVER"
            f" (ORDER BY {KEY_ORDER}) AS rn FROM (",
            rows,
            ") AS j) AS r",
        )

    def _held(self, spec: ClaimSpec, kind: str) -> Fragment:
        """``ks``: the keys whose locks the claim holds (``kc``) and that have room."""
        most = spec.keyed[kind].per_key
        return Fragment(
            f"(SELECT kc.{KEY}, kc.part, %s - kc.n AS free, kc.ids FROM kc_{_name(spec, kind)}"
            " AS kc WHERE kc.n < %s) AS ks",
            [most, most],
        )

    def _found(self, spec: ClaimSpec, kind: str, room: Fragment) -> Fragment:
        """``ks``: keys with pending jobs (no limit per key: each may give the claim's
        whole room), as many as the claim takes jobs."""
        most = min(KEYS_PER_CLAIM, max(4, 2 * spec.slots))
        return Fragment.concat(
            f"(SELECT w.{KEY}, w.part, ",
            room,
            " AS free, '{}'::uuid[] AS ids FROM (",
            self._walks(spec, kind),
            Fragment(") AS w LIMIT %s) AS ks", [most]),
        )

    def _walks(self, spec: ClaimSpec, kind: str) -> Fragment:
        """``(job_key, part)``: the kind's keys with pending jobs in the order a claim
        visits them, each walk at most ``KEY_STEPS`` keys long: after the key this process
        last served (``part`` 0), then round from the start to it (``part`` 1)."""
        after = spec.key_after.get(kind)
        if after is None:
            return _key_walk(kind, "", [], "", [], 0)
        bound = f" AND k.{KEY} <= %s"
        later = _key_walk(kind, f" AND k.{KEY} > %s", [after], "", [], 0)
        wrapped = _key_walk(kind, bound, [after], bound, [after], 1)
        return Fragment.concat(later, " UNION ALL ", wrapped)


def _key_walk(
    kind: str, start: str, start_params: list[str], bound: str, bound_params: list[str], part: int
) -> Fragment:
    """One walk of ``_walks``: a recursive CTE, one index probe a step (``start``: the
    first key's condition, ``bound``: every step's beyond the key after the last)."""
    name = f"w{part}"
    first = _FIRST.format(after=start)
    step = _FIRST.format(after=f" AND k.{KEY} > {name}.{KEY}{bound}")
    return Fragment(
        f"(WITH RECURSIVE {name}({KEY}, d) AS ((SELECT ({first}), 1) UNION ALL SELECT"
        f" ({step}), {name}.d + 1 FROM {name} WHERE {name}.{KEY} IS NOT NULL AND"
        f" {name}.d < %s) SELECT {KEY}, {part} AS part FROM {name} WHERE {KEY} IS NOT NULL)",
        [kind, *start_params, kind, *bound_params, KEY_STEPS],
    )


def _name(spec: ClaimSpec, kind: str) -> int:
    """The number in the names of ``kind``'s CTEs (its place among the keyed kinds)."""
    return list(spec.keyed).index(kind)
