"""The operator actions through the Django test client: each one bulk and on one job,
every state it must skip, its permission (shown and enforced with 403), CSRF, the
journal's operator and the Django LogEntry."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from django_jobqueue.models import Job, JournalEntry, TerminateRequest
from tests.admin.conftest import OPERATOR_PERMS, jobs_in_every_state, make_user

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

CHANGELIST = "/admin/django_jobqueue/job/"

# For each action: the states it changes, and what each becomes (status, or for run now
# and a claimed job's cancel, the field that shows it).
CHANGES = {
    "requeue": {"dead", "cancelled"},
    "cancel": {"pending", "scheduled", "claimed"},
    # A claimed job already asked to stop ("stopping") can still be stopped now.
    "terminate": {"pending", "scheduled", "claimed", "stopping"},
    "run_now": {"scheduled"},
    "delete_selected": {"completed", "dead", "cancelled"},
}
PERMISSION = {
    "requeue": "requeue_job",
    "cancel": "cancel_job",
    "terminate": "cancel_job",
    "run_now": "run_job_now",
    "delete_selected": "delete_job",
}


def bulk(client: Client, action: str, jobs: list[Job], **extra: str) -> object:
    data = {"action": action, "_selected_action": [str(j.id) for j in jobs], **extra}
    return client.post(CHANGELIST, data, follow="post" in extra)


def check_changed(action: str, before: dict[str, Job], *, force: bool = False) -> None:
    """Every job the action applies to changed as it should; the others did not."""
    changed = CHANGES[action] | ({"completed"} if force else set())
    now = timezone.now()
    for name, job in before.items():
        after = Job.objects.filter(id=job.id).first()
        if action == "delete_selected" and name in changed:
            assert after is None, name
            assert not JournalEntry.objects.filter(job_id=job.id).exists()
            continue
        assert after is not None, name
        if name not in changed:
            assert (after.status, after.visible_at) == (job.status, job.visible_at), name
        elif action == "requeue":
            assert after.status == "pending", name
        elif action == "run_now":
            assert after.visible_at <= now, name
        elif name in ("claimed", "stopping"):
            assert after.cancel_requested, name
            asked = TerminateRequest.objects.filter(job_id=job.id, run_no=job.run_count)
            assert asked.exists() == (action == "terminate"), name
        else:
            assert after.status == "cancelled", name


@pytest.mark.parametrize("action", list(CHANGES))
def test_bulk_action_confirms_with_counts_then_changes_only_what_its_state_allows(
    action: str, operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    before = jobs_in_every_state()
    page = bulk(client, action, list(before.values()))
    text = page.content.decode()  # type: ignore[attr-defined]
    n = len(CHANGES[action])
    assert f"will change {n} job" in text
    assert f"skip {len(before) - n}, because their state does not allow it" in text
    assert Job.objects.count() == len(before)  # nothing changed before the confirmation
    done = bulk(client, action, list(before.values()), post="yes")
    messages = [str(m) for m in done.context["messages"]]  # type: ignore[attr-defined]
    assert any(f" {n} job" in m and f"Skipped {len(before) - n}" in m for m in messages), messages
    check_changed(action, before)


def test_requeue_takes_completed_jobs_only_when_forced(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    before = jobs_in_every_state()
    page = bulk(client, "requeue", list(before.values()))
    assert "Force: also requeue 1 completed job" in page.content.decode()  # type: ignore[attr-defined]
    bulk(client, "requeue", list(before.values()), post="yes", force="on")
    check_changed("requeue", before, force=True)
    entry = JournalEntry.objects.get(job_id=before["completed"].id, outcome="requeued")
    assert entry.actor == "admin:olga"


def test_the_requeue_confirmation_mentions_force_only_where_its_box_is(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    before = jobs_in_every_state()
    dead_only = bulk(client, "requeue", [before["dead"]]).content.decode()  # type: ignore[attr-defined]
    assert "will change 1 job" in dead_only
    assert 'name="force"' not in dead_only
    assert "force" not in dead_only.split('id="content-main"')[1].lower()
    with_completed = bulk(client, "requeue", [before["dead"], before["completed"]])
    text = with_completed.content.decode()  # type: ignore[attr-defined]
    assert 'name="force"' in text
    assert "Force: also requeue 1 completed job" in text


@pytest.mark.parametrize("action", list(CHANGES))
def test_single_job_action_page_confirms_then_changes_and_returns_to_the_job(
    action: str, operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    jobs = jobs_in_every_state()
    for name, job in jobs.items():
        url = f"{CHANGELIST}{job.id}/act/{action}/"
        page = client.get(url)
        changes = name in CHANGES[action]
        assert page.status_code == 200
        assert f"will change {int(changes)} job" in page.content.decode(), name
        done = client.post(url, {"post": "yes"})
        assert done.status_code == 302
        assert done["Location"] == f"{CHANGELIST}{job.id}/"
    check_changed(action, jobs)


@pytest.mark.parametrize("action", ["requeue", "cancel", "run_now"])
def test_each_change_journals_the_operator_and_logs_a_django_log_entry(
    action: str, operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    jobs = jobs_in_every_state()
    target = {"requeue": "dead", "cancel": "pending", "run_now": "scheduled"}[action]
    job = jobs[target]
    client.post(f"{CHANGELIST}{job.id}/act/{action}/", {"post": "yes"})
    outcome = {"requeue": "requeued", "cancel": "cancelled", "run_now": "run-now"}[action]
    entry = JournalEntry.objects.get(job_id=job.id, outcome=outcome)
    assert entry.actor == "admin:olga"
    assert "admin:olga" in entry.note
    log = LogEntry.objects.get(object_id=str(job.id))
    assert log.user == operator
    assert "admin:olga" in log.get_change_message()


def test_cancelling_a_running_job_records_the_operator_for_its_ending(
    operator: User, client_for: Callable[..., Client]
) -> None:
    jobs = jobs_in_every_state()
    client_for(operator).post(f"{CHANGELIST}{jobs['claimed'].id}/act/cancel/", {"post": "yes"})
    job = Job.objects.get(id=jobs["claimed"].id)
    assert job.cancel_requested
    assert job.cancel_actor == "admin:olga"


def test_deleting_logs_each_deleted_job(operator: User, client_for: Callable[..., Client]) -> None:
    jobs = jobs_in_every_state()
    bulk(client_for(operator), "delete_selected", list(jobs.values()), post="yes")
    logged = set(LogEntry.objects.filter(action_flag=3).values_list("object_id", flat=True))
    assert logged == {str(jobs[n].id) for n in ("completed", "dead", "cancelled")}


def test_the_stock_delete_view_refuses_an_active_job_and_deletes_through_the_store(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    jobs = jobs_in_every_state()
    for name in ("pending", "claimed"):
        url = f"{CHANGELIST}{jobs[name].id}/delete/"
        assert client.get(url).status_code == 403
        assert client.post(url, {"post": "yes"}).status_code == 403
        assert Job.objects.filter(id=jobs[name].id).exists()
    url = f"{CHANGELIST}{jobs['dead'].id}/delete/"
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not Job.objects.filter(id=jobs["dead"].id).exists()


def test_a_job_that_changed_state_after_the_confirmation_is_skipped(
    operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    jobs = jobs_in_every_state()
    url = f"{CHANGELIST}{jobs['dead'].id}/act/requeue/"
    assert "will change 1 job" in client.get(url).content.decode()
    Job.objects.filter(id=jobs["dead"].id).update(status="pending", finished_at=None)
    done = client.post(url, {"post": "yes"}, follow=True)
    messages = [str(m) for m in done.context["messages"]]
    assert messages == ["Requeued 0 jobs. Skipped 1: their state does not allow it."]


def test_a_bulk_action_on_more_jobs_than_the_limit_is_refused_with_a_message(
    operator: User, client_for: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_jobqueue.admin import actions

    monkeypatch.setattr(actions, "MAX_SELECTED", 3)
    jobs = jobs_in_every_state()
    done = bulk(client_for(operator), "cancel", list(jobs.values()), post="yes")
    messages = [str(m) for m in done.context["messages"]]  # type: ignore[attr-defined]
    assert messages == [
        "Cancel works on at most 3 selected jobs at once: select every job matching the "
        'filter instead ("Select all"), or narrow it (to delete old finished jobs, use '
        "Clean up)."
    ]
    assert Job.objects.filter(status="cancelled").count() == 1  # the one that was already


# --- permissions ----------------------------------------------------------------------------


@pytest.mark.parametrize("action", list(CHANGES))
def test_without_its_permission_an_action_is_neither_shown_nor_allowed(
    action: str, client_for: Callable[..., Client]
) -> None:
    others = [p for p in OPERATOR_PERMS if p != PERMISSION[action]]
    client = client_for(make_user("nora", others))
    jobs = jobs_in_every_state()
    listing = client.get(CHANGELIST).content.decode()
    assert f'value="{action}"' not in listing
    detail = client.get(f"{CHANGELIST}{jobs['dead'].id}/change/").content.decode()
    assert f"/act/{action}/" not in detail
    for job in jobs.values():
        url = f"{CHANGELIST}{job.id}/act/{action}/"
        assert client.get(url).status_code == 403
        assert client.post(url, {"post": "yes"}).status_code == 403
    assert bulk(client, action, list(jobs.values()), post="yes").status_code == 403
    assert Job.objects.count() == len(jobs)
    assert not JournalEntry.objects.exists()


@pytest.mark.parametrize("action", list(CHANGES))
def test_with_its_permission_the_job_page_shows_the_action_only_where_the_state_allows(
    action: str, operator: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(operator)
    for name, job in jobs_in_every_state().items():
        detail = client.get(f"{CHANGELIST}{job.id}/change/").content.decode()
        shown = f"/act/{action}/" in detail
        allowed = name in CHANGES[action] or (action == "requeue" and name == "completed")
        assert shown == allowed, (action, name)


def test_a_staff_user_without_view_permission_gets_403_on_every_job_page(
    client_for: Callable[..., Client],
) -> None:
    client = client_for(make_user("sam", []))
    job = jobs_in_every_state()["dead"]
    for url in (
        CHANGELIST,
        f"{CHANGELIST}{job.id}/change/",
        f"{CHANGELIST}{job.id}/act/requeue/",
        f"{CHANGELIST}dashboard/",
        f"{CHANGELIST}cleanup/",
        "/admin/django_jobqueue/journalentry/",
    ):
        assert client.get(url).status_code == 403, url


def test_jobs_cannot_be_added_or_edited_and_journal_entries_cannot_be_touched(
    client_for: Callable[..., Client],
) -> None:
    superuser = User.objects.create_superuser("root", password="pw")
    client = client_for(superuser)
    job = jobs_in_every_state()["dead"]
    assert client.get(f"{CHANGELIST}add/").status_code == 403
    assert client.post(f"{CHANGELIST}{job.id}/change/", {"kind": "x"}).status_code == 200
    assert Job.objects.get(id=job.id).kind == job.kind  # the page is read-only
    client.post(f"{CHANGELIST}{job.id}/act/requeue/", {"post": "yes"})
    entry = JournalEntry.objects.get(job_id=job.id)
    base = "/admin/django_jobqueue/journalentry/"
    assert client.get(f"{base}add/").status_code == 403
    assert client.post(f"{base}{entry.id}/change/", {"note": "x"}).status_code == 403
    assert client.post(f"{base}{entry.id}/delete/", {"post": "yes"}).status_code == 403
    listing = client.get(base).content.decode()
    assert 'name="action"' not in listing  # no bulk actions (no delete) on the journal
    assert JournalEntry.objects.get(id=entry.id).note == entry.note


# --- CSRF -----------------------------------------------------------------------------------


def test_every_post_needs_the_csrf_token(operator: User, client_for: Callable[..., Client]) -> None:
    client = client_for(operator, csrf=True)
    jobs = jobs_in_every_state()
    posts = [
        (
            CHANGELIST,
            {"action": "cancel", "_selected_action": [str(jobs["pending"].id)], "post": "yes"},
        ),
        *((f"{CHANGELIST}{jobs['dead'].id}/act/{a}/", {"post": "yes"}) for a in CHANGES),
        (f"{CHANGELIST}{jobs['dead'].id}/delete/", {"post": "yes"}),
        (
            f"{CHANGELIST}cleanup/",
            {"finished_before_0": "2020-01-01", "finished_before_1": "00:00"},
        ),
        (f"{CHANGELIST}dashboard/queue/", {"queue": "default", "do": "pause"}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 403, url
    assert Job.objects.filter(status="cancelled").count() == 1
    assert Job.objects.filter(id=jobs["dead"].id, status="dead").exists()
    assert not JournalEntry.objects.exists()
    from django_jobqueue.models import QueuePause

    assert not QueuePause.objects.exists()


def test_bulk_action_labels_read_as_english() -> None:
    """A two-word verb keeps its particle last: "Run selected jobs now"."""
    actions = admin.site._registry[Job].actions
    labels = {getattr(a, "__name__", a): getattr(a, "short_description", "") for a in actions}
    assert labels["run_now"] == "Run selected jobs now"
    assert labels["requeue"] == "Requeue selected jobs"
