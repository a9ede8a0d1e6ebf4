"""The worker loop's wake-up flag (``worker.wake``): ``threading.Event``'s semantics on
one lock, with real threads."""

from __future__ import annotations

import threading

from django_jobqueue.worker.wake import Wake

WAIT = 10.0  # seconds: the longest any step here may take before the test fails


def test_set_clear_and_wait_keep_an_events_meaning() -> None:
    wake = Wake()
    assert not wake.is_set()
    assert not wake.wait(0.01), "not set: the wait runs out"
    assert not wake.wait(0), "a zero wait only looks"
    wake.set()
    wake.set()  # setting twice is setting
    assert wake.is_set()
    assert wake.wait(0)
    assert wake.wait(WAIT)
    assert wake.is_set(), "a wait leaves it set"
    wake.clear()
    wake.clear()
    assert not wake.is_set()
    assert not wake.wait(0.01)


def test_a_set_from_another_thread_ends_the_wait_and_none_is_lost() -> None:
    """Many threads setting while one clears, looks and waits, as the loop does: every
    round's set reaches the waiter, none after a clear is lost."""
    wake = Wake()
    rounds = 200
    go = [threading.Event() for _ in range(rounds)]
    woken = []

    def setter(i: int) -> None:
        go[i].wait(WAIT)
        wake.set()

    for i in range(rounds):
        wake.clear()
        threads = [threading.Thread(target=setter, args=(i,)) for _ in range(3)]
        for t in threads:
            t.start()
        go[i].set()
        woken.append(wake.wait(WAIT))
        for t in threads:
            t.join(WAIT)
        assert wake.is_set()
    assert all(woken)


def test_a_wait_without_a_timeout_returns_once_set() -> None:
    wake = Wake()
    done = threading.Event()

    def waiter() -> None:
        wake.wait()
        done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not done.wait(0.05), "nothing set it yet"
    wake.set()
    assert done.wait(WAIT)
    thread.join(WAIT)
