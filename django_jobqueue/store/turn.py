"""A worker's turn in one round trip: settle the runs that ended and claim as many jobs
as that leaves slots for. Only the worker loop takes turns, on its own connection,
which therefore plans its prepared statements once (``sql.use_generic_plans``).

On PostgreSQL both go in one statement (the settlement CTEs, then the claim's), so a
busy worker pays one round trip and one commit per turn instead of two. Each part
keeps its own guarantees: a settlement whose claim was lost writes nothing, and the
claim skips locked rows. The claim cannot see the rows this statement settles back to
pending; the next turn can. Nor does it count, for a kind with a global
``max_in_flight``, the claims this statement settles as ended: it leaves their slots to
the next turn, never claims beyond the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from django_jobqueue.run.lifecycle import Settlement
from django_jobqueue.store.claim import Claimed, claim_jobs, prepare
from django_jobqueue.store.settle import SETTLE_CTES, apply, as_worker, document, outcome, unique
from django_jobqueue.store.sql import use_generic_plans


def exchange(
    *, worker_id: str, settlements: Sequence[Settlement], **claim: Any
) -> tuple[list[bool], list[Claimed]]:
    """Apply ``settlements`` (guarded by ``worker_id``'s claims), then claim as
    ``claim_jobs(worker_id=worker_id, **claim)`` would. Returns, per settlement, whether
    it was applied, and the claimed jobs."""
    mine = [as_worker(s, worker_id) for s in settlements]
    prepared = prepare(worker_id=worker_id, **claim) if claim.get("limit", 0) > 0 else None
    if prepared is not None:
        use_generic_plans(prepared.dialect)
    if not mine:
        if prepared is None:
            return [], []
        return [], prepared.run()
    if prepared is None or not prepared.dialect.postgres:
        applied = apply(mine)
        return applied, claim_jobs(worker_id=worker_id, **claim) if prepared else []
    d = prepared.dialect
    batch = unique(mine)
    statement = (
        f"WITH {SETTLE_CTES}, {', '.join(prepared.ctes)}, claimed AS ({prepared.update})"
        " SELECT (SELECT array_agg(id) FROM j), c.* FROM (SELECT 1) AS one"
        " LEFT JOIN claimed AS c ON TRUE"
    )
    rows = d.run(statement, [document(batch, timezone.now()), *prepared.params])
    done = {d.read_uuid(v) for v in (rows[0][0] or [])} if rows else set()
    claimed = prepared.read([r[1:] for r in rows if r[1] is not None])
    return outcome(mine, done), claimed
