"""Serving a job's stream to a browser as server-sent events.

``stream_response(request, job_id)`` is what a project's own view returns once it has
decided that this user may see this job (the helper checks nothing of the kind)::

    from django_jobqueue.streams import stream_response

    @login_required
    def report_progress(request, report_id):
        report = get_object_or_404(Report, pk=report_id, owner=request.user)
        return stream_response(request, report.job_id)

Each item is one event: ``id`` its offset, ``event: item``, ``data`` its value as
JSON. When the job has finished and every item was sent, one ``event: end`` whose data
is ``{"status": …}`` ends the response (the page closes its ``EventSource`` on it).
Otherwise the response ends after ``timeout`` seconds and the browser reconnects by
itself (after ``retry`` ms), sending the last id it received as ``Last-Event-ID``: the
next response starts after it, so nothing is sent twice or skipped. A ``?after=N``
query parameter starts a first connection elsewhere than at the beginning.
``astream_response`` is the same for an ``async def`` view under ASGI.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from django.http import Http404, HttpRequest, HttpResponseBadRequest, StreamingHttpResponse

from django_jobqueue import store
from django_jobqueue.errors import JobNotFound
from django_jobqueue.store import streams as stored
from django_jobqueue.task.streaming import Stream, StreamItem

DEFAULT_TIMEOUT = 30.0  # seconds one response follows the stream before it ends


def _start(request: HttpRequest) -> int | None:
    """Where to start: after ``Last-Event-ID`` (a reconnection), else ``?after=``, else
    at the beginning; None when the given one is not an offset."""
    given = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0"
    try:
        offset = int(given)
    except ValueError:
        return None
    return offset if offset >= 0 else None


def _stream(request: HttpRequest, job_id: Any, timeout: float) -> Stream | Any:
    """The stream to send, or the response that says why there is none."""
    after = _start(request)
    if after is None:
        return HttpResponseBadRequest("Last-Event-ID or ?after= must be an offset (0 or more)")
    try:
        key = store.as_uuid(job_id)
    except Exception:
        raise Http404(f"No job with id {job_id!r}") from None
    if stored.status_of(job_id=key) is None:
        raise Http404(f"No job with id {job_id}")
    return Stream(key, after=after, timeout=timeout)


def _event(item: StreamItem) -> bytes:
    data = json.dumps(item.value, default=str, separators=(",", ":"))
    return f"id: {item.offset}\nevent: item\ndata: {data}\n\n".encode()


def _end(stream: Stream) -> bytes:
    status = stored.status_of(job_id=stream.job_id)
    return f"event: end\ndata: {json.dumps({'status': status})}\n\n".encode()


def _response(body: Iterator[bytes] | AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it comes
    return response


def stream_response(
    request: HttpRequest, job_id: Any, *, timeout: float = DEFAULT_TIMEOUT, retry: int = 1000
) -> Any:
    """A response serving ``job_id``'s stream as server-sent events (see the module);
    404 when there is no such job, 400 for a ``Last-Event-ID`` that is no offset."""
    stream = _stream(request, job_id, timeout)
    if not isinstance(stream, Stream):
        return stream

    def body() -> Iterator[bytes]:
        yield f"retry: {int(retry)}\n\n".encode()
        try:
            for item in stream:
                yield _event(item)
        except JobNotFound:  # deleted while followed
            stream.finished = True
        if stream.finished:
            yield _end(stream)

    return _response(body())


async def astream_response(
    request: HttpRequest, job_id: Any, *, timeout: float = DEFAULT_TIMEOUT, retry: int = 1000
) -> Any:
    """``stream_response`` for an ``async def`` view: the stream is followed with
    ``async for``, holding no thread while it waits."""
    from asgiref.sync import sync_to_async

    stream = await sync_to_async(_stream)(request, job_id, timeout)
    if not isinstance(stream, Stream):
        return stream

    async def body() -> AsyncIterator[bytes]:
        yield f"retry: {int(retry)}\n\n".encode()
        try:
            async for item in stream:
                yield _event(item)
        except JobNotFound:
            stream.finished = True
        if stream.finished:
            yield await sync_to_async(_end)(stream)

    return _response(body())
