"""A claim as values (``ClaimSpec``) and a kind's per-key rules (``KeyRule``): what the
store hands a dialect's claim."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class KeyRule:
    """A kind's per-key claim rules, as the task layer resolved them."""

    most: int | None = None  # max_in_flight_per_key
    ordered: bool = False  # one at a time per key, in enqueue order
    fair: bool = False  # round-robin between keys of the same priority

    @property
    def per_key(self) -> int | None:
        """The most claimed at once per key (``ordered``: one)."""
        return 1 if self.ordered else self.most

    @property
    def counted(self) -> bool:
        """Whether the claim must count the key's claimed jobs under the kind's lock (a
        limit to keep), rather than on its own snapshot (an order to follow)."""
        return self.per_key is not None


@dataclass(frozen=True)
class ClaimSpec:
    """One claim as values: what it selects and what it writes to the rows it takes."""

    worker_id: str
    kinds: list[str]  # the kinds it takes (exclusions already removed)
    queues: list[str]  # empty: every queue
    tiers: list[tuple[int, int]]  # (priority floor, slots), the highest floor first
    now: datetime  # the clock the claim reads (visibility, lease expiry)
    default_expiry: datetime  # the lease expiry of a claimed row
    expiries: dict[str, datetime] = field(default_factory=dict)  # kinds with their own lease
    caps: dict[str, int] = field(default_factory=dict)  # this claim's most per kind
    limited: dict[str, int] = field(default_factory=dict)  # global max_in_flight per kind
    # The limited kinds' lock keys (sorted: every claim takes them in one order) and
    # the lock space they share, for the database's own lock (see ``store.limits``).
    lock_keys: tuple[int, ...] = ()
    lock_space: int = 0
    # Kinds with per-key rules (``dialects.base.keyed``), and for each the key after
    # which this claim starts looking (the last it served: keys are visited in turn).
    keyed: dict[str, KeyRule] = field(default_factory=dict)
    key_after: dict[str, str] = field(default_factory=dict)
    # Each limited or per-key-limited kind's own lock key (those of ``lock_keys``), and
    # the space of the locks per key (PostgreSQL counts a limit per key under them).
    kind_locks: dict[str, int] = field(default_factory=dict)
    key_space: int = 0
    # The claim is part of a turn's statement, after its settlements (``s``, their
    # document): a count of claimed jobs there may leave out the ones it settles.
    settling: bool = False
    # The claimer found its queues caught up at its last look (an idle worker's claim
    # made ready): it most likely finds fewer candidates than slots, and a dialect
    # with ``claims_at_once`` tries its tiers in one scan first (``_every_tier``).
    caught_up: bool = False

    @property
    def slots(self) -> int:
        """How many jobs the claim takes at most: its tiers' slots together."""
        return sum(n for _, n in self.tiers)
