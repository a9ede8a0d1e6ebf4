"""Store operations the admin added: queue pause and resume (the claim skips a paused
queue; enqueue, the command and stats see it), run now, deleting finished jobs by id,
bounded counts and the distinct kinds."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from django_jobqueue import (
    InvalidTransition,
    Status,
    pause_queue,
    resume_queue,
    run_now,
    store,
)
from django_jobqueue.models import Job, JournalEntry, QueuePause
from django_jobqueue.rules.lifecycle import Settlement
from tests.admin.conftest import set_state
from tests.helpers import is_postgres, run_burst
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def claim(**options: object) -> list[uuid.UUID]:
    claimed = store.claim_jobs(
        worker_id="w:1",
        request=store.ClaimRequest(limit=10, kinds=[tasks.noop.kind, tasks.add.kind], **options),
    )
    return [c.id for c in claimed]


def test_a_paused_queue_is_not_claimed_and_others_are() -> None:
    mail = tasks.noop.using(queue="mail").enqueue().id
    default = tasks.noop.enqueue().id
    assert pause_queue("mail") is True
    assert pause_queue("mail") is False  # already
    assert claim() == [default]
    assert claim(queues=["mail"]) == []
    assert Job.objects.get(id=mail).status == Status.PENDING
    assert resume_queue("mail") is True
    assert resume_queue("mail") is False
    assert claim() == [mail]


@pytest.mark.django_db(transaction=True)
def test_enqueue_into_a_paused_queue_works_and_a_worker_leaves_it_alone() -> None:
    pause_queue("mail", actor="ops")
    job = tasks.add.using(queue="mail").enqueue(2, 3)
    assert run_burst() == 0
    assert Job.objects.get(id=job.id).status == Status.PENDING
    assert QueuePause.objects.get(queue="mail").paused_by == "ops"
    resume_queue("mail")
    assert run_burst() == 1
    job.refresh()
    assert job.result == 5


def test_a_job_claimed_before_the_pause_still_settles() -> None:
    job = tasks.noop.using(queue="mail").enqueue().id
    [claimed] = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[tasks.noop.kind])
    )
    pause_queue("mail")
    done = Settlement(
        job_id=claimed.id,
        kind=claimed.kind,
        run_no=1,
        outcome="completed",
        status=Status.COMPLETED,
        worker="w:1",
    )
    applied = store.apply([done])
    assert applied == [True]
    assert Job.objects.get(id=job).status == Status.COMPLETED


@pytest.mark.parametrize("name", ["", "   ", "q" * 101])
def test_a_bad_queue_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="at most 100 characters"):
        pause_queue(name)
    assert not QueuePause.objects.exists()


def test_jobqueue_command_pauses_resumes_and_stats_shows_it() -> None:
    out = StringIO()
    call_command("jobqueue", "pause", "mail", "reports", stdout=out)
    call_command("jobqueue", "pause", "mail", stdout=out)
    assert out.getvalue().splitlines() == [
        "mail: paused",
        "reports: paused",
        "mail: already paused",
    ]
    assert QueuePause.objects.get(queue="mail").paused_by.startswith("manage.py jobqueue (")
    stats = StringIO()
    call_command("jobqueue", "stats", stdout=stats)
    assert "Paused queues: mail (since " in stats.getvalue()
    assert [p.queue for p in store.stats().paused_queues] == ["mail", "reports"]
    out = StringIO()
    call_command("jobqueue", "resume", "mail", stdout=out)
    assert out.getvalue() == "mail: resumed\n"
    assert list(QueuePause.objects.values_list("queue", flat=True)) == ["reports"]


@pytest.mark.django_db(transaction=True)
def test_run_now_makes_a_scheduled_job_runnable_with_its_journal_entry() -> None:
    job = tasks.add.using(delay=timedelta(hours=2)).enqueue(1, 1)
    assert run_burst() == 0
    before = timezone.now()
    run_now(job.id, actor="alice")
    row = Job.objects.get(id=job.id)
    assert before <= row.visible_at <= timezone.now()
    entry = JournalEntry.objects.get(job_id=job.id)
    assert entry.outcome == "run-now"
    assert entry.actor == "alice"
    assert entry.note.startswith("run now (was scheduled for ")
    assert run_burst() == 1


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({}, "is already runnable"),
        ({"status": "dead"}, "is dead; only a pending job can be run now"),
        ({"status": "claimed"}, "is claimed; only a pending job can be run now"),
    ],
    ids=["runnable", "dead", "claimed"],
)
def test_run_now_refuses_a_job_that_is_not_scheduled(state: dict[str, str], message: str) -> None:
    job = tasks.add.enqueue(1, 1)
    set_state(job.id, **state)
    with pytest.raises(InvalidTransition, match=message):
        run_now(job.id)
    assert not JournalEntry.objects.exists()


def test_delete_finished_deletes_only_finished_jobs_and_their_journal() -> None:
    ids = {s: tasks.noop.enqueue().id for s in Status.values}
    for status, job_id in ids.items():
        set_state(job_id, status=status)
        JournalEntry.objects.create(job_id=job_id, kind="k", outcome="merged")
    deleted = store.delete_finished(job_ids=list(ids.values()))
    assert set(deleted) == {ids[s] for s in ("completed", "dead", "cancelled")}
    assert set(Job.objects.values_list("status", flat=True)) == {"waiting", "pending", "claimed"}
    assert JournalEntry.objects.count() == 3


def test_count_is_exact_under_the_cap_and_estimated_above_it_on_postgres() -> None:
    for i in range(30):
        tasks.add.enqueue(i, i)
    small = store.count(Job.objects.all(), cap=100)
    assert (small.value, small.estimated) == (30, False)
    capped = store.count(Job.objects.all(), cap=10)
    if is_postgres():
        assert capped.estimated
        assert capped.value >= 11
    else:
        assert (capped.value, capped.estimated) == (30, False)


def test_distinct_kinds_come_from_the_index_in_order() -> None:
    tasks.noop.enqueue()
    tasks.add.enqueue(1, 2)
    tasks.add.enqueue(3, 4)
    assert store.distinct_values(Job, "kind") == sorted([tasks.noop.kind, tasks.add.kind])
    assert store.distinct_values(JournalEntry, "kind") == []


def test_throughput_buckets_cover_the_window_with_zeros() -> None:
    job = tasks.noop.enqueue()
    now = timezone.now()
    for minutes, outcome in (
        (1, "completed"),
        (1, "retried"),
        (2, "dead"),
        (5, "completed"),
        (5, "merged"),
    ):
        JournalEntry.objects.create(
            job_id=job.id, kind="k", outcome=outcome, recorded_at=now - timedelta(minutes=minutes)
        )
    buckets = store.throughput(since=now - timedelta(minutes=10), bucket="minute", now=now)
    assert len(buckets) in (10, 11)
    assert sum(b["completed"] for b in buckets) == 2
    assert sum(b["failed"] for b in buckets) == 2  # the run that killed its job failed too
    assert sum(b["dead"] for b in buckets) == 1
    with pytest.raises(ValueError, match="bucket is minute or hour"):
        store.throughput(since=now, bucket="week")
