"""SQLite's claiming half of its dialect (see ``dialects.base``).

One writer at a time (the transaction is BEGIN IMMEDIATE): a claim takes no row locks,
and a count inside the claim statement is current. SQLite has ``UPDATE … RETURNING`` but
no data-modifying CTEs, so a settlement batch is three statements in one transaction:
the guarded UPDATE, then the journal entries and the run tally of the rows it changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from django_jobqueue import validation
from django_jobqueue.store.dialects.base.claiming import JOB, ClaimingStatements, ClaimSpec
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.settling import (
    COLUMNS,
    GUARD,
    JOURNAL,
    JOURNAL_COLUMNS,
    SET,
    SettleRow,
    Tally,
    journal_select,
    tallied,
)


class SQLiteClaiming(ClaimingStatements):
    """SQLite: claims, turns and settlements."""

    def skipping_locked(self, select: Fragment) -> Fragment:
        return select  # no row locks: writers are serialised

    def greatest(self, *values: Fragment) -> Fragment:
        return "max(" + Fragment.join(", ", values) + ")"  # the scalar max

    def least(self, *values: Fragment) -> Fragment:
        return "min(" + Fragment.join(", ", values) + ")"

    def free_slots(self, spec: ClaimSpec, kind: str) -> Fragment:
        # One writer at a time: the statement's own count is current.
        return Fragment(
            f"%s - (SELECT count(*) FROM {JOB} WHERE status = 'claimed' AND kind = %s)",
            [spec.limited[kind], kind],
        )

    def apply_settlements(self, rows: Sequence[SettleRow], tally: Tally) -> set[uuid.UUID]:
        s = self._relation(rows)
        with transaction.atomic(using=self.alias), self.conn.cursor() as cursor:
            cursor.execute(*self.settle_statement(rows, tally).statement())
            done = [r[0] for r in cursor.fetchall()]
            if done:
                marks = ", ".join(["%s"] * len(done))
                joined = f"s JOIN {JOB} AS j ON j.id = s.id WHERE j.id IN ({marks})"
                entries = (
                    s
                    + f" INSERT INTO {JOURNAL} ({JOURNAL_COLUMNS})"
                    + f" {journal_select('s.duration')} FROM {joined}"
                )
                cursor.execute(entries.sql, [*entries.params, *done])
                counted = s + f" {tally.insert(tallied(joined))}"
                cursor.execute(counted.sql, [*counted.params, *done])
        return {self.read_uuid(v) for v in done}

    def settle_statement(self, rows: Sequence[SettleRow], tally: Tally) -> Fragment:
        update = f" UPDATE {JOB} AS t SET {SET} FROM s WHERE {GUARD} RETURNING id"
        return self._relation(rows) + update

    def _relation(self, rows: Sequence[SettleRow]) -> Fragment:
        """``WITH s(…) AS (VALUES …)``: the batch as a relation."""
        one = "(" + ", ".join(["%s"] * len(COLUMNS)) + ")"
        values = Fragment(", ".join([one] * len(rows)), [v for r in rows for v in self._values(r)])
        return f"WITH s({', '.join(COLUMNS)}) AS (VALUES " + values + ")"

    def _values(self, r: SettleRow) -> tuple[Any, ...]:
        """One row of ``s``, in the order of ``COLUMNS`` (the journal's duration in
        microseconds, as Django stores a DurationField here)."""
        return (
            self.job_id(r.id),
            r.run_no,
            r.kind,
            r.status,
            r.outcome,
            self.dt(r.visible_at),
            r.failed,
            _json(r.carry),
            _json(r.result),
            r.note,
            _json(r.attachment),
            self.dt(r.started_at),
            r.micros,
            r.worker,
            self.dt(r.recorded_at),
            r.claimed,
            r.c_status,
            r.c_outcome,
            r.c_note,
            r.shard,
            r.micros,
            r.bucket,
        )


def _json(value: Any) -> str | None:
    return None if value is None else validation.dumps(value)
