"""``jobqueue cancel|requeue`` by filter (a count first, ``--yes`` to act, every job
journalled as by id), bad filters refused with nothing done, and ``list --ids/--json``."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import Status
from django_jobqueue.management import bulk
from django_jobqueue.models import Job, JournalEntry, Outcome
from tests.db.test_command import ACTOR, jobqueue, jobqueue_fails, make

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

KIND = "tests.taskapp.tasks.add"
OTHER = "tests.taskapp.tasks.noop"


def statuses(**filters: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for job in Job.objects.filter(**filters):
        counts[job.status] = counts.get(job.status, 0) + 1
    return counts


def test_requeue_by_filter_counts_first_then_requeues_each_journalled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bulk, "BATCH", 3)  # several pages of the keyset walk
    old = timezone.now() - timedelta(days=2)
    dead = [make(KIND, Status.DEAD, created_at=old) for _ in range(7)]
    make(KIND, Status.DEAD)  # too recent
    make(OTHER, Status.DEAD, created_at=old)  # another kind
    make(KIND, Status.CANCELLED, created_at=old)  # not dead
    args = ("requeue", "--kind", KIND, "--older-than", "1d")
    out, _ = jobqueue(*args)
    assert out.strip() == (
        f"7 job(s) match (status dead, kind {KIND}, created over 1d ago); nothing was done "
        "(dry run): add --yes to requeue them"
    )
    assert statuses(kind=KIND) == {Status.DEAD: 8, Status.CANCELLED: 1}
    assert not JournalEntry.objects.exists()
    out, err = jobqueue(*args, "--yes")
    assert out.strip() == f"requeued 7 job(s) (status dead, kind {KIND}, created over 1d ago)"
    assert err == ""
    assert statuses(id__in=[j.id for j in dead]) == {Status.PENDING: 7}
    entries = JournalEntry.objects.filter(job__in=dead)
    assert sorted(e.job_id for e in entries) == sorted(j.id for j in dead)
    assert {(e.outcome, e.actor) for e in entries} == {(Outcome.REQUEUED, ACTOR)}
    assert statuses(kind=OTHER) == {Status.DEAD: 1}
    assert jobqueue(*args, "--yes")[0].startswith("requeued 0 job(s)")


def test_cancel_by_filter_cancels_pending_and_asks_claimed_ones_to_stop() -> None:
    pending = [make(KIND, Status.PENDING, queue="mail") for _ in range(3)]
    running = make(KIND, Status.CLAIMED, queue="mail")
    make(KIND, Status.PENDING, queue="default")
    out, _ = jobqueue("cancel", "--queue", "mail")
    assert out.startswith("3 job(s) match (status pending, queue mail)")
    out, _ = jobqueue(
        "cancel", "--queue", "mail", "--status", "pending", "--status", "claimed", "--yes"
    )
    assert out.strip() == (
        "cancelled 4 job(s) (status pending/claimed, queue mail), 1 of them running: asked to stop"
    )
    assert statuses(id__in=[j.id for j in pending]) == {Status.CANCELLED: 3}
    running.refresh_from_db()
    assert (running.status, running.cancel_requested) == (Status.CLAIMED, True)
    assert statuses(queue="default") == {Status.PENDING: 1}
    assert JournalEntry.objects.filter(outcome=Outcome.CANCELLED).count() == 3


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["requeue", "--status", "pending"], "--status"),
        (["cancel", "--status", "dead"], "--status"),
        (["cancel", "--status", "nonsense"], "--status"),
        (["requeue", "--older-than", "soon"], "--older-than"),
        (["requeue", "--older-than", "0s"], "--older-than"),
        (["cancel", "--queue", ""], "--queue"),
        (["cancel", "--kind", "x" * 300], "--kind"),
    ],
)
def test_bad_filter_values_are_usage_errors_naming_them_and_nothing_is_done(
    args: list[str], named: str
) -> None:
    job = make(KIND, Status.DEAD)
    waiting = make(KIND, Status.PENDING)
    message, _, _ = jobqueue_fails(*args, "--yes")
    assert named in message
    assert Job.objects.get(id=job.id).status == Status.DEAD
    assert Job.objects.get(id=waiting.id).status == Status.PENDING
    assert not JournalEntry.objects.exists()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["requeue"], "give job ids, or filters"),
        (["requeue", "--status", "completed", "--yes"], "add --force"),
        (["cancel", "--yes"], "give job ids, or filters"),
    ],
)
def test_a_bulk_command_line_that_says_too_little_or_too_much_is_refused(
    args: list[str], said: str
) -> None:
    done = make(KIND, Status.COMPLETED)
    message, _, _ = jobqueue_fails(*args)
    assert said in message
    assert Job.objects.get(id=done.id).status == Status.COMPLETED
    message, _, _ = jobqueue_fails("requeue", str(done.id), "--kind", KIND)
    assert "ids or filters, not both" in message
    message, _, _ = jobqueue_fails("requeue", str(done.id), "--yes")
    assert "--yes goes with filters" in message
    assert not JournalEntry.objects.exists()


def test_a_filter_for_a_misspelt_kind_matches_nothing_and_says_did_you_mean() -> None:
    make(KIND, Status.DEAD)
    out, _ = jobqueue("requeue", "--kind", "tests.taskapp.tasks.ad")
    assert out.startswith("0 job(s) match")
    assert f"did you mean {KIND!r}?" in out


def test_list_ids_prints_one_id_a_line_and_the_cursor_on_stderr() -> None:
    jobs = [make(KIND, Status.DEAD) for _ in range(3)]
    out, err = jobqueue("list", "--status", "dead", "--ids", "--limit", "2")
    assert out.split() == [str(j.id) for j in jobs[:2]]
    assert err.startswith("next: --after '")
    cursor = err.split("'")[1]
    out, err = jobqueue("list", "--status", "dead", "--ids", "--after", cursor)
    assert out.split() == [str(jobs[2].id)]
    assert err == ""


def test_list_json_is_the_page_with_its_cursor() -> None:
    job = make(KIND, Status.DEAD, queue="mail")
    make(KIND, Status.DEAD)
    out, _ = jobqueue("list", "--json", "--limit", "1")
    page = json.loads(out)
    assert page["next_cursor"]
    [shown] = page["jobs"]
    assert shown["id"] == str(job.id)
    assert (shown["kind"], shown["queue"], shown["status"]) == (KIND, "mail", "dead")
    assert shown["created_at"] == job.created_at.isoformat()
    assert "payload" not in shown
    message, _, _ = jobqueue_fails("list", "--json", "--ids")
    assert "not allowed with argument" in message
