"""The claim buffer's size: from measured run durations and round trips, bounded."""

from __future__ import annotations

import pytest

from django_jobqueue.worker.sizing import (
    CAP,
    GATHER,
    LONG_RUN,
    PACE_SAMPLE,
    RUN_CAP,
    STUCK,
    Pace,
    Sizing,
    cap,
)


def test_no_buffer_before_anything_is_measured() -> None:
    sizing = Sizing()
    assert sizing.buffer(8) == 0
    sizing.ran(0.001)
    assert sizing.buffer(8) == 0, "a round trip is not measured yet"


def test_short_runs_get_about_a_round_trip_of_work_never_more_than_the_cap() -> None:
    sizing = Sizing()
    sizing.ran(0.001)
    sizing.turned(0.005)
    assert sizing.buffer(2) == 10  # 2 slots finish 10 runs of 1 ms in a 5 ms round trip
    sizing.turned(0.5)
    for _ in range(30):
        sizing.turned(0.5)
    assert sizing.buffer(8) == RUN_CAP, "bounded by the cap of a buffer from durations alone"
    sizing.ran(0.0)
    sizing.run = 0.0
    assert sizing.buffer(3) == RUN_CAP
    assert sizing.buffer(RUN_CAP * 2) == RUN_CAP * 2, "a worker of more slots than the cap"


def test_the_cap_is_the_concurrency_or_more() -> None:
    assert cap(1) == cap(2) == RUN_CAP
    assert cap(RUN_CAP + 1) == RUN_CAP + 1
    assert cap(1, paced=True) == cap(2, paced=True) == CAP
    assert cap(CAP + 1, paced=True) == CAP + 1
    assert RUN_CAP <= CAP


def test_once_paced_the_buffer_is_what_the_slots_finish_in_a_round_trip() -> None:
    sizing = Sizing()
    sizing.ran(0.00001)  # a no-op: 10 µs of its own
    sizing.turned(0.005)
    assert sizing.buffer(8) == RUN_CAP, "8 slots × 5 ms ÷ 10 µs: far past the unpaced cap"
    # The slots in fact end a run every 50 µs (they take turns on the interpreter's lock).
    sizing.paced(0.00005)
    assert sizing.buffer(8) == 100, "5 ms ÷ 50 µs, past the unpaced cap"
    assert sizing.buffer(16) == 100, "whatever the thread count"
    sizing.turned(1.0)
    for _ in range(30):
        sizing.turned(1.0)
    assert sizing.buffer(8) == CAP, "bounded by the cap"


def test_a_pace_never_makes_the_buffer_more_than_the_slots_run_side_by_side() -> None:
    sizing = Sizing()
    sizing.ran(0.010)  # 10 ms runs on 8 slots: one ends every 1.25 ms at best
    sizing.turned(0.020)  # round trips long enough for more than a set of slots
    sizing.paced(0.0001)  # a pace measured on shorter runs earlier
    assert sizing.buffer(8) == 16, "8 slots finish 16 runs of 10 ms in 20 ms, not 200"
    sizing.run = LONG_RUN * 2
    assert sizing.buffer(8) == 0, "long jobs are never hoarded, paced or not"


def test_runs_that_end_together_find_a_full_set_of_slots_claimed_ahead() -> None:
    sizing = Sizing()
    sizing.ran(0.050)  # 50 ms I/O waits on 250 slots: at best one ends every 0.2 ms
    sizing.turned(0.005)
    assert sizing.buffer(250) == 250, "a wave's worth, not the 25 of a round trip's pace"
    assert sizing.buffer(8) == 8
    assert sizing.buffer(CAP * 4) == CAP, "a set of slots up to the cap, beyond the pace's"
    sizing.paced(0.001)
    assert sizing.buffer(250) == 250
    sizing.run = LONG_RUN * 2
    assert sizing.buffer(250) == 0, "but long jobs are still never hoarded"


def test_the_pace_counts_only_the_time_the_slots_were_all_busy() -> None:
    reported: list[float] = []
    pace = Pace(reported.append)
    pace.ended(0.0, queued=True)
    for i in range(1, PACE_SAMPLE):
        pace.ended(i * 0.001, queued=True)
    assert reported == [], "an average of PACE_SAMPLE runs"
    pace.ended(PACE_SAMPLE * 0.001, queued=False)  # the queue ran dry at this one
    assert reported == [pytest.approx(0.001)]
    pace.ended(5.0, queued=True)  # the slots were idle in between: not counted
    for i in range(1, PACE_SAMPLE + 1):
        pace.ended(5.0 + i * 0.002, queued=True)
    assert reported == [pytest.approx(0.001), pytest.approx(0.002)]


def test_long_runs_and_a_stuck_slot_get_no_buffer() -> None:
    sizing = Sizing()
    sizing.turned(0.005)
    sizing.ran(LONG_RUN * 2)
    assert sizing.buffer(8) == 0, "long jobs are never hoarded"
    sizing.run = 0.001
    assert sizing.buffer(8) == 40  # 8 slots finish 40 runs of 1 ms in 5 ms
    assert sizing.buffer(8, longest_run=STUCK) == 0


def test_a_turn_waits_for_short_runs_about_to_end_up_to_a_share_of_a_round_trip() -> None:
    sizing = Sizing()
    assert sizing.gather(6, 16) == 0.0, "nothing measured yet"
    sizing.ran(0.0001)
    sizing.turned(0.008)
    assert sizing.gather(0, 16) == 0.0, "nothing going"
    # 6 no-ops on 16 slots end well within a quarter of an 8 ms round trip.
    assert sizing.gather(6, 16) == GATHER * 0.008
    # 20 runs of 1.5 ms on 16 slots take two of them: 3 ms, past the 2 ms it would wait.
    sizing.run = 0.0015
    assert sizing.gather(16, 16) == GATHER * 0.008
    assert sizing.gather(20, 16) == 0.0
    sizing.run = 0.05
    assert sizing.gather(1, 16) == 0.0, "a run longer than the bound: no waiting for it"


def test_a_turn_waits_no_longer_than_the_slots_pace_allows() -> None:
    sizing = Sizing()
    sizing.ran(0.00001)
    sizing.turned(0.008)
    assert sizing.gather(64, 8) == GATHER * 0.008, "8 waves of 10 µs"
    sizing.paced(0.00005)  # one ends every 50 µs: 64 take 3.2 ms, past the 2 ms
    assert sizing.gather(64, 8) == 0.0
    assert sizing.gather(32, 8) == GATHER * 0.008, "32 take 1.6 ms"
