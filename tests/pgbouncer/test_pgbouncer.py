"""Workers and enqueues through PgBouncer in transaction-pooling mode.

Behind it each transaction may run on another server session, and its pool here has
fewer sessions than there are clients. Anything that relied on session state (a
statement prepared on the server, a session ``SET``, a ``LISTEN``) would break: a
prepared statement missing on the next session is an error the worker logs and
retries, so the logs are checked as well as the outcome. Wake-ups LISTEN on the
direct connection ``LISTEN_DATABASE`` names, while NOTIFY goes through the pooler
with the enqueue's transaction.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

import pytest
from django.db import connections, transaction
from django.db.models import Count

from django_jobqueue import Status
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.store import sql
from tests.concurrency.procs import WorkerProcesses, database_url
from tests.helpers import SOFT_LIMIT_NOTICE, postgres_only, wait_for
from tests.pgbouncer.conftest import POOL_SIZE, PgBouncer
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [
    postgres_only,
    pytest.mark.django_db(transaction=True, databases=["default", "pooled"]),
]

JOBS = 300
WORKERS = 3

# What a worker logs when a database call failed and was retried (or worse).
TROUBLE = re.compile(r"WARNING|ERROR|Traceback|prepared statement", re.IGNORECASE)


@pytest.fixture
def workers(
    runworker: WorkerProcesses,
    pgbouncer: PgBouncer,
    pooled: str,
    monkeypatch: pytest.MonkeyPatch,
) -> WorkerProcesses:
    """``runworker`` children whose database is the pooler (tests/settings.py marks it
    pooled and adds the direct ``LISTEN_DATABASE`` when JOBQUEUE_TEST_LISTEN_URL is set)."""
    name = connections["default"].settings_dict["NAME"]
    runworker.database = pgbouncer.url(name)
    monkeypatch.setenv("JOBQUEUE_TEST_LISTEN_URL", database_url())
    return runworker


def assert_quiet(procs: WorkerProcesses) -> None:
    for proc in procs.started:
        trouble = [
            line
            for line in proc.log().splitlines()
            if TROUBLE.search(line) and SOFT_LIMIT_NOTICE not in line
        ]
        assert trouble == [], proc.describe()


def test_the_store_sees_the_pooled_alias_and_keeps_no_session_state(pooled: str) -> None:
    d = sql.dialect()
    assert d.conn.alias == pooled
    assert d.pooled
    assert not d.prepare


def test_workers_and_enqueues_through_pgbouncer_drain_every_job_once(
    workers: WorkerProcesses, pgbouncer: PgBouncer, pooled: str
) -> None:
    name = connections[pooled].settings_dict["NAME"]
    procs = workers.start_ready("--concurrency", "4", "--poll-interval", "30", count=WORKERS)
    # Enqueued through the pooler while the workers run: one at a time (the hot path,
    # over and over on one client, which would be prepared on the server after a few
    # runs) and several in one transaction.
    ids = {tasks.record.enqueue(n=i).id for i in range(JOBS - 50)}
    with transaction.atomic(using=pooled):
        ids |= {tasks.record.enqueue(n=i).id for i in range(JOBS - 50, JOBS)}
    assert len(ids) == JOBS

    most_clients = most_servers = 0
    deadline = time.monotonic() + 45
    while Job.objects.filter(id__in=ids, status=Status.COMPLETED).count() < JOBS:
        clients, servers = pgbouncer.sessions(name)
        most_clients = max(most_clients, clients)
        most_servers = max(most_servers, servers)
        assert time.monotonic() < deadline, workers.describe()
        time.sleep(0.05)
    for proc in procs:
        assert proc.alive(), proc.describe()
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()

    # The clients (each worker's loop and job threads, and this test) really shared
    # the pool's few server sessions.
    assert most_servers <= POOL_SIZE, pgbouncer.log()
    assert most_clients > POOL_SIZE, f"clients {most_clients}, servers {most_servers}"

    jobs = Job.objects.filter(id__in=ids)
    assert jobs.count() == JOBS
    assert set(jobs.values_list("status", flat=True)) == {Status.COMPLETED}
    assert set(jobs.values_list("run_count", flat=True)) == {1}
    assert sorted(int(r) for r in jobs.values_list("result", flat=True)) == list(range(JOBS))
    per_job = Counter(
        dict(JournalEntry.objects.values_list("job_id").annotate(n=Count("id")).order_by())
    )
    assert set(per_job) == ids
    assert set(per_job.values()) == {1}
    assert set(JournalEntry.objects.values_list("outcome", flat=True)) == {"completed"}
    ran = Counter(Execution.objects.values_list("job_id", flat=True))
    assert set(ran) == ids
    assert set(ran.values()) == {1}
    assert len(set(Execution.objects.values_list("pid", flat=True))) > 1
    assert_quiet(workers)


def test_an_idle_worker_behind_pgbouncer_is_woken_by_notify_not_its_poll(
    workers: WorkerProcesses, pooled: str
) -> None:
    # It LISTENs on the direct alias, on a connection of its own (its loop's goes through
    # the pooler, which would lend the session to others): start_ready waits for it.
    [proc] = workers.start_ready("--concurrency", "2", "--poll-interval", "30")
    assert "listening for new jobs on a connection of its own to 'direct'" in proc.log()
    warm_up = tasks.record.enqueue(n=0)
    wait_for(lambda: Job.objects.get(id=warm_up.id).status == Status.COMPLETED, timeout=10)
    time.sleep(0.5)  # idle now: nothing running, nothing scheduled, 30 s to its next poll

    fresh = tasks.record.enqueue(n=1)  # its NOTIFY goes through the pooler, on commit
    run = wait_for(lambda: Execution.objects.filter(job_id=fresh.id).first(), timeout=10)
    latency = (run.started_at - fresh.job.created_at).total_seconds()
    assert 0 <= latency < 5, f"started {latency:.3f}s after enqueue\n{proc.describe()}"
    wait_for(lambda: Job.objects.get(id=fresh.id).status == Status.COMPLETED, timeout=10)

    assert proc.alive(), proc.describe()
    proc.send(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.describe()
    assert_quiet(workers)
    print(f"NOTIFY through PgBouncer: started {latency:.3f}s after enqueue")
