"""Joins under real concurrency: ``runworker`` processes drain a chord's members at
once, and its callback runs exactly once, after every member finished."""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter

import pytest

from django_jobqueue import chain, chord, workflow
from django_jobqueue.models import JournalEntry
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import row_locking, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]

MEMBERS = 200


def test_three_runworker_processes_drain_a_200_member_chord_its_callback_runs_once(
    runworker: WorkerProcesses,
) -> None:
    procs = runworker.start_ready("--concurrency", "4", "--poll-interval", "30", count=3)
    handle = chord(
        [tasks.record.s(n=i) for i in range(MEMBERS)], tasks.wf_record_total.s()
    ).enqueue()
    steady = chain(*(tasks.record.s(n=i) for i in range(20))).enqueue()
    began = time.monotonic()
    wait_for(
        lambda: workflow(handle.id).status != "running" and workflow(steady.id).status != "running",
        timeout=90,
        interval=0.25,
    )
    print(f"chord of {MEMBERS} and a 20-step chain drained in {time.monotonic() - began:.2f}s")
    for proc in procs:
        assert proc.alive(), proc.describe()
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()

    found = workflow(handle.id)
    assert found.status == "completed"
    steps = found.steps
    callback = steps.pop("callback")
    assert callback.result == sum(range(MEMBERS))
    assert callback.run_count == 1
    assert Execution.objects.filter(job_id=callback.id).count() == 1
    [entry] = JournalEntry.objects.filter(job_id=callback.id)
    assert entry.outcome == "completed"
    # Every member ran once, and all had finished before the callback started.
    member_ids = {h.id for h in steps.values()}
    runs = Counter(Execution.objects.filter(job_id__in=member_ids).values_list("job_id", flat=True))
    assert set(runs) == member_ids
    assert set(runs.values()) == {1}
    last = max(
        JournalEntry.objects.filter(job_id__in=member_ids).values_list("recorded_at", flat=True)
    )
    assert entry.started_at is not None
    assert entry.started_at >= last
    # The work was shared, and the chain went step by step, each once, in order.
    workers = set(
        JournalEntry.objects.filter(job_id__in=member_ids).values_list("worker", flat=True)
    )
    assert len(workers) > 1
    chained = workflow(steady.id).steps
    assert workflow(steady.id).status == "completed"
    finished = [JournalEntry.objects.get(job_id=chained[str(i)].id) for i in range(20)]
    gaps = []
    for before, after in itertools.pairwise(finished):
        assert after.started_at is not None
        assert after.started_at >= before.recorded_at
        gaps.append((after.started_at - before.recorded_at).total_seconds() * 1000)
    first = min(
        JournalEntry.objects.filter(job_id__in=member_ids).values_list("started_at", flat=True)
    )
    print(
        f"members ran over {(last - first).total_seconds():.2f}s; the callback started "
        f"{(entry.started_at - last).total_seconds() * 1000:.1f} ms after the last; chain "
        f"steps started {sorted(gaps)[len(gaps) // 2]:.1f} ms (p50) after the previous ended"
    )
