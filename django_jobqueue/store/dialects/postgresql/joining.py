"""PostgreSQL's joins inside the worker's turn: the release of the dependents of the
steps a turn completes, as data-modifying CTEs of the turn's one statement.

A turn that completes workflow steps would otherwise settle them and their joins in a
transaction of ten or so statements (the ended steps, their edges, each child locked
and updated, the workflow row locked and updated, a ``NOTIFY``) before it could claim.
Here they follow the settlement's CTEs (``j``: the rows the guard let through), so a
stale run, whose guard fails, releases nothing, and the release commits with the
settlement or not at all. The counters move once per turn per row: a chord's callback
and its workflow get one UPDATE per turn however many members the turn completed.

Those two rows are the ones every member's settlement touches, so they are locked first
(``lock_ctes``) with SKIP LOCKED: a completion whose child or workflow row another turn
holds is left out of the statement, written by nothing, and the worker sends it again
in its next turn (``Released.deferred``). No worker queues behind another on them; each
keeps claiming and running, and brings more completions to the row once it is free.

A child this turn releases is claimed by the same statement when the worker has room
for it (its kind and queue served, no per-kind cap or global limit on it, its queue not
paused, visible now): the claim CTE cannot see a row the statement itself makes
pending, and a row can be written only once per statement, so the release writes it
``claimed`` directly. The others become ``pending`` and the statement sends the
``NOTIFY`` (on commit) that wakes the workers; a worker never wakes itself for a step
it took.

Only completions come here (the store sends a turn with a dead, cancelled or retried
step the long way, ``store.joins``, which cascades): a completed parent releases or
counts down a child, and cancels only a batch's ``on_failure`` callback (``when=
"failed"``) when no member died, a leaf nothing depends on. The CASEs are
``run.joins.join`` and ``run.joins.outcome`` for completed parents, written in SQL.
"""

from __future__ import annotations

from django_jobqueue.models import StepEdge, Workflow
from django_jobqueue.states import JoinWhen, Outcome, Status, WorkflowStatus
from django_jobqueue.store.dialects.base.claiming import CLAIMED, PAUSED, ClaimSpec
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.settling import JOB, JOURNAL, JOURNAL_COLUMNS, Release

EDGE = StepEdge._meta.db_table
WORKFLOW = Workflow._meta.db_table

CLAIMED_OF_C = ", ".join(f"c.{name.strip()}" for name in CLAIMED.split(","))
# A turn's settled (or deferred) ids, on the first of its rows only (``c.n``: the row's
# number; NULL when it claimed nothing): in every row, a turn of n jobs sent n² ids.
ONCE = "CASE WHEN c.n IS NULL OR c.n = 1 THEN (SELECT array_agg(id) FROM {}) END"
# The child once the turn's completions are counted: still waiting, or released.
_OPEN = "c.parents_open > r.n"
# A batch's on_failure callback once every member completed: cancelled, not run.
_VOID = f"(c.join_when = '{JoinWhen.FAILED}' AND c.parents_dead = 0)"
_RELEASED = f"(NOT {_OPEN} AND NOT {_VOID})"
# The children a parent's ending locks: those it counts down, those a re-arm revives.
_ARMED = f"('{Status.WAITING}', '{Status.CANCELLED}')"


