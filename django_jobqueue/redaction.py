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
``"password": "…"``, ``Authorization: Bearer …``), a URL's password and a PEM block's
body, and so do the admin's pages wherever they show a journal note
(the last-error column, the job page's summary and traceback, the journal), and
``jobqueue show``'s journal. The
stored note keeps the exception as the task raised it: redaction is at display time,
so a change to ``REDACT`` or to these forms covers notes already written.
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
# "abc"``, ``api_key%3Dabc`` (URL-encoded ``=``; the value stops at an encoded ``&``).
# The value is looked ahead at, not consumed, so a key inside another's value
# (``failed: password=abc``) is found too. A key starts where a run of name characters
# starts, never inside one: tried at every position of a long word, the match would
# scan the rest of the word each time (a 16 KB word took 28 s, quadratic); from the
# run's start it reads each character once. A run need not start with a letter
# (``__password=``): whether the name is a secret's is ``_secret``'s to say. ``quote``
# is the quote the value opens with, if any: then the value runs to its closing quote
# (``password='hunter 2'``), on the same line.
_PAIR = re.compile(
    r"""(?<![\w-])(?P<key>[\w-]+)['"]?\s*(?:[=:]|%3[aAdD])\s*(?P<quote>['"]?)"""
    r"""(?=(?P<value>(?:(?!%26)[^\s'",;&)}\]=])+))"""
)

# The schemes of an Authorization header: after a secret-named key the credential that
# follows the scheme is what is hidden (``Authorization: Bearer ********``), not the
# scheme word. A Digest credential is a list of pairs: hidden to the end of its line.
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
_CREDENTIAL = re.compile(r"[ \t]+(?P<value>[^\s'\",;]+)")
_TO_LINE_END = re.compile(r"[ \t]+(?P<value>[^\n]+)")

# A scheme word on its own (``Bearer abc.def``, a header quoted without its name): its
# credential is hidden when it looks like one, at least 8 characters of a token's
# alphabet with a digit or one of ``._~+/=`` among them, so that prose ("Token
# validation failed", "Basic auth") keeps its words.
_BARE_SCHEME = re.compile(
    r"(?<![\w-])(?:Bearer|Basic|Token|Digest)[ \t]+"
    r"(?P<value>(?=[\w~+/=.-]*[\d._~+/=])[\w~+/=.-]{8,})"
)

# A URL's password: ``postgres://bob:********@db/prod``; a URL without one (no ``:``
# before an ``@``, or a port) is left alone.
_URL_PASSWORD = re.compile(r"(?<=://)[^\s:/@]*:(?P<value>[^\s/@]+)@")

# A PEM block's body, to its END line (or the text's end, if it was cut off).
_PEM = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]+)-----(?P<value>.*?)(?:-----END (?P=label)-----|\Z)",
    re.DOTALL,
)


def redact_text(text: str, words: Iterable[str] | None = None) -> str:
    """``text`` (an exception's message, a traceback) with each secret in it replaced
    by ``MARK``: the value after a secret-named key (to its closing quote, or the
    credential after an Authorization scheme), a bare scheme's credential, a URL's
    password and a PEM block's body. A message has no structure to redact by, but a
    secret in one is nearly always written in one of these forms."""
    lowered = _lowered(words)
    if not lowered or not text:
        return text
    spans = [*_pair_spans(text, lowered)]
    for pattern in (_BARE_SCHEME, _URL_PASSWORD, _PEM):
        spans += [m.span("value") for m in pattern.finditer(text) if m["value"]]
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:  # overlapping spans: one mark
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces: list[str] = []
    done = 0
    for start, end in merged:
        pieces += [text[done:start], MARK]
        done = end
    return "".join([*pieces, text[done:]])


def _pair_spans(text: str, lowered: list[str]) -> Iterable[tuple[int, int]]:
    """Where the values of secret-named keys are in ``text``."""
    for match in _PAIR.finditer(text):
        if not _secret(match["key"], lowered):
            continue
        start, end = match.span("value")
        quote = match["quote"]
        if quote:
            # Looked for on this line only: each key's search then reads its own line,
            # never the rest of the text (many unclosed quotes would be quadratic).
            line_end = text.find("\n", start)
            close = text.find(quote, start, len(text) if line_end == -1 else line_end)
            if close != -1:
                end = close
        elif match["value"].lower() in _SCHEMES:
            after = (_TO_LINE_END if match["value"].lower() == "digest" else _CREDENTIAL).match(
                text, end
            )
            if after:
                start, end = after.span("value")
        yield start, end
