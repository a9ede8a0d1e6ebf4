"""Streams and workflow results under real workers (``runworker`` children): a job
SIGKILLed inside a step, between that step's two writes, is recovered by a second
worker, and its stream holds every item once, in order; a reader follows a stream live
as a worker writes it (woken by LISTEN/NOTIFY on PostgreSQL); ``WorkflowHandle.wait``
returns a chord's result once workers ran it."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from django.db import connections

from django_jobqueue import Status, chord, job
from django_jobqueue.models import Job
from django_jobqueue.store.wakeups import STREAM_CHANNEL
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import recorded, wait_for
from tests.taskapp import stream_tasks, tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

POLL = 1.0


def _values(job_id: object) -> list[object]:
    return [item.value for item in job(job_id).stream(timeout=0)]


def test_a_stream_written_in_steps_and_replayed_after_a_sigkill_has_every_item_once_in_order(
    runworker: WorkerProcesses, tmp_path: Path
) -> None:
    marker = tmp_path / "in-step-2"
    [doomed] = runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = stream_tasks.stepped.enqueue(n=4, hold_in=2, hold=120, marker=str(marker))
    # Killed inside step s2, after its first write (held with the step, never stored).
    wait_for(marker.exists, timeout=60)
    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    before = _values(handle.id)
    assert before == stream_tasks.expected_stepped(4)[: 1 + 3 * 2]  # up to "after s1"
    assert [r["name"] for r in recorded(handle.id)] == ["s0", "s1"]
    # A second worker recovers the job once its 3 s lease runs out, and replays it.
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=90)
    items = list(job(handle.id).stream(timeout=0))
    assert [i.value for i in items] == stream_tasks.expected_stepped(4)
    assert [i.offset for i in items] == list(range(1, len(items) + 1))
    assert Job.objects.get(id=handle.id).run_count == 2


def _stream_listeners() -> int:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = %s",
            [f'LISTEN "{STREAM_CHANNEL}"'],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def test_a_reader_follows_a_stream_live_as_a_worker_writes_it(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = stream_tasks.chunks.enqueue(n=60, pause=0.05)
    postgres = connections["default"].vendor == "postgresql"
    seen, listening = [], 0
    stream = job(handle.id).stream(timeout=120)
    for item in stream:
        seen.append(item)
        if postgres:
            listening = max(listening, _stream_listeners())
    assert [i.value["chunk"] for i in seen] == list(range(60))
    assert [i.offset for i in seen] == list(range(1, 61))
    assert stream.finished  # ended by the job's end, not by the timeout
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    if postgres:  # the reader waited on a LISTEN connection of its own, not polling
        assert listening == 1
        # Closed when the iteration ended (its backend gone a moment later).
        wait_for(lambda: _stream_listeners() == 0, timeout=30)


def test_wait_returns_a_chord_s_result_once_workers_ran_it(runworker: WorkerProcesses) -> None:
    runworker.start_ready("--concurrency", "4", "--poll-interval", str(POLL))
    handle = chord([tasks.wf_value.s(i) for i in range(10)], tasks.wf_step.s(label="cb")).enqueue()
    result = handle.wait(timeout=90)
    assert result == {"label": "cb", "parents": {str(i): i for i in range(10)}}
    assert handle.status == "completed"


def test_an_async_reader_follows_a_stream_live_with_async_for(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = stream_tasks.chunks.enqueue(n=30, pause=0.05)

    stream = job(handle.id).stream(timeout=120)

    async def follow() -> list[int]:
        return [item.offset async for item in stream]

    assert asyncio.run(follow()) == list(range(1, 31))
    assert stream.finished
