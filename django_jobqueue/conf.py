"""``settings.JOBQUEUE``: defaults, validation, and a lazy, reloadable view of it.

Settings are read on first use, never at import time, and re-read when Django's
``setting_changed`` fires so that ``override_settings`` works in tests.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any, overload

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from django_jobqueue import validation
from django_jobqueue.databases_setting import QueueDatabases, alias, parse_databases
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.periodic_setting import PeriodicEntry, entries
from django_jobqueue.rules.lifecycle import Policy
from django_jobqueue.states import TERMINAL

DEFAULT_CONCURRENCY = 8


def _default_concurrency() -> int:
    """8 sync slots on any machine: typical tasks wait on I/O (queries, HTTP, mail), so
    a one-CPU container needs more than one thread, and 8 keeps a worker's connections
    (one per thread, plus two) within a default ``max_connections`` at a few processes.
    CPU-bound work wants processes (``--processes``), not more threads."""
    return DEFAULT_CONCURRENCY


DEFAULTS: dict[str, Any] = {
    "DATABASE": "default",
    "LISTEN_DATABASE": None,  # None: DATABASE itself
    "DATABASES": None,  # several queue databases (databases_setting.py); None: DATABASE only
    "CONCURRENCY": None,  # DEFAULT_CONCURRENCY (8), whatever the CPUs
    "KIND_CONCURRENCY": {},
    "ASYNC_CONCURRENCY": 100,  # async def runs at once on a worker's event loop
    "PROCESSES": 1,  # worker processes per runworker: a positive int, or "auto" (CPUs)
    "POOL": "thread",  # where a worker runs sync jobs: "thread" or "process" (a child each)
    "LEASE": timedelta(minutes=1),
    "POLL_INTERVAL": timedelta(seconds=5),
    "SHUTDOWN_TIMEOUT": timedelta(seconds=30),
    "PRIORITY_RATIO": 4,
    "MAX_FAILURES": 25,
    "BACKOFF_BASE": timedelta(seconds=1),
    "BACKOFF_CAP": timedelta(hours=1),
    "BACKOFF_JITTER": 0.2,
    "RETENTION": {},
    "RETENTION_INTERVAL": timedelta(minutes=5),
    # How long an emitted event is kept for a job that starts waiting for it later.
    "EVENT_RETENTION": timedelta(days=7),
    "MAX_PAYLOAD_BYTES": 1024 * 1024,
    "MAX_OUTPUT_BYTES": 1024 * 1024,
    # A job's durable-step records: how many, and their total JSON size.
    "MAX_STEPS": 10_000,
    "MAX_STEPS_BYTES": 16 * 1024 * 1024,
    # A job's stream (ctx.stream.write): how many items, and their total JSON size.
    "MAX_STREAM_ITEMS": 10_000,
    "MAX_STREAM_BYTES": 16 * 1024 * 1024,
    # How deep child workflows awaited from durable steps may nest (ctx.step_workflow).
    "MAX_CHILD_DEPTH": 5,
    "MAX_JSON_DEPTH": 100,
    "REDACT": (
        "password",
        "passwd",
        "pwd",
        "token",
        "secret",
        "authorization",
        "api_key",
        "apikey",
        "credential",
        "private_key",
        "cookie",
        "session",
    ),
    "LIMITS": {},
    "ATOMIC_WARN_AFTER": timedelta(seconds=10),
    "METRICS_TOKEN": None,  # the metrics view's bearer token (None: staff sessions only)
    "PERIODIC": [],
    # The run history's window (days of per-minute counts kept; 0: no history kept).
    "HISTORY_DAYS": 7,
    # Table health: a transaction (or slot, or prepared transaction) holding back the
    # vacuum horizon longer than this is warned of; and dead rows past this share of
    # the live ones (and at least HEALTH_DEAD_MIN_ROWS) are.
    "HEALTH_HORIZON_AGE": timedelta(minutes=5),
    "HEALTH_DEAD_RATIO": 0.2,
    # Each run's own log lines: the level captured (None: off), the loggers (None: the
    # task's module and django_jobqueue.task), the lines per run and the runs per job.
    "RUN_LOGS": "INFO",
    "RUN_LOGS_LOGGERS": None,
    "RUN_LOGS_MAX_LINES": 100,
    "RUN_LOGS_RUNS": 5,
    # The partitioned journal (PostgreSQL, opt-in: jobqueue partitions --convert).
    "JOURNAL_PERIOD": "day",
    "JOURNAL_PARTITIONS_AHEAD": 7,
    "JOURNAL_RETENTION": None,
    "JOURNAL_ANALYZE_INTERVAL": timedelta(hours=1),
}

# What a kind's entry in LIMITS may set (as a task option of the same name may).
LIMIT_KEYS = tuple(validation.LIMIT_NAMES)


def _error(key: str) -> Callable[[str], ConfigurationError]:
    return partial(ConfigurationError, key=key)


def duration(key: str, value: Any, *, allow_zero: bool = True) -> timedelta:
    """Seconds or a timedelta, as a timedelta; the error names ``key``."""
    return validation.duration(value, name=key, error=_error(key), allow_zero=allow_zero)


@dataclass(frozen=True)
class Settings:
    """The validated JOBQUEUE settings."""

    database: str
    concurrency: int
    kind_concurrency: dict[str, int]
    lease: timedelta
    poll_interval: timedelta
    shutdown_timeout: timedelta
    priority_ratio: int | None
    max_failures: int | None
    backoff_base: timedelta
    backoff_cap: timedelta
    backoff_jitter: float
    retention: dict[str, timedelta] = field(default_factory=dict)
    retention_interval: timedelta = timedelta(minutes=5)
    event_retention: timedelta = timedelta(days=7)
    max_payload_bytes: int = 1024 * 1024
    max_output_bytes: int = 1024 * 1024
    max_steps: int = 10_000
    max_steps_bytes: int = 16 * 1024 * 1024
    max_stream_items: int = 10_000
    max_stream_bytes: int = 16 * 1024 * 1024
    max_child_depth: int = 5
    max_json_depth: int = 100
    redact: tuple[str, ...] = ()
    # kind -> the limits it sets: "max_in_flight" (int or None) and/or "rate_limit"
    # (a Rate or None); a key left out leaves that limit to the task's option.
    limits: dict[str, dict[str, Any]] = field(default_factory=dict)
    atomic_warn_after: timedelta | None = timedelta(seconds=10)
    #: The alias the worker LISTENs through; DATABASE unless LISTEN_DATABASE names one.
    listen_database: str = "default"
    metrics_token: str | None = None
    periodic: tuple[PeriodicEntry, ...] = ()
    #: Worker processes one ``runworker`` supervises (1: the worker runs in the command).
    processes: int = 1
    #: Where a worker runs its sync jobs: ``thread`` (slot threads) or ``process`` (a
    #: child process per slot, which a hard time limit or a terminate kills).
    pool: str = "thread"
    #: ``async def`` runs one worker process awaits at once, on its event loop.
    async_concurrency: int = 100
    #: Days of per-minute run history kept (0: none sampled).
    history_days: int = 7
    #: Table health's thresholds: a horizon held longer than this, dead rows past this
    #: share of the live ones.
    health_horizon_age: timedelta = timedelta(minutes=5)
    health_dead_ratio: float = 0.2
    #: The level of the log records a run keeps (None: no capture), and its bounds.
    run_logs: int | None = logging.INFO
    run_logs_loggers: tuple[str, ...] | None = None
    run_logs_max_lines: int = 100
    run_logs_runs: int = 5
    journal_period: str = "day"
    journal_partitions_ahead: int = 7
    journal_retention: timedelta | None = None  # resolved: RETENTION's longest if unset
    journal_analyze_interval: timedelta = timedelta(hours=1)
    #: Several queue databases, how a job picks one (None: DATABASE alone), their HOME.
    databases: QueueDatabases | None = None

    def policy(self) -> Policy:
        """The failure and lease policy of a kind that sets none of its own."""
        return Policy(
            max_failures=self.max_failures,
            lease=self.lease,
            backoff_base=self.backoff_base,
            backoff_cap=self.backoff_cap,
            backoff_jitter=self.backoff_jitter,
        )


def validate(raw: Any) -> Settings:
    """Validate a JOBQUEUE dict; the error names the offending key."""
    values = _with_defaults(raw)
    base = duration("BACKOFF_BASE", values["BACKOFF_BASE"])
    cap = duration("BACKOFF_CAP", values["BACKOFF_CAP"])
    if cap < base:
        raise ConfigurationError(
            f"BACKOFF_CAP ({cap}) must not be below BACKOFF_BASE ({base})", key="BACKOFF_CAP"
        )
    concurrency = values["CONCURRENCY"]
    databases = parse_databases(values["DATABASES"], default=alias(values["DATABASE"]))
    database = alias(values["DATABASE"]) if databases is None else databases.home
    listen = values["LISTEN_DATABASE"]
    depth = _json_depth(values["MAX_JSON_DEPTH"])
    return Settings(
        database=database,
        databases=databases,
        listen_database=database if listen is None else alias(listen, "LISTEN_DATABASE"),
        concurrency=(
            _default_concurrency() if concurrency is None else _positive("CONCURRENCY", concurrency)
        ),
        kind_concurrency=_kind_concurrency(values["KIND_CONCURRENCY"]),
        processes=_processes(values["PROCESSES"]),
        pool=_choice("POOL", values["POOL"], POOLS),
        async_concurrency=_positive("ASYNC_CONCURRENCY", values["ASYNC_CONCURRENCY"]),
        lease=duration("LEASE", values["LEASE"], allow_zero=False),
        poll_interval=duration("POLL_INTERVAL", values["POLL_INTERVAL"], allow_zero=False),
        shutdown_timeout=duration("SHUTDOWN_TIMEOUT", values["SHUTDOWN_TIMEOUT"]),
        priority_ratio=_positive("PRIORITY_RATIO", values["PRIORITY_RATIO"], allow_none=True),
        max_failures=_positive("MAX_FAILURES", values["MAX_FAILURES"], allow_none=True),
        backoff_base=base,
        backoff_cap=cap,
        backoff_jitter=_fraction("BACKOFF_JITTER", values["BACKOFF_JITTER"]),
        retention=_retention(values["RETENTION"]),
        retention_interval=duration(
            "RETENTION_INTERVAL", values["RETENTION_INTERVAL"], allow_zero=False
        ),
        event_retention=duration("EVENT_RETENTION", values["EVENT_RETENTION"], allow_zero=False),
        **_bounds(values),
        max_json_depth=depth,
        redact=_words("REDACT", values["REDACT"]),
        limits=_limits(values["LIMITS"]),
        atomic_warn_after=(
            None
            if values["ATOMIC_WARN_AFTER"] is None
            else duration("ATOMIC_WARN_AFTER", values["ATOMIC_WARN_AFTER"], allow_zero=False)
        ),
        periodic=entries(values["PERIODIC"], max_depth=depth),
        **_observing(values),
        **_journal(values),
    )


def _journal(values: dict[str, Any]) -> dict[str, Any]:
    """The partitioned journal's settings (read only where it is partitioned); its
    retention is JOURNAL_RETENTION, else the longest of RETENTION (None: forever)."""
    keep, ahead, every = (
        values[f"JOURNAL_{k}"] for k in ("RETENTION", "PARTITIONS_AHEAD", "ANALYZE_INTERVAL")
    )
    longest = max(_retention(values["RETENTION"]).values(), default=None)
    return {
        "journal_period": _choice("JOURNAL_PERIOD", values["JOURNAL_PERIOD"], JOURNAL_PERIODS),
        "journal_partitions_ahead": _positive("JOURNAL_PARTITIONS_AHEAD", ahead),
        "journal_retention": longest
        if keep is None
        else duration("JOURNAL_RETENTION", keep, allow_zero=False),
        "journal_analyze_interval": duration("JOURNAL_ANALYZE_INTERVAL", every, allow_zero=False),
    }


def _bounds(values: dict[str, Any]) -> dict[str, Any]:
    """The sizes one job's values and records may reach (each a positive int)."""
    names = (
        "MAX_PAYLOAD_BYTES",
        "MAX_OUTPUT_BYTES",
        "MAX_STEPS",
        "MAX_STEPS_BYTES",
        "MAX_STREAM_ITEMS",
        "MAX_STREAM_BYTES",
        "MAX_CHILD_DEPTH",
    )
    return {name.lower(): _positive(name, values[name]) for name in names}


