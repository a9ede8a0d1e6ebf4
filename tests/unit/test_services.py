"""The worker's maintenance services below the database: what each asks the store for,
and what it does with the answer, and when ``Maintenance`` runs them.

Each service takes its database calls as one callable (the worker's guarded call,
``db``). Here that callable is ``Db``: it records every call it is handed (the store
function and its arguments, without running it) and answers with what the test set
for that function; ``None`` answers as the worker's guard does after a lost
connection. The store functions themselves are tested on real databases in tests/db.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from django_jobqueue import store
from django_jobqueue.rules.lifecycle import Policy
from django_jobqueue.run.context import Context
from django_jobqueue.store import ScheduleState
from django_jobqueue.store.dialects.base.partitions import JournalLayout
from django_jobqueue.store.schedules import TickResult
from django_jobqueue.task import limiting
from django_jobqueue.task.periodic import ScheduleDef
from django_jobqueue.worker.services.base import MIN_WAIT, Maintenance, Running, Service, Timings
from django_jobqueue.worker.services.cancels import CancelChecks
from django_jobqueue.worker.services.heartbeat import Heartbeat
from django_jobqueue.worker.services.leases import LeaseExtension
from django_jobqueue.worker.services.limits import LimitRefresh
from django_jobqueue.worker.services.partitions import Partitions
from django_jobqueue.worker.services.recovery import Recovery
from django_jobqueue.worker.services.retention import Retention
from django_jobqueue.worker.services.scheduler import Scheduler
from django_jobqueue.worker.services.timeouts import Timeouts
from tests.helpers import claimed
from tests.taskapp import tasks

NOW = datetime(2026, 3, 2, 12, 0, 3, tzinfo=UTC)  # three seconds past a minute's tick
MINUTE = timedelta(minutes=1)


class Db:
    """The worker's guarded database call, recording instead of reaching a database."""

    def __init__(self, answers: dict[Callable[..., Any], Any] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[partial[Any]] = []

    def __call__(self, call: Callable[[], Any]) -> Any:
        assert isinstance(call, partial), call  # services hand over a store call, unrun
        self.calls.append(call)
        answer = self.answers.get(call.func)
        return answer(*call.args, **call.keywords) if callable(answer) else answer

    def to(self, func: Callable[..., Any]) -> list[dict[str, Any]]:
        """The keyword arguments of each call made to ``func``, in order."""
        return [dict(c.keywords) for c in self.calls if c.func is func]


def running(*, lease: timedelta = MINUTE, left: timedelta = MINUTE, run_count: int = 1) -> Running:
    """A run in flight whose lease (``lease`` long) has ``left`` to go."""
    now = datetime.now(UTC)
    job = claimed(tasks.add.kind, at=now, lease=left, run_count=run_count, claimed_by="w:1")
    ctx = Context(job_id=job.id, kind=job.kind, run_count=run_count, failure_count=0)
    return Running(job=job, ctx=ctx, lease=lease, expires_at=now + left)


def by_id(*runs: Running) -> dict[uuid.UUID, Running]:
    return {r.job.id: r for r in runs}


# --- Maintenance: when each service runs ------------------------------------------------


class Counting(Service):
    """A service that counts its runs and asks to wake as told."""

    def __init__(self, name: str, interval: float, wake: float | None = 0.0) -> None:
        self.name = name
        self.interval = interval
        self.runs = 0
        self.wake = wake

    def run(self) -> None:
        self.runs += 1

    def wake_in(self, since_run: float) -> float | None:
        return None if self.wake is None else super().wake_in(since_run)


def test_maintenance_runs_every_service_at_first_then_each_when_its_interval_has_passed() -> None:
    often, seldom = Counting("often", 0.0), Counting("seldom", 3600.0)
    maintenance = Maintenance([often, seldom])
    maintenance.run_due()
    maintenance.run_due()
    maintenance.run_due()
    assert (often.runs, seldom.runs) == (3, 1)


def test_maintenance_wakes_for_the_soonest_service_but_never_sooner_than_min_wait() -> None:
    seldom, silent = Counting("seldom", 3600.0), Counting("silent", 1.0, wake=None)
    maintenance = Maintenance([seldom, silent])
    maintenance.run_due()
    assert 3599 < maintenance.wake_in() <= 3600  # the silent one never asks
    assert Maintenance([Counting("every-turn", 0.0)]).wake_in() == MIN_WAIT
    assert Maintenance([silent]).wake_in() == float("inf")


def test_timings_take_the_retention_interval_from_the_settings() -> None:
    from django_jobqueue import conf

    settings = conf.get()
    assert Timings.from_settings(settings).retention == settings.retention_interval.total_seconds()


# --- Recovery ----------------------------------------------------------------------------


def policy_for(kind: str) -> Policy:
    raise AssertionError("handed to the store, never called by the service")


def test_recovery_sweeps_with_the_workers_failure_policy() -> None:
    db = Db({store.recover_expired: 2})
    Recovery(db, interval=1.0, policy_for=policy_for, running={}).run()
    assert db.to(store.recover_expired) == [{"policy_for": policy_for}]


def test_recovery_wakes_on_its_interval_while_running_and_for_the_next_expiry_when_idle() -> None:
    busy = Recovery(Db(), interval=1.0, policy_for=policy_for, running=by_id(running()))
    assert busy.wake_in(0.25) == 0.75
    idle = Recovery(Db(), interval=1.0, policy_for=policy_for, running={})
    assert idle.wake_in(0.25) is None  # no lease anywhere: nothing can expire
    idle.next_expiry = datetime.now(UTC) + timedelta(seconds=30)
    assert 29 < (idle.wake_in(0.25) or 0) <= 30
    idle.next_expiry = datetime.now(UTC) - timedelta(seconds=30)  # another worker's to sweep
    assert idle.wake_in(0.25) == 0.75  # not at once: no spinning on it


# --- Lease extension ----------------------------------------------------------------------


def test_leases_are_extended_once_a_third_is_used_grouped_by_lease_and_guarded_by_run() -> None:
    fresh = running(lease=MINUTE, left=timedelta(seconds=55))
    due = running(lease=MINUTE, left=timedelta(seconds=30), run_count=3)
    long_due = running(lease=10 * MINUTE, left=MINUTE)
    db = Db({store.extend_leases: 1})
    service = LeaseExtension(db, interval=0.0, worker_id="w:1", running=by_id(fresh, due, long_due))
    before = datetime.now(UTC)
    service.run()
    calls = db.to(store.extend_leases)
    assert [c["runs"] for c in calls] == [{due.job.id: 3}, {long_due.job.id: 1}]
    assert {c["worker_id"] for c in calls} == {"w:1"}
    assert before + MINUTE <= calls[0]["until"] <= datetime.now(UTC) + MINUTE
    assert calls[1]["until"] - calls[0]["until"] == 9 * MINUTE
    assert (due.expires_at, long_due.expires_at) == (calls[0]["until"], calls[1]["until"])
    assert fresh.expires_at < before + MINUTE  # untouched


def test_a_lease_extension_lost_with_the_connection_keeps_the_old_expiry() -> None:
    due = running(left=timedelta(seconds=10))
    expires_at = due.expires_at
    db = Db({store.extend_leases: None})
    LeaseExtension(db, interval=0.0, worker_id="w:1", running=by_id(due)).run()
    assert len(db.calls) == 1
    assert due.expires_at == expires_at  # so the next turn tries again


def test_leases_wake_the_worker_when_the_first_third_of_a_lease_is_used() -> None:
    service = LeaseExtension(Db(), interval=0.0, worker_id="w:1", running={})
    assert service.wake_in(0.0) is None
    service.running = by_id(running(left=timedelta(seconds=50)), running(left=MINUTE))
    assert 9 < (service.wake_in(0.0) or 0) <= 10


# --- Timeouts -----------------------------------------------------------------------------


def test_timeouts_give_up_on_runs_past_their_deadline_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = time.monotonic()
    late, on_time, ended = running(), running(), running()
    late.deadline, on_time.deadline, ended.deadline = now - 1, now + 60, now - 1
    ended.ended = True
    given_up: list[Running] = []
    books = by_id(late, on_time, ended)
    service = Timeouts(interval=0.0, running=books, on_timeout=given_up.append)
    service.run()
    assert given_up == [late]
    assert not caplog.records  # no atomic run to warn of
    del books[late.job.id]  # on_timeout's caller takes it off the books
    assert 59 < (service.wake_in(0.0) or 0) <= 60  # the one still on time


def test_an_atomic_run_holding_its_transaction_too_long_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    long = running()
    long.warn_at = time.monotonic() - 0.1
    service = Timeouts(
        interval=0.0,
        running=by_id(long),
        on_timeout=lambda r: pytest.fail("no deadline"),
        atomic_warn_after=timedelta(seconds=5),
    )
    with caplog.at_level(logging.WARNING, logger="django_jobqueue"):
        service.run()
        service.run()
    [record] = caplog.records
    assert str(long.job.id) in record.getMessage()
    assert "ATOMIC_WARN_AFTER" in record.getMessage()
    assert long.warn_at is None
    assert service.wake_in(0.0) is None  # nothing left to watch


# --- Cancels ------------------------------------------------------------------------------


def test_cancel_checks_ask_only_while_running_and_set_the_cancel_event_of_each_asked() -> None:
    a, b = running(), running()
    db = Db({store.cancel_requested: {b.job.id, uuid.uuid4()}})  # and one no longer here
    CancelChecks(db, interval=1.0, running={}).run()
    assert db.calls == []
    service = CancelChecks(db, interval=1.0, running=by_id(a, b))
    service.run()
    assert db.to(store.cancel_requested) == [{"job_ids": [a.job.id, b.job.id]}]
    assert (a.ctx.cancelled.is_set(), b.ctx.cancelled.is_set()) == (False, True)
    assert service.wake_in(0.4) == pytest.approx(0.6)
    assert CancelChecks(db, interval=1.0, running={}).wake_in(0.4) is None


def test_cancel_checks_lost_with_the_connection_cancel_nothing() -> None:
    a = running()
    CancelChecks(Db({store.cancel_requested: None}), interval=1.0, running=by_id(a)).run()
    assert not a.ctx.cancelled.is_set()


# --- Heartbeat and retention ------------------------------------------------------------


def test_the_heartbeat_reports_the_jobs_done_at_the_time_it_beats() -> None:
    done = [0]
    db = Db()
    heartbeat = Heartbeat(db, interval=10.0, worker_id="w:1", jobs_done=lambda: done[0])
    heartbeat.run()
    done[0] = 7
    heartbeat.run()
    assert db.to(store.beat) == [
        {"worker_id": "w:1", "jobs_done": 0},
        {"worker_id": "w:1", "jobs_done": 7},
    ]


def test_retention_prunes_each_status_past_its_own_retention() -> None:
    db = Db({store.cleanup: 0})
    keep = {"completed": timedelta(days=1), "dead": timedelta(days=30)}
    before = datetime.now(UTC)
    Retention(db, interval=300.0, keep=keep).run()
    calls = db.to(store.cleanup)
    assert [c["status"] for c in calls] == ["completed", "dead"]
    for call, kept in zip(calls, keep.values(), strict=True):
        assert before - kept <= call["finished_before"] <= datetime.now(UTC) - kept
    assert db.to(store.prune_events) == []  # no event retention given
    assert db.to(store.prune_merge_locks) == [{}]  # always: held locks are skipped


def test_retention_prunes_events_past_the_event_retention() -> None:
    db = Db({store.prune_events: 0})
    before = datetime.now(UTC)
    Retention(db, interval=300.0, keep={}, events=timedelta(days=7)).run()
    [call] = db.to(store.prune_events)
    assert (
        before - timedelta(days=7)
        <= call["emitted_before"]
        <= datetime.now(UTC) - timedelta(days=7)
    )


LAYOUT = JournalLayout(period="day", partitions=[], analyzed_at=None)


def test_retention_drops_a_partitioned_journals_old_partitions_and_leaves_its_rows() -> None:
    db = Db({store.journal_layout: LAYOUT, store.cleanup: 0, store.drop_older: []})
    before = datetime.now(UTC)
    keep = timedelta(days=7)
    Retention(db, interval=300.0, keep={"completed": keep}, journal=timedelta(days=30)).run()
    [cleanup] = db.to(store.cleanup)
    assert cleanup["journal"] is False  # the entries go with their partitions
    [drop] = db.to(store.drop_older)
    assert before - timedelta(days=30) <= drop["before"] <= datetime.now(UTC) - timedelta(days=30)
    # One table: the entries go with their jobs, and no partition is asked for.
    db = Db({store.journal_layout: None, store.cleanup: 0})
    Retention(db, interval=300.0, keep={"completed": keep}, journal=timedelta(days=30)).run()
    assert [c["journal"] for c in db.to(store.cleanup)] == [True]
    assert db.to(store.drop_older) == []


def test_partitions_service_does_nothing_more_where_the_journal_is_one_table() -> None:
    db = Db({store.journal_layout: None})
    Partitions(db, interval=300.0, ahead=7, analyze_every=timedelta(hours=1)).run()
    assert [c.func for c in db.calls] == [store.journal_layout]
    db = Db({store.journal_layout: LAYOUT, store.make_ahead: [], store.analyze_journal: False})
    Partitions(db, interval=300.0, ahead=7, analyze_every=timedelta(hours=1)).run()
    assert db.to(store.make_ahead) == [{"ahead": 7, "layout": LAYOUT}]
    assert db.to(store.analyze_journal) == [{"every": timedelta(hours=1), "layout": LAYOUT}]


# --- Run-time limits -------------------------------------------------------------------


def test_limits_are_read_at_first_then_every_so_often_or_at_once_when_stale() -> None:
    db = Db({limiting.claim_limits: ({tasks.add.kind: 2}, {})})
    seen: list[tuple[dict[str, int], dict[str, Any]]] = []
    limits = LimitRefresh(db, every=3600.0, kinds=[tasks.add.kind], on_change=seen.append)
    assert not limits.ready
    limits.run()
    limits.run()  # read a moment ago: not again
    assert seen == [({tasks.add.kind: 2}, {})]
    assert limits.ready
    [call] = db.calls
    assert call.args == ([tasks.add.kind],)
    assert call.keywords == {"max_age": 0}  # the store's cache bypassed
    limits.stale = True  # a NOTIFY said they changed
    limits.run()
    assert len(seen) == 2
    assert limits.wake_in(0.0) is None  # never wakes the worker by itself


def test_limits_unread_for_a_lost_connection_stay_stale_and_the_worker_claims_nothing() -> None:
    seen: list[tuple[dict[str, int], dict[str, Any]]] = []
    limits = LimitRefresh(
        Db({limiting.claim_limits: None}), every=3600.0, kinds=[], on_change=seen.append
    )
    limits.run()
    assert (limits.ready, limits.stale, seen) == (False, True, [])


# --- The scheduler ------------------------------------------------------------------------


@pytest.fixture
def limits_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's copy of the run-time limits, read a moment ago and empty (none set).

    Building a tick's request consults them (a rate limit set by an operator applies to
    a periodic job too); without a copy the scheduler would read them from the database.
    """
    monkeypatch.setattr(limiting, "_cache", ({}, time.monotonic()))


class Clock:
    """A clock the test moves."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def every_minute(name: str = "tick") -> ScheduleDef:
    return ScheduleDef(name=name, kind=tasks.noop.kind, expression="* * * * *", tz=UTC)


