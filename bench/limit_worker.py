"""``python -m bench.limit_worker --batch N``: one process of the raw limit's drain
(bench/rawlimit.py), run until SIGTERM.

It claims up to N pending jobs in one statement (its own transaction), runs each (a
no-op function call; a stamp job writes its stamp, ``bench.stamps``), settles the batch
with the guarded settlement and its journal rows (another transaction), and claims
again. With nothing to claim it waits for a NOTIFY on the connection it claims with (no
thread between the wake-up and the claim: the pickup floor), or 10 ms, whichever comes
first, and looks again. DATABASE_URL names the database.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from collections.abc import Callable
from types import FrameType
from typing import Any

import psycopg

from bench.rawlimit import CHANNEL, CLAIM, KIND, SETTLE, STAMP_KIND
from bench.stamps import write_stamp

IDLE = 0.01  # seconds between looks at an empty table, unless a NOTIFY comes first


def noop(**payload: Any) -> None:
    return None


RUN: dict[str, Callable[..., None]] = {KIND: noop, STAMP_KIND: write_stamp}  # by kind


class Stop(Exception):
    pass


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.limit_worker")
    p.add_argument("--batch", type=int, required=True, help="jobs a claim takes at most")
    batch = p.parse_args(argv).batch
    worker = f"limit-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    signal.signal(signal.SIGTERM, _stop)
    try:
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            while True:
                rows = conn.execute(CLAIM, {"worker": worker, "limit": batch}).fetchall()
                if not rows:
                    for _ in conn.notifies(timeout=IDLE, stop_after=1):
                        pass
                    continue
                for _id, kind, payload in rows:
                    RUN[kind](**payload)
                conn.execute(SETTLE, {"ids": [row[0] for row in rows], "worker": worker})
    except (Stop, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main())
