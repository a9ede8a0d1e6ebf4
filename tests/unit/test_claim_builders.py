"""The claim, settlement and turn statements each dialect builds, below the database.

Each dialect is built on a backend's wrapper that never connects, so these tests see
only the text and the parameters: which conditions a claim has for given kinds,
queues, priority floors, caps, limits and leases, that every placeholder has its
parameter in order, and how one settlement becomes the row each dialect writes. Whether
the statements do what they say is the database tier's (tests/db/test_claim.py,
test_dialect_claiming.py, test_turn_plan.py).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend

from django_jobqueue.models import Outcome, Status
from django_jobqueue.rules.lifecycle import Run, Settlement, completed, released
from django_jobqueue.store import ClaimRequest
from django_jobqueue.store.claim import _tiers, prepare
from django_jobqueue.store.dialects import Dialect, MySQL, PostgreSQL, SQLite
from django_jobqueue.store.dialects.base import claimtext
from django_jobqueue.store.dialects.base.claiming import ClaimSpec
from django_jobqueue.store.dialects.base.claimtext import ClaimTexts
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.settling import COLUMNS
from django_jobqueue.store.dialects.base.spec import KeyRule
from django_jobqueue.store.dialects.postgresql.claiming import ORDER, RELATION, document
from django_jobqueue.store.limits import KEY_LOCK_SPACE, LOCK_SPACE, lock_key
from django_jobqueue.store.monitoring import TALLY_SHARDS, shard_of
from django_jobqueue.store.settling import TALLY, settle_row, settle_rows

pytestmark = pytest.mark.sqlite

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
JOB = "django_jobqueue_job"
ENGINES = {PostgreSQL: "postgresql", SQLite: "sqlite3", MySQL: "mysql"}


def detached(cls: type[Dialect]) -> Dialect:
    """``cls``'s dialect on a wrapper of its backend that never connects."""
    engine = f"django.db.backends.{ENGINES[cls]}"
    if cls is MySQL:
        pytest.importorskip("MySQLdb", reason="mysqlclient (the mysql extra) is not installed")
    settings = {"ENGINE": engine, "NAME": "x", "OPTIONS": {}, "TIME_ZONE": None}
    wrapper = load_backend(engine).DatabaseWrapper(settings, "x")

    class Detached(cls):  # type: ignore[misc,valid-type]
        @property
        def conn(self) -> BaseDatabaseWrapper:
            return wrapper

    return Detached("x")  # type: ignore[no-any-return]


@pytest.fixture(params=list(ENGINES), ids=list(ENGINES.values()))
def dialect(request: pytest.FixtureRequest) -> Dialect:
    return detached(request.param)


def spec(**values: Any) -> ClaimSpec:
    base: dict[str, Any] = {
        "worker_id": "w:1",
        "kinds": ["a", "b"],
        "queues": [],
        "tiers": [(0, 5)],
        "now": NOW,
        "default_expiry": NOW + timedelta(minutes=1),
    }
    return ClaimSpec(**{**base, **values})


def assert_in_step(built: Fragment) -> None:
    assert built.sql.count("%s") == len(built.params), built


def test_a_fragment_keeps_each_parameter_beside_its_placeholder() -> None:
    a = Fragment("x = %s", [1])
    b = Fragment("y IN (%s, %s)", [2, 3])
    joined = "WHERE " + Fragment.join(" AND ", [a, b]) + Fragment(" LIMIT %s", [4])
    assert joined == Fragment("WHERE x = %s AND y IN (%s, %s) LIMIT %s", [1, 2, 3, 4])
    assert joined.statement() == ("WHERE x = %s AND y IN (%s, %s) LIMIT %s", [1, 2, 3, 4])
    assert Fragment.join(", ", []) == Fragment()
    assert not Fragment()
    assert Fragment("x")


