"""The admin's pages through the Django test client: the jobs changelist (columns,
filters, search), the job page, the journal changelist, and escaping everywhere."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.admin.common import short_id
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import LATEST
from tests.admin.conftest import jobs_in_every_state, set_state
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
JOURNAL = "/admin/django_jobqueue/journalentry/"
XSS = "<script>alert(1)</script>"


def ids_listed(client: Client, query: str = "") -> set[str]:
    """The short ids a jobs changelist page shows."""
    page = client.get(JOBS + query)
    assert page.status_code == 200
    return {short_id(job.id) for job in page.context["cl"].result_list}


def test_changelist_shows_each_column_for_jobs_in_every_state(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    jobs = jobs_in_every_state()
    JournalEntry.objects.create(
        job_id=jobs["completed"].id,
        kind=jobs["completed"].kind,
        run_no=1,
        outcome="completed",
        duration=timedelta(milliseconds=12.5),
    )
    text = client_for(viewer).get(JOBS).content.decode()
    for job in jobs.values():
        assert short_id(job.id) in text
    assert 'class="jq-badge" style="background:#cf222e">dead<' in text
    assert "in 59m" in text or "in 1h" in text  # the scheduled job's time to go
    assert "w:1" in text
    assert "until " in text
    assert "12.5ms" in text  # the last run's duration
    assert "1 / 0" in text  # runs / failures
    assert "7 jobs" in text  # an exact count: the table is small


def test_status_kind_queue_priority_and_date_filters(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    jobs = jobs_in_every_state()
    other = tasks.noop.using(queue="mail", priority=0).enqueue().id
    old = tasks.noop.enqueue().id
    set_state(old, created_at=timezone.now() - timedelta(days=3))
    short = {name: short_id(job.id) for name, job in jobs.items()}
    assert ids_listed(client, "?status__exact=dead") == {short["dead"]}
    assert ids_listed(client, f"?kind={tasks.noop.kind}") == {short_id(other), short_id(old)}
    assert ids_listed(client, "?queue=mail") == {short_id(other)}
    assert ids_listed(client, "?priority__exact=0") == {short_id(other)}
    day = (timezone.localtime() - timedelta(days=2)).date().isoformat()
    recent = ids_listed(client, f"?created_at__range__gte_0={day}&created_at__range__gte_1=00:00")
    assert short_id(old) not in recent
    assert len(recent) == len(jobs) + 1
    listing = client.get(JOBS).content.decode()
    assert "Last hour" in listing
    assert "Last 24 hours" in listing
    assert tasks.noop.kind in listing
    assert "mail" in listing


def test_a_date_range_that_does_not_parse_says_so_and_filters_nothing(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    jobs = jobs_in_every_state()
    page = client_for(viewer).get(
        JOBS + "?finished_at__range__gte_0=yesterday&finished_at__range__gte_1=noon"
    )
    messages = [str(m) for m in page.context["messages"]]
    assert len(messages) == 1
    assert messages[0].startswith("The finished at range was ignored: Enter a valid date")
    assert len(page.context["cl"].result_list) == len(jobs)


def test_search_by_full_id_short_id_kind_dedup_key_and_idempotency_key(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    jobs = jobs_in_every_state()
    keyed = tasks.noop.using(idempotency_key="order-77").enqueue().id
    deduped = tasks.Sync(account_id=5).enqueue().id
    target = jobs["dead"].id
    assert ids_listed(client, f"?q={target}") == {short_id(target)}
    assert ids_listed(client, f"?q={short_id(target)}") == {short_id(target)}
    assert short_id(target) in ids_listed(client, f"?q={str(target)[:13]}")  # a plain prefix
    assert ids_listed(client, f"?q={tasks.noop.kind}") == {short_id(keyed)}
    assert ids_listed(client, "?q=order-77") == {short_id(keyed)}
    assert ids_listed(client, f"?q={Job.objects.get(id=deduped).dedup_key}") == {short_id(deduped)}
    assert ids_listed(client, "?q=no-such-thing") == set()
    assert ids_listed(client, "?q=order") == set()  # keys match exactly, never as substrings


def test_job_page_pretty_prints_json_folds_large_values_and_shows_the_journal(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    job = tasks.record.enqueue(n=3)
    set_state(job.id, carry={"rows": list(range(400))}, result={"ok": True}, status="completed")
    JournalEntry.objects.create(
        job_id=job.id,
        kind=job.kind,
        run_no=1,
        outcome="retried",
        started_at=timezone.now(),
        duration=timedelta(seconds=2),
        note="boom",
        attachment={"attempt": 1},
        worker="w:1",
    )
    store.requeue(job_id=job.id, force=True, actor="admin:olga")
    text = client_for(viewer).get(f"{JOBS}{job.id}/change/").content.decode()
    assert '<pre class="jq-json">{\n  &quot;n&quot;: 3\n}</pre>' in text  # the payload
    assert "<details><summary>carry (" in text  # large: folded
    assert "&quot;ok&quot;: true" not in text  # the requeue cleared the result
    rows = text.split('class="journal-entry"')[1:]
    assert len(rows) == 2
    assert ">retried<" in rows[0]
    assert "boom" in rows[0]
    assert "2.00s" in rows[0]
    assert "&quot;attempt&quot;: 1" in rows[0]
    assert ">requeued<" in rows[1]
    assert "admin:olga" in rows[1]


def test_job_page_hides_fields_named_like_secrets_but_stores_them_unchanged(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    job = tasks.record.enqueue(n={"user": "ann", "api_token": "t0ps3cret-payload-value"})
    set_state(job.id, carry={"Password": "hunter2-carry-value"})
    JournalEntry.objects.create(
        job_id=job.id,
        kind=job.kind,
        outcome="retried",
        attachment={"secret": "s3cret-attachment-value"},
    )
    text = client_for(viewer).get(f"{JOBS}{job.id}/change/").content.decode()
    journal = client_for(viewer).get(JOURNAL).content.decode()
    # values no page could contain by chance (a CSRF token can hold any short string)
    for secret in ("t0ps3cret-payload-value", "hunter2-carry-value", "s3cret-attachment-value"):
        assert secret not in text
        assert secret not in journal
    assert "********" in text
    assert "&quot;user&quot;: &quot;ann&quot;" in text
    assert Job.objects.get(id=job.id).payload["n"]["api_token"] == "t0ps3cret-payload-value"


def test_job_page_of_an_unknown_or_malformed_id_is_404(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    assert client.get(f"{JOBS}01a22a6f-0000-7000-8000-000000000000/change/").status_code == 404
    assert client.get(f"{JOBS}not-an-id/change/").status_code == 404
    assert client.get(f"{JOBS}not-an-id/act/requeue/").status_code == 404
    job = tasks.noop.enqueue()
    assert client.get(f"{JOBS}{job.id}/act/explode/").status_code == 404


def test_journal_changelist_filters_failures_in_the_last_hour_and_links_jobs(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    job = tasks.add.enqueue(1, 2)
    now = timezone.now()
    for outcome, ago in (("retried", 10), ("dead", 20), ("completed", 5), ("retried", 120)):
        JournalEntry.objects.create(
            job_id=job.id,
            kind=job.kind,
            outcome=outcome,
            note=f"{outcome} {ago}m ago",
            recorded_at=now - timedelta(minutes=ago),
        )
    listing = client.get(JOURNAL).content.decode()
    assert "any failure" in listing
    assert "Last hour" in listing
    # Click 1: "any failure"; click 2: "Last hour" (its link, as the page renders it).
    page = client.get(JOURNAL + "?outcome=failure")
    link = next(
        c
        for c in page.context["cl"].filter_specs[2].choices(page.context["cl"])
        if c.get("display") == "Last hour"
    )
    page = client.get(JOURNAL + link["query_string"])
    notes = [e.note for e in page.context["cl"].result_list]
    assert notes == ["retried 10m ago", "dead 20m ago"]
    assert f'href="{JOBS}{job.id}/change/"' in page.content.decode()
    by_kind = client.get(JOURNAL + f"?kind={job.kind}&outcome=completed")
    assert [e.note for e in by_kind.context["cl"].result_list] == ["completed 5m ago"]


def test_app_index_links_the_dashboard(viewer: User, client_for: Callable[..., Client]) -> None:
    text = client_for(viewer).get("/admin/django_jobqueue/").content.decode()
    assert f'href="{JOBS}dashboard/"' in text


# --- escaping -------------------------------------------------------------------------------


def test_script_in_payload_kind_note_and_attachment_is_escaped_on_every_page(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    job = tasks.record.enqueue(n=1)
    set_state(job.id, kind=XSS, payload={"html": XSS}, status="dead", finished_at=timezone.now())
    JournalEntry.objects.create(
        job_id=job.id, kind=XSS, outcome="dead", note=XSS, attachment={"x": XSS}, worker="w:1"
    )
    for url in (JOBS, f"{JOBS}{job.id}/change/", JOURNAL, f"{JOBS}dashboard/"):
        text = client.get(url).content.decode()
        assert XSS not in text, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text, url


def test_a_wait_for_an_event_without_timeout_shows_what_it_waits_for_not_a_date(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    job = tasks.noop.enqueue()
    set_state(job.id, visible_at=LATEST, parked="event", wait_name="answered")
    listed = client.get(JOBS).content.decode()
    assert "the event (no timeout)" in listed
    assert "9999" not in listed
    page = client.get(f"{JOBS}{job.id}/change/").content.decode()
    assert "the event (no timeout)" in page
    assert "9999" not in page
