"""Job start stamps for the pickup-latency measure, shared by all three systems' tasks.

A stamp task appends ``"<label> <time.time()>"`` to the file named by BENCH_STAMP_FILE
as its first act; the harness reads the file back. One short ``write`` on a file
opened for appending lands whole, so concurrent workers never interleave lines.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "BENCH_STAMP_FILE"


def write_stamp(label: str) -> None:
    """Record that the job ``label`` starts now."""
    now = time.time()
    with open(os.environ[ENV], "a", encoding="utf-8") as f:
        f.write(f"{label} {now!r}\n")


def read_stamps(path: Path) -> dict[str, float]:
    """Label -> first start time (a job delivered twice counts from its first start)."""
    stamps: dict[str, float] = {}
    if not path.exists():
        return stamps
    for line in path.read_text(encoding="utf-8").splitlines():
        label, _, value = line.partition(" ")
        if value and label not in stamps:
            stamps[label] = float(value)
    return stamps
