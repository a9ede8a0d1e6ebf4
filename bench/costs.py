"""The per-job cost breakdown's measuring side (``python -m bench.costs``), run by
``bench.breakdown`` in a child process of its own per round: Django set up with
``settings_jobqueue`` on DATABASE_URL, a fresh database holding our schema.

Two parts, each printed as JSON on the last stdout line:

- **enqueue**: ``noop.enqueue()`` ``--enqueues`` times in autocommit, timed without a
  profiler, with the time inside psycopg's ``Cursor.execute`` (the statement's round
  trip: the driver, the wire and the server) summed apart; then as many under
  cProfile, whose own time per function is grouped by module into ``ENQUEUE_BUCKETS``
  (a builtin's time goes to the module of the function that called it). The profiled
  split is scaled to the unprofiled Python time, so the table is in real µs.
- **worker**: ``--jobs`` no-ops preloaded (``enqueue_many``), then one ``runworker
  --burst --processes 1`` (its defaults otherwise) in this process, with the worker's
  named steps wrapped in timers (``WORKER_STEPS``) and every statement's time charged
  to the step that sent it; each step's own time (its time less the nested steps') per
  job settled.

``--absent`` first makes ``sentry_sdk`` and ``opentelemetry`` unimportable, as if they
were not installed, to set beside a run where they are installed but not configured.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib.abc
import json
import os
import pstats
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

OPTIONAL = ("sentry_sdk", "opentelemetry")  # the features a user may not install
# cProfile's own time, by the module a function lives in: the first prefix that matches
# its file's path (relative to its package's root) names its bucket.
ENQUEUE_BUCKETS: tuple[tuple[str, str], ...] = (
    ("django_jobqueue/validation.py", "validation"),
    ("django_jobqueue/redaction.py", "validation"),
    ("django_jobqueue/tracing.py", "tracing / Sentry"),
    ("django_jobqueue/sentry.py", "tracing / Sentry"),
    ("opentelemetry/", "tracing / Sentry"),
    ("sentry_sdk/", "tracing / Sentry"),
    ("django_jobqueue/ids.py", "ids"),
    ("django_jobqueue/store/dialects/", "the dialect"),
    ("django_jobqueue/store/", "inserting (store)"),
    ("django_jobqueue/task/", "task API (options, request, handle, signals)"),
    ("django_jobqueue/", "django_jobqueue, other"),
    ("psycopg", "statement (psycopg, wire, server)"),
    ("django/", "Django (connection, transaction, cursor)"),
)
OTHER = "Python stdlib, other"
STATEMENT = "statement (psycopg, wire, server)"


class _Absent(importlib.abc.MetaPathFinder):
    """Refuses the optional packages, as an environment without them would."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.split(".")[0] in OPTIONAL:
            raise ModuleNotFoundError(f"No module named {name!r} (bench.costs --absent)")
        return None


# --- timing the worker's steps ----------------------------------------------------------------


class Steps:
    """Wall time of named steps, per thread nested: each step's own time is its time
    less that of the steps it called; a statement is charged to the step that sent it."""

    def __init__(self) -> None:
        self.inclusive: dict[str, float] = defaultdict(float)
        self.nested: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def _stack(self) -> list[str]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def wrap(self, owner: Any, name: str, step: str | None) -> None:
        """Time ``owner.name`` as ``step`` (None: a statement, charged to its caller)."""
        original = getattr(owner, name)
        steps = self

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = steps._stack()
            label = step or f"{stack[-1] if stack else 'outside the steps'} · statements"
            stack.append(label)
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                stack.pop()
                with steps._lock:
                    steps.inclusive[label] += took
                    steps.calls[label] += 1
                    if stack:
                        steps.nested[stack[-1]] += took

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def undo(self) -> None:
        for restore in reversed(self._undo):
            restore()
        self._undo.clear()

    def own(self) -> dict[str, float]:
        """Each step's own seconds (its time less its nested steps')."""
        return {k: self.inclusive[k] - self.nested.get(k, 0.0) for k in self.inclusive}


def worker_steps() -> list[tuple[Any, str, str | None]]:
    """(owner, attribute, step) of what a worker does per job; None: a statement."""
    import psycopg

    from django_jobqueue import store
    from django_jobqueue.run.pipeline import Pipeline
    from django_jobqueue.worker.loop import Worker
    from django_jobqueue.worker.services.base import Maintenance, Service

    services: list[tuple[Any, str, str | None]] = [
        (cls, "run", f"maintenance: {getattr(cls, 'name', '') or cls.__name__}")
        for cls in _subclasses(Service)
        if "run" in vars(cls)
    ]
    return [
        *services,
        (Worker, "_register", "start: register the worker"),
        (Worker, "_loop", "loop: its own Python"),
        (Maintenance, "run_due", "maintenance: scheduling"),
        (Worker, "_collect", "collect ended runs (to_write)"),
        (Worker, "_gather", "wait for runs about to end (gather)"),
        (Worker, "_wait", "wait for a wake-up or a result"),
        (store, "exchange", "turn: settle + claim, Python"),
        (Worker, "_dispatch", "hand-off to a slot (_dispatch)"),
        (Worker, "_settled", "after the turn (_settled, Pipeline.settled)"),
        (Pipeline, "run_one", "run (Pipeline.run_one, slot thread)"),
        (psycopg.Cursor, "execute", None),
        (psycopg.Cursor, "executemany", None),
    ]