def test_the_plain_postgresql_claim_is_one_update_over_one_locked_materialized_cte() -> None:
    built = detached(PostgreSQL).claim_statement(spec())
    assert built.sql == (
        f"WITH t0 AS MATERIALIZED (SELECT j.id, j.kind FROM {JOB} j WHERE j.status = 'pending'"
        " AND j.visible_at <= %s AND j.kind = ANY(%s::text[])"
        " AND NOT (ARRAY[j.queue] <@ ARRAY(SELECT queue FROM django_jobqueue_queuepause))"
        " ORDER BY j.priority, j.visible_at, j.id LIMIT %s FOR UPDATE SKIP LOCKED)"
        f" UPDATE {JOB} AS j SET status = 'claimed', claimed_by = %s,"
        " claim_expires_at = (%s)::timestamptz, run_count = j.run_count + 1"
        " WHERE j.id = ANY(ARRAY(SELECT id FROM t0))"
        " RETURNING id, kind, queue, payload, priority, visible_at, run_count, failure_count,"
        " carry, created_at, workflow_id, trace_context, job_key"
    )
    # The kinds as the text of one array (``text_array``), made once per list of kinds;
    # the size a parameter, so that every size of claim is one text.
    assert built.params == (NOW, '{"a","b"}', 5, "w:1", NOW + timedelta(minutes=1))


VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "queues": {"queues": ["mail", "reports"]},
    "floor": {"tiers": [(1, 5)]},
    "tiers": {"tiers": [(2, 1), (1, 2), (0, 2)]},
    "caps": {"caps": {"a": 2}},
    "limited": {"limited": {"b": 3}, "lock_keys": (lock_key("b"),), "lock_space": LOCK_SPACE},
    "leases": {"expiries": {"a": NOW + timedelta(seconds=5)}},
    "everything": {
        "queues": ["mail"],
        "tiers": [(2, 2), (0, 3)],
        "caps": {"a": 1},
        "limited": {"a": 2, "b": 1},
        "lock_keys": tuple(sorted({lock_key("a"), lock_key("b")})),
        "lock_space": LOCK_SPACE,
        "expiries": {"b": NOW + timedelta(hours=1)},
    },
    "keyed": {
        "tiers": [(2, 1), (0, 4)],
        "keyed": {"a": KeyRule(most=2, fair=True), "b": KeyRule(fair=True)},
        "kind_locks": {"a": lock_key("a")},
        "lock_keys": (lock_key("a"),),
        "lock_space": LOCK_SPACE,
        "key_space": KEY_LOCK_SPACE,
        "key_after": {"a": "k7", "b": "k1"},
    },
    "keyed-limited": {
        "caps": {"a": 3},
        "limited": {"a": 2},
        "keyed": {"a": KeyRule(ordered=True)},
        "kind_locks": {"a": lock_key("a")},
        "lock_keys": (lock_key("a"),),
        "lock_space": LOCK_SPACE,
        "key_space": KEY_LOCK_SPACE,
    },
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_placeholder_of_a_claim_has_its_parameter(dialect: Dialect, variant: str) -> None:
    assert_in_step(dialect.claim_statement(spec(**VARIANTS[variant])))


def test_a_keyed_claim_sends_one_text_whatever_its_size(dialect: Dialect) -> None:
    """Its sizes are parameters: a keyed claim's size varies from turn to turn, and each
    new text was planned anew (PostgreSQL prepares a text only once it has seen it)."""
    keyed = VARIANTS["keyed"]
    small = dialect.claim_statement(spec(**keyed))
    big = dialect.claim_statement(spec(**{**keyed, "tiers": [(2, 9), (0, 40)]}))
    assert small.sql == big.sql
    assert small.params != big.params


def test_postgresqls_count_per_key_in_a_turn_leaves_out_what_the_turn_settles_for_good() -> None:
    d = detached(PostgreSQL)
    rows = settle_rows([completed(_run(), result=1)], NOW, held=False)
    turn = d.turn_statement(rows, TALLY, spec(**VARIANTS["keyed"]))
    claim = d.claim_statement(spec(**VARIANTS["keyed"]))
    assert turn is not None
    settled = "ARRAY(SELECT s.id FROM s WHERE s.status IN ('completed', 'dead', 'cancelled'))"
    assert turn.sql.count("django_jobqueue_key_slots(") == 1  # once for both tiers
    assert settled in turn.sql
    assert "django_jobqueue_key_slots(" in claim.sql
    assert settled not in claim.sql  # a claim alone settles nothing
    assert_in_step(turn)


