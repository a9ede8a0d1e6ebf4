"""Each system's enqueue side, run only inside ``bench.agent`` children.

Every module offers the same functions: ``install()``, ``enqueue_each(n)`` and
``enqueue_bulk(n)`` (seconds taken), ``preload(n)`` (untimed, the fastest path) and
``stamp_series(count, gap, warmup)`` (label -> time.time() right after the commit); the
Django systems' also ``enqueue_requests(n)``, one enqueue per simulated request
(``per_request``), at the ``CONN_MAX_AGE`` that BENCH_CONN_MAX_AGE sets.
"""

from __future__ import annotations

import time
from collections.abc import Callable

WARMUP = 10  # untimed calls before a timed loop: connection, imports, prepared statements


def timed_calls(call: Callable[[], object], n: int) -> float:
    """``call()`` ``WARMUP`` times untimed, then ``n`` times; the seconds the ``n`` took."""
    for _ in range(WARMUP):
        call()
    start = time.perf_counter()
    for _ in range(n):
        call()
    return time.perf_counter() - start


def paced(count: int, gap: float, warmup: int, submit: Callable[[str], None]) -> dict[str, float]:
    """Enqueue ``warmup`` then ``count`` stamp jobs ``gap`` seconds apart, each committed
    by ``submit``; the measured labels' commit times (warm-ups are labelled ``w*``)."""
    for i in range(warmup):
        submit(f"w{i}")
        time.sleep(gap)
    committed: dict[str, float] = {}
    start = time.monotonic()
    for i in range(count):
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        label = f"j{i}"
        submit(label)
        committed[label] = time.time()
    return committed


def per_request(call: Callable[[], object], n: int) -> float:
    """``timed_calls`` of ``call`` each inside one simulated web request: Django's
    ``request_started`` and ``request_finished`` signals around it, whose handlers close
    the connection at ``CONN_MAX_AGE`` 0 (Django's default), as a web process's request
    does, and keep it when persistent."""
    from django.core.signals import request_finished, request_started

    def one() -> None:
        request_started.send(sender=None)
        try:
            call()
        finally:
            request_finished.send(sender=None)

    return timed_calls(one, n)
