"""The lists' counts: exact up to ``store.COUNT_CAP`` matching rows, and past it the
planner's estimate, marked "about" wherever the page says it (beside the search box,
the "select all" link, the pagination), never a bare number."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from django_jobqueue import store
from django_jobqueue.models import Job
from tests.helpers import postgres_only
from tests.taskapp import tasks

pytestmark = [postgres_only, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"


def bulk_dead(n: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Job._meta.db_table} (id, kind, queue, payload, priority, status,"
            " created_at, visible_at, claimed_by, run_count, failure_count, carry,"
            " cancel_requested, cancel_actor, finished_at)"
            " SELECT gen_random_uuid(), %s, 'default', '{}'::jsonb, 0, 'dead', now(), now(),"
            " '', 1, 1, '{}'::jsonb, false, '', now() FROM generate_series(1, %s)",
            [tasks.add.kind, n],
        )
        cursor.execute(f"ANALYZE {Job._meta.db_table}")


def test_a_count_past_the_cap_says_about_beside_the_search_box_and_in_select_all(
    operator: User, client_for: Callable[..., Client]
) -> None:
    bulk_dead(store.COUNT_CAP + 500)
    text = client_for(operator).get(f"{JOBS}?status__exact=dead").content.decode()
    top = re.search(r'<p class="small quiet" id="jq-result-count">(.*?)</p>', text, re.S)
    assert top, "no count beside the search box"
    assert re.search(r"about \d+ results", top.group(1))
    assert not re.search(r">\s*\d+ results", text)  # Django's bare count is not shown
    assert re.search(r"Select all about \d+ jobs", text)
    assert re.search(r"about \d+ jobs", text.split('class="paginator"')[1])


def test_a_count_under_the_cap_is_exact_with_no_about(
    operator: User, client_for: Callable[..., Client]
) -> None:
    bulk_dead(30)
    text = client_for(operator).get(f"{JOBS}?status__exact=dead").content.decode()
    assert "30 results" in text
    assert "about" not in text.split('id="changelist"')[1]
    assert 'id="jq-result-count"' not in text
