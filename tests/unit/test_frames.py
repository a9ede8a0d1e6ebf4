"""The stored traceback (``frames.trimmed``): the header, the task's own frames and
the frames nearest the raise kept, library frames from the middle dropped with a
marker that counts them, chained exceptions kept alike, all within the budget."""

from __future__ import annotations

import json
import re
import sysconfig
import traceback
from collections.abc import Callable

import pytest

from django_jobqueue import frames
from django_jobqueue.admin import tracebacks
from django_jobqueue.redaction import MARK, redact_text
from django_jobqueue.rules.lifecycle import NOTE_LIMIT
from django_jobqueue.run.executor import error_text

HERE = __file__


def raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except BaseException as exc:
        return exc
    raise AssertionError("it did not raise")


def deep_in_the_library() -> None:
    """A failure with library frames between two own frames and under the last: the
    standard library's json decoder calls back into our hook, which decodes again."""

    def hook(obj: dict[str, object]) -> dict[str, object]:
        json.loads('{"token": "tok_live_123", bad')
        return obj

    json.loads('{"a": 1}', object_hook=hook)


def formatted(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def own_frames(text: str) -> list[str]:
    return [m for m in re.findall(r'File "([^"]+)"', text) if not frames.is_library(m)]


def test_the_header_the_task_frame_and_the_nearest_frames_are_kept_and_the_middle_counted() -> None:
    exc = raised(deep_in_the_library)
    full = "".join(traceback.format_exception(exc))
    text = frames.trimmed(exc, NOTE_LIMIT)
    assert text.startswith(frames.HEADER)
    assert f'File "{HERE}"' in text  # the task's own frames
    assert "in deep_in_the_library" in text
    assert "in hook" in text
    assert text.rstrip().endswith(full.rstrip().splitlines()[-1])  # the exception line
    lib_frames = [p for p in re.findall(r'File "([^"]+)"', full) if frames.is_library(p)]
    kept_lib = [p for p in re.findall(r'File "([^"]+)"', text) if frames.is_library(p)]
    assert len(kept_lib) == frames.NEAREST  # the nearest the raise, whatever they are
    dropped = len(lib_frames) - len(kept_lib)
    assert dropped > 0
    assert frames.marker(dropped, library=True) in text


def test_library_frames_between_own_frames_are_dropped_with_their_count() -> None:
    exc = raised(deep_in_the_library)
    text = frames.trimmed(exc, NOTE_LIMIT)
    counts = [int(n) for n in re.findall(r"\[… (\d+) library frames? omitted …\]", text)]
    full = "".join(traceback.format_exception(exc))
    all_frames = len(re.findall(r'File "', full))
    shown = len(re.findall(r'File "', text))
    assert counts
    assert sum(counts) == all_frames - shown


def test_a_chain_keeps_each_exception_its_header_and_its_lead_in_line() -> None:
    def wrapped() -> None:
        try:
            deep_in_the_library()
        except ValueError as exc:
            raise RuntimeError("could not read the order") from exc

    def handled() -> None:
        try:
            wrapped()
        except RuntimeError:
            raise KeyError("while handling")  # noqa: B904 (the context is the point)

    text = frames.trimmed(raised(wrapped), NOTE_LIMIT)
    assert text.count(frames.HEADER) == 2
    assert "The above exception was the direct cause of the following exception:" in text
    assert text.index("JSONDecodeError") < text.index("RuntimeError: could not read")
    assert text.rstrip().endswith("RuntimeError: could not read the order")
    context = frames.trimmed(raised(handled), NOTE_LIMIT)
    assert context.count(frames.HEADER) == 3
    assert "During handling of the above exception, another exception occurred:" in context
    assert context.rstrip().endswith("KeyError: 'while handling'")


def test_a_deep_recursion_keeps_the_entry_and_the_nearest_frames_within_the_budget() -> None:
    def recurse(n: int) -> None:
        if n == 0:
            raise LookupError("the bottom")
        recurse(n - 1)

    def entry() -> None:
        recurse(600)

    text = frames.trimmed(raised(entry), 3_000)
    assert len(text) <= 3_000
    assert text.startswith(frames.HEADER)
    assert "in raised" in text.splitlines()[1]  # the outermost own frame is kept
    assert re.search(r"\[… \d+ frames omitted …\]", text)  # own frames counted too
    assert 'raise LookupError("the bottom")' in text
    assert text.rstrip().endswith("LookupError: the bottom")


def test_a_frame_of_the_tasks_own_file_counts_as_its_own_even_in_a_library() -> None:
    exc = raised(deep_in_the_library)
    stdlib = sysconfig.get_paths()["stdlib"]
    assert frames.is_library(f"{stdlib}/json/decoder.py")
    assert frames.is_library("/srv/venv/lib/python3.11/site-packages/shop/tasks.py")
    assert not frames.is_library("/srv/app/shop/tasks.py")
    own = f"{stdlib}/json/__init__.py"
    text = frames.trimmed(exc, NOTE_LIMIT, own=own)
    default = frames.trimmed(exc, NOTE_LIMIT)
    # json/__init__.py's frames (loads, twice) are now the task's: all kept
    assert text.count(f'File "{own}"') == formatted(exc).count(f'File "{own}"') == 2
    assert default.count(f'File "{own}"') == 1  # otherwise only the nearest one
    assert len(own_frames(text)) == len(own_frames(default))


def test_a_huge_message_is_cut_and_the_note_stays_within_the_budget() -> None:
    exc = raised(lambda: (_ for _ in ()).throw(ValueError("x" * 50_000)))
    note = error_text(exc)
    assert len(note) <= NOTE_LIMIT
    assert note.startswith("ValueError: xxx")
    assert frames.HEADER in note
    assert "more characters cut" in note


def test_the_note_is_the_summary_line_then_the_trimmed_traceback_and_is_redacted_when_shown() -> (
    None
):
    exc = raised(deep_in_the_library)
    note = error_text(exc)
    summary, rest = note.split("\n", 1)
    assert summary.startswith("JSONDecodeError: ")
    assert rest.startswith(frames.HEADER)
    shown = "\n".join(p.text for p in tracebacks.parts(note))
    assert "tok_live_123" in note  # stored as raised
    assert "tok_live_123" not in shown
    assert MARK in shown
    assert "tok_live_123" not in redact_text(note)


def test_the_admin_shows_the_own_frames_open_and_folds_only_library_frames() -> None:
    note = error_text(raised(deep_in_the_library))
    parts = tracebacks.parts(note)
    open_text = "\n".join(p.text for p in parts if not p.folded)
    assert f'File "{HERE}"' in open_text
    assert "omitted" in open_text  # the marker is plain text, open
    assert all(
        all(frames.is_library(p) for p in re.findall(r'File "([^"]+)"', part.text))
        for part in parts
        if part.folded
    )


@pytest.mark.parametrize("limit", [200, 1_000, 5_000])
def test_any_budget_is_kept(limit: int) -> None:
    assert len(frames.trimmed(raised(deep_in_the_library), limit)) <= limit


def test_a_dead_jobs_note_at_the_budget_keeps_its_last_lines() -> None:
    """A traceback that fills the budget leaves room for the line the lifecycle adds
    to a dead job's note: neither it nor the exception's line is cut."""
    import uuid
    from datetime import UTC, datetime, timedelta

    from django_jobqueue.rules.lifecycle import Policy, Run, failure

    def recurse(n: int) -> None:
        if n == 0:
            raise LookupError("the bottom")
        recurse(n - 1)

    note = error_text(raised(lambda: recurse(800)))
    assert len(note) > NOTE_LIMIT - 200  # it filled the budget
    run = Run(job_id=uuid.uuid4(), kind="k", run_no=1, worker="w")
    second = timedelta(seconds=1)
    policy = Policy(
        max_failures=1, lease=second, backoff_base=second, backoff_cap=second, backoff_jitter=0
    )
    dead = failure(run, failure_count=0, policy=policy, now=datetime.now(UTC), note=note)
    assert len(dead.note) <= NOTE_LIMIT
    assert "more characters cut" not in dead.note
    assert dead.note.endswith("LookupError: the bottom\n\n(failure 1 of max_failures=1)")
