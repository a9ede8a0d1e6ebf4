"""MySQL's claiming half of its dialect (see ``dialects.base``).

MySQL 8 and MariaDB 10.6+ have ``SKIP LOCKED`` but neither ``UPDATE … RETURNING`` nor
locking clauses in CTEs, so a claim is one short transaction of a few statements: each
tier's candidates ``SELECT … FOR UPDATE SKIP LOCKED`` (one SELECT per capped kind), then
the UPDATE of the picked ids and the read of their rows. A ``max_in_flight`` kind's
claimed rows are counted under a named lock (``GET_LOCK``) held until the claim commits.

A settlement batch is one transaction too: it locks the batch's rows (``SELECT … FOR
UPDATE``), checks each guard on the locked row, updates each guarded row (the guard
repeated in its WHERE), inserts the entries and adds the runs to the tally.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from django_jobqueue import validation
from django_jobqueue.models import Status
from django_jobqueue.store.dialects.base.claiming import (
    CLAIMED,
    JOB,
    ORDER,
    ClaimingStatements,
    ClaimSpec,
)
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.keyed import KEY
from django_jobqueue.store.dialects.base.settling import (
    GUARD_PARAMS,
    JOURNAL,
    JOURNAL_COLUMNS,
    PROGRESS_CLEARED,
    SettleRow,
    Tally,
)

# A claimed row's id as the database gave it, its kind and its key.
Picked = tuple[Any, str, Any]


class MySQLClaiming(ClaimingStatements):
    """MySQL/MariaDB: claims and settlements in short transactions of a few statements."""

    def claim(self, spec: ClaimSpec) -> list[tuple[Any, ...]]:
        """Candidates a tier locked beyond its slots stay locked (not claimed) until the
        commit a moment later; a concurrent claim skips them meanwhile, as it would on
        PostgreSQL."""
        if not spec.lock_keys:
            return self._claim_locked(spec)
        # Each limited kind's named lock (server-wide, so the database's name is in it),
        # taken in one order so two claims never wait in a circle, held until the claim
        # has committed; the kind's claimed rows are counted under it.
        database = str(self.conn.settings_dict["NAME"])[:40]
        taken: list[str] = []
        try:
            for name in (f"jq:{database}:{key}" for key in spec.lock_keys):
                [(got,)] = self.run("SELECT GET_LOCK(%s, 30)", [name])
                if got != 1:
                    return []  # not within 30 s: claim nothing this turn
                taken.append(name)
            return self._claim_locked(spec)
        finally:
            for name in taken:
                self.run("SELECT RELEASE_LOCK(%s)", [name])

    def claim_statement(self, spec: ClaimSpec) -> Fragment:
        """The first tier's locking SELECT: the statement that reads the claim index."""
        floor, slots = spec.tiers[0]
        kinds = [k for k in spec.kinds if k not in spec.caps] or spec.kinds
        return self._select(spec, kinds=kinds, floor=floor, exclude=[], limit=slots)

    def _claim_locked(self, spec: ClaimSpec) -> list[tuple[Any, ...]]:
        picked: list[Picked] = []
        with transaction.atomic(using=self.alias):
            caps = self._caps(spec)
            cumulative = 0
            for floor, slots in spec.tiers:
                cumulative += slots
                want = cumulative - len(picked)
                if want > 0:
                    picked += self._pick(spec, caps, floor=floor, want=want, picked=picked)
            if not picked:
                return []
            chosen = Fragment(*self.in_list("id", [p[0] for p in picked]))
            update = (
                Fragment(f"UPDATE {JOB} SET status = 'claimed', claimed_by = %s,", [spec.worker_id])
                + " claim_expires_at = "
                + self.expiry(spec, "kind")
                + ", run_count = run_count + 1 WHERE "
                + chosen
            )
            self.run(*update.statement())
            # A list, as the interface says (MySQLdb's rows come as a tuple).
            return list(self.run(*(f"SELECT {CLAIMED} FROM {JOB} WHERE " + chosen).statement()))

    def _caps(self, spec: ClaimSpec) -> dict[str, int]:
        """Each capped kind's most for this claim: its ``caps`` entry, and for a limited
        kind no more than its limit less its claimed rows (counted under its lock)."""
        caps = dict(spec.caps)
        if not spec.limited:
            return caps
        kinds_sql, kinds_params = self.in_list("kind", list(spec.limited))
        running = dict(
            self.run(
                f"SELECT kind, count(*) FROM {JOB} WHERE status = 'claimed'"
                f" AND {kinds_sql} GROUP BY kind",
                kinds_params,
            )
        )
        for kind, most in spec.limited.items():
            room = max(0, most - int(running.get(kind, 0)))
            caps[kind] = min(caps.get(kind, room), room)
        return caps

    def _pick(
        self, spec: ClaimSpec, caps: dict[str, int], *, floor: int, want: int, picked: list[Picked]
    ) -> list[Picked]:
        """One tier's rows: up to ``want`` candidates at ``floor`` or above, the uncapped
        kinds by one locking SELECT and each capped kind by one of its own, limited to
        what is left of its cap; merged in claim order."""
        taken: dict[str, int] = {}
        for p in picked:
            taken[p[1]] = taken.get(p[1], 0) + 1
        groups: list[tuple[list[str], int]] = []
        free = [k for k in spec.kinds if k not in caps and k not in spec.keyed]
        if free:
            groups.append((free, want))
        for kind, cap in caps.items():
            room = min(want, cap - taken.get(kind, 0))
            if room > 0 and kind not in spec.keyed:
                groups.append(([kind], room))
        exclude = [p[0] for p in picked]
        found: list[tuple[Any, ...]] = []
        for kinds, room in groups:
            select = self._select(spec, kinds=kinds, floor=floor, exclude=exclude, limit=room)
            found += self.run(*select.statement())
        for kind in spec.keyed:
            room = want if kind not in caps else min(want, caps[kind] - taken.get(kind, 0))
            if room > 0:
                found += self._keyed(spec, kind, floor=floor, room=room, picked=picked)
        if len(groups) + len(spec.keyed) > 1:
            found.sort(key=lambda r: (r[2], self.read_dt(r[3]), self.read_uuid(r[0])))
        return [(r[0], r[1], r[4] if spec.keyed else None) for r in found[:want]]

    def _keyed(
        self, spec: ClaimSpec, kind: str, *, floor: int, room: int, picked: list[Picked]
    ) -> list[tuple[Any, ...]]:
        """A keyed kind's rows: its unkeyed candidates first, then its keyed ones ranked
        per key (``dialects.base.keyed``), filtered and ordered here by what each key has
        claimed (counted under the kind's named lock when it has a limit per key), and
        locked skipping those another claim holds."""
        rule = spec.keyed[kind]
        exclude = [p[0] for p in picked]
        plain = self._select(spec, kinds=[kind], floor=floor, exclude=exclude, limit=room)
        found: list[tuple[Any, ...]] = list(self.run(*plain.statement()))
        room -= len(found)
        if room <= 0:
            return found
        claimed = {k: int(n) for k, n in self.run(*self.key_claims(spec, kind).statement())}
        for p in picked:
            if p[1] == kind and p[2] is not None:
                claimed[p[2]] = claimed.get(p[2], 0) + 1
        most, seen = rule.per_key, {self.read_uuid(e) for e in exclude}
        # Each key's first rows only (a key never gets more than a claim's room, nor
        # more than its most): the window's rows stay in the server.
        ranked = Fragment.concat(
            "SELECT * FROM (",
            self.key_rows(spec, kind, floor, [], Fragment(str(room))),
            Fragment(") AS c WHERE c.rn <= %s", [room if most is None else min(most, room)]),
        )
        rows = self.run(*ranked.statement())
        ok = [
            r
            for r in rows
            if self.read_uuid(r[0]) not in seen
            and (most is None or r[4] <= most - claimed.get(r[1], 0))
        ]
        ok.sort(
            key=lambda r: (
                r[2],
                r[4] + claimed.get(r[1], 0) if rule.fair else 0,
                r[5] if rule.fair else 0,  # the keys after the last one served first
                self.read_dt(r[3]),
                self.read_uuid(r[0]),
            )
        )
        if not ok:
            return found
        ids = Fragment(*self.in_list("j.id", [r[0] for r in ok[:room]]))
        lock = (
            f"SELECT j.id, j.kind, j.priority, j.visible_at, j.{KEY} FROM {JOB} j WHERE "
            + ids
            + " AND j.status = 'pending'"
        )
        return found + list(self.run(*self.skipping_locked(lock).statement()))

    def _select(
        self, spec: ClaimSpec, *, kinds: list[str], floor: int, exclude: list[Any], limit: int
    ) -> Fragment:
        """One locking candidate SELECT, in claim order."""
        keyed = f", j.{KEY}" if spec.keyed else ""  # a keyed claim counts picks per key
        where = self.candidates(spec, kinds=kinds, floor=floor)
        if any(k in spec.keyed for k in kinds):  # a keyed kind's keyed rows: ``_keyed``
            where += f" AND j.{KEY} IS NULL"
        if exclude:
            where += " AND NOT " + Fragment(*self.in_list("j.id", exclude))
        select = (
            f"SELECT j.id, j.kind, j.priority, j.visible_at{keyed} FROM {JOB} j WHERE "
            + where
            + Fragment(f" {ORDER} LIMIT %s", [limit])
        )
        return self.skipping_locked(select)

    # --- settlements ----------------------------------------------------------------------

    def settle_statement(self, rows: Sequence[SettleRow], tally: Tally) -> Fragment:
        """The SELECT that locks the batch's rows, by primary key."""
        ids = Fragment(*self.in_list("id", [self.job_id(r.id) for r in rows]))
        return (
            "SELECT id, status, claimed_by, run_count, cancel_requested, cancel_actor"
            f" FROM {JOB} WHERE " + ids + " FOR UPDATE"
        )

    def apply_settlements(self, rows: Sequence[SettleRow], tally: Tally) -> set[uuid.UUID]:
        done: set[uuid.UUID] = set()
        entries: list[Fragment] = []
        runs: list[tuple[str, str, int, int | None]] = []  # for the tally
        with transaction.atomic(using=self.alias), self.conn.cursor() as cursor:
            cursor.execute(*self.settle_statement(rows, tally).statement())
            locked = {self.read_uuid(r[0]): r[1:] for r in cursor.fetchall()}
            for r in rows:
                row = locked.get(r.id)
                ending = None if row is None else self._update(cursor, r, row)
                if ending is None:
                    continue
                _, outcome, note, actor = ending
                done.add(r.id)
                runs.append((r.kind, outcome, r.shard, r.micros))
                entries.append(self._entry(r, outcome=outcome, note=note, actor=actor))
            if done:
                values = Fragment.join(", ", entries)
                cursor.execute(
                    *(f"INSERT INTO {JOURNAL} ({JOURNAL_COLUMNS}) VALUES " + values).statement()
                )
                cursor.execute(*tally.rows(runs))
        return done

    def _entry(self, r: SettleRow, *, outcome: str, note: str, actor: str) -> Fragment:
        """One journal entry's VALUES row (the duration in microseconds, as Django's
        DurationField stores it here)."""
        values = [
            self.job_id(r.id),
            r.kind,
            r.run_no,
            outcome,
            self.dt(r.started_at),
            self.dt(r.recorded_at),
            r.micros,
            note,
            _json(r.attachment),
            r.worker,
            actor,
        ]
        return Fragment("(" + ", ".join(["%s"] * len(values)) + ")", values)

    def _update(
        self, cursor: Any, r: SettleRow, row: Sequence[Any]
    ) -> tuple[str, str, str, str] | None:
        """Apply one settlement to its locked row if the guard holds: its ending (status,
        outcome, note, actor), or None when the claim is no longer this run's."""
        status, claimed_by, run_count, cancel_flag, cancel_actor = row
        if (status, claimed_by, run_count) != (r.claimed, r.worker, r.run_no):
            return None
        ending = (
            (r.c_status, r.c_outcome or "", r.c_note or "", cancel_actor)
            if cancel_flag and r.c_status is not None
            else (r.status, r.outcome, r.note, "")
        )
        pending = ending[0] == Status.PENDING
        cursor.execute(
            f"UPDATE {JOB} SET status = %s,"
            f" visible_at = {'%s' if pending else 'visible_at'},"
            f" claimed_by = '', claim_expires_at = NULL, {PROGRESS_CLEARED},"
            " failure_count = failure_count + %s, carry = COALESCE(%s, carry),"
            " result = %s, finished_at = %s, cancel_requested = FALSE"
            f" WHERE {GUARD_PARAMS}",
            [
                ending[0],
                *([self.dt(r.visible_at)] if pending else []),
                r.failed,
                _json(r.carry),
                _json(r.result),
                None if pending else self.dt(r.recorded_at),
                self.job_id(r.id),
                r.claimed,
                r.worker,
                r.run_no,
            ],
        )
        # rowcount 1 always while the row is locked; checked defensively
        return ending if cursor.rowcount == 1 else None


def _json(value: Any) -> str | None:
    return None if value is None else validation.dumps(value)