def test_each_priority_tier_takes_its_floor_and_leaves_the_rest_to_the_next() -> None:
    built = detached(PostgreSQL).claim_statement(spec(tiers=[(2, 1), (0, 4)]))
    t0, t1 = built.sql.split("t1 AS MATERIALIZED")
    assert "j.priority >= %s" in t0
    assert "LIMIT %s FOR UPDATE" in t0
    assert "j.priority >=" not in t1.split("UPDATE django")[0]  # floor 0: no condition
    assert "AND j.id NOT IN (SELECT id FROM t0)" in t1
    assert "LIMIT %s - ((SELECT count(*) FROM t0)) FOR UPDATE SKIP LOCKED" in t1
    assert "SELECT id FROM t0 UNION ALL SELECT id FROM t1" in t1
    # Tier 0 takes 1 (its floor 2), tier 1 up to 5 with what tier 0 took.
    assert built.params[:6] == (NOW, '{"a","b"}', 2, 1, NOW, '{"a","b"}')
    assert built.params[6] == 5


def test_a_capped_kind_is_claimed_only_from_its_own_first_candidates(dialect: Dialect) -> None:
    if isinstance(dialect, MySQL):
        # One SELECT per capped kind there; the uncapped kinds' SELECT is the first.
        built = dialect.claim_statement(spec(caps={"a": 2}))
        assert built.params == (dialect.dt(NOW), "b", 5)
        return
    built = dialect.claim_statement(spec(caps={"a": 2}))
    kinds = "j.kind = ANY(%s::text[])" if isinstance(dialect, PostgreSQL) else "j.kind IN (%s)"
    assert f" AND (NOT {kinds} OR j.id IN (SELECT id FROM (SELECT j.id FROM {JOB} j" in built.sql
    assert "ORDER BY j.priority, j.visible_at, j.id LIMIT %s) AS c))" in built.sql
    assert 2 in built.params


def test_a_limited_kind_counts_its_free_slots_inside_the_statement(dialect: Dialect) -> None:
    limits = {"limited": {"b": 3}, "lock_keys": (lock_key("b"),), "lock_space": LOCK_SPACE}
    built = dialect.claim_statement(spec(**limits))
    if isinstance(dialect, PostgreSQL):
        assert "GREATEST(django_jobqueue_free_slots(%s, %s, %s, %s::int4[]), 0)" in built.sql
        at = built.params.index("b", 2)
        assert built.params[at : at + 4] == ("b", 3, LOCK_SPACE, [lock_key("b")])
    elif isinstance(dialect, SQLite):
        # Never below zero: SQLite reads a negative LIMIT as no limit at all.
        assert (
            f"max(%s - (SELECT count(*) FROM {JOB} WHERE status = 'claimed' AND kind = %s), 0)"
            in built.sql
        )
    else:  # counted apart, under the kind's named lock: the first SELECT is unchanged
        assert built == dialect.claim_statement(spec())


def test_a_claim_leaves_paused_queues_out_inside_the_statement(dialect: Dialect) -> None:
    built = dialect.claim_statement(spec())
    if isinstance(dialect, PostgreSQL):
        assert "NOT (ARRAY[j.queue] <@ ARRAY(SELECT queue FROM django_jobqueue_queuepause))" in (
            built.sql
        )
    else:
        assert "j.queue NOT IN (SELECT queue FROM django_jobqueue_queuepause)" in built.sql


def test_only_sqlite_claims_without_row_locks(dialect: Dialect) -> None:
    built = dialect.claim_statement(spec(tiers=[(1, 2), (0, 3)]))
    locks = built.sql.count("FOR UPDATE SKIP LOCKED")
    if isinstance(dialect, SQLite):
        assert locks == 0  # writers are serialised
    else:  # a lock per tier; MySQL/MariaDB's first SELECT is the first tier's alone
        assert locks == (2 if isinstance(dialect, PostgreSQL) else 1)


def test_a_kind_with_its_own_lease_gets_its_own_expiry(dialect: Dialect) -> None:
    own = NOW + timedelta(seconds=5)
    built = dialect.expiry(spec(expiries={"a": own}), "j.kind")
    case = "CASE j.kind WHEN %s THEN %s ELSE %s END"
    assert built.sql == (f"({case})::timestamptz" if isinstance(dialect, PostgreSQL) else case)
    assert built.params == ("a", dialect.dt(own), dialect.dt(NOW + timedelta(minutes=1)))


