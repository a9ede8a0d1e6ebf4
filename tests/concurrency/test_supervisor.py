"""``runworker --processes N``: real supervisors with real worker children.

A child killed is replaced and its job recovered; children recycled after their job
quota lose no job and run none twice; SIGTERM stops every child gracefully within the
shutdown timeout; the supervisor holds no database connection; a crash loop backs off.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry, WorkerHeartbeat
from django_jobqueue.worker.supervisor import Supervisor
from tests.concurrency.procs import WorkerProcess, WorkerProcesses
from tests.helpers import journal_of, row_locking, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def supervisors(runworker: WorkerProcesses) -> Iterator[WorkerProcesses]:
    """``runworker`` children, whose own children (in sessions of their own, so out of
    reach of a kill of the supervisor) are killed too at teardown: none is left to
    claim the next test's jobs."""
    try:
        yield runworker
    finally:
        for proc in runworker.started:
            for pid in _children(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _children(parent: int) -> list[int]:
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _parent(int(p.name)) == parent
    ]


def children_of(supervisor: WorkerProcess, count: int, timeout: float = 60) -> set[int]:
    """Wait until ``count`` live children of the supervisor are registered; their pids."""

    def live() -> set[int] | None:
        pids = set(
            WorkerHeartbeat.objects.filter(stopped_at__isnull=True).values_list("pid", flat=True)
        )
        pids = {pid for pid in pids if _parent(pid) == supervisor.pid}
        return pids if len(pids) >= count else None

    found: set[int] = wait_for(live, timeout=timeout, interval=0.2)
    return found


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])


def database_sockets(pid: int, port: int) -> int:
    """How many TCP connections process ``pid`` holds to ``port`` (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            if int(fields[2].rpartition(":")[2], 16) == port and fields[9] in inodes:
                count += 1
    return count


def test_a_sigkilled_child_is_replaced_and_its_job_recovered(supervisors: WorkerProcesses) -> None:
    """Also: the supervisor holds no database connection, its children do; its first
    children are forks of it (its own command line), the one in the killed one's place
    a fresh interpreter (``--supervised``)."""
    sup = supervisors.start("--processes", "2", "--concurrency", "1", "--poll-interval", "0.5")
    first = children_of(sup, 2)
    assert all(_cmdline(pid) == _cmdline(sup.pid) for pid in first), "not forked"
    if connection.vendor == "postgresql":
        port = int(connection.settings_dict.get("PORT") or 5432)
        assert all(database_sockets(pid, port) >= 1 for pid in first), "each child connects"
        assert database_sockets(sup.pid, port) == 0, "the supervisor holds a connection"
    handle = tasks.short_lease_sleep.enqueue(seconds=120)
    run = wait_for(lambda: Execution.objects.filter(job_id=handle.id, run_no=1).first(), 30)
    assert run.pid in first

    os.kill(run.pid, signal.SIGKILL)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=30)
    now = children_of(sup, 2)
    assert run.pid not in now, "the killed child is not listed as running"
    assert len(now - first) == 1, "exactly one new child took the killed one's place"
    (replacement,) = now - first
    assert "--supervised" in _cmdline(replacement), "a restart is a fresh interpreter"
    stale, completed = journal_of(handle.id)
    assert (stale.outcome, completed.outcome) == ("stale-recovered", "completed")
    assert completed.worker != stale.worker
    assert "killed by SIGKILL" in sup.log()
    assert sup.alive()


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_a_sigkilled_child_has_its_jobs_back_at_once_and_is_listed_gone(
    supervisors: WorkerProcesses, pool: str
) -> None:
    """With a 5-minute lease, only the supervisor's recovery at once brings the job back
    within 2 s; on the process pool, the killed worker's pool child exits with it, so
    the job's next run never overlaps the first."""
    sup = supervisors.start("--processes", "2", "--concurrency", "1", "--pool", pool)
    first = children_of(sup, 2)
    handle = tasks.long_lease_sleep.enqueue(seconds=600)
    run = wait_for(lambda: Execution.objects.filter(job_id=handle.id).first(), 60)
    victim = run.pid if pool == "thread" else _parent(run.pid)
    assert victim in first

    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    # Its journal, not its status, says when it came back: the tests' backoff is 0, so
    # the other worker process may claim it again at once.
    recovered = wait_for(
        lambda: JournalEntry.objects.filter(job_id=handle.id, outcome="stale-recovered").first(),
        timeout=2,
    )
    assert recovered.run_no == 1
    assert "killed by SIGKILL" in recovered.note, recovered.note
    wait_for(
        lambda: WorkerHeartbeat.objects.filter(pid=victim, stopped_at__isnull=False).exists(),
        timeout=2,
    )
    wait_for(lambda: _parent(run.pid) is None, timeout=10)  # the run's process is gone
    again = wait_for(lambda: Execution.objects.filter(job_id=handle.id, run_no=2).first(), 60)
    assert again.pid != run.pid
    assert again.started_at > run.started_at
    assert Job.objects.get(id=handle.id).failure_count == 1
    assert sup.alive()


