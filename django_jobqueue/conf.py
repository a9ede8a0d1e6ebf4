"""``settings.JOBQUEUE``: defaults, validation, and a lazy, reloadable view of it.

Settings are read on first use, never at import time, and re-read when Django's
``setting_changed`` fires so that ``override_settings`` works in tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .errors import ConfigurationError
from .lifecycle import Policy


def _default_concurrency() -> int:
    return max(1, min(8, os.cpu_count() or 1))


DEFAULTS: dict[str, Any] = {
    "DATABASE": "default",
    "CONCURRENCY": None,  # computed: max(1, min(8, cpus))
    "KIND_CONCURRENCY": {},
    "LEASE": timedelta(minutes=15),
    "POLL_INTERVAL": timedelta(seconds=5),
    "SHUTDOWN_TIMEOUT": timedelta(seconds=30),
    "PRIORITY_RATIO": 4,
    "MAX_FAILURES": 25,
    "BACKOFF_BASE": timedelta(seconds=1),
    "BACKOFF_CAP": timedelta(hours=1),
    "BACKOFF_JITTER": 0.2,
    "RETENTION": {},
    "RETENTION_INTERVAL": timedelta(minutes=5),
}

TERMINAL_STATUSES = ("completed", "dead", "cancelled")


def duration(key: str, value: Any, *, allow_zero: bool = True) -> timedelta:
    """Turn seconds or a timedelta into a timedelta, naming ``key`` when it is neither."""
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise ConfigurationError(
            f"{key} must be a number of seconds or a timedelta, not {type(value).__name__}",
            key=key,
        )
    result = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if result < timedelta(0) or (not allow_zero and result == timedelta(0)):
        bound = "positive" if not allow_zero else "zero or more"
        raise ConfigurationError(f"{key} must be {bound}, got {value!r}", key=key)
    return result


def _positive_int(key: str, value: Any, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        extra = " or None" if allow_none else ""
        raise ConfigurationError(f"{key} must be a positive integer{extra}, got {value!r}", key=key)
    return value


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
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigurationError(f"JOBQUEUE must be a dict, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise ConfigurationError(
            f"Unknown JOBQUEUE key(s): {', '.join(unknown)}. "
            f"Known keys: {', '.join(sorted(DEFAULTS))}",
            key=unknown[0],
        )
    values = {**DEFAULTS, **raw}

    database = values["DATABASE"]
    if not isinstance(database, str) or database not in django_settings.DATABASES:
        raise ConfigurationError(
            f"DATABASE must name an alias in settings.DATABASES, got {database!r}",
            key="DATABASE",
        )
    concurrency = values["CONCURRENCY"]
    concurrency = (
        _default_concurrency() if concurrency is None else _positive_int("CONCURRENCY", concurrency)
    )
    caps = values["KIND_CONCURRENCY"]
    if not isinstance(caps, dict):
        raise ConfigurationError(
            "KIND_CONCURRENCY must be a dict of kind -> int", key="KIND_CONCURRENCY"
        )
    for kind, cap in caps.items():
        if not isinstance(kind, str):
            raise ConfigurationError(
                f"KIND_CONCURRENCY keys must be kind names, got {kind!r}", key="KIND_CONCURRENCY"
            )
        _positive_int(f"KIND_CONCURRENCY[{kind!r}]", cap)
    ratio = values["PRIORITY_RATIO"]
    ratio = _positive_int("PRIORITY_RATIO", ratio, allow_none=True)
    max_failures = _positive_int("MAX_FAILURES", values["MAX_FAILURES"], allow_none=True)
    jitter = values["BACKOFF_JITTER"]
    if isinstance(jitter, bool) or not isinstance(jitter, int | float) or not 0 <= jitter <= 1:
        raise ConfigurationError(
            f"BACKOFF_JITTER must be a fraction between 0 and 1, got {jitter!r}",
            key="BACKOFF_JITTER",
        )
    retention_raw = values["RETENTION"]
    if not isinstance(retention_raw, dict):
        raise ConfigurationError("RETENTION must be a dict of status -> duration", key="RETENTION")
    retention: dict[str, timedelta] = {}
    for status, keep in retention_raw.items():
        if status not in TERMINAL_STATUSES:
            raise ConfigurationError(
                f"RETENTION keys must be one of {', '.join(TERMINAL_STATUSES)}, got {status!r}",
                key="RETENTION",
            )
        retention[status] = duration(f"RETENTION[{status!r}]", keep, allow_zero=False)
    base = duration("BACKOFF_BASE", values["BACKOFF_BASE"])
    cap = duration("BACKOFF_CAP", values["BACKOFF_CAP"])
    if cap < base:
        raise ConfigurationError(
            f"BACKOFF_CAP ({cap}) must not be below BACKOFF_BASE ({base})", key="BACKOFF_CAP"
        )
    return Settings(
        database=database,
        concurrency=concurrency,  # type: ignore[arg-type]
        kind_concurrency=dict(caps),
        lease=duration("LEASE", values["LEASE"], allow_zero=False),
        poll_interval=duration("POLL_INTERVAL", values["POLL_INTERVAL"], allow_zero=False),
        shutdown_timeout=duration("SHUTDOWN_TIMEOUT", values["SHUTDOWN_TIMEOUT"]),
        priority_ratio=ratio,
        max_failures=max_failures,
        backoff_base=base,
        backoff_cap=cap,
        backoff_jitter=float(jitter),
        retention=retention,
        retention_interval=duration(
            "RETENTION_INTERVAL", values["RETENTION_INTERVAL"], allow_zero=False
        ),
    )


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
