"""A producer at a fixed rate for the autovacuum soak: every tick it enqueues the no-op
jobs that are due by then (``rate`` × seconds since the start, minus those already
sent), in one ``enqueue_many`` (one INSERT, one NOTIFY), as a busy application would.

Run with ``DJANGO_SETTINGS_MODULE=tests.settings`` and ``DATABASE_URL`` set::

    python -m tests.chaos.paced_producer --rate 500 --seconds 180

It prints ``sent <n> lag <seconds>`` at the end: how many jobs it enqueued, and the
most it was ever behind its schedule at a tick (one tick when it keeps up: a producer
that cannot keep its rate says so instead of silently measuring less). An enqueue that
raises is fatal: the soak counts on every job it was told about.
"""

from __future__ import annotations

import argparse
import time

TICK = 0.05  # seconds between enqueues
BATCH_CAP = 2000  # at most this many jobs in one statement when catching up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, required=True, help="jobs per second")
    parser.add_argument("--seconds", type=float, required=True)
    options = parser.parse_args(argv)

    import django

    django.setup()
    from tests.taskapp.tasks import noop

    began = time.monotonic()
    sent = 0
    lag = 0.0
    while True:
        elapsed = min(time.monotonic() - began, options.seconds)
        due = int(options.rate * elapsed) - sent
        lag = max(lag, due / options.rate)
        if due > 0:
            n = min(due, BATCH_CAP)
            noop.enqueue_many([{}] * n)
            sent += n
        if elapsed >= options.seconds and sent >= int(options.rate * options.seconds):
            break
        time.sleep(max(0.0, began + (int(elapsed / TICK) + 1) * TICK - time.monotonic()))
    print(f"sent {sent} lag {lag:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
