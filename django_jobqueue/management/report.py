"""The text ``manage.py jobqueue`` prints: time and window formats, tables, and the stats
report."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from django_jobqueue.formatting import fmt_age, fmt_seconds

UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def fmt_window(seconds: float) -> str:
    """A window as it would be typed: 24h, 7d, 2w, 90m."""
    total = int(seconds)
    for unit in ("w", "d", "h", "m"):
        size = UNITS[unit]
        if total >= size and total % size == 0 and not (unit in "wd" and total < 2 * size):
            return f"{total // size}{unit}"
    return fmt_age(total)


def fmt_time(value: datetime | None) -> str:
    if value is None:
        return "-"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S%z")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    """Left-aligned columns sized to their widest cell; numbers aligned right."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]

    def line(values: Sequence[str], header: bool = False) -> str:
        parts = [
            v.rjust(w) if numeric[i] and not header else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers, header=True), *(line(row) for row in cells)]


def render_stats(s: dict[str, Any]) -> list[str]:
    """The stats snapshot as a readable report."""
    at: datetime = s["at"]
    out = [f"Queue at {fmt_time(at)}", ""]
    out.append(
        f"Pending (runnable now): {s['pending_total']}   scheduled for later: {s['scheduled']}"
        f"   claimed (running): {s['claimed']}"
    )
    if s["pending"]:
        rows = []
        seen: set[str] = set()
        for row in s["pending"]:
            first = row["kind"] not in seen
            seen.add(row["kind"])
            oldest = s["oldest_pending_seconds"].get(row["kind"]) if first else None
            rows.append([row["kind"] if first else "", row["queue"], row["count"], fmt_age(oldest)])
        out += table(["KIND", "QUEUE", "PENDING", "OLDEST"], rows)
    paused = s.get("paused_queues", [])
    out.append(
        "Paused queues: "
        + (", ".join(f"{p['queue']} (since {fmt_time(p['paused_at'])})" for p in paused) or "none")
    )
    out.append("")
    dead_total = sum(s["dead"].values())
    out.append(f"Dead: {dead_total}")
    if s["dead"]:
        out += table(["KIND", "DEAD"], [[k, n] for k, n in s["dead"].items()])
    out.append("")
    unserved = s["unserved_kinds"]
    out.append(
        "Pending kinds no live worker serves: " + (", ".join(unserved) if unserved else "none")
    )
    unclaimed = s["unclaimed_kinds"]
    out.append(
        "Pending kinds no worker claimed in the last hour: "
        + (", ".join(unclaimed) if unclaimed else "none")
    )
    out.append("")
    alive = sum(1 for w in s["workers"] if w["state"] == "alive")
    gone = len(s["workers"]) - alive
    out.append(f"Workers: {alive} alive, {gone} gone")
    if s["workers"]:
        rows = [
            [
                w["id"],
                w["state"],
                ",".join(w["queues"]) or "all",
                w["concurrency"],
                fmt_age((at - w["started_at"]).total_seconds()) + " ago",
                fmt_age((at - w["last_seen_at"]).total_seconds()) + " ago",
                w["jobs_done"],
            ]
            for w in s["workers"]
        ]
        headers = ["WORKER", "STATE", "QUEUES", "SLOTS", "STARTED", "LAST SEEN", "JOBS DONE"]
        out += table(headers, rows)
    return out + _runs_lines(s)


def _runs_lines(s: dict[str, Any]) -> list[str]:
    """The run statistics part of the stats report."""
    out: list[str] = []
    out.append("")
    window = fmt_window(s["window_seconds"])
    out.append(f"Runs in the last {window}:")
    if s["runs"]:
        rows = [
            [
                kind,
                r["runs"],
                " ".join(f"{o}={n}" for o, n in sorted(r["outcomes"].items())),
                fmt_seconds(r["p50"]),
                fmt_seconds(r["p95"]),
                f"{r['failure_rate'] * 100:.1f}%",
            ]
            for kind, r in sorted(s["runs"].items())
        ]
        out += table(["KIND", "RUNS", "OUTCOMES", "P50", "P95", "FAILED"], rows)
    else:
        out.append("  none")
    return out
