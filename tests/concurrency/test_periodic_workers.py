"""Periodic jobs with real workers: four ``runworker`` processes run the same schedule,
and each tick becomes exactly one job, never two, none lost; the worker caught inside
a tick's transaction is SIGKILLed there, and another one does that tick.

The short form (CI) runs a schedule of every second for about 20 seconds. The long
form, ``JOBQUEUE_LONG_TESTS=1``, is the acceptance run: ``* * * * *`` for three
minutes. A trigger on the jobs table makes the Nth insert of a schedule's job sleep
inside its transaction (the job row written, the schedule's row advanced, nothing
committed), so the test knows which worker is mid-tick, and kills it there.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from django_jobqueue.models import Job
from django_jobqueue.rules.cron import Cron
from tests.concurrency.procs import WorkerProcesses, server_now
from tests.helpers import postgres_only, wait_for

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

LONG = os.environ.get("JOBQUEUE_LONG_TESTS") == "1"
NAME = "acceptance"
if LONG:
    CRON, PERIOD, RUN_FOR, STALL_AT = "* * * * *", 60.0, 180.0, 2
else:
    CRON, PERIOD, RUN_FOR, STALL_AT = "* * * * * *", 1.0, 20.0, 3
STALL_SECONDS = 4
APP = "jq-periodic-"

STALL_SQL = f"""
CREATE TABLE jq_test_stall (armed boolean NOT NULL);
INSERT INTO jq_test_stall VALUES (false);
CREATE SEQUENCE jq_test_tick_inserts;
CREATE FUNCTION jq_test_stall_tick() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT armed FROM jq_test_stall) AND nextval('jq_test_tick_inserts') = {STALL_AT} THEN
        PERFORM pg_sleep({STALL_SECONDS});
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER jq_test_stall_tick AFTER INSERT ON django_jobqueue_job FOR EACH ROW
    WHEN (NEW.idempotency_key LIKE 'periodic:{NAME}:%')
    EXECUTE FUNCTION jq_test_stall_tick();
"""
UNSTALL_SQL = """
DROP TRIGGER IF EXISTS jq_test_stall_tick ON django_jobqueue_job;
DROP FUNCTION IF EXISTS jq_test_stall_tick();
DROP SEQUENCE IF EXISTS jq_test_tick_inserts;
DROP TABLE IF EXISTS jq_test_stall;
"""


@pytest.fixture
def stalled_tick() -> Iterator[None]:
    """Once armed, the STALL_AT-th insert of the schedule's job sleeps inside its
    transaction (counted by a sequence, which a rollback does not undo: once only)."""
    with connections["default"].cursor() as cursor:
        cursor.execute(UNSTALL_SQL)
        cursor.execute(STALL_SQL)
    try:
        yield
    finally:
        with connections["default"].cursor() as cursor:
            cursor.execute(UNSTALL_SQL)


def sleeping_in_a_tick() -> str | None:
    """The application name of the worker whose tick transaction sleeps in the trigger."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event = 'PgSleep' AND application_name LIKE %s",
            [APP + "%"],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def ticks_enqueued() -> list[datetime]:
    keys = Job.objects.filter(idempotency_key__startswith=f"periodic:{NAME}:").values_list(
        "idempotency_key", flat=True
    )
    prefix = len(f"periodic:{NAME}:")
    return sorted(
        datetime.strptime(k[prefix:], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) for k in keys
    )


def test_four_workers_enqueue_each_tick_once_and_a_worker_killed_mid_tick_loses_none(
    runworker: WorkerProcesses, stalled_tick: None
) -> None:
    schedule = [{"kind": "tests.taskapp.tasks.noop", "cron": CRON, "name": NAME}]
    env = {"JOBQUEUE_TEST_PERIODIC": json.dumps(schedule)}
    workers = {
        f"{APP}{i}": runworker.start("--concurrency", "2", env={**env, "PGAPPNAME": f"{APP}{i}"})
        for i in range(4)
    }
    for proc in workers.values():
        proc.wait_registered()
    started = server_now()
    began = time.monotonic()
    with connections["default"].cursor() as cursor:
        cursor.execute("UPDATE jq_test_stall SET armed = true")

    # The STALL_AT-th tick from now sleeps in its transaction: kill its worker there.
    stalled = wait_for(sleeping_in_a_tick, timeout=STALL_AT * PERIOD + 30, interval=0.02)
    victim = workers[stalled]
    victim.send(signal.SIGKILL)
    assert victim.wait(10) == -signal.SIGKILL
    killed_at = server_now()

    time.sleep(max(RUN_FOR - (time.monotonic() - began), 0))
    stopped = server_now()
    for proc in workers.values():
        if proc.alive():
            proc.send(signal.SIGTERM)
    for proc in workers.values():
        proc.wait(30)
    assert [p.popen.returncode for p in workers.values() if p is not victim] == [0, 0, 0], (
        runworker.describe()
    )

    ticks = ticks_enqueued()
    # Never two jobs for one tick.
    assert len(ticks) == len(set(ticks)), runworker.describe()
    # None lost: every tick of the schedule between the first and the last, the one the
    # killed worker was enqueueing included, has its job.
    cron = Cron(CRON)
    expected = [ticks[0], *cron.ticks(after=ticks[0], until=ticks[-1])]
    assert ticks == expected, runworker.describe()
    # And the run covered the time the workers ran, but for the boundaries.
    assert ticks[0] <= started + timedelta(seconds=PERIOD)
    assert ticks[-1] >= stopped - timedelta(seconds=2 * PERIOD)
    # The tick the killed worker was enqueueing has its job, enqueued by another worker.
    assert cron.latest(killed_at) in ticks
    print(  # the long form's numbers, for the record (pytest -s)
        f"\nperiodic acceptance: cron {CRON!r}, 4 workers from {started:%H:%M:%S} for "
        f"{stopped - started}, "
        f"{len(ticks)} ticks enqueued once each ({ticks[0]:%H:%M:%S} to {ticks[-1]:%H:%M:%S}), "
        f"worker {victim.pid} killed mid-tick at {killed_at:%H:%M:%S.%f}"
    )
