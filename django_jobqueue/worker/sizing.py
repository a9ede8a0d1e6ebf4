"""How many jobs a worker claims beyond its free slots: a small buffer, sized by the work.

A turn that claims only as many jobs as there are free slots leaves each slot idle for a
round trip after every run: for jobs that take less time than that, the claim size, not
the work, sets the rate. So the worker measures both (recent run durations and turn
round trips, as moving averages) and claims, beyond its free slots, about what its
slots get through in one round trip: ``concurrency × round trip / run duration``,
never more than ``cap(concurrency)`` (``max(concurrency, CAP)``), and none at all while
runs take longer than ``LONG_RUN``: long jobs are never hoarded, and what one worker
does not buffer the others take. The cap is not the concurrency itself because at a
small concurrency (the default on a small machine) short jobs would then come a few
per round trip, and the worker's rate would follow its thread count, not the work;
a buffered job waits about one round trip whatever the cap, since the buffer is what
the slots finish in that time.

A buffered job waits in the slot threads' queue under the same lease as a running one
(the worker renews it), starts as soon as a slot frees (no round trip), and is handed
back (``released``: pending now, no failure counted) if it has waited ``HOLD`` seconds,
or at once when the worker shuts down.
"""

from __future__ import annotations

import math

# Runs longer than this (on average) get no buffer at all.
LONG_RUN = 0.25
# A run going on for this long means its slot is not about to free: no buffer meanwhile.
STUCK = 4 * LONG_RUN
# The longest a buffered job waits for a slot before it is handed back, in seconds.
HOLD = 5.0
# The most a turn waits for short runs about to end (``Sizing.gather``), as a share of a
# turn's round trip.
GATHER = 0.25
# The weight of the newest sample in each moving average.
WEIGHT = 0.2
# The buffer's ceiling, for a worker of fewer slots than this: two workers of 2 slots
# drained no-ops at 0.49x pgqueuer's rate with a ceiling of 2, 1.40x with 64 (bench).
CAP = 64


def cap(concurrency: int) -> int:
    """The most jobs a worker of ``concurrency`` slots buffers beyond them."""
    return max(concurrency, CAP)


class Sizing:
    """Moving averages of run durations and turn round trips, and the buffer they call for."""

    def __init__(self) -> None:
        self.run: float | None = None
        self.turn: float | None = None

    def ran(self, seconds: float) -> None:
        self.run = seconds if self.run is None else self.run + WEIGHT * (seconds - self.run)

    def turned(self, seconds: float) -> None:
        self.turn = seconds if self.turn is None else self.turn + WEIGHT * (seconds - self.turn)

    def buffer(self, concurrency: int, *, longest_run: float = 0.0) -> int:
        """Jobs to claim beyond the free slots of ``concurrency`` slot threads; none
        while a run has been going for ``STUCK`` seconds (its slot frees no sooner)."""
        if self.run is None or self.turn is None or self.run > LONG_RUN:
            return 0
        if longest_run >= STUCK:
            return 0
        if self.run <= 0:
            return cap(concurrency)
        return min(cap(concurrency), math.ceil(concurrency * self.turn / self.run))

    def gather(self, going: int, concurrency: int) -> float:
        """How long a turn may wait for the ``going`` runs of ``concurrency`` slot threads
        to end first: while they should all end within ``GATHER`` of a round trip, up
        to that; else not at all (a run that takes longer gets its turn without them)."""
        if not going or self.run is None or self.turn is None:
            return 0.0
        bound = GATHER * self.turn
        waves = -(-going // concurrency)  # runs one slot thread still has, queued ones too
        return bound if self.run * waves <= bound else 0.0