def lock_ctes(*, wait: bool) -> str:
    """The CTEs between the settlement's rows ``s`` and its UPDATE ``j``: the waiting (and
    cancelled) children of the batch's steps and their workflows, locked first (in id order, as
    the long way locks them), and ``deferred``, the steps whose joins need a row another
    turn holds. Those settle in a later turn (unless ``wait``): a worker never queues
    behind another on a chord's callback or a workflow, it keeps running and claiming
    and brings more completions to the row when it is free."""
    lock = "FOR UPDATE" if wait else "FOR UPDATE SKIP LOCKED"
    return (
        # The batch's rows by primary key, as an array (a join with ``s`` was planned as a
        # scan of the table, and a test of workflow_id here as a scan of the steps' index);
        # a plain job's workflow is NULL, which nothing below matches.
        # Locked first, as the long way's guarded UPDATE locks them before the children:
        # an operator holding one (cancelling its workflow) never waits for a child
        # this statement holds while it waits for the step.
        f" steps AS MATERIALIZED (SELECT t.id, t.workflow_id FROM {JOB} AS t"
        " WHERE t.id = ANY(ARRAY(SELECT id FROM s)) ORDER BY t.id FOR UPDATE),"
        f" kids AS (SELECT e.parent_id, e.child_id FROM {EDGE} AS e"
        " WHERE e.parent_id = ANY(ARRAY(SELECT id FROM steps))),"
        # Cancelled children too, as the long way locks them: a re-arm counts its
        # parents under that lock. ``status`` is the row's as locked, which can be newer
        # than the statement's snapshot (a re-arm committed meanwhile).
        f" held AS MATERIALIZED (SELECT c.id, c.status FROM {JOB} AS c"
        f" WHERE c.id = ANY(ARRAY(SELECT child_id FROM kids)) AND c.status IN {_ARMED}"
        f" ORDER BY c.id {lock}),"
        f" flows AS MATERIALIZED (SELECT w.id FROM {WORKFLOW} AS w"
        f" WHERE w.id = ANY(ARRAY(SELECT workflow_id FROM steps)) ORDER BY w.id {lock}),"
        " deferred AS (SELECT p.id FROM steps AS p WHERE p.workflow_id IS NOT NULL"
        " AND (NOT (p.workflow_id = ANY(ARRAY(SELECT id FROM flows))) OR EXISTS (SELECT 1"
        f" FROM kids AS k JOIN {JOB} AS c ON c.id = k.child_id WHERE k.parent_id = p.id"
        f" AND c.status IN {_ARMED} AND NOT (c.id = ANY(ARRAY(SELECT id FROM held))))"
        # A child changed since the snapshot (re-armed, cancelled): the counts below read
        # the snapshot, so the step settles in a later statement, which sees the change.
        " OR EXISTS (SELECT 1 FROM kids AS k JOIN held AS h ON h.id = k.child_id"
        f" JOIN {JOB} AS c ON c.id = k.child_id WHERE k.parent_id = p.id"
        " AND c.status <> h.status))),"
    )


def join_ctes(spec: ClaimSpec, release: Release, expiry: Fragment) -> Fragment:
    """The CTEs that follow the settlement's and the claim's (``j``, ``claimed``): the
    turn's completed steps' children counted down, released (claimed here when there is
    room, see ``_taken``) or cancelled with a journal entry, and their workflows'
    counters; ``child`` holds the children written, ``woken`` the ``NOTIFY`` sent."""
    taken = _taken(spec, release)
    return Fragment.concat(
        "ended AS (SELECT id, workflow_id FROM j"
        f" WHERE workflow_id IS NOT NULL AND status = '{Status.COMPLETED}'),"
        " fanin AS (SELECT k.child_id AS id, count(*) AS n FROM ended JOIN kids AS k"
        " ON k.parent_id = ended.id WHERE k.child_id = ANY(ARRAY(SELECT id FROM held"
        f" WHERE status = '{Status.WAITING}'))"
        " GROUP BY k.child_id),"
        " ranked AS (SELECT f.id, f.n,"
        " row_number() OVER (ORDER BY c.priority, c.visible_at, c.id) AS rank"
        f" FROM fanin AS f JOIN {JOB} AS c ON c.id = f.id),",
        _child(taken, release, expiry),
        f", notes AS (INSERT INTO {JOURNAL} ({JOURNAL_COLUMNS})",
        Fragment(
            f" SELECT id, kind, run_count, '{Outcome.CANCELLED}', NULL, %s, NULL, %s, NULL, '', ''"
            f" FROM child WHERE status = '{Status.CANCELLED}'),",
            [release.now, release.void_note],
        ),
        " closing AS (SELECT workflow_id, count(*) AS n FROM (SELECT workflow_id FROM ended"
        f" UNION ALL SELECT workflow_id FROM child WHERE status = '{Status.CANCELLED}') AS x"
        " GROUP BY workflow_id),",
        _flow(release),
        Fragment(
            ", woken AS MATERIALIZED (SELECT pg_notify(%s, q.queue) FROM (SELECT DISTINCT queue"
            f" FROM child WHERE status = '{Status.PENDING}') AS q)",
            [release.channel],
        ),
    )


