"""A failure's note as an operator reads it: the first line (the exception's class and
message) as a summary, and the traceback under it with library frames folded.

The note is what the worker journalled (``run.executor.error_text``: the class and
message, then the traceback as ``frames.trimmed`` keeps it: the task's own frames, the
frames nearest each raise, and a marker for the library frames dropped between).
Frames from installed packages, the standard library and the queue itself
(``frames.is_library``) say how the task was called, not why it failed: they are
folded so that the task's own frames are what one sees, open. Everything here is redacted
(``redact_text``) before it is shown: the summary, the hover text and each frame.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django_jobqueue.frames import is_library
from django_jobqueue.redaction import redact_text

# The most of a note the jobs list reads and puts in the hover text of its error cell.
HOVER_LIMIT = 2000
# The most of the first line the jobs list shows in its error cell.
CELL_LIMIT = 90

_FRAME = re.compile(r'^  File "(?P<path>[^"]*)", line \d+')


@dataclass(frozen=True)
class Part:
    """A run of a traceback's lines: plain text, or ``frames`` library frames folded."""

    text: str
    frames: int = 0

    @property
    def folded(self) -> bool:
        return self.frames > 0


def first_line(note: str) -> str:
    """The summary of a failure: its note's first non-blank line, redacted."""
    for line in note.splitlines():
        if line.strip():
            return redact_text(line.strip())
    return ""


def cell(note: str) -> tuple[str, str]:
    """(shown, hover) for the jobs list's error cell: the first line, cut to
    ``CELL_LIMIT``, and the note itself (as far as it was read), both redacted."""
    shown = first_line(note)
    if len(shown) > CELL_LIMIT:
        shown = shown[: CELL_LIMIT - 1] + "…"
    return shown, redact_text(note.strip())


def parts(note: str) -> list[Part]:
    """``note`` redacted and cut into plain runs and folded runs of library frames (a
    frame is its ``File "…"`` line and the indented lines under it)."""
    frames: list[tuple[bool, list[str]]] = []  # (library, lines) per frame or plain line
    for line in redact_text(note).splitlines():
        match = _FRAME.match(line)
        if match:
            frames.append((is_library(match["path"]), [line]))
        elif line.startswith("    ") and frames and _FRAME.match(frames[-1][1][0]):
            frames[-1][1].append(line)
        else:
            frames.append((False, [line]))
    out: list[Part] = []
    run: list[str] = []
    count = 0
    for library, lines in frames:
        if library:
            run += lines
            count += 1
            continue
        if count:
            out.append(Part("\n".join(run), count))
            run, count = [], 0
        out.append(Part("\n".join(lines)))
    if count:
        out.append(Part("\n".join(run), count))
    return _merged(out)


def _merged(found: list[Part]) -> list[Part]:
    """Adjacent plain parts joined, so a template renders one block per run."""
    merged: list[Part] = []
    for part in found:
        if merged and not part.folded and not merged[-1].folded:
            merged[-1] = Part(merged[-1].text + "\n" + part.text)
        else:
            merged.append(part)
    return merged
