"""How many jobs a worker claims beyond its free slots: a small buffer, sized by the work.

A turn that claims only as many jobs as there are free slots leaves each slot idle for a
round trip after every run: for jobs that take less time than that, the claim size, not
the work, sets the rate. So the worker measures the work and the round trip (moving
averages) and claims, beyond its free slots, about what its slots get through in one
round trip, and none at all while runs take longer than ``LONG_RUN``: long jobs are
never hoarded, and what one worker does not buffer the others take.

What the slots get through is measured two ways. Their *pace* (``paced``) is the time
between two runs ending while runs were queued for a slot: the slots' real rate, the
interpreter's lock and the loop thread's own work included. Before there is a pace
(no run has queued yet), a run's duration stands in: ``concurrency × round trip / run
duration``, which takes the slots to run side by side; for short pure-Python runs they
take turns on one lock, so that estimate is kept within ``RUN_CAP`` (or the
concurrency). Once paced, the buffer is ``round trip / pace``, within ``CAP`` (or the
concurrency): short jobs then come as many a round trip as the slots finish in it,
whatever the thread count (a no-op drain at the default concurrency of 8 no longer
follows it), and a buffered job still waits about one round trip, since the buffer is
what the slots finish in that time.

Never less than a full set of slots (up to ``CAP``, which bounds what a worker of
thousands of event-loop slots holds unstarted), though, for runs shorter than
``LONG_RUN``: runs claimed together start together and end together (a wave of
I/O-bound jobs), and a buffer of what the slots finish in a round trip *at their
average pace* (25 jobs for 250 slots of 50 ms runs over 5 ms round trips) left most
slots idle for a turn after every wave. With the next run of every slot claimed ahead,
a slot that frees finds it waiting; a buffered job waits at most about one run for its
slot. (Two workers at the documented 250 threads drained 5,000 jobs of 50 ms at
6,300-7,300 jobs/s before, 9,000-9,400 after; ``async def`` at 250 on the event loop
7,460-7,500 before, 8,000-9,000 after: bench ``io_sync`` and ``io_async``, three
interleaved pairs.)

A buffered job waits in the slot threads' queue under the same lease as a running one
(the worker renews it), starts as soon as a slot frees (no round trip), and is handed
back (``released``: pending now, no failure counted) if it has waited ``HOLD`` seconds,
or at once when the worker shuts down.
"""

from __future__ import annotations

import math
from collections.abc import Callable

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
# The buffer's ceiling once the slots' pace is measured, for a worker of fewer slots than
# this. (Two workers of 2 slots drained no-ops at 0.49x pgqueuer's rate with a ceiling of
# 2, 1.40x with 64; at the default 8 slots a ceiling of 64 made the drain follow the
# thread count: bench, docs/explanation/performance.md.)
CAP = 256
# The ceiling while only run durations are known (never above ``CAP``).
RUN_CAP = 64
# Runs that end while others are queued, averaged into one sample of the slots' pace.
PACE_SAMPLE = 16


def cap(concurrency: int, *, paced: bool = False) -> int:
    """The most jobs a worker of ``concurrency`` slots buffers beyond them: ``CAP`` once
    the slots' pace is measured, ``RUN_CAP`` before (either at least the concurrency)."""
    return max(concurrency, CAP if paced else min(CAP, RUN_CAP))


class Sizing:
    """Moving averages of run durations and turn round trips, and the buffer they call for."""

    def __init__(self) -> None:
        self.run: float | None = None
        self.turn: float | None = None
        # Seconds between two runs ending while runs waited for a slot (None: not yet).
        self.pace: float | None = None

    def ran(self, seconds: float) -> None:
        self.run = seconds if self.run is None else self.run + WEIGHT * (seconds - self.run)

    def turned(self, seconds: float) -> None:
        self.turn = seconds if self.turn is None else self.turn + WEIGHT * (seconds - self.turn)

    def paced(self, seconds: float) -> None:
        """The slots ended a run every ``seconds`` while runs waited for them (the
        average over ``PACE_SAMPLE`` such runs, from ``Pace``)."""
        self.pace = seconds if self.pace is None else self.pace + WEIGHT * (seconds - self.pace)

    def each(self, concurrency: int) -> float | None:
        """Seconds the slots take per run when busy: their pace, never less than a run's
        duration shared by ``concurrency`` slots (None: no run measured yet)."""
        if self.run is None:
            return None
        return max(self.pace or 0.0, self.run / concurrency)

    def buffer(self, concurrency: int, *, longest_run: float = 0.0) -> int:
        """Jobs to claim beyond the free slots of ``concurrency`` slot threads: what they
        finish in a round trip, and at least ``concurrency`` up to ``CAP`` (see the module
        docstring); none while a run has been going for ``STUCK`` seconds (its slot
        frees no sooner)."""
        if self.run is None or self.turn is None or self.run > LONG_RUN:
            return 0
        if longest_run >= STUCK:
            return 0
        ceiling = cap(concurrency, paced=self.pace is not None)
        each = self.each(concurrency)
        if not each or each <= 0:
            return ceiling
        # At least a full set of slots (up to CAP): runs that end together find their next.
        return min(ceiling, max(math.ceil(self.turn / each), min(concurrency, CAP)))

    def gather(self, going: int, concurrency: int) -> float:
        """How long a turn may wait for the ``going`` runs of ``concurrency`` slot threads
        to end first: while they should all end within ``GATHER`` of a round trip, up
        to that; else not at all (a run that takes longer gets its turn without them)."""
        if not going or self.run is None or self.turn is None:
            return 0.0
        bound = GATHER * self.turn
        waves = -(-going // concurrency)  # runs one slot thread still has, queued ones too
        left = max(self.run * waves, going * (self.pace or 0.0))  # or at the slots' pace
        return bound if left <= bound else 0.0


class Pace:
    """The slots' pace, measured where their runs end (``Slots``): the time from one run
    ending to the next, counted only while runs were queued for a slot (every slot busy
    in between), averaged over ``PACE_SAMPLE`` runs and handed to ``report``. Called
    with the slots' lock held."""

    def __init__(self, report: Callable[[float], None]) -> None:
        self.report = report
        self._last: float | None = None  # when the last run ended, if runs were queued
        self._busy = 0.0
        self._runs = 0

    def ended(self, now: float, *, queued: bool) -> None:
        """A run ended at ``now``; ``queued``: others were waiting for a slot then."""
        if self._last is not None:
            self._busy += now - self._last
            self._runs += 1
            if self._runs >= PACE_SAMPLE:
                self.report(self._busy / self._runs)
                self._busy, self._runs = 0.0, 0
        self._last = now if queued else None