def _subclasses(cls: type) -> list[type]:
    found: list[type] = []
    sub: type
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


# --- the two parts ------------------------------------------------------------------------------


def _bucket(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for prefix, bucket in ENQUEUE_BUCKETS:
        if f"/{prefix}" in path or path.startswith(prefix):
            return bucket
    return OTHER


def profile_buckets(stats: pstats.Stats) -> dict[str, float]:
    """cProfile's own time grouped by ``ENQUEUE_BUCKETS``; a builtin's (file ``~``) goes
    to its callers' buckets, in proportion to the time it spent under each."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = defaultdict(float)
    for (filename, _line, _name), (_cc, _nc, tt, _ct, callers) in raw.items():
        if filename != "~" or not callers:
            out[_bucket(filename)] += tt
            continue
        shares = {caller: entry[2] for caller, entry in callers.items()}
        total = sum(shares.values()) or 1.0
        for caller, share in shares.items():
            out[_bucket(caller[0])] += tt * share / total
    return dict(out)


def enqueue_part(n: int) -> dict[str, Any]:
    import psycopg

    from bench.benchapp.tasks import noop

    for _ in range(50):
        noop.enqueue()
    steps = Steps()
    steps.wrap(psycopg.Cursor, "execute", None)
    start = time.perf_counter()
    for _ in range(n):
        noop.enqueue()
    total = time.perf_counter() - start
    steps.undo()
    statement = sum(steps.inclusive.values())
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        noop.enqueue()
    profiler.disable()
    buckets = profile_buckets(pstats.Stats(profiler))
    python_profiled = sum(v for k, v in buckets.items() if k != STATEMENT)
    scale = (total - statement) / python_profiled if python_profiled else 0.0
    per = 1e6 / n
    return {
        "n": n,
        "total_us": total * per,
        "statement_us": statement * per,
        "python_us": (total - statement) * per,
        "statements": sum(steps.calls.values()) / n,
        "python_buckets_us": {
            k: v * scale * per for k, v in sorted(buckets.items()) if k != STATEMENT
        },
        "profiled_us": {k: v * per for k, v in sorted(buckets.items())},
    }


def worker_part(n: int) -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connections

    from bench.benchapp.tasks import noop

    connection = connections["default"]
    noop.enqueue_many([{} for _ in range(n)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("SELECT count(*) FROM django_jobqueue_job WHERE status = 'pending'")
        pending = cursor.fetchone()[0]
    connection.close()
    steps = Steps()
    for owner, name, step in worker_steps():
        steps.wrap(owner, name, step)
    start = time.perf_counter()
    call_command("runworker", "--burst", "--processes", "1", verbosity=0)
    elapsed = time.perf_counter() - start
    steps.undo()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_jobqueue_job WHERE status = 'completed'")
        done = cursor.fetchone()[0]
    if done != pending:
        raise SystemExit(f"runworker --burst settled {done} of {pending} jobs")
    per = 1e6 / done
    return {
        "jobs": done,
        "elapsed_us": elapsed * per,
        "steps_us": {k: v * per for k, v in sorted(steps.own().items())},
        "calls_per_job": {k: v / done for k, v in sorted(steps.calls.items())},
    }


def optional_part(n: int = 100_000) -> dict[str, float]:
    """µs per call of what every enqueue asks of the optional features, in a loop: the
    stored trace context (``tracing.capture_context``: OpenTelemetry's and Sentry's) and
    the enqueue span (``tracing.enqueue_span``, entered and left)."""
    from django_jobqueue import tracing

    def per_call(call: Callable[[], object]) -> float:
        start = time.perf_counter()
        for _ in range(n):
            call()
        return (time.perf_counter() - start) * 1e6 / n

    def span() -> None:
        with tracing.enqueue_span(kind="bench.noop", queue="default"):
            pass

    return {"capture_context": per_call(tracing.capture_context), "enqueue_span": per_call(span)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.costs")
    p.add_argument("--enqueues", type=int, default=2_000)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--absent", action="store_true", help="sentry_sdk, opentelemetry hidden")
    args = p.parse_args(argv)
    if args.absent:
        sys.meta_path.insert(0, _Absent())
    import django

    django.setup()
    from django_jobqueue import sentry, tracing

    result = {
        "absent": args.absent,
        "optional_importable": {
            "sentry": getattr(sentry, "sentry_sdk", None) is not None,
            "tracing": getattr(tracing, "trace", None) is not None,
        },
        "optional_us": optional_part(),
        "enqueue": enqueue_part(args.enqueues),
        "worker": worker_part(args.jobs),
    }
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
