"""A worker's turn: settle the runs that ended and claim as many jobs as that leaves
slots for, in one round trip where the database allows (one statement on PostgreSQL:
see its dialect's ``claiming``). Only the worker loop takes turns, on its own
connection, which therefore plans its prepared statements once.

Each part keeps its own guarantees: a settlement whose claim was lost writes nothing,
and the claim skips locked rows. The claim cannot see the rows the same turn settles
back to pending; the next turn can.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from django_jobqueue.models import Status
from django_jobqueue.rules.joins import VOID_NOTE
from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.store import runlogs, wakeups
from django_jobqueue.store.claim import Claimed, ClaimRequest, PreparedClaim, prepare
from django_jobqueue.store.dialects.base.settling import Release
from django_jobqueue.store.settling import TALLY, as_worker, outcome, settle_rows
from django_jobqueue.store.settling import apply_guarded as apply


def exchange(
    *, worker_id: str, settlements: Sequence[Settlement], request: ClaimRequest | None
) -> tuple[Sequence[bool], list[Claimed]]:
    """Apply ``settlements`` (guarded by ``worker_id``'s claims), then claim as
    ``claim_jobs`` would for ``request`` (None: settle only). Returns, per settlement,
    whether it was applied, and the claimed jobs."""
    mine = [as_worker(s, worker_id) for s in settlements]
    return runlogs.written_with(
        mine, lambda: _exchange(worker_id, mine, request), lambda done: done[0]
    )


def _exchange(
    worker_id: str, mine: Sequence[Settlement], request: ClaimRequest | None
) -> tuple[Sequence[bool], list[Claimed]]:
    prepared = _prepared(worker_id, request)
    if prepared is None:
        return apply(mine), []
    prepared.dialect.use_generic_plans()
    if not mine:
        return [], prepared.run()
    d = prepared.dialect
    if any(s.step for s in mine):
        if all(s.status == Status.COMPLETED for s in mine if s.step):
            # Completions only: where the dialect can, their joins (and the claim of
            # what they release) are part of the turn's one statement, on the claim's
            # clock: what it releases is visible to the claim.
            now = prepared.spec.now
            rows = settle_rows(mine, now, held=d.conn.in_atomic_block)
            release = releasing(worker_id, now)
            found = d.turn_releasing(rows, TALLY, prepared.spec, release)
            if found is not None and found.claim_after:
                # Settled and released; the claim follows and sees the released steps,
                # and the workers are woken for those it left (none woken for one it took).
                took = prepared.run()
                taken = {c.id for c in took}
                for queue in sorted({q for i, q in found.pending if i not in taken}):
                    d.notify(wakeups.CHANNEL, queue)
                return outcome(mine, found.done), took
            if found is not None:
                return outcome(mine, found.done), prepared.read(found.claimed)
        # Workflow steps settle with their joins in a transaction of their own first; the
        # claim is prepared after it, so that its clock is past the visible_at of the
        # steps that settlement released and this turn claims them (a chain moves on
        # now, not a turn or a wake-up later).
        applied = apply(mine)
        after = _prepared(worker_id, request)
        return applied, [] if after is None else after.run()
    rows = settle_rows(mine, timezone.now(), held=d.conn.in_atomic_block)
    done, claimed = d.turn(rows, TALLY, prepared.spec)
    return outcome(mine, done), prepared.read(claimed)


def releasing(worker_id: str, now: datetime) -> Release:
    """What a turn that releases its completed steps' dependents writes with them."""
    return Release(now=now, void_note=VOID_NOTE, worker=worker_id, channel=wakeups.CHANNEL)


def turn_statement(
    *, worker_id: str, settlements: Sequence[Settlement], request: ClaimRequest | None
) -> tuple[str, list[Any]] | None:
    """The one statement ``exchange`` would send for these arguments, for EXPLAIN; None
    where a turn is not one statement (or would not claim)."""
    prepared = _prepared(worker_id, request)
    if prepared is None or not settlements:
        return None
    mine = [as_worker(s, worker_id) for s in settlements]
    now = timezone.now()
    rows = settle_rows(mine, now, held=False)
    d = prepared.dialect
    if any(s.step for s in mine):  # the turn that releases (``turn_releasing``)
        release = releasing(worker_id, now)
        statement = d.releasing_statement(rows, TALLY, prepared.spec, release)
    else:
        statement = d.turn_statement(rows, TALLY, prepared.spec)
    return None if statement is None else statement.statement()


def _prepared(worker_id: str, request: ClaimRequest | None) -> PreparedClaim | None:
    return None if request is None else prepare(worker_id=worker_id, request=request)
