"""The live pages' views (admin/live.py): the same permissions as their pages; a stamp
that changes when what the page shows does (the poll of SQLite and MariaDB); on
PostgreSQL an event stream fed by the process's one listener, filtered per page,
ending itself after a bounded time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import close_old_connections, connection
from django.test import Client, RequestFactory
from django.utils import timezone

from django_jobqueue import cancel
from django_jobqueue.admin import live
from django_jobqueue.models import Job
from django_jobqueue.store import listening
from tests.admin.conftest import OPERATOR_PERMS, make_user, set_state
from tests.admin.workflow_rows import make_workflow
from tests.helpers import is_postgres, postgres_only
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
WORKFLOWS = "/admin/django_jobqueue/workflow/"


@pytest.fixture(autouse=True)
def _listener() -> Iterator[None]:
    yield
    listening.stop_all()


@pytest.fixture
def watcher(client_for: Callable[..., Client]) -> Client:
    return client_for(make_user("wes", [*OPERATOR_PERMS, "view_workflow"]))


def stamp(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response
    assert "no-store" in response["Cache-Control"]
    return str(json.loads(response.content)["stamp"])


def test_live_views_need_the_pages_view_permission(client_for: Callable[..., Client]) -> None:
    job = tasks.add.enqueue(1, 2)
    wf, _ = make_workflow("w", {"a": "pending"})
    nobody = client_for(User.objects.create_user("nina", password="pw", is_staff=True))
    for url in (
        f"{JOBS}dashboard/live/",
        f"{JOBS}dashboard/live/stamp/",
        f"{JOBS}{job.id}/live/",
        f"{JOBS}{job.id}/live/stamp/",
        f"{WORKFLOWS}{wf.id}/live/",
        f"{WORKFLOWS}{wf.id}/live/stamp/",
    ):
        assert nobody.get(url).status_code == 403, url
        assert Client().get(url).status_code == 302, url  # to the login page


def test_live_views_of_a_missing_job_or_workflow_are_404(watcher: Client) -> None:
    missing = "01a247bc-2dca-7845-a562-abfa5a50895d"
    for url in (f"{JOBS}{missing}/live/stamp/", f"{WORKFLOWS}{missing}/live/stamp/"):
        assert watcher.get(url).status_code == 404, url


def test_the_job_stamp_changes_with_its_status_and_progress(watcher: Client) -> None:
    job = tasks.add.enqueue(1, 2)
    url = f"{JOBS}{job.id}/live/stamp/"
    first = stamp(watcher, url)
    assert stamp(watcher, url) == first  # nothing changed, nothing to fetch
    lease = {"claimed_by": "w:1", "claim_expires_at": timezone.now() + timedelta(minutes=1)}
    set_state(job.id, status="claimed", run_count=1, **lease)
    claimed = stamp(watcher, url)
    set_state(job.id, progress_done=3, progress_total=10)
    progressed = stamp(watcher, url)
    set_state(job.id, status="completed", progress_done=None, progress_total=None)
    assert len({first, claimed, progressed, stamp(watcher, url)}) == 4


def test_the_dashboard_stamp_changes_on_a_new_job_a_claim_and_a_settlement(
    watcher: Client,
) -> None:
    url = f"{JOBS}dashboard/live/stamp/"
    before = stamp(watcher, url)
    job = tasks.add.enqueue(1, 2)
    enqueued = stamp(watcher, url)
    set_state(job.id, status="claimed", claimed_by="w:1", run_count=1)
    claimed = stamp(watcher, url)
    set_state(job.id, status="pending", claimed_by="")
    cancel(job_id=job.id)  # a journal entry
    assert len({before, enqueued, claimed, stamp(watcher, url)}) == 4


def test_the_workflow_stamp_changes_when_a_step_does(watcher: Client) -> None:
    wf, steps = make_workflow("w", {"a": "pending", "b": "waiting"}, [("a", "b")])
    url = f"{WORKFLOWS}{wf.id}/live/stamp/"
    before = stamp(watcher, url)
    set_state(steps["a"].id, status="completed")
    assert stamp(watcher, url) != before


def test_each_live_page_names_its_views_and_polls_where_nothing_listens(
    watcher: Client,
) -> None:
    job = tasks.add.enqueue(1, 2)
    wf, _ = make_workflow("w", {"a": "pending"})
    for page, events in (
        (f"{JOBS}dashboard/", f"{JOBS}dashboard/live/"),
        (f"{JOBS}{job.id}/change/", f"{JOBS}{job.id}/live/"),
        (f"{WORKFLOWS}{wf.id}/change/", f"{WORKFLOWS}{wf.id}/live/"),
    ):
        response = watcher.get(page)
        config = response.context["live_page"]
        assert config["events_url"] == events
        assert config["stamp_url"] == events + "stamp/"
        assert config["mode"] == ("events" if is_postgres() else "poll")
        # A polling page starts from the stamp it was rendered with.
        assert ("stamp" in config) is not is_postgres()
        text = response.content.decode()
        assert 'id="jq-live-config"' in text
        assert "data-live" in text


def test_where_nothing_listens_the_event_view_says_204_so_the_page_polls(
    watcher: Client,
) -> None:
    if is_postgres():
        pytest.skip("PostgreSQL streams")
    assert watcher.get(f"{JOBS}dashboard/live/").status_code == 204


# --- the event stream, on PostgreSQL -------------------------------------------------


def _chunks(response: object) -> Iterator[str]:
    for chunk in response.streaming_content:  # type: ignore[attr-defined]
        yield chunk.decode() if isinstance(chunk, bytes) else chunk


def _in_thread(fn: Callable[[], object], after: float = 0.5) -> threading.Thread:
    def run() -> None:
        time.sleep(after)  # the stream is waiting by then; if not, it still sees it
        try:
            fn()
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def listener_up() -> Iterator[None]:
    """The process's listener connected before a stream opens: a stream that started it
    would get its "read again" (``RESYNC``) as a first change."""
    with listening.subscribe([*listening.wakeups.CHANNELS]):
        yield


def _events(chunks: Iterator[str]) -> list[str]:
    """The stream's events to its end (``STREAM_SECONDS``), heartbeats left out."""
    return [c for c in chunks if c.startswith("event:")]


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("listener_up")
def test_the_job_stream_sends_a_change_for_its_job_and_not_for_another(
    watcher: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "STREAM_SECONDS", 2.0)
    mine, other = tasks.add.enqueue(1, 2), tasks.add.enqueue(3, 4)
    response = watcher.get(f"{JOBS}{mine.id}/live/")
    assert response["Content-Type"] == "text/event-stream"
    chunks = _chunks(response)
    assert next(chunks) == "id: 0\nretry: 1000\n\n"  # no change at a first connect
    _in_thread(lambda: cancel(job_id=other.id), after=0).join()
    assert _events(chunks) == []  # another job's settlement: nothing
    assert listening.hub().subscribers() == 1  # the stream's subscription ended with it

    response = watcher.get(f"{JOBS}{mine.id}/live/")
    chunks = _chunks(response)
    next(chunks)
    _in_thread(lambda: cancel(job_id=mine.id), after=0).join()
    assert _events(chunks) == ["event: change\nid: 1\ndata: 1\n\n"]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_reconnecting_stream_starts_with_a_change(watcher: Client) -> None:
    response = watcher.get(f"{JOBS}dashboard/live/", HTTP_LAST_EVENT_ID="4")
    assert next(_chunks(response)) == "id: 0\nretry: 1000\n\n" + "event: change\nid: 0\ndata: 0\n\n"
    response.close()


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("listener_up")
def test_the_workflow_stream_passes_its_steps_settlements_and_not_others(
    watcher: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "STREAM_SECONDS", 2.0)
    wf, steps = make_workflow("w", {"a": "pending", "b": "waiting"}, [("a", "b")])
    stranger = tasks.add.enqueue(1, 2)
    response = watcher.get(f"{WORKFLOWS}{wf.id}/live/")
    chunks = _chunks(response)
    next(chunks)
    _in_thread(lambda: cancel(job_id=stranger.id), after=0).join()
    assert _events(chunks) == []

    response = watcher.get(f"{WORKFLOWS}{wf.id}/live/")
    chunks = _chunks(response)
    next(chunks)
    _in_thread(lambda: cancel(job_id=steps["a"].id), after=0).join()
    assert _events(chunks) == ["event: change\nid: 1\ndata: 1\n\n"]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_stream_ends_itself_after_its_time(watcher: Client) -> None:
    request = RequestFactory().get("/")
    began = time.monotonic()
    response = live.events(request, live.everything, seconds=0.5)
    chunks = list(_chunks(response))
    assert time.monotonic() - began < 10
    assert chunks[0].startswith("id: 0\nretry:")
    assert listening.hub().subscribers() == 0


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_every_open_page_shares_the_one_listener_connection(watcher: Client) -> None:
    job = tasks.add.enqueue(1, 2)
    before = listening.hub().connections
    responses = [watcher.get(f"{JOBS}{job.id}/live/") for _ in range(10)]
    for r in responses:
        next(_chunks(r))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE 'LISTEN%%'"
        )
        (listeners,) = cursor.fetchone()
    assert listening.hub().connections - before <= 1
    assert listeners == 1
    for r in responses:
        r.close()
    assert Job.objects.filter(id=job.id).exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("listener_up")
def test_under_asgi_the_stream_is_an_async_generator(watcher: Client) -> None:
    """An ASGI request gets the async stream (no thread held while it waits); it sends
    its opening and then a change for its job."""
    import asyncio

    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    job = tasks.add.enqueue(1, 2)

    def cancel_and_close() -> None:  # in a thread of its own: its connection closed
        try:
            cancel(job_id=job.id)
        finally:
            connection.close()

    client = AsyncClient()
    client.cookies = watcher.cookies

    async def read() -> list[str]:
        response = await client.get(f"{JOBS}{job.id}/live/")
        assert response.is_async
        chunks = response.streaming_content.__aiter__()
        got = [(await chunks.__anext__()).decode()]
        await sync_to_async(cancel_and_close, thread_sensitive=False)()
        event = (await asyncio.wait_for(chunks.__anext__(), 20)).decode()
        while event.startswith(":"):
            event = (await asyncio.wait_for(chunks.__anext__(), 20)).decode()
        got.append(event)
        await chunks.aclose()
        return got

    opening, event = asyncio.run(read())
    assert opening == "id: 0\nretry: 1000\n\n"
    assert event.startswith("event: change\n")