def tick_recorder(calls: list[datetime]) -> Callable[..., TickResult]:
    def record_tick(*, name: str, tick: datetime, request: Any) -> TickResult:
        calls.append(tick)
        state = ScheduleState(name=name, created_at=NOW - MINUTE, last_tick=tick)
        return TickResult(job_id=uuid.uuid4(), state=state)

    return record_tick


@pytest.mark.usefixtures("limits_read")
def test_the_scheduler_enqueues_a_due_tick_once_then_sleeps_until_the_next() -> None:
    ticks: list[datetime] = []
    states = {"tick": ScheduleState(name="tick", created_at=NOW - MINUTE)}
    db = Db({store.schedule_states: states, store.record_tick: tick_recorder(ticks)})
    clock = Clock(NOW)
    scheduler = Scheduler(db, interval=1.0, schedules=[every_minute()], clock=clock)
    scheduler.run()
    assert db.to(store.schedule_states) == [{"names": ["tick"], "create": True}]
    [call] = db.to(store.record_tick)
    assert call["tick"] == NOW.replace(second=0) == ticks[0]
    assert call["request"].kind == tasks.noop.kind
    assert call["request"].idempotency_key == store.tick_key("tick", ticks[0])
    clock.now = NOW + timedelta(seconds=1)
    scheduler.run()  # the next tick is a minute away: no call at all
    assert len(db.calls) == 2
    assert scheduler.wake_in(0.0) == 56.0


