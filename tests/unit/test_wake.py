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


def test_wait_readable_ends_at_the_socket_at_a_set_or_at_the_timeout() -> None:
    """The idle loop's wait on its connection (``worker.inline``): it ends when the socket
    has something to read, when another thread sets the flag, or when time is up."""
    import socket

    wake = Wake()
    ours, theirs = socket.socketpair()
    try:
        assert not wake.wait_readable(ours.fileno(), 0.01), "nothing: the time runs out"

        theirs.send(b"x")
        assert wake.wait_readable(ours.fileno(), WAIT), "readable: it says so"
        assert not wake.is_set()
        ours.recv(1)

        wake.set()
        assert not wake.wait_readable(ours.fileno(), WAIT), "already set: it only looks"
        wake.clear()

        # A set from another thread while it polls ends the poll, every round.
        for _ in range(50):
            wake.clear()
            polling = threading.Event()

            def setter(polling: threading.Event) -> None:
                polling.wait(WAIT)
                wake.set()

            thread = threading.Thread(target=setter, args=(polling,))
            thread.start()
            polling.set()
            assert not wake.wait_readable(ours.fileno(), WAIT)
            assert wake.is_set()
            thread.join(WAIT)
    finally:
        wake.close()
        ours.close()
        theirs.close()


def test_a_set_while_nobody_polls_leaves_no_stale_wake_behind() -> None:
    """Sets between polls are the lock's alone: the next poll waits its full time."""
    import socket
    import time

    wake = Wake()
    ours, theirs = socket.socketpair()
    try:
        assert not wake.wait_readable(ours.fileno(), 0.001)
        for _ in range(100):
            wake.set()
        wake.clear()
        began = time.monotonic()
        assert not wake.wait_readable(ours.fileno(), 0.2)
        assert time.monotonic() - began >= 0.15, "woken by a set made before it polled"
    finally:
        wake.close()
        ours.close()
        theirs.close()
