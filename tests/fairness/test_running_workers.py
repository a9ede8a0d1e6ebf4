"""Unique while running across real workers (issue 23, item 4): four ``runworker``
processes (threads on SQLite) while the test keeps enqueuing. ``while_running="wait"``:
per dedup key, runs never overlap, the enqueues that came while one ran wait (merged
into the one pending sibling), and the last enqueue is always followed by a run.
``while_running="drop"``: enqueues during a run merge into it, and nothing else runs."""

from __future__ import annotations

import signal
import threading
import time
from collections import defaultdict
from datetime import datetime

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue import Outcome, Status
from django_jobqueue.models import Job, JournalEntry
from tests.concurrency.procs import WorkerProcess, WorkerProcesses
from tests.concurrency.test_caps import most_at_once
from tests.fairness.test_workers import all_done, most_claimed_of_a_key, workers
from tests.helpers import WorkerThread
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite]

__all__ = ["workers"]  # the fixture: runworker processes, or threads on SQLite

KIND = tasks.unique_running.kind
KEYS = 3
ROUNDS = 25


class Workers:
    """Four workers of four slots: ``runworker`` processes, or threads on SQLite."""

    def __init__(self, procs: WorkerProcesses | None) -> None:
        self.procs = procs
        self.threads: list[WorkerThread] = []
        self.children: list[WorkerProcess] = []
        if procs is None:
            self.threads = [
                WorkerThread(concurrency=4, poll_interval=0.1).start() for _ in range(4)
            ]
        else:
            self.children = procs.start_ready("--concurrency", "4", count=4)

    def stop(self) -> None:
        for thread in self.threads:
            thread.stop()
        for proc in self.children:
            assert proc.alive(), proc.describe()
            proc.send(signal.SIGTERM)
        for proc in self.children:
            assert proc.wait(30) == 0, proc.describe()

    def describe(self) -> str:
        return self.procs.describe() if self.procs is not None else "worker threads"


class Sampler(threading.Thread):
    """Samples the most claimed jobs of one key of ``KIND`` until told to stop."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: list[int] = []
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                self.seen.append(most_claimed_of_a_key(KIND))
                time.sleep(0.01)
        finally:
            connection.close()


def wait_until_done(timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not all_done(KIND):
        assert time.monotonic() < deadline, "the jobs did not all finish"
        time.sleep(0.05)


def runs_by_key() -> dict[str, list[tuple[datetime, datetime]]]:
    keys = dict(Job.objects.filter(kind=KIND).values_list("id", "key"))
    runs: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for e in Execution.objects.filter(kind=KIND).order_by("started_at", "id"):
        assert e.finished_at is not None, "a run did not finish"
        runs[str(keys[e.job_id])].append((e.started_at, e.finished_at))
    return runs


def test_wait_runs_one_at_a_time_per_dedup_key_and_after_the_last_enqueue(
    workers: WorkerProcesses | None,
) -> None:
    """ROUNDS enqueues of each of KEYS dedup keys, 40 ms apart, each run taking 100 ms,
    while the workers run."""
    running = Workers(workers)
    sampler = Sampler()
    sampler.start()
    last: dict[str, datetime] = {}
    made = 0
    try:
        for n in range(ROUNDS):
            for k in range(KEYS):
                key = f"user:{k}"
                bound = tasks.unique_running.using(dedup_key=key, while_running="wait")
                # Before the call: the enqueue commits after this instant, and a run may
                # start between its commit and the call's return.
                last[key] = timezone.now()
                bound.enqueue(n=n, seconds=0.1)
                made += 1
            time.sleep(0.04)
        wait_until_done()
    finally:
        sampler.halt.set()
        sampler.join(10)
        running.stop()
    seen = sampler.seen
    assert max(seen) <= 1, f"most claimed of one dedup key over {len(seen)} samples: {max(seen)}"
    runs = runs_by_key()
    assert set(runs) == {f"user:{k}" for k in range(KEYS)}
    for key, spans in runs.items():
        assert most_at_once(spans) <= 1, f"{key}: runs overlapped"
        # the last enqueue of the key was followed by a run that started after it
        assert spans[-1][0] >= last[key], key
    jobs = Job.objects.filter(kind=KIND).count()
    assert jobs < made, "no enqueue waited in a pending sibling"
    merged = JournalEntry.objects.filter(kind=KIND, outcome=Outcome.MERGED).count()
    assert merged == made - jobs


def test_drop_merges_enqueues_during_a_run_into_it(workers: WorkerProcesses | None) -> None:
    bound = tasks.unique_running.using(dedup_key="report:1", while_running="drop")
    running = Workers(workers)
    try:
        first = bound.enqueue(n=0, seconds=1.5)
        deadline = time.monotonic() + 60
        while Job.objects.get(id=first.id).status != Status.CLAIMED:
            assert time.monotonic() < deadline, "the job was never claimed"
            time.sleep(0.01)
        handles = [bound.enqueue(n=n, seconds=0) for n in range(1, 6)]
        wait_until_done()
    finally:
        running.stop()
    assert {h.id for h in handles} == {first.id}
    assert {h.disposition for h in handles} == {"merged"}
    assert Job.objects.filter(kind=KIND).count() == 1
    assert Job.objects.get(id=first.id).status == Status.COMPLETED
    assert Execution.objects.filter(kind=KIND).count() == 1
    merged = JournalEntry.objects.filter(job_id=first.id, outcome=Outcome.MERGED)
    assert merged.count() == 5
