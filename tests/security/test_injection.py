"""Injection: SQL metacharacters and LIKE wildcards (``' OR 1=1 --``, ``%``, ``_``, ``\\``,
a stacked ``DROP TABLE``, a ``UNION``) through the search box, the ordering (``o=``, also
out of range and not a number), the page number and every declared filter of both
changelists, and through the clean-up and queue forms: each is a 200 (or the admin's own
"invalid parameter" redirect) with exactly the rows that hold that literal value, never a
500, and the database is intact afterwards.

The oracle is the ORM with the same value as a bound parameter; each META value is some
job's kind, queue and dedup key (world.py), so "exactly" means one job, not none or all.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db.models import Model

from django_jobqueue.models import Job, JournalEntry, QueuePause
from tests.security.pages import cleanup_data, confirmed
from tests.security.world import META, ROLES, World, fingerprint

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
JOURNAL = "/admin/django_jobqueue/journalentry/"
VIEWER = next(r for r in ROLES if r.name == "view-only staff")
SUPERUSER = next(r for r in ROLES if r.superuser)
ORDERINGS = ["1", "-1", "0", "99", "-99", "abc", "1.-1", "1.1.1", "", ".", "-", "2.3", *META]
RECENT = timedelta(minutes=1)  # a clean-up of jobs finished before a minute ago
PAGES = ["-1", "0", "abc", "99999", "1e9", *META]


def listed(world: World, url: str, query: dict[str, str]) -> set[Any] | None:
    """The ids a view-only operator's changelist shows for ``query``; None when the admin
    refused the parameters (its own "?e=1" redirect, or a 400). Never a 500, no change."""
    before = fingerprint()
    response = world.client(VIEWER).get(f"{url}?{urlencode(query)}")
    assert fingerprint() == before
    if response.status_code == 302:
        assert response["Location"].endswith("?e=1")
        return None
    if response.status_code == 400:
        return None
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


def ids(model: type[Model], **lookup: Any) -> set[Any]:
    return set(model._default_manager.filter(**lookup).values_list("pk", flat=True))


@pytest.mark.parametrize("value", META)
def test_search_finds_exactly_the_job_with_that_key(world: World, value: str) -> None:
    assert listed(world, JOBS, {"q": value}) == {world.keyed[value].pk}
    assert listed(world, JOBS, {"q": f"{value} nothing"}) == set()


@pytest.mark.parametrize("value", META)
def test_the_kind_and_queue_filters_match_the_literal_value(world: World, value: str) -> None:
    assert listed(world, JOBS, {"kind": value}) == ids(Job, kind=value) == {world.keyed[value].pk}
    assert listed(world, JOBS, {"queue": value}) == ids(Job, queue=value)
    both = {"kind": value, "queue": value, "q": value}
    assert listed(world, JOBS, both) == {world.keyed[value].pk}


@pytest.mark.parametrize("value", META)
def test_the_status_priority_and_date_filters_refuse_or_match_nothing(
    world: World, value: str
) -> None:
    every = ids(Job)
    assert listed(world, JOBS, {"status__exact": value}) in (None, set())
    assert listed(world, JOBS, {"priority__exact": value}) in (None, set())
    for name in ("created_at", "finished_at"):
        # A date that does not parse is ignored with a message: every job, as unfiltered.
        assert listed(world, JOBS, {f"{name}__range__gte_0": value}) in (None, every)


@pytest.mark.parametrize("value", META)
def test_the_journal_filters_match_the_literal_value(world: World, value: str) -> None:
    assert listed(world, JOURNAL, {"outcome": value}) in (None, ids(JournalEntry, outcome=value))
    assert listed(world, JOURNAL, {"kind": value}) == ids(JournalEntry, kind=value)
    every = ids(JournalEntry)
    assert listed(world, JOURNAL, {"recorded_at__range__gte_0": value}) in (None, every)
    assert listed(world, JOURNAL, {"q": value}) in (None, every)  # the journal has no search


@pytest.mark.parametrize("order", ORDERINGS)
def test_any_ordering_lists_every_row(world: World, order: str) -> None:
    assert listed(world, JOBS, {"o": order}) == ids(Job)
    assert listed(world, JOURNAL, {"o": order}) == ids(JournalEntry)


@pytest.mark.parametrize("page", PAGES)
def test_any_page_number_is_a_page_or_the_admins_refusal(world: World, page: str) -> None:
    for url, model in ((JOBS, Job), (JOURNAL, JournalEntry)):
        assert listed(world, url, {"p": page}) in (None, set(), ids(model))


@pytest.mark.parametrize("value", META)
def test_the_cleanup_form_deletes_only_what_the_literal_value_names(
    world: World, value: str
) -> None:
    client = world.client(SUPERUSER)
    before = fingerprint()
    for bad in ({"statuses": [value]}, {"finished_before_0": value}):
        response = client.post(f"{JOBS}cleanup/", {**cleanup_data(RECENT, kind=""), **bad})
        assert response.status_code == 200
        assert response.context["form"].errors
    # The value names a kind (of a pending job): nothing of it is finished, nothing goes.
    data = confirmed(client, cleanup_data(RECENT, kind=value), count=0)
    assert client.post(f"{JOBS}cleanup/", data).status_code == 302
    assert fingerprint()[0] == before[0]


@pytest.mark.parametrize("value", META)
def test_pausing_a_queue_named_by_the_value_pauses_that_queue_only(
    world: World, value: str
) -> None:
    client = world.client(SUPERUSER)
    before = set(QueuePause.objects.values_list("queue", flat=True))
    url = f"{JOBS}dashboard/queue/"
    assert client.post(url, {"queue": value, "do": "pause"}).status_code == 302
    assert set(QueuePause.objects.values_list("queue", flat=True)) == before | {value}
    assert client.post(url, {"queue": value, "do": "resume"}).status_code == 302
    assert set(QueuePause.objects.values_list("queue", flat=True)) == before


def test_after_every_attempt_the_tables_are_whole(world: World) -> None:
    # Runs last in the module: the attempts above were each rolled back, and nothing they
    # sent reached the schema (a stacked DROP TABLE among them).
    assert Job.objects.filter(pk__in=[j.pk for j in world.keyed.values()]).count() == len(META)
    assert JournalEntry.objects.filter(pk=world.entry.pk).exists()
    assert listed(world, JOBS, {}) == ids(Job)
