"""Live progress of a running job: the value ``ctx.progress`` records and readers show.

Pure: checked here, held on the run's context, written by the worker about once a
second (``worker.services.progress``: one statement for all its running jobs, never
one per call), cleared by the run's settlement, and read back from the job's
``progress_*`` columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django_jobqueue.errors import InvalidProgress
from django_jobqueue.states import Status

NOTE_LIMIT = 200  # characters: the column's length


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a run got: ``done`` of ``total`` (None: a count with no known end), and a
    short note saying what it is doing."""

    done: float
    total: float | None = None
    note: str = ""

    @property
    def fraction(self) -> float | None:
        """``done / total`` (0.0 to 1.0), or None when there is no total."""
        return None if self.total is None else self.done / self.total

    @property
    def percent(self) -> int | None:
        """The fraction as a whole percentage, rounded down (None when there is no total)."""
        fraction = self.fraction
        return None if fraction is None else int(fraction * 100)

    def __str__(self) -> str:
        done = _number(self.done)
        text = done if self.total is None else f"{done}/{_number(self.total)} ({self.percent}%)"
        return f"{text} {self.note}" if self.note else text

    @classmethod
    def stored(cls, done: float | None, total: float | None, note: str | None) -> Progress | None:
        """The progress held in a job's columns (None: no run reported any)."""
        if done is None:
            return None
        return cls(done=done, total=total, note=note or "")


def live(status: str, done: float | None, total: float | None, note: str | None) -> Progress | None:
    """The progress to show for a job in ``status``: its run's while it runs, and none
    once it does not (every settlement clears the columns; this keeps a row an older
    version settled without clearing from showing a stale value beside its badge)."""
    return Progress.stored(done, total, note) if status == Status.CLAIMED else None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _finite(value: Any, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidProgress(
            f"ctx.progress(): {argument} must be a number, not {type(value).__name__}",
            argument=argument,
        )
    number = float(value)
    if not math.isfinite(number):
        raise InvalidProgress(
            f"ctx.progress(): {argument} must be finite, not {value!r}", argument=argument
        )
    return number


def checked(done: Any, total: Any = None, note: Any = None) -> Progress:
    """``ctx.progress``'s arguments as a ``Progress``, or ``InvalidProgress`` naming the
    argument that is wrong: a negative or non-finite count, a total that is not
    positive, ``done`` past ``total``, a note that is not text or is too long."""
    d = _finite(done, "done")
    if d < 0:
        raise InvalidProgress(
            f"ctx.progress(): done must not be negative, not {done!r}", argument="done"
        )
    t: float | None = None
    if total is not None:
        t = _finite(total, "total")
        if t <= 0:
            raise InvalidProgress(
                f"ctx.progress(): total must be positive, not {total!r}", argument="total"
            )
        if d > t:
            raise InvalidProgress(
                f"ctx.progress(): done ({done!r}) is more than total ({total!r})",
                argument="done",
            )
    if note is None:
        note = ""
    if not isinstance(note, str):
        raise InvalidProgress(
            f"ctx.progress(): note must be a string, not {type(note).__name__}", argument="note"
        )
    if len(note) > NOTE_LIMIT:
        raise InvalidProgress(
            f"ctx.progress(): note is {len(note)} characters, over the limit of {NOTE_LIMIT}",
            argument="note",
        )
    if "\x00" in note:
        raise InvalidProgress("ctx.progress(): note must not contain NUL", argument="note")
    return Progress(done=d, total=t, note=note)
