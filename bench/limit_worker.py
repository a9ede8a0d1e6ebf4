"""``python -m bench.limit_worker --batch N``: one process of the raw limit's drain
(bench/rawlimit.py), run until SIGTERM.

It claims up to N pending jobs in one statement (its own transaction), runs each (a
no-op function call), settles the batch with the guarded settlement and its journal
rows (another transaction), and claims again; with nothing to claim it looks again
10 ms later. DATABASE_URL names the database.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from types import FrameType
from typing import Any

import psycopg

from bench.rawlimit import CLAIM, SETTLE

IDLE = 0.01  # seconds between looks at an empty table


def noop(**payload: Any) -> None:
    return None


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
            while True:
                rows = conn.execute(CLAIM, {"worker": worker, "limit": batch}).fetchall()
                if not rows:
                    time.sleep(IDLE)
                    continue
                for _id, _kind, payload in rows:
                    noop(**payload)
                conn.execute(SETTLE, {"ids": [row[0] for row in rows], "worker": worker})
    except (Stop, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main())
