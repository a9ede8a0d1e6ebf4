"""The clean-up form (count first, then delete in batches through the store; bad input
refused with a message) and the dashboard (cards, kinds, chart, workers, queue pause)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.models import Job, JournalEntry, QueuePause, WorkerHeartbeat
from django_jobqueue.testing import run_jobs
from tests.admin.conftest import OPERATOR_PERMS, jobs_in_every_state, make_user, set_state
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

CLEANUP = "/admin/django_jobqueue/job/cleanup/"
DASHBOARD = "/admin/django_jobqueue/job/dashboard/"
QUEUE = "/admin/django_jobqueue/job/dashboard/queue/"


def moment(delta: timedelta) -> dict[str, str]:
    at = timezone.localtime() + delta
    return {
        "finished_before_0": at.date().isoformat(),
        "finished_before_1": at.strftime("%H:%M:%S"),
    }


def test_cleanup_counts_first_then_deletes_only_what_it_counted(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    jobs = jobs_in_every_state()
    set_state(jobs["dead"].id, finished_at=timezone.now() - timedelta(days=10))
    set_state(jobs["completed"].id, finished_at=timezone.now() - timedelta(days=10))
    choice = {**moment(-timedelta(days=1)), "statuses": ["dead", "completed"]}
    page = client.post(CLEANUP, choice)
    assert "2 finished jobs will be deleted" in page.content.decode()
    assert Job.objects.count() == len(jobs)
    counted = page.context["counted"]
    # A choice edited after the count is counted again, not deleted unseen.
    again = client.post(CLEANUP, {**choice, "statuses": ["dead"], "confirm": counted})
    assert "1 finished job will be deleted" in again.content.decode()
    assert Job.objects.count() == len(jobs)
    done = client.post(CLEANUP, {**choice, "confirm": counted}, follow=True)
    assert next(str(m) for m in done.context["messages"]).startswith(
        "Cleaned up 2 finished jobs (dead, completed) that finished before"
    )
    assert not Job.objects.filter(id__in=[jobs["dead"].id, jobs["completed"].id]).exists()
    assert Job.objects.count() == len(jobs) - 2
    log = LogEntry.objects.get(object_repr="clean-up of 2 jobs")
    assert "admin:olga" in log.change_message


def test_cleanup_of_one_kind_leaves_the_others(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    mine = tasks.noop.enqueue().id
    other = tasks.add.enqueue(1, 2).id
    old = timezone.now() - timedelta(days=2)
    for job_id in (mine, other):
        set_state(job_id, status="completed", finished_at=old)
    choice = {**moment(-timedelta(hours=1)), "statuses": ["completed"], "kind": tasks.noop.kind}
    counted = client.post(CLEANUP, choice).context["counted"]
    client.post(CLEANUP, {**choice, "confirm": counted})
    assert list(Job.objects.values_list("id", flat=True)) == [other]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"finished_before_0": "31/02/2025", "finished_before_1": "10:00"}, "Enter a valid date."),
        ({"finished_before_0": "", "finished_before_1": ""}, "This field is required."),
        ({**moment(timedelta(days=1))}, "Choose a moment in the past"),
        ({**moment(-timedelta(days=1)), "statuses": ["pending"]}, "Select a valid choice."),
        ({**moment(-timedelta(days=1)), "kind": "no.such.kind"}, "Select a valid choice."),
    ],
    ids=["bad-date", "missing", "future", "active-status", "unknown-kind"],
)
def test_cleanup_refuses_bad_input_with_a_message_and_deletes_nothing(
    data: dict[str, object], error: str, operator: User, client_for: Callable[..., Client]
) -> None:
    jobs = jobs_in_every_state()
    page = client_for(operator).post(CLEANUP, {"statuses": ["dead"], **data, "confirm": "x"})
    assert page.status_code == 200
    assert error in page.content.decode()
    assert Job.objects.count() == len(jobs)


def test_cleanup_needs_its_permission(client_for: Callable[..., Client]) -> None:
    client = client_for(make_user("nora", [p for p in OPERATOR_PERMS if p != "cleanup_job"]))
    jobs_in_every_state()
    assert client.get(CLEANUP).status_code == 403
    assert client.post(CLEANUP, moment(-timedelta(days=1))).status_code == 403
    assert "/cleanup/" not in client.get("/admin/django_jobqueue/job/").content.decode()


# --- dashboard ------------------------------------------------------------------------------


def test_dashboard_cards_kinds_chart_and_workers(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    """Without a run history (``HISTORY_DAYS`` 0), the runs are read from the journal."""
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "HISTORY_DAYS": 0}):
        journal_read_dashboard(viewer, client_for)


def journal_read_dashboard(viewer: User, client_for: Callable[..., Client]) -> None:
    jobs = jobs_in_every_state()
    now = timezone.now()
    for minutes, outcome in ((3, "completed"), (3, "completed"), (3, "retried"), (90, "dead")):
        JournalEntry.objects.create(
            job_id=jobs["completed"].id,
            kind=jobs["completed"].kind,
            outcome=outcome,
            worker="w:1",
            duration=timedelta(seconds=1),
            recorded_at=now - timedelta(minutes=minutes),
        )
    store.register_worker(
        worker_id="h:1", host="h", pid=1, queues=["mail"], kinds=["x"], concurrency=4
    )
    store.register_worker(worker_id="h:2", host="h", pid=2, queues=[], kinds=["x"], concurrency=1)
    store.beat(worker_id="h:2", jobs_done=9, stopped=True)
    page = client_for(viewer).get(DASHBOARD)
    text = page.content.decode()
    assert {label: value for label, value, _, _ in page.context["cards"]} == {
        "pending now": "1",
        "scheduled": "1",
        "claimed": "2",
        "dead jobs": "1",
        "cancelled": "1",
        "oldest pending": page.context["cards"][5][1],
        "waiting (workflow steps)": "0",
        "sleeping": "0",
        "waiting for events": "0",
    }
    [row] = page.context["kinds"]
    assert (row["pending"], row["claimed"], row["dead"], row["runs"]) == (1, 2, 1, 4)
    assert row["failure_rate"] == "50.0%"
    assert row["unserved"]  # no live worker runs tests.taskapp.tasks.add
    assert 'id="unserved"' in text
    assert page.context["hour"]["total_completed"] == 2
    assert page.context["hour"]["total_failed"] == 1
    assert page.context["day"]["total_failed"] == 2
    assert page.context["day"]["total_dead"] == 1  # failed runs and dead jobs told apart
    assert page.context["day"]["total_retried"] == 1
    assert text.count('<svg class="jq-chart"') == 2
    # Its one script is the live page's (admin/live.py); without it the page refreshes.
    scripts = text.split('id="content-main"')[1].count("<script")
    assert scripts == 2, "the live page's config and its script, nothing else"
    assert '<noscript><meta http-equiv="refresh" content="30"></noscript>' in text
    assert [w["id"] for w in page.context["live"]] == ["h:1"]
    assert [w["id"] for w in page.context["gone"]] == ["h:2"]


def test_with_a_run_history_the_dashboard_reads_it_not_the_journal(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    """With the run history kept (the default), the kinds' runs and the charts are read
    from it: they stay when the journal entries are gone, and a journal entry the
    history has not counted is not shown."""
    now = timezone.now()
    store.sample_history(now=now - timedelta(minutes=3), min_gap=timedelta(seconds=1))
    tasks.add.enqueue_many([{"a": n, "b": n} for n in range(3)])
    tasks.permanent.enqueue()  # dead at its first failure
    run_jobs(kinds=[tasks.add, tasks.permanent])
    store.sample_history(now=now, min_gap=timedelta(seconds=1))
    JournalEntry.objects.all().delete()
    JournalEntry.objects.create(  # not in the history: not shown
        job_id=jobs_in_every_state()["completed"].id,
        kind=tasks.add.kind,
        outcome="completed",
        worker="w:1",
        duration=timedelta(seconds=1),
        recorded_at=now - timedelta(minutes=1),
    )
    page = client_for(viewer).get(DASHBOARD)
    rows = {row["kind"]: row for row in page.context["kinds"]}
    assert rows[tasks.add.kind]["runs"] == 3
    assert rows[tasks.add.kind]["failure_rate"] == "0.0%"
    assert rows[tasks.add.kind]["p50"] != "-"  # from the history's duration buckets
    dead = rows[tasks.permanent.kind]
    assert (dead["runs"], dead["failure_rate"]) == (1, "100.0%")
    assert page.context["hour"]["total_completed"] == 3
    assert page.context["hour"]["total_failed"] == 1
    assert page.context["day"]["total_dead"] == 1


def test_a_worker_gone_for_a_day_is_forgotten_when_the_next_one_starts(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    for n in (1, 2):
        store.register_worker(
            worker_id=f"h:{n}", host="h", pid=n, queues=[], kinds=[], concurrency=1
        )
    WorkerHeartbeat.objects.filter(id="h:1").update(
        last_seen_at=timezone.now() - timedelta(days=1, minutes=1)
    )
    store.register_worker(worker_id="h:3", host="h", pid=3, queues=[], kinds=[], concurrency=1)
    assert set(WorkerHeartbeat.objects.values_list("id", flat=True)) == {"h:2", "h:3"}


def test_pause_and_resume_from_the_dashboard(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    tasks.noop.using(queue="mail").enqueue()
    page = client.post(QUEUE, {"queue": "mail", "do": "pause"}, follow=True)
    assert [str(m) for m in page.context["messages"]] == ["Queue mail paused."]
    row = next(q for q in page.context["queues"] if q["name"] == "mail")
    assert row["paused"].paused_by == "admin:olga"
    assert row["pending"] == 1
    assert 'value="resume"' in page.content.decode()
    assert QueuePause.objects.filter(queue="mail").exists()
    again = client.post(QUEUE, {"queue": "mail", "do": "pause"}, follow=True)
    assert [str(m) for m in again.context["messages"]] == ["Queue mail was already paused."]
    done = client.post(QUEUE, {"queue": "mail", "do": "resume"}, follow=True)
    assert [str(m) for m in done.context["messages"]] == ["Queue mail resumed."]
    assert not QueuePause.objects.exists()
    assert LogEntry.objects.filter(object_repr="queue mail").count() == 3


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {"queue": "", "do": "pause"},
            "queue must be a non-empty string of at most 100 characters, got ''",
        ),
        (
            {"queue": "q" * 101, "do": "pause"},
            "queue must be a non-empty string of at most 100 characters",
        ),
        ({"queue": "mail", "do": "explode"}, "Unknown queue action 'explode': pause or resume"),
    ],
    ids=["empty", "too-long", "unknown-verb"],
)
def test_pause_refuses_bad_input_with_a_message(
    data: dict[str, str], error: str, operator: User, client_for: Callable[..., Client]
) -> None:
    page = client_for(operator).post(QUEUE, data, follow=True)
    [message] = [str(m) for m in page.context["messages"]]
    assert message.startswith(error)
    assert not QueuePause.objects.exists()


def test_pause_needs_its_permission_and_a_post(
    viewer: User, operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    assert client.post(QUEUE, {"queue": "mail", "do": "pause"}).status_code == 403
    assert 'value="pause"' not in client.get(DASHBOARD).content.decode()
    assert client_for(operator).get(QUEUE).status_code == 405
    assert not QueuePause.objects.exists()
