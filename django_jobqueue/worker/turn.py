"""The worker's turn: settle the runs that ended and claim the slots that frees, in one
round trip (``store.exchange``), with the claim request the worker builds
(``claiming.claim_request``) and the per-key cursor it keeps; then claim for the pools
the turn's own claim was not for. An idle worker makes its next claim ready before it
waits (``Ready``) and sends it first when the wait ends, ahead of the services that
run before a turn: the Python that builds a claim, and those services, were a sixth of
an idle pickup. A part of ``Worker`` (``loop``), apart because it is one concept: the
loop decides when to take a turn, this what a turn does."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from django_jobqueue import store
from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.store import Claimed
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.worker.claiming import KeyCursor, atomic_going, claim_request, look_again
from django_jobqueue.worker.dbguard import DbGuard
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.wake import Wake

#: Seconds an idle worker's loop waits, once it has handed in the runs it claimed,
#: before it goes on with its turn: unless woken sooner (a NOTIFY, a run's end), as
#: its wait after the turn would be. A slot thread woken by the hand-in needs the GIL
#: to start its run, and the loop held it for what it did next (the turn's
#: bookkeeping, the reckoning of its next wait), 60-70 us of an idle worker's pickup
#: on the shared two-core machine. Blocked here, it lets the run start first and does
#: the rest beside it.
HAND_OVER = 0.001

if TYPE_CHECKING:
    from django_jobqueue.worker.pools import Pools
    from django_jobqueue.worker.services.limits import LimitRefresh


@dataclass(frozen=True)
class Ready:
    """An idle worker's next claim, made before its wait: the request, the claim prepared
    from it, the other pools' (kinds, room) the turn would claim for after it, and all
    the pools' room together."""

    request: store.ClaimRequest
    prepared: store.PreparedClaim
    others: list[tuple[list[str], int]]
    free: int


