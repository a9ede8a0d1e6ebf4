"""``store.stats()`` against a hand-made queue: every number is worked out in the test.

Rows are written straight through the ORM with timestamps relative to a fixed ``now``
that is passed to ``stats(now=...)``, so nothing depends on a worker or the clock.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.models import Job, JournalEntry, Outcome, Status, WorkerHeartbeat
from django_jobqueue.store.snapshot import KindRuns, PendingCount

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db, pytest.mark.usefixtures("queue")]

S = timedelta(seconds=1)


@pytest.fixture
def now() -> datetime:
    return timezone.now().replace(microsecond=0)


def job(kind: str, status: str, now: datetime, *, queue: str = "default", **fields: Any) -> Job:
    fields.setdefault("created_at", now - 3600 * S)
    fields.setdefault("visible_at", fields["created_at"])
    if status == Status.CLAIMED:
        fields.setdefault("claimed_by", "host:1")
        fields.setdefault("claim_expires_at", now + 600 * S)
        fields.setdefault("run_count", 1)
    if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
        fields.setdefault("finished_at", now - 60 * S)
    return Job.objects.create(kind=kind, queue=queue, status=status, **fields)


def entry(
    owner: Job,
    outcome: str,
    recorded_at: datetime,
    duration: float | None = None,
    *,
    worker: str = "host:1",
    actor: str = "",
) -> JournalEntry:
    return JournalEntry.objects.create(
        job=owner,
        kind=owner.kind,
        run_no=1,
        outcome=outcome,
        started_at=None if duration is None else recorded_at - duration * S,
        recorded_at=recorded_at,
        duration=None if duration is None else duration * S,
        worker=worker,
        actor=actor,
    )


def heartbeat(
    worker_id: str,
    now: datetime,
    *,
    last_seen: float,
    kinds: list[str],
    queues: list[str] | None = None,
    jobs_done: int = 0,
    stopped: bool = False,
) -> WorkerHeartbeat:
    return WorkerHeartbeat.objects.create(
        id=worker_id,
        host=worker_id.split(":")[0],
        pid=int(worker_id.split(":")[1]),
        queues=queues or [],
        kinds=kinds,
        concurrency=4,
        started_at=now - 7200 * S,
        last_seen_at=now - last_seen * S,
        jobs_done=jobs_done,
        stopped_at=now - last_seen * S if stopped else None,
    )


@pytest.fixture
def queue(now: datetime) -> None:
    """The hand-made queue every test below reads (expected values are in the tests)."""
    # Runnable pending jobs.
    for age in (10, 20, 300):
        job("mail.send", Status.PENDING, now, queue="mail", visible_at=now - age * S)
    # Created a day ago but only runnable for a minute (it was backed off): its wait is 60 s.
    job("mail.send", Status.PENDING, now, created_at=now - 86400 * S, visible_at=now - 60 * S)
    for age in (3600, 5):
        job("reports.render", Status.PENDING, now, visible_at=now - age * S)
    job("img.resize", Status.PENDING, now, visible_at=now - 1 * S)
    # Runnable exactly now counts as pending, one microsecond later as scheduled.
    job("img.resize", Status.PENDING, now, visible_at=now)
    # Scheduled for later (delayed, backed off or paused).
    job("reports.render", Status.PENDING, now, visible_at=now + 600 * S)
    job("img.resize", Status.PENDING, now, visible_at=now + timedelta(microseconds=1))
    job("mail.digest", Status.PENDING, now, visible_at=now + 86400 * S)
    # Running.
    job("mail.send", Status.CLAIMED, now, queue="mail")
    job("img.resize", Status.CLAIMED, now)
    # Finished.
    for _ in range(2):
        job("reports.render", Status.DEAD, now)
    job("img.resize", Status.DEAD, now)
    job("mail.send", Status.COMPLETED, now)
    job("mail.send", Status.CANCELLED, now)

    # Workers: one alive on the mail queue only, one alive on every queue, one whose
    # heartbeat went stale (crashed), one that stopped cleanly a moment ago.
    heartbeat("a:1", now, last_seen=5, kinds=["mail.send"], queues=["mail"], jobs_done=42)
    heartbeat("d:4", now, last_seen=60, kinds=["img.resize"], jobs_done=3)
    heartbeat("b:2", now, last_seen=61, kinds=["reports.render", "mail.send"], jobs_done=7)
    heartbeat("c:3", now, last_seen=30, kinds=["reports.render"], stopped=True)

    # Journal. mail.send in the window: 10 runs.
    send = job("mail.send", Status.COMPLETED, now)
    recent = now - 600 * S
    for seconds in (1, 2, 3, 4, 10):
        entry(send, Outcome.COMPLETED, recent, seconds)
    entry(send, Outcome.RETRIED, recent, 5)
    entry(send, Outcome.DEAD, recent, 20)
    entry(send, Outcome.PAUSED, recent, 0.5)
    entry(send, Outcome.CANCELLED, recent, 7)  # a running job cancelled by an operator
    entry(send, Outcome.STALE_RECOVERED, recent)  # no duration: its worker died
    # Not runs: merges, requeues and an operator's cancel of a pending job.
    entry(send, Outcome.MERGED, recent, worker="")
    entry(send, Outcome.REQUEUED, recent, worker="", actor="ops")
    entry(send, Outcome.CANCELLED, recent, worker="", actor="ops")
    # Outside the 24 h window.
    entry(send, Outcome.COMPLETED, now - 25 * 3600 * S, 1000)

    # reports.render: 3 runs five hours ago, none failed.
    render = job("reports.render", Status.COMPLETED, now)
    five_hours = now - 5 * 3600 * S
    entry(render, Outcome.COMPLETED, five_hours, 0.1)
    entry(render, Outcome.COMPLETED, five_hours, 0.3)
    entry(render, Outcome.RELEASED, five_hours)

    # img.resize: one recovered run (no duration), plus a merge that is not a run.
    resize = job("img.resize", Status.COMPLETED, now)
    entry(resize, Outcome.STALE_RECOVERED, recent)
    entry(resize, Outcome.MERGED, recent, worker="")

    # mail.digest: only an operator's cancel of a pending job, so no runs at all.
    digest = job("mail.digest", Status.CANCELLED, now)
    entry(digest, Outcome.CANCELLED, recent, worker="", actor="ops")


def test_stats_pending_counts_by_kind_and_queue_only_runnable_jobs(now: datetime) -> None:
    s = store.stats(now=now)
    assert s.at == now
    assert s.pending == (
        PendingCount(kind="img.resize", queue="default", count=2),
        PendingCount(kind="mail.send", queue="default", count=1),
        PendingCount(kind="mail.send", queue="mail", count=3),
        PendingCount(kind="reports.render", queue="default", count=2),
    )
    assert s.pending_total == 8


def test_stats_oldest_pending_age_is_time_since_runnable_per_kind(now: datetime) -> None:
    s = store.stats(now=now)
    # mail.send: 300 s on the mail queue beats the day-old job runnable for only 60 s.
    assert s.oldest_pending_seconds == {
        "img.resize": 1.0,
        "mail.send": 300.0,
        "reports.render": 3600.0,
    }


def test_stats_scheduled_claimed_and_dead_counts(now: datetime) -> None:
    s = store.stats(now=now)
    assert s.scheduled == 3
    assert s.claimed == 2
    assert s.dead == {"img.resize": 1, "reports.render": 2}


def test_stats_unserved_kinds_need_a_live_worker_for_kind_and_queue(now: datetime) -> None:
    s = store.stats(now=now)
    # img.resize: served by d:4 (seen exactly 60 s ago, still alive, every queue).
    # mail.send: a:1 is alive but reads only "mail"; one job waits on "default".
    # reports.render: b:2 went stale and c:3 stopped, so nobody serves it.
    # mail.digest is only scheduled, not pending now.
    assert s.unserved_kinds == ("mail.send", "reports.render")


def test_stats_unclaimed_kinds_have_had_no_claim_in_the_last_hour(now: datetime) -> None:
    s = store.stats(now=now)
    # mail.send and img.resize each have a job running now; reports.render's last runs
    # were five hours ago, so its two runnable jobs have waited on no one for an hour.
    assert s.unclaimed_kinds == ("reports.render",)
    # A run settled 59 minutes ago counts as a claim within the hour.
    render = Job.objects.filter(kind="reports.render", status=Status.COMPLETED).get()
    entry(render, Outcome.COMPLETED, now - 59 * 60 * S, 0.2)
    assert store.stats(now=now).unclaimed_kinds == ()


def test_stats_workers_stale_heartbeat_shown_as_gone_not_deleted(now: datetime) -> None:
    s = store.stats(now=now)
    workers = {w.id: w for w in s.workers}
    assert {wid: w.state for wid, w in workers.items()} == {
        "a:1": "alive",
        "d:4": "alive",
        "b:2": "gone",
        "c:3": "gone",
    }
    assert [w.id for w in s.workers] == ["a:1", "c:3", "d:4", "b:2"]  # latest seen first
    assert workers["a:1"].jobs_done == 42
    assert workers["a:1"].queues == ["mail"]
    assert workers["a:1"].kinds == ["mail.send"]
    assert workers["a:1"].last_seen_at == now - 5 * S
    assert workers["b:2"].last_seen_at == now - 61 * S
    assert workers["b:2"].jobs_done == 7
    assert workers["b:2"].host == "b"
    assert workers["b:2"].pid == 2
    assert WorkerHeartbeat.objects.count() == 4


def test_stats_run_stats_by_kind_with_outcomes_percentiles_and_failure_rate(
    now: datetime,
) -> None:
    runs = store.stats(now=now).runs
    assert set(runs) == {"mail.send", "reports.render", "img.resize"}

    send = runs["mail.send"]
    assert send.outcomes == {
        "completed": 5,
        "retried": 1,
        "dead": 1,
        "paused": 1,
        "cancelled": 1,
        "stale-recovered": 1,
    }
    assert send.runs == 10
    # retried + dead + stale-recovered of 10 runs.
    assert send.failure_rate == pytest.approx(0.3)
    # Durations sorted: 0.5 1 2 3 4 5 7 10 20 (n = 9; the recovered run has none).
    # p50: position 8 × 0.5 = 4 → 4 s. p95: position 8 × 0.95 = 7.6 → 10 + 0.6 × (20 − 10).
    assert send.p50 == pytest.approx(4.0, rel=1e-9)
    assert send.p95 == pytest.approx(16.0, rel=1e-9)

    render = runs["reports.render"]
    assert render.outcomes == {"completed": 2, "released": 1}
    assert render.runs == 3
    assert render.failure_rate == 0.0
    # 0.1 and 0.3: p50 at position 0.5 → 0.2; p95 at position 0.95 → 0.1 + 0.95 × 0.2.
    assert render.p50 == pytest.approx(0.2, rel=1e-9)
    assert render.p95 == pytest.approx(0.29, rel=1e-9)

    resize = runs["img.resize"]
    assert resize == KindRuns(
        runs=1, outcomes={"stale-recovered": 1}, p50=None, p95=None, failure_rate=1.0
    )


def test_stats_window_limits_run_stats_to_recent_entries(now: datetime) -> None:
    s = store.stats(now=now, window=timedelta(hours=1))
    assert s.window_seconds == 3600.0
    # reports.render ran five hours ago: outside a one-hour window.
    assert set(s.runs) == {"mail.send", "img.resize"}
    assert s.runs["mail.send"].runs == 10

    wide = store.stats(now=now, window=timedelta(hours=26))
    send = wide.runs["mail.send"]
    assert send.runs == 11
    assert send.outcomes["completed"] == 6
    # The 1000 s run 25 hours ago joins: 0.5 1 2 3 4 5 7 10 20 1000 (n = 10).
    # p50: position 9 × 0.5 = 4.5 → 4 + 0.5 × (5 − 4). p95: 9 × 0.95 = 8.55 → 20 + 0.55 × 980.
    assert send.p50 == pytest.approx(4.5, rel=1e-9)
    assert send.p95 == pytest.approx(559.0, rel=1e-9)


def test_stats_on_an_empty_queue_is_all_zero() -> None:
    Job.objects.all().delete()
    WorkerHeartbeat.objects.all().delete()
    s = store.stats()
    assert s.pending == ()
    assert s.pending_total == 0
    assert s.oldest_pending_seconds == {}
    assert s.scheduled == 0
    assert s.claimed == 0
    assert s.dead == {}
    assert s.unserved_kinds == ()
    assert s.workers == ()
    assert s.runs == {}


def test_stats_is_frozen_and_to_dict_is_the_json_shape_of_jobqueue_stats(now: datetime) -> None:
    """``to_dict()`` is what ``jobqueue stats --json`` has always printed: these keys in
    this order, rows as dicts with their own keys in order, sequences as lists."""
    s = store.stats(now=now)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.claimed = 0  # type: ignore[misc]
    d = s.to_dict()
    assert list(d) == [
        "at",
        "pending",
        "pending_total",
        "oldest_pending_seconds",
        "scheduled",
        "waiting",
        "sleeping",
        "waiting_for_events",
        "claimed",
        "claimed_by_kind",
        "dead",
        "cancelled",
        "paused_queues",
        "unserved_kinds",
        "workers",
        "unclaimed_kinds",
        "runs",
        "window_seconds",
    ]
    assert d["at"] == now
    assert d["pending"][0] == {"kind": "img.resize", "queue": "default", "count": 2}
    assert d["claimed_by_kind"] == {"img.resize": 1, "mail.send": 1}
    assert d["cancelled"] == Job.objects.filter(status=Status.CANCELLED).count() > 0
    assert d["paused_queues"] == []
    assert d["unserved_kinds"] == ["mail.send", "reports.render"]
    assert d["unclaimed_kinds"] == ["reports.render"]
    [a1] = [w for w in d["workers"] if w["id"] == "a:1"]
    assert a1 == {
        "id": "a:1",
        "host": "a",
        "pid": 1,
        "queues": ["mail"],
        "kinds": ["mail.send"],
        "concurrency": a1["concurrency"],
        "started_at": a1["started_at"],
        "last_seen_at": now - 5 * S,
        "jobs_done": 42,
        "state": "alive",
    }
    assert list(a1) == [
        *("id", "host", "pid", "queues", "kinds", "concurrency"),
        *("started_at", "last_seen_at", "jobs_done", "state"),
    ]
    assert d["runs"]["img.resize"] == {
        "runs": 1,
        "outcomes": {"stale-recovered": 1},
        "p50": None,
        "p95": None,
        "failure_rate": 1.0,
    }
    assert list(d["runs"]["mail.send"]) == ["runs", "outcomes", "p50", "p95", "failure_rate"]
    assert d["window_seconds"] == 86400.0
    assert all(type(row) is dict for row in [*d["pending"], *d["workers"]])
    assert type(d["runs"]["mail.send"]) is dict
