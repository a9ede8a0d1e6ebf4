"""The printed table, the JSON file and the description of the machine.

A cell is ``median [min–max]`` over the repetitions. The ratio columns divide our
median by the peer's, whatever the row: on a higher-is-better row (↑) a ratio above
1 favours django_jobqueue, on a lower-is-better row (↓: latency, statements) a ratio
below 1 does. ``backend/tasks-db`` sets the two Django Tasks backends side by side
(django_jobqueue's JobQueueBackend ÷ django-tasks-db, the same django.tasks code);
``backend/ours`` is what the django.tasks layer costs on top of our own API.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.config import Config
from bench.limit import LIMIT, limit_of
from bench.measures import measures
from bench.phases import fraction
from bench.procs import REPO_ROOT
from bench.results import Outcome, Results, Row
from bench.systems import SYSTEMS

OURS = "django_jobqueue"
OURS_BACKEND = "django_jobqueue.backend"  # ours through Django's Tasks API
TASKS_DB = "django-tasks-db"
DASH = "–"
PACKAGES = (
    "django-jobqueue",
    "django",
    "django-tasks-db",
    "django-tasks",
    "pgqueuer",
    "asyncpg",
    "psycopg",
    "dj-database-url",
)


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Summary:
        return cls(statistics.median(values), min(values), max(values))


def summary(outcome: Outcome | None, value: str) -> Summary | None:
    if outcome is None or outcome.error is not None or not outcome.reps:
        return None
    # A value some repetitions lack (a drain's phases where its store showed none) is
    # summarised over those that have it.
    values = [rep.values[value] for rep in outcome.reps if value in rep.values]
    return Summary.of(values) if values else None


def number(x: float) -> str:
    if math.isnan(x):
        return "untimed"  # the quick form's drain done before its first poll
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _cell(results: Results, key: str, measure: str, row: Row) -> str:
    if key not in results:
        return "not run"
    outcome = results[key].get(measure)
    if outcome is None:
        return DASH
    if outcome.error is not None:
        return "ERROR"
    s = summary(outcome, row.value)
    if s is None:
        return DASH
    return f"{number(s.median)} [{number(s.low)}{DASH}{number(s.high)}]"


def _ratio(results: Results, mine: str, peer: str, measure: str, row: Row) -> str:
    ours = summary(results.get(mine, {}).get(measure), row.value)
    theirs = summary(results.get(peer, {}).get(measure), row.value)
    if ours is None or theirs is None or math.isnan(ours.median) or math.isnan(theirs.median):
        return DASH
    if theirs.median == 0:
        return "1.00" if ours.median == 0 else "∞"
    return f"{ours.median / theirs.median:.2f}"


def ratio_columns() -> dict[str, tuple[str, str]]:
    """Column title -> (numerator, denominator) system keys."""
    natives = [s.key for s in SYSTEMS if s.key not in (OURS, OURS_BACKEND) and not s.is_limit]
    columns = {f"ours/{peer.removeprefix('django-')}": (OURS, peer) for peer in natives}
    columns["backend/tasks-db"] = (OURS_BACKEND, TASKS_DB)
    columns["backend/ours"] = (OURS_BACKEND, OURS)
    return columns


def _of_limit(results: Results, measure: str, row: Row) -> str:
    """Our median as a fraction of the raw limit's matching median (bench/limit.py)."""
    match = limit_of(measure, row.value)
    if match is None:
        return DASH
    ours = summary(results.get(OURS, {}).get(measure), row.value)
    limit = summary(results.get(LIMIT, {}).get(match[0]), match[1])
    share = fraction(ours.median, limit.median) if ours and limit else None
    return DASH if share is None else f"{share:.2f}"