def _observing(values: dict[str, Any]) -> dict[str, Any]:
    """What the operators' tools read: the metrics' token, the run history's window,
    table health's thresholds, and each run's log lines."""
    loggers = values["RUN_LOGS_LOGGERS"]
    return {
        "metrics_token": _token("METRICS_TOKEN", values["METRICS_TOKEN"]),
        "history_days": _days("HISTORY_DAYS", values["HISTORY_DAYS"]),
        "health_horizon_age": duration(
            "HEALTH_HORIZON_AGE", values["HEALTH_HORIZON_AGE"], allow_zero=False
        ),
        "health_dead_ratio": _fraction("HEALTH_DEAD_RATIO", values["HEALTH_DEAD_RATIO"]),
        "run_logs": _level("RUN_LOGS", values["RUN_LOGS"]),
        "run_logs_loggers": None if loggers is None else _words("RUN_LOGS_LOGGERS", loggers),
        "run_logs_max_lines": _positive("RUN_LOGS_MAX_LINES", values["RUN_LOGS_MAX_LINES"]),
        "run_logs_runs": _positive("RUN_LOGS_RUNS", values["RUN_LOGS_RUNS"]),
    }


def _with_defaults(raw: Any) -> dict[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigurationError(f"JOBQUEUE must be a dict, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise ConfigurationError(
            f"Unknown JOBQUEUE key(s): {', '.join(unknown)}"
            f"{validation.did_you_mean(unknown[0], DEFAULTS)}. "
            f"Known keys: {', '.join(sorted(DEFAULTS))}",
            key=unknown[0],
        )
    return {**DEFAULTS, **raw}


def _json_depth(value: Any) -> int:
    """MAX_JSON_DEPTH: at most what readers decode (``validation.READ_DEPTH``), so that
    whatever was allowed in is shown and run again."""
    depth = _positive("MAX_JSON_DEPTH", value)
    if depth > validation.READ_DEPTH:
        raise ConfigurationError(
            f"MAX_JSON_DEPTH must be at most {validation.READ_DEPTH}, got {depth!r}",
            key="MAX_JSON_DEPTH",
        )
    return depth


@overload
def _positive(key: str, value: Any) -> int: ...


@overload
def _positive(key: str, value: Any, *, allow_none: bool) -> int | None: ...


def _positive(key: str, value: Any, *, allow_none: bool = False) -> int | None:
    return validation.positive_int(value, name=key, error=_error(key), allow_none=allow_none)


# The worker pools a sync job can run on (``POOL``, ``runworker --pool``).
POOLS = ("thread", "process")
# A partition of the journal holds one of these: a UTC day, an ISO week, a month.
JOURNAL_PERIODS = ("day", "week", "month")


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigurationError(
            f"{key} must be one of {', '.join(map(repr, choices))}, got {value!r}", key=key
        )
    return str(value)


def _processes(value: Any) -> int:
    if value == "auto":
        return _default_processes()
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f'PROCESSES must be a positive int or "auto", got {value!r}', key="PROCESSES"
        )
    return value


