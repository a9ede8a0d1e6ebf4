"""PostgreSQL's joins inside the worker's turn: the release of the dependents of the
steps a turn completes, as CTEs of the turn's one statement.

A turn that completes workflow steps would otherwise settle them and their joins in a
transaction of ten or so statements (the ended steps, their edges, each child locked
and updated, the workflow row locked and updated, a ``NOTIFY``) before it could claim.
Here they follow the settlement's CTEs (``j``: the rows the guard let through), so a
stale run, whose guard fails, releases nothing, and the release commits with the
settlement or not at all. The counters move once per turn per row: a chord's callback
and its workflow get one write per turn however many members the turn completed.

Those two rows are the ones every member's settlement writes, so two workers' turns
take turns on them, each holding them from its write to its commit. The write comes
last, so that is short: the turn's guarded settlement, its journal entries, its tally
and its claim are done first (``entries`` and ``tallied`` return a row each so that the
release can wait for them), and only then are the rows locked and counted, by the
function of migration 0019, ``django_jobqueue_count_down``. It takes the locks,
children then workflows, in id order, waiting for a turn that holds one, and then
counts on a snapshot of its own, taken once it holds them: it reads each counter as
committed, a re-arm or a cancel committed meanwhile included. The turn's own statement
never writes a row another turn changed after it began, which PostgreSQL would
re-check by starting the statement's whole plan again for that row (``EvalPlanQual``: a
third of the server's time in a chord's turns, when this statement wrote the rows
itself).

A child this turn releases is claimed by it when the worker has room for it (its kind
and queue served, no per-kind cap or global limit on its kind, its queue not paused,
visible now, within the room the claim left, in claim order): the claim CTE cannot see
a row the statement makes pending, so the release writes it ``claimed`` directly. The
others become ``pending`` and the statement sends the ``NOTIFY`` (on commit) that
wakes the workers; a worker never wakes itself for a step it took. A claim with a
rule that orders candidates (a preferred priority tier, fair keys) is not fused at all
(``orders_candidates``): it could not weigh the steps it releases.

Only completions come here (the store sends a turn with a dead, cancelled or retried
step the long way, ``store.joins``, which cascades): a completed parent releases or
counts down a child, and cancels only a batch's ``on_failure`` callback (``when=
"failed"``) when no member died, a leaf nothing depends on. The function's CASEs are
``rules.joins.join`` and ``rules.joins.outcome`` for completed parents.
"""

from __future__ import annotations

from django_jobqueue.models import StepEdge
from django_jobqueue.states import Outcome, Status
from django_jobqueue.store.dialects.base.claiming import CLAIMED, PAUSED, ClaimedRow, ClaimSpec
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.settling import JOB, JOURNAL, JOURNAL_COLUMNS, Release

EDGE = StepEdge._meta.db_table

CLAIMED_OF_C = ", ".join(f"c.{name}" for name in ClaimedRow._fields)
# A turn's settled ids, on the first of its rows only (``c.n``: the row's number; NULL
# when it claimed nothing): in every row, a turn of n jobs sent n² ids.
ONCE = "CASE WHEN c.n IS NULL OR c.n = 1 THEN (SELECT array_agg(id) FROM {}) END"
# The arrays a function is called with, each in the children's (or workflows') id order.
_BY_ID = "ARRAY(SELECT {column} FROM {relation} ORDER BY id)"


def join_ctes(
    spec: ClaimSpec, release: Release, expiry: Fragment, *, notify: bool = True
) -> Fragment:
    """The CTEs that follow the settlement's and the claim's (``j``, ``claimed``,
    ``entries`` and ``tallied`` returning rows): the turn's completed steps' children
    counted down, released (claimed here when there is room, see ``_takes``) or
    cancelled with a journal entry, and their workflows' counters; ``child`` holds the
    children written, ``woken`` the ``NOTIFY`` sent (none without ``notify``: the
    statement's caller announces what its claim after it leaves)."""
    woken = Fragment(
        ", woken AS MATERIALIZED (SELECT pg_notify(%s, q.queue) FROM (SELECT DISTINCT queue"
        f" FROM child WHERE status = '{Status.PENDING}') AS q)",
        [release.channel],
    )
    return Fragment.concat(
        "ended AS (SELECT id, workflow_id FROM j"
        f" WHERE workflow_id IS NOT NULL AND status = '{Status.COMPLETED}'),"
        " flows AS (SELECT workflow_id AS id, count(*)::int AS n FROM ended GROUP BY workflow_id),"
        f" kids AS (SELECT e.child_id FROM {EDGE} AS e"
        " WHERE e.parent_id = ANY(ARRAY(SELECT id FROM ended))),"
        # Each child as the turn would claim it if this count released it (``c.rank``:
        # the children in claim order).
        " ranked AS MATERIALIZED (SELECT c.id, c.n, ",
        _takes(spec, release),
        " AS take, ",
        expiry,
        " AS expires FROM (SELECT f.id, f.n, j.kind, j.queue, j.priority, j.visible_at,"
        " row_number() OVER (ORDER BY j.priority, j.visible_at, j.id) AS rank"
        " FROM (SELECT child_id AS id, count(*)::int AS n FROM kids GROUP BY child_id) AS f"
        f" JOIN {JOB} AS j ON j.id = f.id) AS c),",
        _child(release),
        f", notes AS (INSERT INTO {JOURNAL} ({JOURNAL_COLUMNS})",
        Fragment(
            f" SELECT id, kind, run_count, '{Outcome.CANCELLED}', NULL, %s, NULL, %s, NULL, '', ''"
            f" FROM child WHERE status = '{Status.CANCELLED}')",
            [release.now, release.void_note],
        ),
        woken if notify else "",
    )


