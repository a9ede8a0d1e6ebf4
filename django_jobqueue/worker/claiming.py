"""What a worker asks for when it claims: how many jobs, of which kinds, and which
priority tier each free slot prefers. Pure: the loop passes in what it knows."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import timedelta

from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.states import Status
from django_jobqueue.store import Claimed, ClaimRequest, KeyRule
from django_jobqueue.worker.services.base import Running


def priority_floor(slot: int, ratio: int | None) -> int:
    """The lowest priority a claim slot prefers: every (ratio+1)-th slot lets the next tier
    go first, every (ratio+1)²-th the tier after it, so low tiers get a steady share."""
    if ratio is None:
        return 0
    period = ratio + 1
    if slot % (period * period) == period * period - 1:
        return 2
    if slot % period == period - 1:
        return 1
    return 0


def floor_counts(slot: int, free: int, ratio: int | None) -> dict[int, int]:
    """How many of the ``free`` slots from ``slot`` on prefer each floor above 0: the
    count of ``priority_floor`` over them, counted rather than walked (a claim of a
    hundred slots called it a hundred times each turn)."""
    if ratio is None or free <= 0:
        return {}
    period = ratio + 1

    def every(m: int) -> int:  # slots x in [slot, slot + free) with x % m == m - 1
        return (slot + free) // m - slot // m

    second = every(period * period)
    counts = {1: every(period) - second, 2: second}
    return {f: n for f, n in counts.items() if n}


def claim_request(
    free: int,
    *,
    running: Mapping[uuid.UUID, Running],
    caps: Mapping[str, int],
    max_in_flight: Mapping[str, int],
    slot: int,
    per_key: Mapping[str, KeyRule],
    key_after: Mapping[str, str],
    priority_ratio: int | None,
    kinds: Sequence[str],
    queues: Sequence[str],
    leases: Mapping[str, timedelta],
) -> ClaimRequest:
    """The claim for ``free`` slots: kinds, caps and each slot's floor."""
    in_flight = Counter(r.job.kind for r in running.values())
    at_cap = {k for k, cap in caps.items() if in_flight[k] >= cap}
    limits = {k: cap - in_flight[k] for k, cap in caps.items() if k not in at_cap}
    # A kind at its global limit by this worker's runs alone needs no look; the others
    # are counted (all workers) inside the claim.
    at_cap |= {k for k, most in max_in_flight.items() if in_flight[k] >= most}
    limited = {k: most for k, most in max_in_flight.items() if k not in at_cap}
    # A floor only says which tier a slot prefers: slots its tiers cannot fill fall
    # through to the next higher tier, down to floor 0 (everything).
    return ClaimRequest(
        limit=free,
        kinds=kinds,
        queues=queues,
        exclude_kinds=frozenset(at_cap),
        kind_limits=limits,
        max_in_flight=limited,
        per_key={k: rule for k, rule in per_key.items() if k not in at_cap},
        key_after=key_after,
        preferring=floor_counts(slot, free, priority_ratio),
        leases=leases,
    )


class KeyCursor:
    """Per keyed kind, the greatest key its owner's last claim of it served: the next
    claim looks at the keys after it first, so that keys past the few one claim looks
    at get their turn. Owned by whoever claims again (a worker, a test), so that two
    claimers in one process do not move each other's place."""

    def __init__(self) -> None:
        self._after: dict[str, str] = {}

    def after(self) -> Mapping[str, str]:
        """Where each keyed kind's next claim starts (a copy: a request is a value)."""
        return dict(self._after)

    def served(self, claimed: Iterable[Claimed], keyed: Collection[str]) -> None:
        """Move past the greatest key of each keyed kind in ``claimed``."""
        for job in claimed:
            if job.key is not None and job.kind in keyed:
                self._after[job.kind] = max(job.key, self._after.get(job.kind, job.key))


def atomic_going(running: Mapping[uuid.UUID, Running], atomic_kinds: Collection[str]) -> bool:
    """Whether an atomic run has started and not ended: on a database with one writer
    (SQLite) its transaction may hold the write lock, and a claim would only block the
    loop (and with it the timeouts and the long-transaction warning) until it ends."""
    return any(
        r.started_at is not None and not r.ended and r.job.kind in atomic_kinds
        for r in running.values()
    )


def look_again(
    batch: Sequence[Settlement],
    applied: Sequence[bool],
    wanted: ClaimRequest | None,
) -> bool:
    """Whether a turn that settled ``batch`` should claim again at once: its claim ran
    beside the settlements, so it could not see a job they sent back to pending (a
    retry without backoff, a pause, a hand-back), nor room they freed under a cap or a
    global limit (counted from the claim's snapshot or from the runs still listed). A
    turn of completions only, all applied, under a claim with none of those, left
    nothing it could not see: a workflow step such a completion released was claimed by
    the same statement, or announced (``NOTIFY``) when this turn had no room for it; a
    per-key rule's count leaves out the jobs the turn completes (PostgreSQL counts
    without them in the same statement, the other databases claim after the settlements
    commit). Skipping that second look leaves a chain's next step its slot thread and
    the database at once."""
    if not batch:
        return False
    if wanted is None:
        return True
    if any(s.status != Status.COMPLETED for s in batch):
        return True
    return wanted.bounded
