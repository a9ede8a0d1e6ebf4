"""Periodic schedules against the database: each tick enqueued exactly once however
many callers race for it (threads, each its own connection), never again after its job
finished, missed ticks skipped or the last one caught up, a worker running its
schedules, the ``jobqueue schedules`` command, and the system check."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.checks.registry import registry
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings

from django_jobqueue import Status, periodic, store, task
from django_jobqueue.checks import check_periodic_schedules
from django_jobqueue.models import Job, Schedule
from django_jobqueue.task.periodic import ScheduleDef
from django_jobqueue.task.registry import Registry
from django_jobqueue.worker.loop import Worker
from django_jobqueue.worker.services.scheduler import Scheduler
from tests.helpers import WorkerThread, wait_for

pytestmark = [pytest.mark.sqlite]

S = timedelta(seconds=1)
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def every_minute(task_registry: Registry) -> ScheduleDef:
    @task(kind="tests.periodic.beat")
    def beat(label: str = "") -> str:
        return label

    return periodic(beat, "* * * * *", kwargs={"label": "x"}, timezone="UTC")


def direct(call: Callable[[], Any]) -> Any:
    """The scheduler's database call without the worker's guard."""
    return call()


def scheduler(schedule: ScheduleDef, now: datetime) -> Scheduler:
    return Scheduler(direct, interval=1.0, schedules=[schedule], clock=lambda: now)


def jobs_of(schedule: ScheduleDef) -> list[Job]:
    return list(Job.objects.filter(kind=schedule.kind).order_by("created_at"))


def race(callers: int, call: Callable[[], Any]) -> list[Any]:
    """Run ``call`` on ``callers`` threads released at once; their results."""
    barrier = threading.Barrier(callers)
    results: list[Any] = [None] * callers
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = call()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    return results


@pytest.mark.django_db(transaction=True)
def test_one_tick_raced_by_eight_callers_is_enqueued_exactly_once(
    every_minute: ScheduleDef,
) -> None:
    results = race(
        8,
        lambda: store.record_tick(
            name=every_minute.name, tick=T0, request=every_minute.request(T0)
        ),
    )
    winners = [r for r in results if r.job_id is not None]
    assert len(winners) == 1
    (job,) = jobs_of(every_minute)
    assert job.id == winners[0].job_id
    assert job.payload == {"label": "x"}
    assert job.idempotency_key == f"periodic:{every_minute.name}:2026-03-02T12:00:00Z"
    assert all(r.state.last_tick == T0 and r.state.last_job_id == job.id for r in results)


@pytest.mark.django_db(transaction=True)
def test_schedulers_of_eight_workers_racing_over_three_ticks_enqueue_one_job_each(
    every_minute: ScheduleDef,
) -> None:
    for minute in range(3):
        now = T0 + timedelta(minutes=minute, seconds=1)
        pool: Iterator[Scheduler] = iter([scheduler(every_minute, now) for _ in range(8)])
        lock = threading.Lock()

        def run_one(pool: Iterator[Scheduler] = pool, lock: threading.Lock = lock) -> None:
            with lock:
                s = next(pool)
            s.run()

        race(8, run_one)
    ticks = [job.idempotency_key for job in jobs_of(every_minute)]
    assert sorted(ticks) == [
        f"periodic:{every_minute.name}:2026-03-02T12:0{m}:00Z" for m in range(3)
    ]


@pytest.mark.django_db
def test_a_late_caller_does_not_enqueue_a_tick_again_after_its_job_finished(
    every_minute: ScheduleDef,
) -> None:
    first = store.record_tick(name=every_minute.name, tick=T0, request=every_minute.request(T0))
    assert first.job_id is not None
    # Finished: the idempotency key alone would no longer stop a second job.
    Job.objects.filter(id=first.job_id).update(status=Status.COMPLETED, finished_at=T0)
    again = store.record_tick(name=every_minute.name, tick=T0, request=every_minute.request(T0))
    older = store.record_tick(
        name=every_minute.name, tick=T0 - S * 60, request=every_minute.request(T0 - S * 60)
    )
    assert again.job_id is None
    assert older.job_id is None
    assert len(jobs_of(every_minute)) == 1


@pytest.mark.django_db
def test_a_tick_whose_enqueue_fails_is_not_recorded_so_it_can_be_done_again(
    every_minute: ScheduleDef,
) -> None:
    """The compare-and-set and the enqueue are one transaction: a failed enqueue (as a
    worker killed mid-tick) leaves the tick to the next caller."""
    request = every_minute.request(T0)
    broken = dataclasses.replace(request, priority=7)  # refused by the CHECK constraint
    with pytest.raises(Exception, match="priority"):
        store.record_tick(name=every_minute.name, tick=T0, request=broken)
    assert not Schedule.objects.filter(name=every_minute.name, last_tick__isnull=False).exists()
    assert jobs_of(every_minute) == []
    done = store.record_tick(name=every_minute.name, tick=T0, request=request)
    assert done.job_id is not None
    assert len(jobs_of(every_minute)) == 1


@pytest.mark.django_db
def test_missed_ticks_are_skipped_and_the_schedule_runs_again_at_its_next_tick(
    every_minute: ScheduleDef,
) -> None:
    Schedule.objects.create(
        name=every_minute.name,
        created_at=T0 - timedelta(hours=3),
        last_tick=T0 - timedelta(hours=2),
    )
    back = T0 + 30 * S  # no worker ran for two hours: every tick since was missed
    s = scheduler(every_minute, back)
    s.run()
    assert jobs_of(every_minute) == []
    assert Schedule.objects.get(name=every_minute.name).last_tick == T0 - timedelta(hours=2)
    s.clock = lambda: T0 + 61 * S  # the next tick, seen on time
    s.run()
    (job,) = jobs_of(every_minute)
    assert job.idempotency_key == f"periodic:{every_minute.name}:2026-03-02T12:01:00Z"


@pytest.mark.django_db
def test_catch_up_enqueues_only_the_last_missed_tick(task_registry: Registry) -> None:
    @task(kind="tests.periodic.nightly")
    def nightly() -> None:
        return None

    schedule = periodic(nightly, "0 3 * * *", timezone="UTC", catch_up=True)
    Schedule.objects.create(
        name=schedule.name,
        created_at=T0 - timedelta(days=10),
        last_tick=T0 - timedelta(days=5, hours=9),  # the 03:00 run five days ago
    )
    s = scheduler(schedule, T0)  # 12:00: four nightly ticks missed, the last today 03:00
    s.run()
    s.run()
    (job,) = jobs_of(schedule)
    assert job.idempotency_key == f"periodic:{schedule.name}:2026-03-02T03:00:00Z"
    assert Schedule.objects.get(name=schedule.name).last_tick == T0 - timedelta(hours=9)


@pytest.mark.django_db
def test_a_new_schedule_does_not_catch_up_ticks_from_before_it_existed(
    task_registry: Registry,
) -> None:
    @task(kind="tests.periodic.fresh")
    def fresh() -> None:
        return None

    schedule = periodic(fresh, "0 3 * * *", timezone="UTC", catch_up=True)
    scheduler(schedule, T0).run()
    assert jobs_of(schedule) == []
    assert Schedule.objects.get(name=schedule.name).created_at is not None


@pytest.mark.django_db
def test_a_schedule_that_cannot_be_enqueued_is_logged_and_the_worker_goes_on(
    every_minute: ScheduleDef, caplog: pytest.LogCaptureFixture
) -> None:
    with override_settings(JOBQUEUE={"MAX_PAYLOAD_BYTES": 5}):
        scheduler(every_minute, T0 + S).run()
    assert jobs_of(every_minute) == []
    assert "schedule tests.periodic.beat: could not enqueue its tick" in caplog.text
    assert "MAX_PAYLOAD_BYTES" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_its_schedules_and_the_jobs_they_enqueue(task_registry: Registry) -> None:
    @task(kind="tests.periodic.second")
    def second() -> str:
        return "tick"

    periodic(second, "* * * * * *")  # every second
    worker = WorkerThread(poll_interval=5).start()
    try:
        wait_for(
            lambda: (
                Job.objects.filter(kind="tests.periodic.second", status="completed").count() >= 2
            ),
            timeout=15,
        )
    finally:
        worker.stop()
    keys = list(Job.objects.values_list("idempotency_key", flat=True))
    assert len(keys) == len(set(keys))


@pytest.mark.django_db
def test_a_worker_without_schedules_runs_no_scheduler(task_registry: Registry) -> None:
    assert "schedules" not in [s.name for s in Worker()._maintenance.services]

    @task(kind="tests.periodic.hourly", cron="@hourly")
    def hourly() -> None:
        return None

    assert "schedules" in [s.name for s in Worker()._maintenance.services]


@pytest.mark.django_db
def test_the_schedules_command_lists_next_run_last_tick_and_its_job(
    every_minute: ScheduleDef,
) -> None:
    out = StringIO()
    call_command("jobqueue", "schedules", stdout=out)
    text = out.getvalue()
    header, row = text.splitlines()
    assert header.split() == [
        "NAME",
        "KIND",
        "CRON",
        "TIMEZONE",
        "NEXT",
        "RUN",
        "LAST",
        "TICK",
        "LAST",
        "JOB",
    ]
    assert row.startswith("tests.periodic.beat  tests.periodic.beat  * * * * *  UTC")
    assert row.rstrip().endswith(" -")
    done = store.record_tick(name=every_minute.name, tick=T0, request=every_minute.request(T0))
    out = StringIO()
    call_command("jobqueue", "schedules", stdout=out)
    assert f"{done.job_id} (pending)" in out.getvalue()
    assert "2026-03-02" in out.getvalue()


@pytest.mark.django_db
def test_the_schedules_command_without_schedules_and_with_a_bad_setting(
    task_registry: Registry,
) -> None:
    out = StringIO()
    call_command("jobqueue", "schedules", stdout=out)
    assert out.getvalue().strip() == "No periodic schedules."
    with (
        override_settings(JOBQUEUE={"PERIODIC": [{"kind": "no.such", "cron": "@daily"}]}),
        pytest.raises(CommandError, match=r"PERIODIC\[0\] \('no.such'\)"),
    ):
        call_command("jobqueue", "schedules", stdout=StringIO())


def test_the_system_check_reports_a_periodic_setting_naming_an_unknown_kind(
    task_registry: Registry,
) -> None:
    assert check_periodic_schedules in registry.get_checks()
    assert check_periodic_schedules() == []
    with override_settings(JOBQUEUE={"PERIODIC": [{"kind": "no.such", "cron": "@daily"}]}):
        (message,) = check_periodic_schedules()
    assert message.id == "django_jobqueue.E005"
    assert "PERIODIC[0] ('no.such'): No task is registered under kind 'no.such'" in message.msg
