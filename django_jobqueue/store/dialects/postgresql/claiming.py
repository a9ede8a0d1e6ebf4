"""PostgreSQL's claiming half of its dialect (see ``dialects.base``): one statement per
claim, per settlement batch, and per worker turn.

A batch of settlements travels as one JSON document (an array per row): the
guarded UPDATE, the journal INSERT and the run tally's upsert are data-modifying CTEs of
one statement, so each job's settlement and its entry commit together. A turn puts the
claim's CTEs after them, so a busy worker pays one round trip and one commit per turn.
The turn's claim cannot see the rows the same statement settles back to pending (the
next turn can), nor count, for a kind with a global ``max_in_flight``, the claims it
settles as ended: it leaves their slots to the next turn, never claims beyond the limit.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import cache, lru_cache
from typing import Any

from django_jobqueue import validation
from django_jobqueue.store.dialects.base.claiming import (
    CLAIMED,
    EVERY_TIER,
    PAUSED,
    ClaimedRow,
    ClaimingStatements,
    ClaimSpec,
)
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.keyed import KEY
from django_jobqueue.store.dialects.base.settling import (
    COLUMNS,
    GUARD,
    JOB,
    JOURNAL,
    JOURNAL_COLUMNS,
    RUN_LOG,
    SET,
    Release,
    Released,
    SettleRow,
    Tally,
    journal_select,
    tallied,
)
from django_jobqueue.store.dialects.base.wakeups import IDS_PER_NOTE, SETTLED_CHANNEL
from django_jobqueue.store.dialects.postgresql import joining
from django_jobqueue.store.dialects.postgresql.keyed import PostgreSQLKeyed

# A releasing turn's claim when it claims nothing (its claim follows it).
NO_CLAIM = f"claimed AS (SELECT {CLAIMED} FROM {JOB} WHERE false)"

# A batch of settlements is one JSON array of arrays (``document``), each row's elements
# in ``ORDER``: arrays, not objects by name, as a workflow's steps go (``storage``). For a
# turn of 200 no-op settlements, objects took 7.9-9.4 us a row to write and the server 10
# us a row to read (``jsonb_to_recordset``); arrays take 2.7-3.2 and 7 (performance.md,
# "The settlements as arrays"). The fields most rows lack come last: a row without any
# ends before them, one without log lines before those, and an element past a row's end
# reads as NULL. ``duration`` is not sent: it is ``micros`` in seconds. Beside the
# columns every dialect's ``s`` has: a run's own log lines, written by the settlement's
# statement itself (``settles_run_logs``).
_TYPES = {**COLUMNS, "logs": "jsonb", "dropped": "int", "logs_from": "int"}
ORDER: tuple[str, ...] = (
    *("id", "run_no", "kind", "status", "outcome", "failed", "note", "worker"),
    *("recorded_at", "claimed", "shard", "started_at", "micros", "bucket"),
    *("visible_at", "carry", "result", "attachment", "c_status", "c_outcome", "c_note"),
    *("logs", "dropped", "logs_from"),
)
# The fields of a settlement that hold a task's own values.
_OPEN = ("carry", "result", "attachment", "logs")


def _read(name: str) -> str:
    """Column ``name`` of ``s``, read from a document row ``r`` (a JSON null in an open
    field is no value: the row keeps its carry, as for a field past the row's end)."""
    if name == "duration":
        return f"(r->>{ORDER.index('micros')})::float8 / 1000000 AS duration"
    if _TYPES[name] == "jsonb":
        return f"NULLIF(r->{ORDER.index(name)}, 'null') AS {name}"
    return f"(r->>{ORDER.index(name)})::{_TYPES[name]} AS {name}"


# The batch as the relation ``s`` (its one parameter: ``document``).
RELATION = (
    f"SELECT {', '.join(_read(name) for name in _TYPES)} FROM jsonb_array_elements(%s::jsonb) AS r"
)
# The applied runs' lines, and the lines of those jobs' runs before their kept ones.
_LOGGED = (
    f", logged AS (INSERT INTO {RUN_LOG} (job_id, run_no, lines, dropped)"
    " SELECT s.id, s.run_no, s.logs, s.dropped FROM j JOIN s ON s.id = j.id"
    " WHERE s.logs IS NOT NULL)"
    f", trimmed AS (DELETE FROM {RUN_LOG} AS r USING j JOIN s ON s.id = j.id"
    " WHERE s.logs IS NOT NULL AND r.job_id = s.id AND r.run_no < s.logs_from)"
)


@lru_cache(maxsize=256)
def text_array(names: tuple[str, ...]) -> str:
    """``names`` as the text of a PostgreSQL ``text[]`` (every element quoted, its
    backslashes and double quotes escaped), made once per list of names.

    A worker's claim filters on the kinds it serves, every turn: psycopg adapts a
    Python list element by element in Python, about 2 us a name (a project of 160 task
    kinds paid 330 us a turn for it, more than the claim's own execution), while one
    string is one C copy and the server parses it in microseconds."""
    quoted = (n.replace("\\", "\\\\").replace('"', '\\"') for n in names)
    return "{" + ",".join(f'"{n}"' for n in quoted) + "}"


def logged(rows: Sequence[SettleRow]) -> bool:
    """Whether a batch carries log lines (its statement then writes them)."""
    return any(r.logs is not None for r in rows)


# The settled ids on ``SETTLED_CHANNEL``, ``IDS_PER_NOTE`` a notification, sent inside
# the settling statement. Measured against a statement of its own after the turn, a
# worker's turn of 50 settlements and 50 claims interleaved in one process: the
# notification inside cost the turn 4-9 %, a statement after it 19 % (its round trip).
ANNOUNCED = (
    f"announced AS (SELECT pg_notify('{SETTLED_CHANNEL}', string_agg(id::text, ','))"
    f" FROM (SELECT id, (row_number() OVER () - 1) / {IDS_PER_NOTE} AS n FROM sw) AS a"
    " GROUP BY n)"
)


@cache
def settle_ctes(tally: Tally, *, returning: bool = False, logs: bool = False) -> str:
    """The settlement's CTEs, whose one parameter is the batch's document: ``j`` holds
    the job rows it changed. ``returning``: ``entries`` and ``tallied`` return a row
    each, for a later CTE to wait for them (``joining``). ``logs``: the batch carries
    runs' log lines, written (and older runs' deleted) for the rows ``j`` holds."""
    back = " RETURNING 1" if returning else ""
    return (
        f"s AS ({RELATION}),"
        f" sw AS (UPDATE {JOB} AS t SET {SET} FROM s"
        f" WHERE t.id = ANY(ARRAY(SELECT id FROM s)) AND {GUARD}"
        " RETURNING t.id, t.status, t.cancel_actor, t.workflow_id),"
        # The rows it changed, announced on commit (``ANNOUNCED``); every later part
        # reads them through ``j``, which waits for the announcement.
        f" {ANNOUNCED},"
        " j AS (SELECT * FROM sw WHERE (SELECT count(*) FROM announced) >= 0),"
        f" entries AS (INSERT INTO {JOURNAL} ({JOURNAL_COLUMNS})"
        f" {journal_select('make_interval(secs => s.duration)')} FROM j JOIN s ON s.id = j.id"
        f"{back}),"
        # The runs counted, in the same statement: the metrics never read the journal.
        f" tallied AS ({tally.insert(tallied('j JOIN s ON s.id = j.id'))}{back})"
        f"{_LOGGED if logs else ''}"
    )


def document(rows: Sequence[SettleRow]) -> str:
    """The batch as the JSON parameter of ``settle_ctes``: an array per row, its
    elements in ``ORDER``, and only as many as the row has values for."""
    stamps: dict[datetime, str] = {}  # a batch's rows share their recorded_at
    return validation.dumps_rows([_row(r, stamps) for r in rows], names=ORDER, open_fields=_OPEN)


def _row(r: SettleRow, stamps: dict[datetime, str]) -> list[Any]:
    """One row of the document; ``stamps``: the batch's recorded times, formatted once."""
    recorded = stamps.get(r.recorded_at)
    if recorded is None:
        recorded = stamps[r.recorded_at] = r.recorded_at.isoformat()
    started = r.started_at
    row: list[Any] = [
        r.id.hex,  # 32 hex digits, as PostgreSQL reads a uuid too: not UUID.__str__
        r.run_no,
        r.kind,
        r.status,
        r.outcome,
        r.failed,
        r.note,
        r.worker,
        recorded,
        r.claimed,
        r.shard,
        None if started is None else started.isoformat(),
        r.micros,
        r.bucket,
    ]
    if (
        r.visible_at is not None
        or r.carry is not None
        or r.result is not None
        or r.attachment is not None
        or r.c_status is not None
        or r.logs is not None
    ):
        visible = r.visible_at
        row += (None if visible is None else visible.isoformat(), r.carry, r.result)
        row += (r.attachment, r.c_status, r.c_outcome, r.c_note)
        if r.logs is not None:
            row += (r.logs, r.dropped, r.logs_from)
    return row


# Connections whose session plans prepared statements generically (see use_generic_plans).
_generic_plans: weakref.WeakSet[Any] = weakref.WeakSet()


class PostgreSQLClaiming(PostgreSQLKeyed, ClaimingStatements):
    """PostgreSQL: claims, turns and settlements, each one statement."""

    def unpaused(self) -> str:
        # The paused names are read once per statement (an InitPlan) and each candidate
        # is only compared with them, so the claim keeps its index scan. Written as array
        # containment, whose selectivity the planner takes as small whatever the queue
        # column's statistics (a plain "queue <> ALL(...)" on a table of one queue was
        # estimated to remove every row, and the claim index was dropped for a sort).
        return f"NOT (ARRAY[j.queue] <@ ARRAY(SELECT queue FROM {PAUSED}))"

    def picked_ids(self, union: str) -> str:
        # An array, so PostgreSQL looks the few ids up by primary key whatever it guesses
        # of the tiers' row counts (a guessed-large semi-join would scan the table instead).
        return f"j.id = ANY(ARRAY({union}))"

    claims_at_once = True

    def at_once_statement(self, spec: ClaimSpec, scan: Fragment, total: Fragment) -> Fragment:
        # The UPDATE must be a CTE to say "full" in a row of its own; the scan's CTE is
        # read, not run, by each count. The tiers are a second statement, not a branch
        # of this one: a plan's nodes cost a woken server at their start-up, run or not
        # (a CASE between the two in one statement saved a fifth to a half of what one
        # scan alone did).
        found = f"(SELECT count(*) FROM {EVERY_TIER})"
        picked = Fragment.concat(
            f"j.id = ANY(ARRAY(SELECT id FROM {EVERY_TIER} WHERE {found} < ", total, "))"
        )
        nulls = ", ".join(["NULL"] * len(ClaimedRow._fields))
        return Fragment.concat(
            "WITH ",
            scan,
            ", claimed AS (",
            self.claim_update(spec, picked),
            f") SELECT {CLAIMED} FROM claimed UNION ALL SELECT {nulls} WHERE {found} >= ",
            total,
        )

    def pooled_ids(self, pool: Fragment) -> Fragment:
        # An array, so the pool's few ids are looked up by primary key (as picked_ids).
        return Fragment.concat("j.id = ANY(ARRAY(", pool, "))")

    def timestamp(self, value: Fragment) -> Fragment:
        return "(" + value + ")::timestamptz"

    def free_slots(self, spec: ClaimSpec, kind: str) -> Fragment:
        # Takes every limited kind's advisory lock, in one order, then counts the kind's
        # claims on a snapshot newer than the locks (migration 0006, ``store.limits``). A
        # limit per key takes locks of its own (``keyed``). (A spec built by hand, without
        # ``kind_locks``, takes every lock of ``lock_keys``.)
        locks = (
            sorted({spec.kind_locks[k] for k in spec.limited})
            if spec.kind_locks
            else list(spec.lock_keys)
        )
        return Fragment(
            "django_jobqueue_free_slots(%s, %s, %s, %s::int4[])",
            [kind, spec.limited[kind], spec.lock_space, locks],
        )

    def plain_part(
        self, spec: ClaimSpec, plain: list[str], floor: int, previous: list[str], cumulative: int
    ) -> Fragment:
        """Each plain kind's unkeyed rows by a probe of ``jobqueue_job_key_claim`` (which
        holds them first, in claim order), a LATERAL per kind; their keyed rows (a key on
        a kind without key rules) by a walk of the claim index, only when one of them
        has any (a probe per kind): the walk would pass the keyed kinds' backlog."""
        one = Fragment.concat(
            Fragment(
                "SELECT p.id FROM unnest(%s::text[]) AS pk(kind) CROSS JOIN LATERAL (",
                [text_array(tuple(plain))],
            ),
            self._unkeyed(spec, Fragment("j.kind = pk.kind"), floor, previous, cumulative),
            ") AS p",
        )
        keyed = Fragment(
            f" WHERE EXISTS (SELECT 1 FROM unnest(%s::text[]) AS qk(kind) WHERE EXISTS"
            f" (SELECT 1 FROM {JOB} q WHERE q.status = 'pending' AND q.kind = qk.kind AND"
            f" q.{KEY} IS NOT NULL))",
            [text_array(tuple(plain))],
        )
        walk = self._walk(spec, plain, floor, previous, cumulative, f" AND j.{KEY} IS NOT NULL")
        return Fragment.concat(one, " UNION ALL SELECT id FROM (", walk, ") AS w", keyed)

    def apply_settlements(self, rows: Sequence[SettleRow], tally: Tally) -> set[uuid.UUID]:
        found = self.run(*self.settle_statement(rows, tally).statement())
        return {self.read_uuid(r[0]) for r in found}

    def settle_statement(self, rows: Sequence[SettleRow], tally: Tally) -> Fragment:
        ctes = settle_ctes(tally, logs=logged(rows))
        return Fragment(f"WITH {ctes} SELECT id FROM j", [document(rows)])

    def turn(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec
    ) -> tuple[set[uuid.UUID], list[tuple[Any, ...]]]:
        """The settlements and the claim in one statement: a row per claimed job (one
        of NULLs when the claim took none), the first of them with the settled ids."""
        statement = self.turn_statement(rows, tally, spec)
        assert statement is not None
        found = self.run(*statement.statement())
        done = {self.read_uuid(v) for r in found for v in (r[0] or ())}
        return done, [r[1:] for r in found if r[1] is not None]

    def turn_statement(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec
    ) -> Fragment | None:
        ctes, update = self.claim_parts(replace(spec, settling=True))
        return (
            Fragment(f"WITH {settle_ctes(tally, logs=logged(rows))}, ", [document(rows)])
            + Fragment.join(", ", ctes)
            + ", claimed AS ("
            + update
            + f") SELECT {joining.ONCE.format('j')}, {joining.CLAIMED_OF_C} FROM (SELECT 1)"
            " AS one LEFT JOIN (SELECT *, row_number() OVER () AS n FROM claimed) AS c ON TRUE"
        )

    def turn_releasing(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec, release: Release
    ) -> Released | None:
        """``turn`` for a batch whose workflow steps all completed: their joins, and the
        claim of what they release, in the same statement (``joining``). A claim with a
        rule that ranks its candidates (``joining.orders_candidates``) cannot weigh the
        steps its statement releases: then the statement settles and releases only,
        sends no wake-up, and returns the steps it made pending (``claim_after``: the
        claim follows, and sees them)."""
        statement = self.releasing_statement(rows, tally, spec, release)
        found = self.run(*statement.statement())
        if joining.orders_candidates(spec):
            ((done, ids, queues),) = found
            return Released(
                done={self.read_uuid(v) for v in done or ()},
                claimed=[],
                claim_after=True,
                pending=[(self.read_uuid(i), q) for i, q in zip(ids, queues, strict=True)],
            )
        return Released(
            done={self.read_uuid(v) for r in found for v in (r[0] or ())},
            claimed=[r[1:] for r in found if r[1] is not None],
        )

    def releasing_statement(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec, release: Release
    ) -> Fragment:
        """The statement of ``turn_releasing``; for a claim that ranks its candidates,
        one whose claim takes nothing (``NO_CLAIM``), writes no released step claimed and
        sends no wake-up."""
        settling = settle_ctes(tally, returning=True, logs=logged(rows))
        settle = Fragment(f"WITH {settling}, ", [document(rows)])
        if joining.orders_candidates(spec):
            nothing = replace(spec, tiers=[(spec.tiers[-1][0], 0)])
            return Fragment.concat(
                settle,
                f"{NO_CLAIM}, ",
                joining.join_ctes(nothing, release, self.expiry(spec, "c.kind"), notify=False),
                joining.released_select(),
            )
        ctes, update = self.claim_parts(replace(spec, settling=True))
        return Fragment.concat(
            settle,
            Fragment.join(", ", ctes),
            ", claimed AS (",
            update,
            "), ",
            joining.join_ctes(spec, release, self.expiry(spec, "c.kind")),
            joining.final_select(),
        )

    def use_generic_plans(self) -> None:
        """PostgreSQL re-plans a prepared statement on every run while it guesses that a
        plan for the actual values would be much cheaper; on a table of a million
        pending rows it guessed so for the claim and spent more time planning than
        running. The hot statements' plans (index order for the claim, primary keys for
        settling) do not depend on the values, so the plan made once is the one wanted.
        Set per connection, and again after a reconnect; never on a pooled connection,
        whose session setting would stay behind on whichever server session ran it.
        Remembered only once committed: a SET inside a transaction that rolls back is
        undone with it, so the next turn sets it again."""
        if not self.prepare or self.pooled:
            return
        self.conn.ensure_connection()
        raw = self.conn.connection
        if raw in _generic_plans:
            return
        self.run("SET plan_cache_mode = force_generic_plan", [])
        if raw.info.transaction_status.name == "IDLE":  # no transaction: it has committed
            _generic_plans.add(raw)