def table(config: Config, results: Results) -> str:
    ratios = ratio_columns()
    header = ["measure", *[s.key for s in SYSTEMS], *ratios, "ours/limit"]
    lines: list[list[str]] = [header]
    for m in measures(config.sizes):
        if config.only_measures and m.key not in config.only_measures:
            continue
        for row in m.rows:
            arrow = "↓" if row.lower_is_better else "↑"
            lines.append(
                [
                    f"{arrow} {row.label}",
                    *[_cell(results, s.key, m.key, row) for s in SYSTEMS],
                    *[_ratio(results, mine, peer, m.key, row) for mine, peer in ratios.values()],
                    _of_limit(results, m.key, row),
                ]
            )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        first = line[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    reps = f"{config.reps} repetition{'s' if config.reps != 1 else ''}"
    notes = [
        f"cells: median [min{DASH}max] of {reps}; ↑ higher is better, ↓ lower is better",
        "ours/peer: django_jobqueue's median ÷ the peer's; on ↑ rows above 1 favours ours, "
        "on ↓ rows (latency, statements: lower is better) below 1 favours ours",
        f"backend/tasks-db: {OURS_BACKEND} (ours as Django's Tasks backend) ÷ {TASKS_DB}, "
        "both enqueued and run through django.tasks; backend/ours: that API's cost on ours",
        "statements per job: all 'Q' + 'E' messages one worker sent, start to last job done, "
        "idle polling not subtracted (the idle row shows that rate)",
        "limit: raw psycopg with the queue's guarantees (bench/rawlimit.py); ours/limit: ours "
        "÷ the matching limit (enqueue ÷ insert per job, bulk ÷ unnest bulk, every no-op "
        "drain ÷ the 2-process batch-100 limit drain's same figure, pickup ÷ the limit's "
        "pickup: one process LISTENing on the connection it claims with)",
        "drains: the polled rate, then from the settlements' timestamps the whole run, the "
        "steady rate (first settlement to last) and the start-up (workers' start to first)",
    ]
    rule = "-" * len(fmt(header))
    return "\n".join([*notes, rule, fmt(header), rule, *[fmt(line) for line in lines[1:]], rule])


def errors(results: Results) -> list[str]:
    return [
        f"{key} / {measure}: {outcome.error}"
        for key, by_measure in results.items()
        for measure, outcome in by_measure.items()
        if outcome is not None and outcome.error is not None
    ]


def _git() -> str:
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args],  # noqa: S607 (git from PATH, as a developer runs it)
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )

    head = git("rev-parse", "--short", "HEAD").stdout.strip() or "unknown"
    dirty = git("diff", "--quiet", "HEAD", "--", "django_jobqueue").returncode != 0
    return f"{head} + uncommitted changes in django_jobqueue/" if dirty else head


PG_SETTINGS = (
    "autovacuum",
    "fsync",
    "max_connections",
    "shared_buffers",
    "synchronous_commit",
    "wal_level",
)


def source_fingerprint() -> str:
    """A hash of django_jobqueue's source as it is on disk: taken at the start and the
    end of a run, it shows whether the code under test changed meanwhile."""
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "django_jobqueue").rglob("*.py")):
        digest.update(str(path.relative_to(REPO_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def machine(server_version: str, pg_settings: dict[str, str]) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "postgresql": server_version,
        "postgresql_settings": pg_settings,
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "django_jobqueue_commit": _git(),
        "packages": versions,
    }


def describe_machine(info: dict[str, Any]) -> str:
    packages = " · ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
    pg = " · ".join(f"{k}={v}" for k, v in info["postgresql_settings"].items())
    load = ", ".join(f"{x:.2f}" for x in info["load_average"])
    return "\n".join(
        [
            f"machine: {info['cpus']} CPUs · {info['platform']} · PostgreSQL "
            f"{info['postgresql']} · Python {info['python']}",
            f"postgresql: {pg}",
            f"load average at the end (1, 5, 15 min): {load}",
            f"packages: {packages}",
            f"django_jobqueue at {info['django_jobqueue_commit']}",
        ]
    )


def describe_source(at_start: str, at_end: str) -> str:
    if at_start == at_end:
        return (
            f"django_jobqueue source {at_start}, unchanged during the run"
            " (byte-compiled before it, as pip install compiles the peers)"
        )
    return (
        f"WARNING: django_jobqueue/ changed during the run (source {at_start} -> {at_end}): "
        "its numbers mix versions"
    )


def describe_workers(config: Config) -> dict[str, str]:
    return {s.key: s.worker_note(config.concurrency) for s in config.systems}


def _outcome_json(outcome: Outcome | None, rows: tuple[Row, ...]) -> dict[str, Any] | None:
    if outcome is None:
        return None
    summaries = {row.value: summary(outcome, row.value) for row in rows}
    return {
        "status": "error" if outcome.error else "ok",
        "error": str(outcome.error) if outcome.error else None,
        "error_detail": outcome.error.detail if outcome.error else None,
        "summary": {k: asdict(v) if v else None for k, v in summaries.items()},
        "reps": [{"values": rep.values, "raw": rep.raw} for rep in outcome.reps],
    }


def write_json(
    path: Path,
    *,
    config: Config,
    results: Results,
    info: dict[str, Any],
    started: datetime,
    seconds: float,
    argv: list[str],
) -> None:
    ms = measures(config.sizes)
    payload = {
        "generated_at": started.astimezone(UTC).isoformat(),
        "duration_seconds": seconds,
        "command": argv,
        "machine": info,
        "config": {
            "quick": config.quick,
            "reps": config.reps,
            "concurrency": config.concurrency,
            "sizes": asdict(config.sizes),
            "systems": [s.key for s in config.systems],
        },
        "workers": describe_workers(config),
        "rows": [
            {
                "measure": m.key,
                "value": r.value,
                "label": r.label,
                "lower_is_better": r.lower_is_better,
            }
            for m in ms
            for r in m.rows
        ],
        "results": {
            key: {m.key: _outcome_json(by_measure.get(m.key), m.rows) for m in ms}
            for key, by_measure in results.items()
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