def _child(release: Release) -> Fragment:
    """``child``: the children as ``django_jobqueue_count_down`` wrote them (their
    workflows' counters with them), called once the turn's settlement, journal, tally
    and claim are done (a one-time filter on ``entries`` and ``tallied``; ``ranked``
    reads the claim): from then to the commit the turn holds those rows."""
    arrays = [
        *(_BY_ID.format(column=c, relation="ranked") for c in ("id", "n", "take", "expires")),
        *(_BY_ID.format(column=c, relation="flows") for c in ("id", "n")),
    ]
    return Fragment(
        f" child AS MATERIALIZED (SELECT {CLAIMED_OF_C}, c.status"
        f" FROM django_jobqueue_count_down({', '.join(arrays)}, %s, %s) AS c"
        " WHERE (SELECT count(*) FROM entries) + (SELECT count(*) FROM tallied) >= 0)",
        [release.now, release.worker],
    )


def _takes(spec: ClaimSpec, release: Release) -> Fragment:
    """Whether a child this turn releases is claimed by it: of a kind and queue the
    claim serves, uncapped, unlimited and without key rules, at or above the lowest
    priority floor, visible now, its queue not paused, and within the room the claim
    left. A kind with key rules (``spec.keyed``) is left pending for the next claim,
    whose keyed part (``dialects.base.keyed``) is the one place those rules are
    decided: its key's place may be taken, or another key's turn come first."""
    slots = spec.slots
    parts: list[Fragment | str] = [Fragment("(c.kind = ANY(%s)", [list(spec.kinds)])]
    if spec.queues:
        parts.append(Fragment(" AND c.queue = ANY(%s)", [list(spec.queues)]))
    bounded = list(dict.fromkeys([*spec.caps, *spec.limited, *spec.keyed]))
    if bounded:
        parts.append(Fragment(" AND NOT (c.kind = ANY(%s))", [bounded]))
    parts.append(
        Fragment(
            " AND c.priority >= %s AND c.visible_at <= %s"
            f" AND NOT (ARRAY[c.queue] <@ ARRAY(SELECT queue FROM {PAUSED}))"
            " AND c.rank <= %s - (SELECT count(*) FROM claimed))",
            [spec.tiers[-1][0], release.now, slots],
        )
    )
    return Fragment.concat(*parts)


def orders_candidates(spec: ClaimSpec) -> bool:
    """Whether the claim has a rule that orders its candidates rather than bounds them: a
    slot that prefers a lower priority tier (``spec.tiers`` beyond the one that takes
    everything), or a kind whose keys take turns (``fair``). The turn's claim runs on the
    statement's snapshot, where the steps the statement releases are still waiting, and
    ``_takes`` gives them only the room the claim left: such a rule would be decided
    without them (a preferring slot falling back to a higher tier while the turn
    releases a step of the tier it prefers; a key served twice while the turn releases
    another key's first job). Those turns settle and release first, in a transaction
    of their own, and claim after it (``store.exchanging``), as SQLite and MariaDB do."""
    return len(spec.tiers) > 1 or any(rule.fair for rule in spec.keyed.values())


def released_select() -> str:
    """A turn that claims nothing: one row, the settled ids, and the children it made
    pending with their queues (in id order), which the claim that follows it may take
    and whose wake-up its caller sends for those it leaves."""
    pending = f"FROM child WHERE status = '{Status.PENDING}' ORDER BY id"
    return (
        " SELECT (SELECT array_agg(id) FROM j),"
        f" ARRAY(SELECT id {pending}), ARRAY(SELECT queue {pending})"
    )


def final_select() -> str:
    """The turn's one row per claimed job (from the claim or the release; NULLs when
    none), the first of them with the settled ids (``ONCE``)."""
    return (
        f" SELECT {ONCE.format('j')}, {CLAIMED_OF_C}"
        " FROM (SELECT count(*) FROM woken) AS one LEFT JOIN"
        f" (SELECT u.*, row_number() OVER () AS n FROM (SELECT {CLAIMED} FROM claimed"
        f" UNION ALL SELECT {CLAIMED} FROM child WHERE status = '{Status.CLAIMED}') AS u) AS c"
        " ON TRUE"
    )
