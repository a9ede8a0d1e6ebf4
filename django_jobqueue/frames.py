"""A failure's traceback as it is stored: the user's own lines kept, the library's
middle dropped, within the note's budget.

Most real failures are deep: an ``IntegrityError`` raised inside
``Charge.objects.create(...)`` has one frame of the task's module and a dozen of
Django's and the driver's under it. Keeping only the traceback's last lines keeps the
library and loses the one line an operator needs, so each exception of the chain
(``raise … from``, and the exception being handled, ``__context__``) is kept as:

- its ``Traceback (most recent call last):`` header;
- every **own frame**: a frame whose file is not a library's (``is_library``), or is
  the file the task was written in (``own``, so that a task installed as a package
  keeps its frames);
- the ``NEAREST`` frames nearest the raise, whatever they are (where it broke);
- in place of each run of other frames, one marker line saying how many were
  dropped (``  [… 9 library frames omitted …]``);
- its exception line(s), the message cut to ``MESSAGE_LIMIT``.

If that is still over the budget, own frames are dropped too, outermost first and
the causes' before the final exception's, keeping to the last the first own frame
(the task's entry point) and the frames nearest the final raise; the marker then
counts frames, not library frames. Secrets are not removed here: redaction is at
display time (``redaction.redact_text``), which works line by line on what is kept.
Pure: no Django, no settings.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from dataclasses import dataclass, field
from functools import cache

HEADER = "Traceback (most recent call last):\n"
# Frames kept nearest each raise, library or not: where it actually broke.
NEAREST = 3
# The most of an exception's message kept in each of its lines.
MESSAGE_LIMIT = 2000
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
_CUT = "<the traceback could not be formatted>\n"


def marker(count: int, *, library: bool) -> str:
    """The line that stands for ``count`` dropped frames."""
    what = "library frame" if library else "frame"
    return f"  [… {count} {what}{'' if count == 1 else 's'} omitted …]\n"


@cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.add(os.path.dirname(os.path.abspath(__file__)))  # the queue itself
    return tuple(sorted(os.path.join(os.path.normpath(r), "") for r in roots))


def is_library(path: str) -> bool:
    """Whether a frame's file belongs to an installed package (under ``site-packages``
    or ``dist-packages``), the standard library (``<frozen …>`` modules included) or
    the queue (its executor calls every task), rather than to the project."""
    if path.startswith("<frozen ") or "/site-packages/" in path or "/dist-packages/" in path:
        return True
    return os.path.normpath(path).startswith(_library_roots())


@dataclass(eq=False)  # frames are told apart by identity: a recursion's are all alike
class _Frame:
    text: str
    library: bool
    kept: bool = False


@dataclass
class _Block:
    """One exception of the chain: the line that leads into it, its frames, its lines."""

    lead: str
    frames: list[_Frame] = field(default_factory=list)
    tail: str = ""

    def render(self) -> str:
        out = [self.lead]
        if self.frames:
            out.append(HEADER)
        dropped: list[_Frame] = []
        for frame in [*self.frames, None]:
            if frame is not None and not frame.kept:
                dropped.append(frame)
                continue
            if dropped:
                out.append(marker(len(dropped), library=all(f.library for f in dropped)))
                dropped = []
            if frame is not None:
                out.append(frame.text)
        out.append(self.tail)
        return "".join(out)


def _chain(exc: BaseException) -> list[tuple[BaseException, str]]:
    """The exceptions as Python prints them, oldest first, each with its lead-in line."""
    found: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    lead = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found.append((current, lead))
        if current.__cause__ is not None:
            current, lead = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, lead = current.__context__, _CONTEXT
        else:
            current = None
    # printed oldest first, each lead between a cause and the exception it led to
    leads = ["", *reversed([lead for _, lead in found[1:]])]
    return [(e, leads[i]) for i, (e, _) in enumerate(reversed(found))]


def _exception_lines(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(exc))
    if len(text) > MESSAGE_LIMIT:
        text = f"{text[:MESSAGE_LIMIT]}… ({len(text) - MESSAGE_LIMIT} more characters cut)\n"
    return text


def _block(exc: BaseException, lead: str, own: str | None) -> _Block:
    block = _Block(lead, tail=_exception_lines(exc))
    stack = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=True)
    for summary in stack:
        library = is_library(summary.filename) and summary.filename != own
        text = stack.format_frame_summary(summary)
        block.frames.append(_Frame(text, library, kept=not library))
    for frame in block.frames[-NEAREST:]:
        frame.kept = True
    return block


def _drop_order(blocks: list[_Block]) -> list[_Frame]:
    """The kept frames in the order they give way to the budget: the causes' first,
    then the final exception's; within one, outermost first, the first own frame
    (the task's entry) and the nearest frames last."""
    order: list[_Frame] = []
    last: list[_Frame] = []
    for index, block in enumerate(blocks):
        kept = [f for f in block.frames if f.kept]
        nearest = [f for f in block.frames[-NEAREST:] if f.kept]
        own = [f for f in kept if not f.library and f not in nearest]
        entry, middle = own[:1], own[1:]
        if index < len(blocks) - 1:
            order += middle + entry + nearest
        else:
            order += middle
            last = entry + nearest
    return order + last


def trimmed(exc: BaseException, limit: int, *, own: str | None = None) -> str:
    """``exc``'s traceback, chain included, as the module's docstring says, in at most
    ``limit`` characters; never raises (a traceback that cannot be formatted says so).
    ``own`` is the path of the file the task was written in, if known."""
    try:
        blocks = [_block(e, lead, own) for e, lead in _chain(exc)]
    except Exception:
        return _CUT
    text = "".join(b.render() for b in blocks)
    removed = 0  # characters of frames dropped since the text was last rendered
    for frame in _drop_order(blocks):
        if len(text) <= limit:
            break
        frame.kept = False
        removed += len(frame.text)
        if removed >= len(text) - limit:  # enough, unless the markers added: render
            text, removed = "".join(b.render() for b in blocks), 0
    text = "".join(b.render() for b in blocks)
    if len(text) > limit:  # even the bare chain is too long: its newest end is kept
        text = text[len(text) - limit :]
    return text