def test_children_recycled_after_their_quota_lose_no_job_and_run_none_twice(
    supervisors: WorkerProcesses,
) -> None:
    tasks.record.enqueue_many([{"n": i} for i in range(300)])
    sup = supervisors.start("--processes", "2", "--concurrency", "4", "--max-jobs-per-child", "100")
    wait_for(
        lambda: Job.objects.filter(status=Status.COMPLETED).count() == 300,
        timeout=120,
        interval=0.2,
    )
    runs = list(Execution.objects.values_list("job_id", "run_no", "pid"))
    assert len(runs) == 300
    assert len({job for job, _, _ in runs}) == 300, "a job ran twice"
    assert {run for _, run, _ in runs} == {1}
    pids = {pid for _, _, pid in runs}
    assert len(pids) >= 3, "300 jobs at 100 a child take at least three children"
    per_child = [sum(1 for *_, p in runs if p == pid) for pid in pids]
    assert max(per_child) <= 100
    assert not JournalEntry.objects.exclude(outcome="completed").exists()
    assert "ran its job quota" in sup.log()
    assert "restarting in 0.0s" in sup.log()


def test_sigterm_stops_every_child_gracefully_within_the_shutdown_timeout(
    supervisors: WorkerProcesses,
) -> None:
    sup = supervisors.start(
        "--processes", "2", "--concurrency", "1", "--shutdown-timeout", "2", "--poll-interval", "1"
    )
    pids = children_of(sup, 2)
    handles = [tasks.stubborn.enqueue(seconds=60) for _ in range(2)]
    wait_for(lambda: Execution.objects.count() == 2, timeout=30)
    assert set(Execution.objects.values_list("pid", flat=True)) == pids

    started = time.monotonic()
    sup.send(signal.SIGTERM)
    assert sup.wait(30) == 0
    took = time.monotonic() - started
    assert took < 2 + 8, f"the stop took {took:.1f}s: beyond the timeout and a few turns"
    for handle in handles:
        job = Job.objects.get(id=handle.id)
        assert job.status == Status.PENDING
        assert job.failure_count == 0
        [released] = journal_of(handle.id)
        assert released.outcome == "released"
    stopped = WorkerHeartbeat.objects.filter(pid__in=pids, stopped_at__isnull=False).count()
    assert stopped == 2, "each child wrote its stop to its heartbeat row"
    assert all(_parent(pid) is None for pid in pids), "no child outlived the supervisor"


def test_a_crash_loop_backs_off_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    sup = Supervisor(
        argv=[sys.executable, "-c", "import sys; sys.exit(7)"], count=1, shutdown_timeout=1
    )
    thread = threading.Thread(target=sup.run)
    with caplog.at_level("INFO", logger="django_jobqueue"):
        thread.start()
        time.sleep(3.2)
        sup.stop()
        thread.join(20)
    # Without a backoff it would restart every tenth of a second (30 times); with one
    # doubling from 0.5 s: after 0.5, 1.5 and 3.5 s.
    assert 1 <= sup.restarts <= 4
    assert "exited with status 7" in caplog.text
    assert "restarting in 1.0s" in caplog.text


def _state(pid: int) -> str | None:
    """A process's state letter from /proc (``T`` stopped, ``Z`` zombie), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def test_a_stopped_child_is_killed_and_replaced_and_its_job_completes(
    supervisors: WorkerProcesses,
) -> None:
    """A child alive to ``poll()`` but stopped (SIGSTOP) stops pinging its parent: after
    the liveness bound (a third of the lease: 5 s here) it is killed and replaced, and
    its job, recovered when its lease runs out, completes elsewhere."""
    sup = supervisors.start(
        "--processes",
        "2",
        "--concurrency",
        "1",
        "--poll-interval",
        "0.5",
        env={"JOBQUEUE_TEST_LEASE": "15"},
    )
    first = children_of(sup, 2)
    handle = tasks.short_lease_sleep.enqueue(seconds=120)
    run = wait_for(lambda: Execution.objects.filter(job_id=handle.id, run_no=1).first(), 30)
    assert run.pid in first

    os.kill(run.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _state(run.pid) in (None, "Z"), timeout=60, interval=0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(run.pid, signal.SIGCONT)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)

    def replaced() -> set[int] | None:
        pids = children_of(sup, 2)
        return pids if pids - first else None

    now: set[int] = wait_for(replaced, timeout=60)
    assert run.pid not in now, "the stopped child is no longer listed as running"
    assert "has not answered for" in sup.log()
    assert "killed by SIGKILL" in sup.log()
    stale, completed = journal_of(handle.id)
    assert (stale.outcome, completed.outcome) == ("stale-recovered", "completed")
    assert completed.worker != stale.worker
    assert sup.alive()
