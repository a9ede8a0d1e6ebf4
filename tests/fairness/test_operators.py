"""What operators see of keys (issue 23): the dashboard's busiest keys per kind with
per-key limits, ``jobqueue limit`` setting and showing them, ``jobqueue stats --key``,
and the admin's key filter and job page."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.task import limiting
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]

DASHBOARD = "/admin/django_jobqueue/job/dashboard/"
JOBS = "/admin/django_jobqueue/job/"


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiting.forget()
    yield
    limiting.forget()


def jobqueue(*args: str) -> str:
    out = StringIO()
    call_command("jobqueue", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_the_dashboard_shows_the_busiest_keys_of_a_kind_with_per_key_limits(
    admin_client: Client,
) -> None:
    busy = tasks.per_shop.enqueue_many([{"shop": 1, "seconds": 0}] * 3)
    tasks.per_shop.enqueue(shop=2, seconds=0)
    Job.objects.filter(id=busy[0].id).update(status=Status.CLAIMED, claimed_by="w")
    text = admin_client.get(DASHBOARD).content.decode()
    assert f'data-kind="{tasks.per_shop.kind}">{tasks.per_shop.kind}: most 2 a key (task)' in text
    section = text[text.index(f'class="keys-of" data-kind="{tasks.per_shop.kind}"') :]
    rows = section[: section.index("</table>")]
    assert rows.index("shop:1") < rows.index("shop:2")  # busiest first: one in flight
    assert "<td>shop:1</td><td>1</td><td>2</td>" in rows


def test_jobqueue_limit_sets_and_shows_per_key_limits() -> None:
    kind = tasks.keyed.kind
    out = jobqueue("limit", kind, "--max-in-flight-per-key", "3", "--fair", "on")
    assert "most 3 a key (database), fair (database)" in out
    assert limiting.resolve(kind, max_age=0).rule() is not None
    out = jobqueue("limit", kind, "--fair", "none", "--max-in-flight-per-key", "none")
    assert limiting.resolve(kind, max_age=0).rule() is None
    with pytest.raises(CommandError, match="expected on, off or none"):
        jobqueue("limit", kind, "--ordered", "sometimes")


def test_jobqueue_stats_key_shows_one_keys_jobs_by_kind() -> None:
    tasks.keyed.using(key="tenant:7").enqueue_many([{"n": 1}, {"n": 2}])
    tasks.per_shop.using(key="tenant:7").enqueue(shop=1, seconds=0)
    tasks.keyed.using(key="tenant:8").enqueue(n=3)
    out = jobqueue("stats", "--key", "tenant:7")
    lines = out.splitlines()
    assert lines[0].split() == ["KIND", "PENDING", "IN", "FLIGHT", "OLDEST", "PENDING"]
    assert any(line.split()[:3] == [tasks.keyed.kind, "2", "0"] for line in lines)
    assert any(line.split()[:3] == [tasks.per_shop.kind, "1", "0"] for line in lines)
    assert len(lines) == 3


def test_the_admin_filters_jobs_by_key_and_shows_it_on_the_job_page(admin_client: Client) -> None:
    mine = tasks.keyed.using(key="tenant:42").enqueue(n=1)
    other = tasks.keyed.using(key="tenant:43").enqueue(n=2)
    listing = admin_client.get(JOBS, {"key": "tenant:42"}).content.decode()
    assert f"{mine.id}/change/" in listing
    assert f"{other.id}/change/" not in listing
    assert "tenant:43" in listing  # offered as a choice of the filter
    page = admin_client.get(f"{JOBS}{mine.id}/change/").content.decode()
    assert "<dt>key</dt><dd>tenant:42</dd>" in page
