"""The claim buffer's size: from measured run durations and round trips, bounded."""

from __future__ import annotations

from django_jobqueue.worker.sizing import CAP, GATHER, LONG_RUN, STUCK, Sizing, cap


def test_no_buffer_before_anything_is_measured() -> None:
    sizing = Sizing()
    assert sizing.buffer(8) == 0
    sizing.ran(0.001)
    assert sizing.buffer(8) == 0, "a round trip is not measured yet"


def test_short_runs_get_about_a_round_trip_of_work_never_more_than_the_cap() -> None:
    sizing = Sizing()
    sizing.ran(0.010)
    sizing.turned(0.005)
    assert sizing.buffer(8) == 4  # 8 slots finish 4 runs of 10 ms in a 5 ms round trip
    sizing.turned(0.5)
    for _ in range(30):
        sizing.turned(0.5)
    assert sizing.buffer(8) == CAP, "bounded by the cap"
    sizing.ran(0.0)
    sizing.run = 0.0
    assert sizing.buffer(3) == CAP
    assert sizing.buffer(CAP * 2) == CAP * 2, "a worker of more slots than the cap: its slots"


def test_the_cap_is_the_concurrency_or_more() -> None:
    assert cap(1) == cap(2) == CAP
    assert cap(CAP + 1) == CAP + 1


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
