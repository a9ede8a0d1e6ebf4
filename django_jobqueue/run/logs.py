"""Each run's own log lines: the records its task logs while it runs, kept with the run.

A worker runs many jobs at once in one process (slot threads, and ``async def`` tasks
on one event loop), so a record belongs to the run whose context emitted it: the run
sets a context variable (``capturing``) while its task runs; one handler on each
captured logger appends a record to that run's ``Capture`` and ignores every record
emitted outside a run. A thread the task starts itself does not carry the variable
(``asyncio.to_thread`` and the tasks an async task creates do), so its records are not
the run's.

Which loggers: ``RUN_LOGS_LOGGERS`` (their children included), by default the task's
own module's logger and ``django_jobqueue.task`` (``ctx.logger`` is its child named by
the kind). At what level: ``RUN_LOGS`` (None turns capture off). A captured logger
whose own level is unset gets that level, so that its records reach the handler (its
records then also reach the handlers above it, as any logger's set to that level do).

Bounded per run: at most ``RUN_LOGS_MAX_LINES`` lines, the first half and the last half
of them when a run logs more (the lines between are counted, not kept), and each
message cut at ``LINE_LIMIT`` characters. The lines are stored as the run's task wrote
them; every page that shows them redacts them (``redaction.redact_text``).
"""

from __future__ import annotations

import logging
from collections import deque
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django_jobqueue import conf, validation
from django_jobqueue.run.context import TASK_LOGGER

# The most of one message (its traceback included) a line keeps.
LINE_LIMIT = 2000

_current: ContextVar[Capture | None] = ContextVar("django_jobqueue_run_logs", default=None)


@dataclass(frozen=True, slots=True)
class Captured:
    """A run's lines as they are stored: each ``{"at", "level", "logger", "message"}``
    (``at`` in seconds since the epoch), oldest first, and how many lines between the
    kept head and tail were dropped."""

    lines: tuple[dict[str, Any], ...]
    dropped: int = 0


class Capture:
    """The lines of one run while it runs: the first ``limit // 2`` records, and a ring
    of the last ones."""

    __slots__ = ("_head", "_head_room", "_last", "_tail", "dropped", "level", "loggers")

    def __init__(self, limit: int, level: int, loggers: tuple[str, ...]) -> None:
        self._head: list[dict[str, Any]] = []
        self._head_room = limit - limit // 2
        self._tail: deque[dict[str, Any]] = deque(maxlen=limit // 2)
        self._last: logging.LogRecord | None = None
        self.dropped = 0
        self.level = level
        # The loggers this run keeps: a handler put on another one for an earlier run
        # (under other settings) still sees records, which are not this run's to keep.
        self.loggers = _prefixes(loggers)

    def wants(self, record: logging.LogRecord) -> bool:
        """Whether the record is of a level and a logger this run keeps."""
        if record.levelno < self.level:
            return False
        prefixes = self.loggers
        return prefixes is None or (record.name + ".").startswith(prefixes)

    def add(self, record: logging.LogRecord) -> None:
        if record is self._last:  # seen by a captured logger below this one already
            return
        self._last = record
        line = _line(record)
        if len(self._head) < self._head_room:
            self._head.append(line)
            return
        if len(self._tail) == self._tail.maxlen:  # the oldest of the tail goes
            self.dropped += 1
        self._tail.append(line)

    def captured(self) -> Captured | None:
        """What the run logged so far (None: nothing). Safe from another thread (the
        worker's loop reads a timed-out run's lines while the run may still log)."""
        if not self._head:
            return None
        head = tuple(self._head[: self._head_room])
        tail: tuple[dict[str, Any], ...] = ()
        for _ in range(3):  # a deque appended to while it is read raises: read again
            try:
                tail = tuple(self._tail)
                break
            except RuntimeError:
                continue
        return Captured(lines=(*head, *tail), dropped=self.dropped)


def _line(record: logging.LogRecord) -> dict[str, Any]:
    try:
        message = record.getMessage()
    except Exception as exc:  # a bad format string is the task's, never the run's end
        message = f"{record.msg!r} (its arguments did not format: {type(exc).__name__})"
    if record.exc_info and record.exc_info[0] is not None:
        message += "\n" + logging.Formatter().formatException(record.exc_info)
    return {
        "at": round(record.created, 6),  # seconds since the epoch: formatted when shown
        "level": record.levelname,
        "logger": record.name[:200],
        "message": validation.clean_text(message, LINE_LIMIT),
    }


class RunLogHandler(logging.Handler):
    """Appends a record to the capture of the run that emitted it (none: ignored)."""

    def handle(self, record: logging.LogRecord) -> bool:
        # No handler lock: each run's capture is written by that run only.
        capture = _current.get()
        if capture is None or not capture.wants(record):
            return False
        capture.add(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)


_HANDLER = RunLogHandler()
_installed: set[str] = set()


def install(name: str, level: int) -> None:
    """Put the handler on logger ``name`` (once), its level lowered to ``level`` if unset."""
    if name in _installed:
        return
    logger = logging.getLogger(name or None)
    if logger.level == logging.NOTSET:
        logger.setLevel(level)
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
    _installed.add(name)


def loggers_for(module: str | None, settings: conf.Settings) -> tuple[str, ...]:
    """The loggers a run of a task defined in ``module`` captures."""
    if settings.run_logs_loggers is not None:
        return settings.run_logs_loggers
    return (TASK_LOGGER,) if not module else (TASK_LOGGER, module)


def capturing(
    module: str | None, settings: conf.Settings
) -> AbstractContextManager[Capture | None]:
    """Capture the records of this run's loggers while the block runs (None: capture is
    off). The capture is the context's: other runs of the process go on with theirs."""
    level = settings.run_logs
    if level is None:
        return _OFF
    names = loggers_for(module, settings)
    for name in names:
        if name not in _installed:
            install(name, level)
    return _Capturing(Capture(settings.run_logs_max_lines, level, names))


# Every run enters one of these, so it is a plain class: a generator's context manager
# cost a no-op's run about 1 µs more.
_OFF: AbstractContextManager[None] = nullcontext()


class _Capturing:
    __slots__ = ("capture", "token")

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def __enter__(self) -> Capture:
        self.token = _current.set(self.capture)
        return self.capture

    def __exit__(self, *exc: object) -> None:
        _current.reset(self.token)


@lru_cache(maxsize=256)
def _prefixes(loggers: tuple[str, ...]) -> tuple[str, ...] | None:
    """What a kept record's logger name (with a dot added) starts with; None: all."""
    return None if "root" in loggers else tuple(n + "." for n in loggers)


def current() -> Captured | None:
    """What the running run logged so far (for a settlement written inside the run)."""
    return captured(_current.get())


def captured(capture: Capture | None) -> Captured | None:
    """What a run's capture holds so far (None: capture off, or nothing logged)."""
    return None if capture is None else capture.captured()