class Turns:
    """The turn's part of ``Worker``: what it reads of the worker, and its methods."""

    # The claim an idle worker made ready before its wait (``_make_ready``), sent first
    # thing once the wait ends.
    _ready: Ready | None = None
    _caught_up: bool | None

    alias: str
    worker_id: str
    concurrency: int
    caps: dict[str, int]
    max_in_flight: dict[str, int]
    key_rules: dict[str, store.KeyRule]
    leases: Any
    queues: list[str]
    priority_ratio: int | None
    max_jobs: int | None
    claimed: int
    _db: DbGuard
    _pools: Pools
    _limits: LimitRefresh
    _running: dict[uuid.UUID, Running]
    _unsettled: list[Settlement]
    _atomic_kinds: set[str]
    _slot: int
    _keys: KeyCursor
    _wake: Wake

    def _settled(self, batch: list[Settlement], applied: Sequence[bool]) -> None:
        raise NotImplementedError  # the loop's

    def _settle_apart(self, batch: list[Settlement], exc: DatabaseError) -> None:
        raise NotImplementedError  # the loop's

    def _dispatch(self, job: Claimed) -> None:
        raise NotImplementedError  # the loop's

    def _turn(self, *, claim: bool = True) -> tuple[bool, int, int]:
        """Settle the runs that ended and claim the slots that frees, in one round trip.

        Returns whether to look again at once (``claiming.look_again``), how many jobs
        were claimed and how many slots there were to fill.
        """
        batch = [] if self._db.waiting else list(self._unsettled)
        # SQLite: no claim while an atomic run may hold the one write lock.
        one_writer = for_alias(self.alias).one_writer
        claim = claim and not (one_writer and atomic_going(self._running, self._atomic_kinds))
        (kinds, room), others, free = self._room({s.job_id for s in batch})
        wanted = self._claim_request(room, kinds) if claim else None
        if not batch and wanted is None:
            return False, self._claim_others(others) if claim else 0, free
        began = time.monotonic()
        try:
            result = self._db(
                partial(store.exchange, worker_id=self.worker_id, settlements=batch, request=wanted)
            )
        except DatabaseError as exc:
            if not batch:
                raise
            self._settle_apart(batch, exc)
            return True, 0, free
        if result is None:
            return False, 0, free  # database trouble: keep the settlements and try again
        applied, claimed = result
        self._pools.turned(time.monotonic() - began)
        self._settled(batch, applied)
        self._claimed(claimed, wanted)
        unseen = look_again(batch, applied, wanted)
        return unseen, len(claimed) + (self._claim_others(others) if claim else 0), free

    def _room(
        self, settling: set[uuid.UUID]
    ) -> tuple[tuple[list[str], int], list[tuple[list[str], int]], int]:
        """The pools' room for a turn that settles the runs ``settling``: the (kinds,
        room) its own claim is for, the other pools' (kinds, room), and all of it."""
        buffer = self._pools.sizing.buffer(self.concurrency, longest_run=self._pools.longest_run())
        groups = self._pools.groups(self._running, settling, extra=buffer, settles=bool(settling))
        return groups[0], groups[1:], sum(max(room, 0) for _, room in groups)

    def _idle(self) -> bool:
        """Nothing running, nothing to settle, the database not backing off: what a claim
        made ready is made from (``_make_ready``), and what must still hold when it is
        sent (``_send_ready``)."""
        return not (self._running or self._unsettled or self._db.waiting)

    def _make_ready(self) -> None:
        """An idle worker, about to wait: make ready the claim its next turn would send,
        so that when a wake-up comes (a NOTIFY, most often) the claim goes out first,
        without the Python that builds it or the services that run before a turn
        (``_send_ready``)."""
        self._ready = None
        if not self._idle():
            return
        (kinds, room), others, free = self._room(set())
        wanted = self._claim_request(room, kinds)
        if wanted is None:
            return
        prepared = self._db(partial(store.ready_claim, worker_id=self.worker_id, request=wanted))
        if prepared is not None:
            self._ready = Ready(wanted, prepared, others, free)

    def _send_ready(self) -> bool:
        """Send the claim made ready before the wait, on the clock of now, if nothing it
        was made from has changed since (nothing running or to settle, the limits not
        marked stale by a NOTIFY, the database not backing off); whether it stood for
        the turn. It does when it took less than it asked for (the queue has caught
        up): the other pools' claims follow, as in a turn, and a turn now would claim
        nothing more. Once only: a claim made ready is dropped, sent or not."""
        ready, self._ready = self._ready, None
        if ready is None or not self._idle() or self._limits.stale:
            return False
        began = time.monotonic()
        claimed = self._db(partial(store.claim_ready, ready.prepared))
        if claimed is None:
            return False  # database trouble: the turn tries again, with its backoff
        self._pools.turned(time.monotonic() - began)
        self._claimed(claimed, ready.request)
        if len(claimed) >= ready.request.limit:
            return False  # more may be waiting: the turn claims the rest
        got = len(claimed) + self._claim_others(ready.others)
        self._caught_up = got < ready.free
        return True

    def _claim_others(self, groups: list[tuple[list[str], int]]) -> int:
        """Claim for the pools the turn's own claim was not for (the event loop's kinds
        when the slot threads had more room, or the other way round): a second round
        trip, only for a worker that runs both sync and async kinds."""
        got = 0
        for kinds, room in groups:
            wanted = self._claim_request(room, kinds)
            if wanted is None:
                continue
            call = partial(store.exchange, worker_id=self.worker_id, settlements=[], request=wanted)
            result = self._db(call)
            claimed = result[1] if result is not None else []
            self._claimed(claimed, wanted)
            got += len(claimed)
        return got

    def _claimed(self, claimed: list[Claimed], wanted: store.ClaimRequest | None) -> None:
        idle = not self._running
        if wanted is not None:
            self._pools.found(wanted.kinds, len(claimed))
        self._slot += len(claimed)
        self._keys.served(claimed, wanted.per_key if wanted else ())
        for job in claimed:
            self._dispatch(job)
        if idle and claimed:
            # Nothing was running: the loop begins its wait now, for a moment, rather
            # than after its turn's bookkeeping (see ``HAND_OVER``).
            self._wake.wait(HAND_OVER)

    def _claim_request(self, free: int, kinds: Sequence[str]) -> store.ClaimRequest | None:
        """What to claim for ``free`` slots (None: nothing to claim now)."""
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed)
        if free <= 0 or not self._limits.ready:
            return None
        return claim_request(
            free,
            running=self._running,
            caps=self.caps,
            max_in_flight=self.max_in_flight,
            per_key=self.key_rules,
            key_after=self._keys.after(),
            slot=self._slot,
            priority_ratio=self.priority_ratio,
            kinds=kinds,
            queues=self.queues,
            leases=self.leases,
        )
