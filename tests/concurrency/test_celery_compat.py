"""Celery's Django example on this queue, through ``runworker`` subprocesses: its demo
app's tasks with only their imports changed (``tests/celeryapp``), the canvas examples
of Celery's user guide with Celery's documented results, and retries as Celery
documents them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_jobqueue.contrib.celery import AsyncResult, GroupResult, chain, chord, group, states
from django_jobqueue.contrib.celery.exceptions import TaskFailed
from django_jobqueue.models import Job, JournalEntry
from tests.celeryapp import tasks
from tests.celeryapp.celery import debug_task
from tests.celeryapp.models import Widget
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import wait_for

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

WAIT = 90  # seconds: generous, for a loaded machine


def test_the_demo_apps_tasks_run_on_a_worker_with_only_their_imports_changed(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "4")
    widget = Widget.objects.create(name="old")
    assert tasks.add.delay(2, 2).get(timeout=WAIT) == 4
    assert tasks.mul.apply_async((3, 5)).get(timeout=WAIT) == 15
    assert tasks.xsum.delay([1, 2, 3]).get(timeout=WAIT) == 6
    assert tasks.count_widgets.delay().get(timeout=WAIT) == 1
    renamed = tasks.rename_widget.delay(widget.id, "new")
    assert renamed.get(timeout=WAIT) is None
    assert renamed.state == states.SUCCESS
    widget.refresh_from_db()
    assert widget.name == "new"
    # proj/celery.py's bound debug_task, on the app's own decorator.
    debugged = debug_task.delay()
    assert debugged.get(timeout=WAIT) == f"Request: {debugged.id}"


def test_the_user_guides_canvas_gives_celerys_results(runworker: WorkerProcesses) -> None:
    runworker.start_ready("--concurrency", "4")
    # chain(add.s(4, 4), mul.s(8)): (4 + 4) * 8
    assert chain(tasks.add.s(4, 4), tasks.mul.s(8)).apply_async().get(timeout=WAIT) == 64
    assert (tasks.add.s(2, 2) | tasks.mul.s(8) | tasks.add.si(1, 1)).delay().get(timeout=WAIT) == 2
    # chord of add.s(i, i) for i in range(10) with xsum.s(): 2 * (0 + ... + 9)
    assert chord(tasks.add.s(i, i) for i in range(10))(tasks.xsum.s()).get(timeout=WAIT) == 90
    assert (group(tasks.add.s(i, i) for i in range(10)) | tasks.xsum.s()).delay().get(
        timeout=WAIT
    ) == 90
    # group results come in member order, whichever finished first.
    grouped = group(tasks.add.s(i, i) for i in range(10)).apply_async()
    assert isinstance(grouped, GroupResult)
    assert grouped.get(timeout=WAIT) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert GroupResult.restore(grouped.id).get(timeout=WAIT) == grouped.get(timeout=WAIT)
    # a chain into a group: each member receives the chain's result.
    fanned = chain(tasks.add.s(1, 1), group(tasks.mul.s(10), tasks.mul.s(100))).apply_async()
    assert fanned.get(timeout=WAIT) == [20, 200]
    assert tasks.add.starmap([(1, 2), (3, 4)]).delay().get(timeout=WAIT) == [3, 7]
    assert tasks.add.chunks([(i, i) for i in range(5)], 2).delay().get(timeout=WAIT) == [
        [0, 2],
        [4, 6],
        [8],
    ]
    linked = tasks.add.apply_async((2, 2), link=tasks.mul.s(3))
    assert linked.get(timeout=WAIT) == 4
    [child] = Job.objects.filter(workflow_id=Job.objects.get(id=linked.id).workflow_id).exclude(
        id=linked.id
    )
    assert AsyncResult(child.id).get(timeout=WAIT) == 12


def test_retries_follow_celerys_rules(runworker: WorkerProcesses) -> None:
    runworker.start_ready("--concurrency", "4")
    widget = Widget.objects.create(name="old")
    flaky = tasks.flaky.delay(widget.id)
    assert flaky.get(timeout=WAIT) == 2  # self.request.retries on the run that succeeded
    assert flaky.retries == 2
    widget.refresh_from_db()
    assert widget.name == "done after 2"
    # An exception nothing retries fails at once: one run, FAILURE, the type named.
    boom = tasks.boom.delay()
    with pytest.raises(TaskFailed) as failed:
        boom.get(timeout=WAIT)
    assert failed.value.exc_type == "ValueError"
    assert boom.state == states.FAILURE
    assert boom.failed()
    assert Job.objects.get(id=boom.id).run_count == 1
    assert boom.get(timeout=WAIT, propagate=False).message == "no retry for this"
    # autoretry_for with max_retries=1: two runs, then the KeyError fails it.
    keyed = tasks.always_key_error.delay()
    with pytest.raises(TaskFailed, match="KeyError"):
        keyed.get(timeout=WAIT)
    assert Job.objects.get(id=keyed.id).run_count == 2


def test_autoretry_countdown_and_retry_backoff_set_the_retry_delays(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "2")
    # retry_kwargs countdown=600: retried, ten minutes later.
    slow = tasks.error_task.delay()
    wait_for(lambda: AsyncResult(slow.id).state == states.RETRY, timeout=WAIT)
    job = Job.objects.get(id=slow.id)
    [entry] = JournalEntry.objects.filter(job_id=slow.id)
    assert entry.outcome == "retried"
    assert timedelta(seconds=590) < job.visible_at - entry.recorded_at < timedelta(seconds=610)
    # retry_backoff=5 without jitter: 5 s, then 10 s.
    backing = tasks.error_backoff_test.delay()
    wait_for(lambda: Job.objects.get(id=backing.id).failure_count >= 2, timeout=WAIT)
    first, second = JournalEntry.objects.filter(job_id=backing.id).order_by("id")[:2]
    assert second.started_at is not None
    gap = (second.started_at - first.recorded_at).total_seconds()
    assert 4.5 < gap < 9  # 5 s (not the 10 s of the next retry, nor at once)
    job = Job.objects.get(id=backing.id)
    last = JournalEntry.objects.filter(job_id=backing.id).order_by("-id")[0]
    assert timedelta(seconds=9.5) < job.visible_at - last.recorded_at < timedelta(seconds=10.5)
    AsyncResult(slow.id).revoke()
    AsyncResult(backing.id).revoke()
    assert AsyncResult(slow.id).state == states.REVOKED
