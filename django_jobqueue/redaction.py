"""Hiding secrets when jobs are shown: payload and carry fields whose name contains one
of the ``REDACT`` words (``password``, ``token``, ``api_key``, ``session``, … by
default; case, ``-``, ``_`` and spaces ignored, so ``X-Api-Key`` and ``apiKey`` match
``api_key``) are replaced by a marker wherever they are nested, and so
are a Django task's positional arguments whose parameter name contains one.

Only what the admin's pages and ``manage.py jobqueue show`` display is redacted; the
stored job, and so what the task receives, is never altered. The worker's log lines
name a job's id, kind and outcome, never its payload, carry or result; the error they
quote (the INFO line's first line of a failure, the DEBUG traceback) goes through
``redact_text``, which hides the value after a secret-named key (``token=…``,
``"password": "…"``), and so do the admin's pages wherever they show a journal note
(the last-error column, the job page's summary and traceback, the journal), and
``jobqueue show``'s journal. The
stored note keeps the exception as the task raised it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django_jobqueue import conf

MARK = "********"

# The keys of a Django Tasks payload (django_jobqueue.backend): its positional
# arguments are a list under "args", with no names beside them.
DJANGO_TASK_KEYS = frozenset({"args", "kwargs", "priority", "backend", "run_after"})


def redact(value: Any, words: Iterable[str] | None = None) -> Any:
    """A copy of ``value`` with the values of secret-named keys replaced by ``MARK``."""
    lowered = _lowered(words)
    if not lowered:
        return value
    return _redact(value, lowered)


def redact_payload(payload: Any, *, task: object, words: Iterable[str] | None = None) -> Any:
    """A job's payload as ``redact`` shows it, and, for a Django task, each positional
    argument hidden when the parameter it binds to has a secret's name
    (``send_mail.enqueue("ann", "hunter2")`` stores "hunter2" without its name, the
    task's signature has it). ``task`` is the kind's registry entry (None if this
    process does not know the kind: then every positional argument of a Django task is
    hidden, since which are secret cannot be told)."""
    lowered = _lowered(words)
    if not lowered:
        return payload
    shown = _redact(payload, lowered)
    if not (
        isinstance(payload, dict)
        and isinstance(payload.get("args"), list)
        and "backend" in payload
        and payload.keys() <= DJANGO_TASK_KEYS
    ):
        return shown
    count = len(payload["args"])
    names = _positional_names(task, count)
    shown["args"] = [
        MARK if name is None or _secret(name, lowered) else item
        for name, item in zip(names, shown["args"], strict=True)
    ]
    return shown


def _positional_names(task: object, count: int) -> list[str | None]:
    # Only a Django task's definition has positional_names (the backend's DjangoTaskDef,
    # a layer above this one); a task of ours binds its arguments to names at enqueue.
    names = getattr(task, "positional_names", None)
    return list(names(count)) if callable(names) else [None] * count


def _lowered(words: Iterable[str] | None) -> list[str]:
    plain = (_plain(w) for w in (conf.get().redact if words is None else words))
    return [w for w in plain if w]  # a word of separators only would match every name


def _plain(name: str) -> str:
    """A name as words are matched against it: lower case, no separators."""
    return name.lower().translate(_SEPARATORS)


_SEPARATORS = str.maketrans("", "", "-_ ")


def _secret(name: str, words: list[str]) -> bool:
    plain = _plain(name)
    return any(w in plain for w in words)


def _redact(value: Any, words: list[str]) -> Any:
    if isinstance(value, dict):
        return {
            key: MARK if isinstance(key, str) and _secret(key, words) else _redact(item, words)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact(item, words) for item in value]
    return value


# A key and what follows it in text: ``token=abc``, ``api-key: abc``, ``"password":
# "abc"``. The value is looked ahead at, not consumed, so a key inside another's value
# (``failed: password=abc``) is found too. A key starts where a run of name characters
# starts, never inside one: tried at every position of a long word, the match would
# scan the rest of the word each time (a 16 KB word took 28 s, quadratic); from the
# run's start it reads each character once. A run need not start with a letter
# (``__password=``): whether the name is a secret's is ``_secret``'s to say.
_PAIR = re.compile(
    r"""(?<![\w-])(?P<key>[\w-]+)['"]?\s*[=:]\s*['"]?(?=(?P<value>[^\s'",;&)}\]=]+))"""
)


def redact_text(text: str, words: Iterable[str] | None = None) -> str:
    """``text`` (an exception's message, a traceback) with the value after each
    secret-named key replaced by ``MARK``: a message has no structure to redact by, but
    a secret in one is nearly always written as a key and its value."""
    lowered = _lowered(words)
    if not lowered or not text:
        return text
    pieces: list[str] = []
    done = 0
    for match in _PAIR.finditer(text):
        start = match.start("value")
        if start < done or not _secret(match["key"], lowered):
            continue
        pieces += [text[done:start], MARK]
        done = match.end("value")
    return "".join([*pieces, text[done:]])
