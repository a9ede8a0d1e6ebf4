"""``runworker --pool process``: real workers whose slots run their jobs in children.

A runaway task is stopped at its hard limit by killing its child (its soft limit raised
inside it first), and the slot runs the next job in a new child; a child killed under a
run is seen at once and its job recovered within a second or two, whatever its lease.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from django.db import connection

import django_jobqueue
from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import is_postgres, journal_of, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Effect, Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # reaped between the two looks
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def _recovery(job_id: object) -> JournalEntry | None:
    return JournalEntry.objects.filter(job_id=job_id, outcome="stale-recovered").first()


def test_a_runaway_task_is_killed_at_its_time_limit_after_its_soft_limit_and_the_slot_goes_on(
    runworker: WorkerProcesses, tmp_path: Path
) -> None:
    marker = tmp_path / "soft-limit-raised"
    runaway = tasks.runaway.enqueue(marker=str(marker))
    [worker] = runworker.start_ready("--pool", "process", "--concurrency", "1")
    run = wait_for(lambda: Execution.objects.filter(job_id=runaway.id).first(), timeout=60)
    assert run.pid != worker.pid, "the task ran in the worker process, not in a child"

    wait_for(lambda: Job.objects.get(id=runaway.id).status == Status.DEAD, timeout=30)
    [dead] = journal_of(runaway.id)
    # From the run's start (its own row, written first thing) to its settlement's write.
    settled_after = (dead.recorded_at - run.started_at).total_seconds()
    assert settled_after < 3, f"settled {settled_after:.1f}s after the run started"
    assert "time_limit" in dead.note, dead.note
    assert f"child (pid {run.pid}) killed" in dead.note, dead.note
    assert marker.read_text() == str(run.pid), "the soft limit was not raised inside the task"
    wait_for(lambda: _gone(run.pid), timeout=10)

    after = tasks.record.enqueue(n=1)
    wait_for(lambda: Job.objects.get(id=after.id).status == Status.COMPLETED, timeout=60)
    [next_run] = Execution.objects.filter(job_id=after.id)
    assert next_run.pid not in (run.pid, worker.pid), "the next job ran in a new child"
    assert worker.alive()


def test_a_killed_pool_child_has_its_job_recovered_at_once(runworker: WorkerProcesses) -> None:
    [worker] = runworker.start_ready("--pool", "process", "--concurrency", "2")
    handle = tasks.long_lease_sleep.enqueue(seconds=600)
    run = wait_for(lambda: Execution.objects.filter(job_id=handle.id).first(), timeout=60)
    assert run.pid != worker.pid

    os.kill(run.pid, signal.SIGKILL)
    # The tests' backoff is 0: pending again at once, the job may be claimed again at
    # once too, so its journal, not its status, says when it came back.
    recovered = wait_for(lambda: _recovery(handle.id), timeout=2)
    assert recovered.run_no == 1
    assert f"child (pid {run.pid}) killed by SIGKILL" in recovered.note, recovered.note
    again = wait_for(lambda: Execution.objects.filter(job_id=handle.id, run_no=2).first(), 60)
    assert again.pid not in (run.pid, worker.pid), "it ran again in a new child"
    assert Job.objects.get(id=handle.id).failure_count == 1
    assert worker.alive()


def test_children_are_recycled_after_their_task_quota_and_past_their_memory_bound(
    runworker: WorkerProcesses,
) -> None:
    handles = tasks.record.enqueue_many([{"n": i} for i in range(7)])
    first = runworker.start("--pool", "process", "--concurrency", "1", "--max-tasks-per-child", "3")
    wait_for(
        lambda: Job.objects.filter(status=Status.COMPLETED).count() == len(handles), timeout=120
    )
    runs = list(Execution.objects.order_by("started_at").values_list("job_id", "pid"))
    assert len({job for job, _ in runs}) == len(runs) == 7, "a job ran twice or not at all"
    per_child = [sum(1 for _, p in runs if p == pid) for pid in dict.fromkeys(p for _, p in runs)]
    assert per_child == [3, 3, 1]
    first.send(signal.SIGTERM)
    assert first.wait(60) == 0

    Execution.objects.all().delete()
    more = tasks.record.enqueue_many([{"n": i} for i in range(3)])
    runworker.start("--pool", "process", "--concurrency", "1", "--max-memory-per-child", "1")
    ids = [h.id for h in more]
    wait_for(
        lambda: Job.objects.filter(id__in=ids, status=Status.COMPLETED).count() == 3, timeout=120
    )
    pids = list(Execution.objects.filter(job_id__in=ids).values_list("pid", flat=True))
    assert len(set(pids)) == 3, "a child over 1 MiB is replaced after each run"


def test_progress_and_a_cancel_cross_between_the_worker_and_its_child(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--pool", "process", "--concurrency", "1")
    handle = tasks.reports_progress.enqueue(steps=1000, step_seconds=0.2)
    wait_for(lambda: (Job.objects.get(id=handle.id).progress_done or 0) >= 3, timeout=60)
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.CLAIMED
    assert job.progress_total == 1000

    # Its 1,000 steps take 200 s; the cancel, reaching ctx.cancelled in the child, ends
    # its loop at the next step (a run that returns completes, asked to stop or not).
    django_jobqueue.cancel(handle.id)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=30)


@pytest.mark.skipif(
    not is_postgres(), reason="sees the child's open transaction in pg_stat_activity"
)
def test_an_atomic_task_settles_in_its_child_and_a_killed_child_leaves_nothing(
    runworker: WorkerProcesses,
) -> None:
    [worker] = runworker.start_ready("--pool", "process", "--concurrency", "1")
    plain = tasks.atomic_effect.enqueue()
    wait_for(lambda: Job.objects.get(id=plain.id).status == Status.COMPLETED, timeout=60)
    [effect] = Effect.objects.filter(job_id=plain.id)
    assert effect.worker == worker.worker_id, "the child wrote under the worker's claim"
    assert [e.outcome for e in journal_of(plain.id)] == ["completed"]

    held = tasks.atomic_effect.enqueue(write_first=True, hold=600)
    wait_for(_a_write_held_open, timeout=60)
    [child] = _pool_children(worker.pid)
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: _recovery(held.id), timeout=2)
    assert not Effect.objects.filter(job_id=held.id).exists(), "its write was rolled back"


def _pool_children(worker: int) -> list[int]:
    """The worker's process-pool children (started by its slot threads, so listed under
    their tasks; multiprocessing's resource tracker is left out)."""
    found = []
    for task in Path(f"/proc/{worker}/task").iterdir():
        for pid in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                found.append(int(pid))
    return found


def _a_write_held_open() -> bool:
    """Whether another session holds a transaction that wrote and waits (the child's)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND state = 'idle in transaction'"
            " AND backend_xid IS NOT NULL"
        )
        row = cursor.fetchone()
    return bool(row and row[0] == 1)
