"""``stream_response``: a job's stream as server-sent events (an ``id``, ``event: item``
and JSON ``data`` per item, ``event: end`` once the job finished), resumed after
``Last-Event-ID`` or ``?after=``; 404 for no such job, 400 for an offset that is not one;
``astream_response`` the same for an async view. And the admin's job page shows a
job's last stream items."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import AsyncClient, Client
from django.urls import reverse

from django_jobqueue.admin.job_page import STREAM_SHOWN
from django_jobqueue.testing import run_jobs
from tests.taskapp import stream_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db, pytest.mark.urls("tests.stream_urls")]


def events(body: bytes) -> list[dict[str, Any]]:
    """The events of a server-sent events body, each as its fields."""
    found = []
    for block in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append(fields)
    return found


def body_of(response: Any) -> bytes:
    return b"".join(response.streaming_content)


def test_a_finished_job_s_stream_is_served_whole_then_an_end_event() -> None:
    handle = stream_tasks.chunks.enqueue(n=3)
    run_jobs()
    response = Client().get(f"/stream/{handle.id}/events/")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "no-cache"
    body = body_of(response)
    assert body.startswith(b"retry: 100\n\n")
    found = events(body)
    assert [(e["id"], e["event"]) for e in found[:3]] == [
        ("1", "item"),
        ("2", "item"),
        ("3", "item"),
    ]
    assert [json.loads(e["data"])["chunk"] for e in found[:3]] == [0, 1, 2]
    assert found[3] == {"event": "end", "data": '{"status": "completed"}'}


def test_a_reconnection_resumes_after_last_event_id_and_after_is_a_first_start() -> None:
    handle = stream_tasks.chunks.enqueue(n=5)
    run_jobs()
    resumed = events(body_of(Client().get(f"/stream/{handle.id}/events/", HTTP_LAST_EVENT_ID="3")))
    assert [e.get("id") for e in resumed] == ["4", "5", None]
    started = events(body_of(Client().get(f"/stream/{handle.id}/events/?after=4")))
    assert [e.get("id") for e in started] == ["5", None]


def test_a_running_job_s_response_ends_at_its_timeout_without_an_end_event() -> None:
    handle = stream_tasks.chunks.enqueue(n=5)  # pending: no run wrote anything yet
    found = events(body_of(Client().get(f"/stream/{handle.id}/events/?timeout=0.2")))
    assert found == []


def test_no_such_job_is_a_404_and_a_bad_last_event_id_a_400() -> None:
    missing = Client().get("/stream/01234567-89ab-cdef-0123-456789abcdef/events/")
    assert missing.status_code == 404
    handle = stream_tasks.chunks.enqueue(n=1)
    for bad in ("x", "-2"):
        response = Client().get(f"/stream/{handle.id}/events/", HTTP_LAST_EVENT_ID=bad)
        assert response.status_code == 400
        assert b"must be an offset" in response.content


@pytest.mark.django_db(transaction=True)
def test_astream_response_serves_the_same_events_to_an_async_view() -> None:
    handle = stream_tasks.chunks.enqueue(n=3)
    run_jobs()

    async def get() -> bytes:
        response = await AsyncClient().get(f"/stream/{handle.id}/aevents/")
        return b"".join([chunk async for chunk in response.streaming_content])

    found = events(asyncio.run(get()))
    assert [e.get("id") for e in found] == ["1", "2", "3", None]
    assert found[-1]["event"] == "end"


@pytest.mark.urls("testproject.urls")
def test_the_job_page_shows_the_stream_s_last_items() -> None:
    handle = stream_tasks.chunks.enqueue(n=STREAM_SHOWN + 5)
    run_jobs()
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    page = client.get(reverse("admin:django_jobqueue_job_change", args=[handle.id]))
    html = page.content.decode()
    assert 'id="job-stream"' in html
    assert f"{STREAM_SHOWN + 5} items" in html
    assert f"the last {STREAM_SHOWN} are shown" in html
    assert html.count('class="job-stream-item"') == STREAM_SHOWN
    assert re.search(rf"chunk {STREAM_SHOWN + 4}\b", html)  # the newest
    assert re.search(r"chunk 5\b", html)  # the oldest shown
    assert not re.search(r"chunk 4\b", html)
