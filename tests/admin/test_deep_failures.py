"""A deep ORM failure keeps the user's line: an IntegrityError raised inside
``User.objects.create`` in a task (a real constraint of a real database) is stored with
the traceback's header, the task's own frame and the frames nearest the raise, the
library frames between dropped with a marker counting them, the driver's exception it
was chained from kept the same way; the job page shows the task's frame open."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from django_jobqueue import frames
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import NOTE_LIMIT
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

JOBS = "/admin/django_jobqueue/job/"
TASK_FRAME = re.compile(r'File "[^"]*tests/taskapp/tasks\.py", line \d+, in duplicate_user')


def failed_deep() -> Job:
    handle = tasks.duplicate_user.enqueue(username="ada")
    run_jobs(kinds=[tasks.duplicate_user], now=timezone.now())
    return Job.objects.get(id=handle.id)


def test_an_integrity_error_inside_a_task_keeps_the_tasks_frame_and_the_chain() -> None:
    job = failed_deep()
    assert job.status == "dead"
    note = JournalEntry.objects.filter(job_id=job.id).latest("id").note
    assert note.startswith("IntegrityError: ")
    assert len(note) <= NOTE_LIMIT
    # the driver's exception, then Django's raised from it: each with its header
    assert note.count(frames.HEADER) == 2
    assert "The above exception was the direct cause of the following exception:" in note
    final = note.rsplit(frames.HEADER, 1)[1]
    assert TASK_FRAME.search(final), final
    assert "User.objects.create(username=username)" in final
    assert re.search(r"\[… \d+ library frames omitted …\]", final)
    after_frames = final.rsplit('  File "', 1)[1]
    assert "\ndjango.db.utils.IntegrityError: " in after_frames
    # the nearest frames are the database layer's, where it broke
    shown = re.findall(r'File "([^"]+)"', final)
    assert len(shown) == 1 + frames.NEAREST
    assert all(frames.is_library(p) for p in shown[1:])


def test_the_job_page_shows_the_tasks_frame_without_unfolding(
    client_for: Callable[..., Client], viewer: User
) -> None:
    job = failed_deep()
    text = client_for(viewer).get(f"{JOBS}{job.id}/change/").content.decode()
    head = text.split('id="last-error"')[1].split('class="jq-section"')[0]
    open_text = unescape(re.sub(r"<details.*?</details>", "", head, flags=re.S))
    assert TASK_FRAME.search(open_text), open_text
    assert "library frames omitted" in open_text
    assert re.search(r'<details class="jq-lib"><summary>\d+ library frames?</summary>', head)
