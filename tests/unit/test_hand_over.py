"""An idle worker's hand-over (``turn.HAND_OVER``): once the loop has handed in the runs
of a claim made while nothing ran, it waits on its wake-up before anything else of its
turn, so the slot thread it woke can take the GIL and start the run; a worker with runs
going, or a claim that found nothing, does not wait there. The turn's part of ``Worker``
on stand-ins (no database, no threads)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from django_jobqueue.ids import uuid7
from django_jobqueue.store import Claimed, ClaimRequest
from django_jobqueue.worker import turn
from django_jobqueue.worker.claiming import KeyCursor
from django_jobqueue.worker.turn import Turns
from django_jobqueue.worker.wake import Wake
from tests.helpers import claimed

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Recorder(Wake):
    """The loop's wake-up, noting each wait in the turn's log."""

    def __init__(self, log: list[Any]) -> None:
        super().__init__()
        self.log = log

    def wait(self, timeout: float | None = None) -> bool:
        self.log.append(("wait", timeout))
        return super().wait(timeout)


class Pools:
    def found(self, kinds: Any, got: int) -> None:
        pass


class Loop(Turns):
    def __init__(self, running: dict[uuid.UUID, Any]) -> None:
        self.log: list[Any] = []
        self._running = running
        self._pools = Pools()  # type: ignore[assignment]
        self._slot = 0
        self._keys = KeyCursor()
        self._wake = Recorder(self.log)

    def _dispatch(self, job: Claimed) -> None:
        self.log.append(("dispatch", job.id))
        self._running[job.id] = job


def _claimed() -> Claimed:
    return claimed("unit.kind", at=NOW)


WANTED = ClaimRequest(limit=4, kinds=["unit.kind"])


def test_an_idle_loop_waits_once_it_has_handed_in_every_run_of_its_claim() -> None:
    loop = Loop({})
    jobs = [_claimed(), _claimed()]
    loop._claimed(jobs, WANTED)
    dispatched = [("dispatch", job.id) for job in jobs]
    assert loop.log == [*dispatched, ("wait", turn.HAND_OVER)]


def test_a_wake_up_already_set_ends_the_hand_over_at_once() -> None:
    """A NOTIFY or a run's end that came during the turn is not made to wait."""
    loop = Loop({})
    loop._wake.set()
    loop._claimed([_claimed()], WANTED)
    assert loop._wake.is_set(), "the wait leaves it set, for the loop's next look"


@pytest.mark.parametrize("going", [True, False])
def test_no_hand_over_with_runs_going_or_nothing_claimed(going: bool) -> None:
    loop = Loop({uuid7(): object()} if going else {})
    jobs = [_claimed()] if going else []
    loop._claimed(jobs, WANTED)
    assert [entry for entry in loop.log if entry[0] == "wait"] == []
    assert len(loop.log) == len(jobs)
