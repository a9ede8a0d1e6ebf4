"""An app's configuration, Celery's ``app.conf``: set in code or read, lazily, from
Django's settings (``config_from_object("django.conf:settings", namespace="CELERY")``:
``CELERY_TASK_ROUTES`` is ``conf.task_routes``), and the routing it decides.

Settings are read when a value is asked for, never at import time.
"""

from __future__ import annotations

import fnmatch
import importlib
import re
from collections.abc import Iterator, MutableMapping
from typing import Any

from django_jobqueue.contrib.celery.exceptions import Unsupported

# The keys this queue reads, and Celery's defaults for them (None: ours decides).
DEFAULTS: dict[str, Any] = {
    "beat_schedule": {},
    "task_routes": None,
    "task_default_queue": None,
    "task_default_priority": None,
    "task_time_limit": None,
    "task_soft_time_limit": None,
    "task_acks_late": False,
    "task_always_eager": False,
    "task_eager_propagates": False,
    "task_annotations": None,
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ["json"],
    "timezone": None,
}

# Keys accepted and not used here, each with what takes its place.
IGNORED: dict[str, str] = {
    "broker_url": "jobs are rows of the project's database: there is no broker",
    "result_backend": "results are kept on the job's row in the project's database",
    "result_expires": "results are pruned with their jobs (RETENTION, jobqueue cleanup)",
    "task_track_started": "a running job is always shown as claimed (STARTED)",
    "worker_prefetch_multiplier": "workers claim what their slots run (--concurrency)",
    "worker_concurrency": "runworker --concurrency",
    "task_reject_on_worker_lost": "a dead worker's jobs always come back (the lease)",
    "broker_connection_retry_on_startup": "there is no broker",
    "enable_utc": "times are stored in UTC; schedules run in TIME_ZONE",
    "worker_hijack_root_logger": "runworker logs through Django's LOGGING",
    "task_ignore_result": "results stay on the job's row",
}


def _pickle(key: str, value: Any) -> None:
    serial = key.endswith("serializer") and value not in ("json", None)
    content = key == "accept_content" and any(v not in ("json", "application/json") for v in value)
    if serial or content:
        raise Unsupported(
            f"{key}={value!r}: payloads and results are JSON here, never pickle; pass JSON "
            "values (ids, not model instances) to tasks",
            option=key,
        )


class Conf(MutableMapping[str, Any]):
    """``app.conf``: values set in code win over those read from the configured source."""

    def __init__(self) -> None:
        self._set: dict[str, Any] = {}
        self._source: tuple[str | object, str | None] | None = None

    def from_object(self, obj: str | object, namespace: str | None) -> None:
        self._source = (obj, namespace)

    def _read(self) -> dict[str, Any]:
        if self._source is None:
            return {}
        obj, namespace = self._source
        if isinstance(obj, str):
            module, _, attr = obj.partition(":")
            target: Any = importlib.import_module(module)
            if attr:
                target = getattr(target, attr)
        else:
            target = obj
        prefix = f"{namespace}_" if namespace else ""
        found = {}
        for name in dir(target):
            if name.isupper() and name.startswith(prefix):
                found[name[len(prefix) :].lower()] = getattr(target, name)
            elif not prefix and name.islower() and not name.startswith("_"):
                found[name] = getattr(target, name)
        return found

    def _all(self) -> dict[str, Any]:
        return {**self._read(), **self._set}

    def __getitem__(self, key: str) -> Any:
        values = self._all()
        if key in values:
            return values[key]
        if key in DEFAULTS:
            return DEFAULTS[key]
        raise KeyError(key)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"Celery setting {key!r} is not set") from None

    def __setattr__(self, key: str, value: Any) -> None:
        if key.startswith("_"):
            object.__setattr__(self, key, value)
        else:
            self[key] = value

    def __delattr__(self, key: str) -> None:
        del self[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _pickle(key, value)
        self._set[key] = value

    def __delitem__(self, key: str) -> None:
        del self._set[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def checked(self) -> None:
        """Raise ``Unsupported`` for a pickle serializer, wherever it is configured."""
        for key, value in self._all().items():
            _pickle(key, value)


def route(conf: Conf, name: str) -> dict[str, Any]:
    """The options ``task_routes`` gives task ``name`` (``queue``, ``priority``): a dict
    of names or glob patterns, a list of such dicts, or ``(pattern, options)`` pairs,
    the first match winning, as in Celery. A regex pattern is ``re.compile(...)``."""
    routes = conf["task_routes"]
    if not routes:
        return {}
    tables = routes if isinstance(routes, list | tuple) else [routes]
    for table in tables:
        pairs = table.items() if isinstance(table, dict) else [table]
        for pattern, options in pairs:
            if isinstance(pattern, re.Pattern):
                hit = pattern.match(name) is not None
            else:
                hit = fnmatch.fnmatchcase(name, pattern)
            if hit:
                if isinstance(options, str):
                    return {"queue": options}
                if not isinstance(options, dict):
                    raise Unsupported(
                        f"task_routes[{pattern!r}] is {options!r}: give a dict of options "
                        "(queue=, priority=) or a queue name; router functions and classes "
                        "are not supported, set queue= on the task or the call instead",
                        option="task_routes",
                    )
                return {k: v for k, v in options.items() if k in ("queue", "priority")}
    return {}


class _Defaults:
    """What a task reads when no app was made: Celery's defaults."""

    def __init__(self) -> None:
        self.conf = Conf()


# The apps made, the current one last (``Celery(set_as_current=True)`` appends).
apps: list[Any] = []
_defaults = _Defaults()


def current() -> Any:
    return apps[-1] if apps else _defaults