@pytest.mark.usefixtures("limits_read")
def test_the_scheduler_tries_again_after_the_database_was_away() -> None:
    ticks: list[datetime] = []
    states = {"tick": ScheduleState(name="tick", created_at=NOW - MINUTE)}
    db = Db({store.schedule_states: None, store.record_tick: None})
    scheduler = Scheduler(db, interval=1.0, schedules=[every_minute()], clock=Clock(NOW))
    scheduler.run()  # the states could not be read: nothing more
    assert [c.func for c in db.calls] == [store.schedule_states]
    db.answers[store.schedule_states] = states
    scheduler.run()  # the tick's enqueue was lost: due again at the next run
    assert [c.func for c in db.calls][1:] == [store.schedule_states, store.record_tick]
    db.answers[store.record_tick] = tick_recorder(ticks)
    scheduler.run()
    assert ticks == [NOW.replace(second=0)]


@pytest.mark.usefixtures("limits_read")
def test_a_schedule_that_cannot_be_enqueued_is_logged_and_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ticks: list[datetime] = []
    broken = ScheduleDef(name="broken", kind=tasks.add.kind, expression="* * * * *", tz=UTC)
    states = {
        name: ScheduleState(name=name, created_at=NOW - MINUTE) for name in ("broken", "tick")
    }
    db = Db({store.schedule_states: states, store.record_tick: tick_recorder(ticks)})
    scheduler = Scheduler(db, interval=1.0, schedules=[broken, every_minute()], clock=Clock(NOW))
    with caplog.at_level(logging.ERROR, logger="django_jobqueue"):
        scheduler.run()  # add() needs arguments this schedule does not give
    assert ticks == [NOW.replace(second=0)]  # the good one's tick, only
    assert "schedule broken: could not enqueue its tick" in caplog.text
    assert scheduler.wake_in(0.0) == 57.0  # both looked at again at the next minute


def test_a_worker_idle_between_schedules_wakes_on_its_interval_before_the_first_look() -> None:
    scheduler = Scheduler(Db(), interval=1.0, schedules=[every_minute()], clock=Clock(NOW))
    assert scheduler.wake_in(0.25) == 0.75
