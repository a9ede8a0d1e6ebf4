"""A small URLconf for the stream tests (tests/steps/test_stream_views.py,
tests/browser/test_stream_page.py): a page that follows a job's stream with an
``EventSource``, and the view that serves it with ``stream_response``."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.urls import path

from django_jobqueue.streams import astream_response, stream_response

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Job stream</title></head>
<body>
<h1>Job {job_id}</h1>
<ol id="items"></ol>
<script>
const items = document.getElementById("items");
const source = new EventSource("events/");
source.addEventListener("item", (event) => {{
  const li = document.createElement("li");
  li.dataset.offset = event.lastEventId;
  li.textContent = JSON.parse(event.data).text;
  items.appendChild(li);
}});
source.addEventListener("end", (event) => {{
  source.close();
  document.body.dataset.done = JSON.parse(event.data).status;
}});
</script>
</body></html>
"""


def page(request: HttpRequest, job_id: uuid.UUID) -> HttpResponse:
    return HttpResponse(PAGE.format(job_id=job_id))


def events(request: HttpRequest, job_id: uuid.UUID) -> HttpResponse:
    # Short responses, so that a page following a long job reconnects with
    # Last-Event-ID a few times on the way.
    timeout = float(request.GET.get("timeout", "2"))
    return stream_response(request, job_id, timeout=timeout, retry=100)


async def aevents(request: HttpRequest, job_id: uuid.UUID) -> HttpResponse:
    return await astream_response(request, job_id, timeout=float(request.GET.get("timeout", "3")))


urlpatterns = [
    path("stream/<uuid:job_id>/", page),
    path("stream/<uuid:job_id>/events/", events),
    path("stream/<uuid:job_id>/aevents/", aevents),
]
