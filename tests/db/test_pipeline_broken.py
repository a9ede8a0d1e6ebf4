"""A run our own code fails around, outside the task (an observer such as the tracing
or Sentry hooks, whose library changed under us): the run ends as a counted failure
whose journal note names what failed, by the kind's policy, and the slot thread lives
on. Before, the exception ended the slot thread and the job stayed claimed, its lease
renewed for as long as the worker lived (the Sentry SDK 3.0 outage's symptom)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from django_jobqueue import Status, tracing
from django_jobqueue.models import Job, JournalEntry
from tests.helpers import WorkerThread, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.mark.parametrize("task", [tasks.add, tasks.async_add], ids=["thread", "event-loop"])
def test_a_failure_around_a_run_is_a_counted_failure_and_the_slot_lives_on(
    task: Any, worker_thread: Callable[..., WorkerThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    started = tracing.start_run
    broke: list[str] = []

    def start_run(job: Any, **kwargs: Any) -> Any:
        if not broke:  # the first run only
            broke.append(str(job.id))
            raise RuntimeError("an observer broke")
        return started(job, **kwargs)

    monkeypatch.setattr(tracing, "start_run", start_run)
    first = task.enqueue(a=1, b=2)
    second = task.enqueue(a=3, b=4)
    worker_thread(kinds=[task.kind], concurrency=1, async_concurrency=1)
    # The slot ran the other job; the failed run was retried after its backoff.
    ids = [first.id, second.id]
    wait_for(
        lambda: (
            set(Job.objects.filter(id__in=ids).values_list("status", flat=True))
            == {Status.COMPLETED}
        ),
        timeout=60,
    )
    assert broke in ([str(first.id)], [str(second.id)])
    failed = JournalEntry.objects.get(job_id=broke[0], run_no=1)
    assert failed.outcome == "retried"
    assert failed.note.startswith(
        "the worker failed around this run: RuntimeError: an observer broke"
    )
    again = JournalEntry.objects.get(job_id=broke[0], run_no=2)
    assert again.outcome == "completed"
    assert Job.objects.get(id=broke[0]).failure_count == 1