def _default_processes() -> int:
    return max(1, os.cpu_count() or 1)


def _kind_concurrency(caps: Any) -> dict[str, int]:
    if not isinstance(caps, dict):
        raise ConfigurationError(
            "KIND_CONCURRENCY must be a dict of kind -> int", key="KIND_CONCURRENCY"
        )
    for kind, cap in caps.items():
        if not isinstance(kind, str):
            raise ConfigurationError(
                f"KIND_CONCURRENCY keys must be kind names, got {kind!r}", key="KIND_CONCURRENCY"
            )
        _positive(f"KIND_CONCURRENCY[{kind!r}]", cap)
    return dict(caps)


def _days(key: str, value: Any) -> int:
    """A whole number of days from 0 to 366."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 366:
        raise ConfigurationError(
            f"{key} must be a whole number of days from 0 to 366, got {value!r}", key=key
        )
    return value


def _fraction(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigurationError(
            f"{key} must be a fraction between 0 and 1, got {value!r}", key=key
        )
    return float(value)


def _words(key: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str) or not isinstance(raw, list | tuple | set | frozenset):
        raise ConfigurationError(f"{key} must be a list of words, got {raw!r}", key=key)
    for word in raw:
        if not isinstance(word, str) or not word:
            raise ConfigurationError(
                f"{key} words must be non-empty strings, got {word!r}", key=key
            )
    return tuple(raw)


def _level(key: str, raw: Any) -> int | None:
    """None, or a logging level by name (``"INFO"``) or number, as its number."""
    if raw is None:
        return None
    number = logging.getLevelName(raw.upper()) if isinstance(raw, str) else raw
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ConfigurationError(
            f'{key} must be None or a logging level such as "INFO", got {raw!r}', key=key
        )
    return number


def _token(key: str, raw: Any) -> str | None:
    """None, or a secret of printable non-space ASCII long enough not to be guessed."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ConfigurationError(
            f"{key} must be a string or None, not {type(raw).__name__}", key=key
        )
    if len(raw) < 16 or not all("!" <= c <= "~" for c in raw):
        raise ConfigurationError(
            f"{key} must be at least 16 printable ASCII characters without spaces "
            f"(got {len(raw)} characters)",
            key=key,
        )
    return raw


