"""A task's error can hold terminal control sequences (ESC to clear the screen or print
fake red text, CR to overwrite a line, BEL, backspace, the one-byte CSI ``\\x9b``):
``jobqueue show`` and the worker's log lines print each one escaped (``\\x1b``), so
the operator's terminal does nothing with it and the operator sees it was there."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command

from django_jobqueue.models import Job, StepRecord
from tests.helpers import run_burst
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

# Clear the screen, home the cursor, print fake red text; then CR, BEL, backspace, CSI.
HOSTILE = "\x1b[2J\x1b[H\x1b[31mFATAL: disk wiped\x1b[0m\r\x07\x08\x9b31m done"
ESCAPED = "\\x1b[2J\\x1b[H\\x1b[31mFATAL: disk wiped\\x1b[0m\\x0d\\x07\\x08\\x9b31m done"
CONTROL = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]


def raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if c in CONTROL})


def test_visible_escapes_every_control_character_and_keeps_newlines_and_tabs() -> None:
    from django_jobqueue.formatting import visible  # here: the log and show tests need none

    assert visible(HOSTILE) == ESCAPED
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("a\nb", newlines=False) == "a\\nb"
    assert raw_controls(visible("".join(CONTROL))) == []


def failed_with_escapes(caplog: pytest.LogCaptureFixture) -> tuple[Job, list[str]]:
    """A job whose error holds the sequences, run to its death by a real worker; the
    log lines the worker wrote (INFO and DEBUG) about it."""
    handle = tasks.declined.enqueue(message=f"{HOSTILE}\nsecond {HOSTILE}")
    with caplog.at_level(logging.DEBUG, logger="django_jobqueue"):
        run_burst(concurrency=1)
    job = Job.objects.get(id=handle.id)
    assert job.status == "dead"
    lines = [r.getMessage() for r in caplog.records if str(job.id) in r.getMessage()]
    return job, lines


def test_the_worker_log_lines_of_a_failed_job_print_control_characters_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, lines = failed_with_escapes(caplog)
    settled = [ln for ln in lines if "outcome=dead" in ln]
    assert settled
    assert all(ESCAPED in line for line in settled)
    raised = [ln for ln in lines if "raised" in ln]
    assert raised  # the DEBUG traceback: its newlines kept, its escapes shown
    assert all("\n" in line and ESCAPED in line for line in raised)
    assert [raw_controls(line) for line in lines] == [[] for _ in lines]


def test_jobqueue_show_prints_an_errors_and_a_steps_control_characters_escaped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    job, _ = failed_with_escapes(caplog)
    # A step's name is the task's to choose: stored with the sequences in it.
    step = {"kind": "step", "name": f"charge{HOSTILE}", "run": 1, "at": "t", "result": 1}
    StepRecord.objects.create(job_id=job.id, record=step, size=len(json.dumps(step)))
    out = io.StringIO()
    call_command("jobqueue", "show", str(job.id), stdout=out)
    text = out.getvalue()
    assert f"ConnectionRefusedError: {ESCAPED}" in text
    assert f"step charge{ESCAPED}" in text
    assert raw_controls(text) == []