def test_the_mysql_claim_statement_is_its_first_tiers_locking_select() -> None:
    d = detached(MySQL)
    built = d.claim_statement(spec(tiers=[(1, 2), (0, 3)], queues=["mail"]))
    assert built.sql.startswith(f"SELECT j.id, j.kind, j.priority, j.visible_at FROM {JOB} j")
    assert built.sql.endswith(
        "ORDER BY j.priority, j.visible_at, j.id LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    assert built.params == (d.dt(NOW), "a", "b", "mail", 1, 2)


def test_tiers_go_from_the_highest_floor_down_and_the_last_takes_the_rest() -> None:
    assert _tiers(5, 0, {}) == [(0, 5)]
    assert _tiers(5, 0, {1: 2, 2: 1}) == [(2, 1), (1, 2), (0, 2)]
    assert _tiers(2, 0, {2: 5}) == [(2, 2), (0, 0)]
    assert _tiers(5, 1, {1: 2}) == [(1, 5)]  # a preference at the floor is no tier


def test_prepare_turns_the_options_into_a_claims_values() -> None:
    prepared = prepare(
        worker_id="w:1",
        request=ClaimRequest(
            limit=4,
            kinds=["a", "b", "c"],
            exclude_kinds=["c"],
            kind_limits={"a": 1, "c": 1},
            max_in_flight={"b": 2, "c": 9},
            preferring={1: 1},
            leases={"a": timedelta(seconds=5), "b": timedelta(minutes=1)},
            lease=timedelta(minutes=1),
            now=NOW,
        ),
    )
    assert prepared is not None
    s = prepared.spec
    assert (s.kinds, s.caps, s.limited) == (["a", "b"], {"a": 1}, {"b": 2})
    assert s.tiers == [(1, 1), (0, 3)]
    assert s.lock_keys == (lock_key("b"),)
    assert s.expiries == {"a": NOW + timedelta(seconds=5)}  # b's lease is the default
    assert s.default_expiry == NOW + timedelta(minutes=1)
    assert prepare(worker_id="w", request=ClaimRequest(limit=0, kinds=["a"])) is None
    assert (
        prepare(worker_id="w", request=ClaimRequest(limit=3, kinds=["a"], exclude_kinds=["a"]))
        is None
    )


def _run(**values: Any) -> Run:
    return Run(job_id=uuid.UUID(int=7), kind="a", run_no=2, worker="w:1", **values)


def test_one_settlement_becomes_one_row_with_its_cancel_alternative() -> None:
    back = released(_run(), now=NOW, note="shutting down")
    row = settle_row(back, NOW, held=False)
    assert (row.status, row.outcome, row.claimed) == (Status.PENDING, back.outcome, "claimed")
    assert (row.c_status, row.c_outcome) == (Status.CANCELLED, Outcome.CANCELLED)
    assert row.c_note is not None
    assert back.outcome in row.c_note
    done = settle_row(
        completed(_run(duration=timedelta(milliseconds=3)), result={"n": 1}), NOW, held=True
    )
    assert (done.c_status, done.c_outcome, done.c_note) == (None, None, None)
    assert (done.micros, done.result, done.recorded_at) == (3000, {"n": 1}, NOW)
    assert done.bucket is not None
    assert TALLY_SHARDS // 2 <= done.shard < TALLY_SHARDS  # a caller's transaction's half
    assert 0 <= row.shard < TALLY_SHARDS // 2


def test_postgresql_and_sqlite_each_encode_the_one_settlement_row_their_own_way() -> None:
    s: Settlement = completed(_run(duration=timedelta(seconds=1.5)), result=[1])
    row = settle_row(s, NOW, held=False)
    [written] = json.loads(document([row]))
    doc = dict(zip(ORDER, written, strict=False))
    assert doc["id"] == s.job_id.hex  # as SQLite: PostgreSQL reads a uuid from it too
    assert "duration" not in ORDER  # read as micros in seconds
    assert doc["micros"] == 1_500_000
    assert doc["result"] == [1]
    assert [doc[name] for name in ("carry", "attachment", "visible_at", "c_status")] == [None] * 4
    assert "logs" not in doc  # a row without log lines ends before them
    sqlite = detached(SQLite)
    values = dict(zip(COLUMNS, sqlite._values(row), strict=True))  # type: ignore[attr-defined]
    assert values["id"] == s.job_id.hex
    assert values["result"] == "[1]"
    assert values["duration"] == values["micros"] == 1_500_000  # DurationField: microseconds
    assert values["recorded_at"] == sqlite.dt(NOW)


def test_a_batch_finds_each_workers_shard_once_and_shares_its_recorded_time() -> None:
    """``settle_rows`` hashes each worker's shard once a batch, ``document`` formats the
    batch's recorded time once: each row as ``settle_row`` alone makes it."""
    runs = [Run(job_id=uuid.UUID(int=i), kind="a", run_no=1, worker=f"w:{i % 2}") for i in range(6)]
    batch = [completed(r, result=i) for i, r in enumerate(runs)]
    for held in (False, True):
        rows = settle_rows(batch, NOW, held=held)
        assert rows == [settle_row(s, NOW, held=held) for s in batch]
        assert [r.shard for r in rows] == [shard_of(s.worker, held=held) for s in batch]
    docs = [dict(zip(ORDER, d, strict=False)) for d in json.loads(document(rows))]
    assert [d["recorded_at"] for d in docs] == [NOW.isoformat()] * 6
    assert [d["result"] for d in docs] == list(range(6))


def test_postgresqls_turn_is_the_settlement_ctes_then_the_claims_in_one_statement() -> None:
    d = detached(PostgreSQL)
    rows = [settle_row(completed(_run(), result=1), NOW, held=False)]
    built = d.turn_statement(rows, TALLY, spec(tiers=[(1, 1), (0, 2)]))
    assert built is not None
    assert_in_step(built)
    assert built.sql.startswith(f"WITH s AS ({RELATION}),")
    ctes = (" sw AS (UPDATE", " j AS (SELECT", " entries AS (INSERT", " tallied AS (INSERT")
    for cte in (*ctes, " t0 AS", " t1 AS"):
        assert cte in built.sql
    # The settled ids announced on commit, in the same statement (the live pages, waits).
    assert "announced AS (SELECT pg_notify('django_jobqueue_settled', string_agg(" in built.sql
    assert ", claimed AS (UPDATE django_jobqueue_job AS j SET status = 'claimed'" in built.sql
    assert json.loads(built.params[0])[0][ORDER.index("id")] == uuid.UUID(int=7).hex
    assert built.params[1:] == d.claim_statement(spec(tiers=[(1, 1), (0, 2)])).params


def test_only_postgresql_turns_in_one_statement(dialect: Dialect) -> None:
    rows = [settle_row(completed(_run(), result=1), NOW, held=False)]
    built = dialect.turn_statement(rows, TALLY, spec())
    assert (built is not None) is isinstance(dialect, PostgreSQL)


@pytest.mark.parametrize(
    "flag", ["postgres", "mysql", "json", "skip_locked", "not_paused", "materialized"]
)
def test_the_dialects_answer_by_method_not_by_flag(dialect: Dialect, flag: str) -> None:
    """The transitional flags are gone: what they said, a method of the dialect says."""
    assert not hasattr(dialect, flag)


def test_the_claims_statement_made_once_per_shape_is_the_one_built_for_each_clock(
    dialect: Dialect,
) -> None:
    """The claim's text and parameters for a second clock, from the statement made for
    its shape at the first, are exactly what building them for that clock gives: on
    PostgreSQL from the kept template (its times put where the markers were), elsewhere
    built anew (the time is bound as text there, so no marker is found again)."""
    texts = ClaimTexts(dialect.claim_statement)
    leases = {"b": NOW + timedelta(minutes=5)}
    shapes = [
        {},
        {"tiers": [(2, 1), (1, 2), (0, 5)], "queues": ["q1", "q2"]},
        {"caps": {"a": 2}, "limited": {"b": 3}, "lock_keys": (7,), "kind_locks": {"b": 7}},
    ]
    for values in shapes:
        for now in (NOW, NOW + timedelta(seconds=3), NOW + timedelta(hours=2)):
            later = {k: v - NOW + now for k, v in leases.items()}
            one = spec(now=now, default_expiry=now + timedelta(minutes=1), expiries=later)
            one = dataclasses.replace(one, **values)
            assert texts.statement(one) == dialect.claim_statement(one).statement(), values
    kept = [t for t in texts._made.values() if t is not None]
    assert len(kept) == (len(shapes) if isinstance(dialect, PostgreSQL) else 0)


def test_a_claims_shape_is_every_field_of_its_spec_but_the_clock() -> None:
    names = [f.name for f in dataclasses.fields(ClaimSpec)]
    assert [n for n in names if n not in claimtext.CLOCK] == list(claimtext.SHAPE)
    one, two = spec(), spec(now=NOW + timedelta(seconds=1), default_expiry=NOW)
    assert claimtext.shape(one) == claimtext.shape(two)
    for name, other in {"kinds": ["a"], "tiers": [(0, 6)], "worker_id": "w:2"}.items():
        assert claimtext.shape(dataclasses.replace(one, **{name: other})) != claimtext.shape(one)