def _taken(spec: ClaimSpec, release: Release) -> Fragment:
    """The condition that a child this turn releases is claimed by it: released, of a
    kind and queue the claim serves, uncapped and unlimited, at or above the lowest
    priority floor, visible now, its queue not paused, and within the room the claim
    left (ranked in claim order)."""
    slots = sum(n for _, n in spec.tiers)
    parts: list[Fragment | str] = [
        Fragment(f"({_RELEASED} AND c.kind = ANY(%s)", [list(spec.kinds)]),
    ]
    if spec.queues:
        parts.append(Fragment(" AND c.queue = ANY(%s)", [list(spec.queues)]))
    bounded = [*spec.caps, *(k for k in spec.limited if k not in spec.caps)]
    if bounded:
        parts.append(Fragment(" AND NOT (c.kind = ANY(%s))", [bounded]))
    parts.append(
        Fragment(
            " AND c.priority >= %s AND c.visible_at <= %s"
            f" AND NOT (ARRAY[c.queue] <@ ARRAY(SELECT queue FROM {PAUSED}))"
            " AND r.rank <= %s - (SELECT count(*) FROM claimed))",
            [spec.tiers[-1][0], release.now, slots],
        )
    )
    return Fragment.concat(*parts)


def _child(taken: Fragment, release: Release, expiry: Fragment) -> Fragment:
    """The children's UPDATE: counters, then released, claimed, cancelled or waiting."""
    now = Fragment("%s", [release.now])
    return Fragment.concat(
        f"child AS (UPDATE {JOB} AS c SET parents_open = GREATEST(c.parents_open - r.n, 0),",
        f" status = CASE WHEN {_OPEN} THEN '{Status.WAITING}'"
        f" WHEN {_VOID} THEN '{Status.CANCELLED}' WHEN ",
        taken,
        f" THEN '{Status.CLAIMED}' ELSE '{Status.PENDING}' END,",
        f" visible_at = CASE WHEN {_RELEASED} THEN GREATEST(c.visible_at, ",
        now,
        ") ELSE c.visible_at END,",
        f" finished_at = CASE WHEN NOT {_OPEN} AND {_VOID} THEN ",
        now,
        " ELSE c.finished_at END,",
        " claimed_by = CASE WHEN ",
        taken,
        Fragment(" THEN %s ELSE c.claimed_by END,", [release.worker]),
        " claim_expires_at = CASE WHEN ",
        taken,
        " THEN ",
        expiry,
        " ELSE c.claim_expires_at END,",
        " run_count = CASE WHEN ",
        taken,
        " THEN c.run_count + 1 ELSE c.run_count END",
        f" FROM ranked AS r WHERE c.id = r.id AND c.status = '{Status.WAITING}'",
        f" RETURNING {CLAIMED_OF_C}, c.status)",
    )


def _flow(release: Release) -> Fragment:
    """The workflows' UPDATE: their open steps counted down; the turn that closes the
    last one sets the status (``run.joins.outcome``) and the finish time."""
    closes = f"w.steps_open <= x.n AND w.status = '{WorkflowStatus.RUNNING}'"
    return Fragment(
        f" flow AS (UPDATE {WORKFLOW} AS w SET steps_open = GREATEST(w.steps_open - x.n, 0),"
        f" status = CASE WHEN {closes} THEN CASE"
        f" WHEN w.cancel_requested THEN '{WorkflowStatus.CANCELLED}'"
        f" WHEN w.steps_dead > 0 THEN '{WorkflowStatus.FAILED}'"
        f" ELSE '{WorkflowStatus.COMPLETED}' END ELSE w.status END,"
        f" finished_at = CASE WHEN {closes} THEN %s ELSE w.finished_at END"
        " FROM closing AS x WHERE w.id = x.workflow_id AND w.id = ANY(ARRAY(SELECT id FROM flows))"
        " RETURNING w.id)",
        [release.now],
    )


def final_select() -> str:
    """The turn's one row per claimed job (from the claim or the release; NULLs when
    none), the first of them with the settled and the deferred ids (``ONCE``)."""
    return (
        f" SELECT {ONCE.format('j')}, {ONCE.format('deferred')}, {CLAIMED_OF_C}"
        " FROM (SELECT count(*) FROM woken) AS one LEFT JOIN"
        f" (SELECT u.*, row_number() OVER () AS n FROM (SELECT {CLAIMED} FROM claimed"
        f" UNION ALL SELECT {CLAIMED} FROM child WHERE status = '{Status.CLAIMED}') AS u) AS c"
        " ON TRUE"
    )