def _retention(raw: Any) -> dict[str, timedelta]:
    if not isinstance(raw, dict):
        raise ConfigurationError("RETENTION must be a dict of status -> duration", key="RETENTION")
    retention: dict[str, timedelta] = {}
    for status, keep in raw.items():
        if status not in TERMINAL:
            raise ConfigurationError(
                f"RETENTION keys must be one of {', '.join(TERMINAL)}, got {status!r}",
                key="RETENTION",
            )
        retention[status] = duration(f"RETENTION[{status!r}]", keep, allow_zero=False)
    return retention


def _limits(raw: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise ConfigurationError(
            'LIMITS must be a dict of kind -> {"max_in_flight": N, "rate_limit": "100/s"}',
            key="LIMITS",
        )
    limits: dict[str, dict[str, Any]] = {}
    for kind, entry in raw.items():
        if not isinstance(kind, str) or not kind:
            raise ConfigurationError(f"LIMITS keys must be kind names, got {kind!r}", key="LIMITS")
        where = f"LIMITS[{kind!r}]"
        if not isinstance(entry, dict):
            raise ConfigurationError(
                f'{where} must be a dict such as {{"max_in_flight": 2, "rate_limit": "100/s"}}, '
                f"got {entry!r}",
                key="LIMITS",
            )
        unknown = sorted(set(entry) - set(LIMIT_KEYS))
        if unknown:
            raise ConfigurationError(
                f"{where} has unknown key(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(LIMIT_KEYS)}",
                key="LIMITS",
            )
        checked = {
            name: validation.limit(name, value, name=f"{where}[{name!r}]", error=_error("LIMITS"))
            for name, value in entry.items()
        }
        limits[kind] = checked
    return limits


_cached: Settings | None = None


def get() -> Settings:
    """The current validated settings (read lazily, cached until settings change)."""
    global _cached
    if _cached is None:
        _cached = validate(getattr(django_settings, "JOBQUEUE", None))
    return _cached


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    global _cached
    if setting in ("JOBQUEUE", "DATABASES"):
        _cached = None
