"""A producer process for the database-restart test: enqueues jobs for a while, one line
per attempt on stdout: ``<n> ok <job id>`` or ``<n> raised <exception>``.

Run with ``DJANGO_SETTINGS_MODULE=tests.settings`` and ``DATABASE_URL`` set::

    python -m tests.chaos.producer --seconds 12 --interval 0.01

After a failed enqueue it does what Django does at the end of every request: drops a
connection that errored, so the next attempt opens a fresh one.
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True, help="0: one attempt")
    parser.add_argument("--interval", type=float, default=0.01)
    options = parser.parse_args(argv)

    import django

    django.setup()
    from django.db import close_old_connections

    from tests.taskapp.tasks import short_lease_step

    deadline = time.monotonic() + options.seconds
    n = 0
    while True:
        n += 1
        try:
            handle = short_lease_step.enqueue(seconds=0)
        except Exception as exc:
            print(f"{n} raised {type(exc).__name__}", flush=True)
            close_old_connections()
        else:
            print(f"{n} ok {handle.id}", flush=True)
        if time.monotonic() >= deadline:
            return 0
        time.sleep(options.interval)


if __name__ == "__main__":
    raise SystemExit(main())
