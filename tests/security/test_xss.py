"""XSS: hostile strings in every field a page shows (kind, queue, payload keys and values,
carry, result, keys, worker ids, operators, journal notes and tracebacks, attachments,
schedule names, limited kinds, paused queues, log entries, the operator's own username,
search terms and filter values), and every page of the admin rendered: each shows the
fields it should (their token) and none of them raw."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.test import Client

from django_jobqueue.admin.actions import ACTIONS
from tests.security.pages import cleanup_data, confirmed, page_keys, pages
from tests.security.world import (
    DAY,
    HOSTILE_KIND,
    JS_URL,
    World,
    assert_safe,
    hostile,
    unescaped,
)

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"


def superuser(world: World) -> Client:
    """The attacker's favourite victim: a superuser (whose own username is hostile)."""
    client = Client()
    assert world.xss_user is not None
    client.force_login(world.xss_user)
    return client


def test_the_hostile_markers_are_caught_when_raw_and_not_when_escaped() -> None:
    from django.utils.html import escape

    raw = f'<p>{hostile("x")}</p><a href="{JS_URL}">x</a>'
    assert len(unescaped(raw)) == 3
    assert unescaped(escape(raw)) == []


@pytest.mark.parametrize("key", [k for k in page_keys() if k != "job add"])
def test_every_page_shows_hostile_fields_escaped(world: World, key: str) -> None:
    page = {p.key: p for p in pages(world)}[key]
    response = superuser(world).get(page.url)
    refused = page.needs is None  # no one may (an active job's delete page, add, ...)
    assert response.status_code == (403 if refused else page.shown)
    # A live page's event stream holds change notices, no page content (and is left
    # unread: closing it would end the request, and the test's connection with it).
    if not refused and not response.streaming:
        # A live page's stamp is JSON, and its stream a 204 where it cannot listen:
        # neither has an admin header naming the user.
        html = response.status_code == 200 and response["Content-Type"].startswith("text/html")
        assert_safe(response.content.decode(), *(("user",) if html else ()), *page.shows)


SECTIONS = {
    "queues": ("queue", "paused", "pauser"),
    "schedules": ("schedule", "kind"),
    "kinds": ("kind",),
    "limits": ("kind",),
    "workers": ("workerid", "wqueue"),
}


@pytest.mark.parametrize("section", list(SECTIONS))
def test_each_dashboard_section_shows_its_hostile_values_escaped(
    world: World, section: str
) -> None:
    text = superuser(world).get(f"{JOBS}dashboard/").content.decode()
    start = text.index(f'<div class="jq-section" id="{section}"')  # data-live may follow
    end = text.find('<div class="jq-section"', start + 1)
    assert_safe(text[start : end if end > 0 else len(text)], *SECTIONS[section])


@pytest.mark.parametrize("name", list(ACTIONS))
def test_every_bulk_confirmation_shows_hostile_kinds_escaped(world: World, name: str) -> None:
    selected = [job.pk for job in world.hostile.values()]
    response = superuser(world).post(JOBS, {"action": name, "_selected_action": selected})
    assert response.status_code == 200
    assert response.templates[0].name == "django_jobqueue/admin/confirm_action.html"
    assert_safe(response.content.decode(), "user", "kind")


def test_the_cleanup_count_page_shows_a_hostile_kind_escaped(world: World) -> None:
    data = cleanup_data(DAY / 2, kind=HOSTILE_KIND)
    response = superuser(world).post(f"{JOBS}cleanup/", data)
    assert response.status_code == 200
    assert response.context["count"] == 2  # the finished hostile jobs
    assert_safe(response.content.decode(), "user", "kind")


def test_messages_after_a_cleanup_of_a_hostile_kind_are_escaped(world: World) -> None:
    client = superuser(world)
    data = confirmed(client, cleanup_data(DAY / 2, kind=HOSTILE_KIND), count=2)
    response = client.post(f"{JOBS}cleanup/", data, follow=True)
    assert response.status_code == 200
    assert "Cleaned up 2 finished jobs" in response.content.decode()
    assert_safe(response.content.decode(), "user", "kind")


def test_pausing_a_queue_with_a_hostile_name_shows_it_escaped(world: World) -> None:
    name = hostile("newqueue")
    response = superuser(world).post(
        f"{JOBS}dashboard/queue/", {"queue": name, "do": "pause"}, follow=True
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "paused." in text  # the message, and the queue in the table
    assert_safe(text, "user", "newqueue", "paused")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("do", hostile("verb")),  # "Unknown queue action ..."
        ("queue", hostile("longqueue") * 2),  # too long for a queue name: refused, named
    ],
)
def test_queue_form_errors_name_the_hostile_input_escaped(
    world: World, field: str, value: str
) -> None:
    data = {"queue": "default", "do": "pause", field: value}
    response = superuser(world).post(f"{JOBS}dashboard/queue/", data, follow=True)
    assert response.status_code == 200
    token = "verb" if field == "do" else "longqueue"
    assert_safe(response.content.decode(), "user", token)


@pytest.mark.parametrize("field", ["kind", "statuses", "finished_before_0"])
def test_cleanup_form_errors_name_the_hostile_input_escaped(world: World, field: str) -> None:
    data = {**cleanup_data(DAY), field: hostile("choice")}
    response = superuser(world).post(f"{JOBS}cleanup/", data)
    assert response.status_code == 200
    assert response.context["form"].errors
    text = response.content.decode()
    assert unescaped(text) == []
    if field != "finished_before_0":  # "Select a valid choice. ... is not one of ..."
        assert "xss-choice" in text


def test_the_login_page_escapes_a_hostile_next(world: World) -> None:
    response = Client().get(f"/admin/login/?next={quote(hostile('next'))}")
    assert response.status_code == 200
    assert_safe(response.content.decode(), "next")


@pytest.mark.parametrize("tail", ["change/", "history/", "delete/", "act/requeue/", ""])
def test_a_hostile_job_id_in_the_url_is_refused_and_reflected_escaped(
    world: World, tail: str
) -> None:
    # A 404, or Django's "does not exist" message on the admin index, which names the id.
    response = superuser(world).get(f"{JOBS}{quote(hostile('id'))}/{tail}", follow=True)
    assert response.status_code in (200, 404)
    text = response.content.decode()
    assert unescaped(text) == []
    if response.status_code == 200:
        assert "xss-id" in text  # the message names the id, escaped


def test_the_metrics_view_is_plain_text_never_html(world: World) -> None:
    response = superuser(world).get("/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "xss-kind" in response.content.decode()  # the hostile kind, as a label value
