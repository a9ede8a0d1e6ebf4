"""Live pages: the dashboard, a job's page and a workflow's page update themselves.

Each page carries ``live.html``'s small script. On PostgreSQL it opens an
``EventSource`` on the page's ``live/`` view: a server-sent event stream fed by the
process's one listener (``store.listening``): new jobs (channel ``django_jobqueue``),
settlements (``django_jobqueue_settled``) and progress (``django_jobqueue_progress``),
filtered for the page (a job's page: its id; a workflow's: its steps' ids) without a
query. On each event the script fetches the page again and swaps the parts marked
``data-live`` (the whole content when the set of parts changed). Elsewhere the script
polls the page's ``live/stamp/`` view (a short text from one small read, see
``store.live``) every ``POLL_MS`` and fetches the page when it changes. With
JavaScript off the pages are what they were (the dashboard refreshes itself).

A stream holds a thread of a WSGI server for its life, so it ends itself after
``STREAM_SECONDS`` (the browser's EventSource reconnects ``RETRY_MS`` later); under
ASGI it is an async generator, holding no thread while it waits.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase

from django_jobqueue.store import listening, live, wakeups
from django_jobqueue.store.listening import RESYNC, Note

#: How long one event stream lasts before it ends itself (the browser reconnects).
STREAM_SECONDS = 300.0
#: What the stream tells the browser to wait before reconnecting (milliseconds).
RETRY_MS = 1000
#: The least time between two events of one stream (a burst of settlements is one).
GAP = 0.25
#: A comment sent when nothing happened for this long: a write to a client that has
#: gone fails, which ends its stream (and frees its WSGI thread) within this time.
HEARTBEAT = 5.0
#: How often the page polls its stamp where no listener can tell it (milliseconds).
POLL_MS = 1000

Wanted = Callable[[Note], bool]


def context(events_url: str, stamp_url: str, stamp: Callable[[], str]) -> dict[str, Any]:
    """What ``live.html`` needs: where to listen (or poll) and which of the two; a
    polling page starts from the stamp of what it shows (read with it)."""
    events = listening.supported()
    found = {
        "mode": "events" if events else "poll",
        "events_url": events_url,
        "stamp_url": stamp_url,
        "poll_ms": POLL_MS,
    }
    if not events:
        found["stamp"] = stamp()
    return found


def everything(note: Note) -> bool:
    return note.channel in (wakeups.CHANNEL, wakeups.SETTLED_CHANNEL)


def naming(ids: Callable[[], set[str]]) -> Wanted:
    """Notes of settlements or progress naming one of ``ids()`` (re-asked after a new
    job: a workflow may have grown)."""
    known = ids()

    def wanted(note: Note) -> bool:
        nonlocal known
        if note.channel == wakeups.CHANNEL:
            grown = ids()
            added, known = grown != known, grown
            return added
        return any(i in known for i in note.payload.split(","))

    return wanted


def _event(n: int) -> str:
    return f"event: change\nid: {n}\ndata: {n}\n\n"


def _any_wanted(first: Note, rest: list[Note], wanted: Wanted) -> bool:
    """Whether a note of the burst concerns the page; the thread's database connections
    are then let go (``_let_go``)."""
    try:
        return any(n is RESYNC or wanted(n) for n in [first, *rest])
    finally:
        _let_go()


def _let_go() -> None:
    """Close this thread's database connections: a stream lasts minutes and holds none
    meanwhile (the listener's one connection serves every stream of the process)."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


def _opening(resumed: bool) -> str:
    """The stream's first lines: the reconnection delay and an id (so that the browser's
    reconnect says ``Last-Event-ID``); a reconnect gets a change at once, for what
    happened while it was away."""
    return f"id: 0\nretry: {RETRY_MS}\n\n" + (_event(0) if resumed else "")


def stream(wanted: Wanted, seconds: float, resumed: bool) -> Iterator[str]:
    """The event stream for a WSGI server: a thread, ending after ``seconds``. It
    subscribes when it starts (a response closed before it started holds nothing)."""
    sub = listening.subscribe([*wakeups.CHANNELS])
    _let_go()
    try:
        yield _opening(resumed)
        deadline, n = time.monotonic() + seconds, 0
        while (left := deadline - time.monotonic()) > 0:
            note = sub.get(min(left, HEARTBEAT))
            if note is None:
                yield ": idle\n\n"
                continue
            time.sleep(GAP)  # a burst of notes is one event
            if _any_wanted(note, sub.pending(), wanted):
                n += 1
                yield _event(n)
    finally:
        sub.close()


async def astream(wanted: Wanted, seconds: float, resumed: bool) -> AsyncIterator[str]:
    """``stream`` for an ASGI server: waits on the event loop, holding no thread."""
    import asyncio

    from asgiref.sync import sync_to_async

    subscribe = sync_to_async(listening.subscribe, thread_sensitive=False)
    sub = await subscribe([*wakeups.CHANNELS])
    await sync_to_async(_let_go)()
    try:
        yield _opening(resumed)
        deadline, n = time.monotonic() + seconds, 0
        while (left := deadline - time.monotonic()) > 0:
            note = await sub.aget(min(left, HEARTBEAT))
            if note is None:
                yield ": idle\n\n"
                continue
            await asyncio.sleep(GAP)
            if await sync_to_async(_any_wanted)(note, sub.pending(), wanted):
                n += 1
                yield _event(n)
    finally:
        sub.close()


def events(
    request: HttpRequest, wanted: Wanted, *, seconds: float | None = None
) -> HttpResponseBase:
    """The page's event stream, for ``seconds`` (``STREAM_SECONDS``); 204 where nothing
    listens: the page polls instead."""
    seconds = STREAM_SECONDS if seconds is None else seconds
    if not listening.supported():
        return HttpResponse(status=204)  # EventSource stops on 204: the script polls
    resumed = "HTTP_LAST_EVENT_ID" in request.META
    body: Iterator[str] | AsyncIterator[str]
    if isinstance(request, ASGIRequest):
        body = astream(wanted, seconds, resumed)
    else:
        body = stream(wanted, seconds, resumed)
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


def stamp(value: str) -> JsonResponse:
    response = JsonResponse({"stamp": value})
    response["Cache-Control"] = "no-store"
    return response


def dashboard_events(modeladmin: Any) -> Callable[[HttpRequest], HttpResponseBase]:
    def view(request: HttpRequest) -> HttpResponseBase:
        if not modeladmin.has_view_permission(request):
            raise PermissionDenied
        return events(request, everything)

    return view


def dashboard_stamp(modeladmin: Any) -> Callable[[HttpRequest], HttpResponse]:
    def view(request: HttpRequest) -> HttpResponse:
        if not modeladmin.has_view_permission(request):
            raise PermissionDenied
        return stamp(live.dashboard_stamp())

    return view


def job_stamp(job_id: object) -> JsonResponse:
    return stamp(live.job_stamp(job_id=str(job_id)))


def workflow_stamp(workflow_id: object) -> JsonResponse:
    return stamp(live.workflow_stamp(workflow_id=str(workflow_id)))


def job_wanted(job_id: str) -> Wanted:
    return lambda note: note.channel != wakeups.CHANNEL and job_id in note.payload


def workflow_wanted(workflow_id: str) -> Wanted:
    return naming(lambda: live.workflow_step_ids(workflow_id=workflow_id))
