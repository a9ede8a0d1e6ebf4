"""The dashboard's global limits: each limited kind with its limits, where each is set, and
its jobs claimed now (a kind at its max_in_flight highlighted)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from django_jobqueue import Status, clear_limit, set_limit
from django_jobqueue.task import limiting
from tests.admin.conftest import set_state
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

DASHBOARD = "/admin/django_jobqueue/job/dashboard/"
LIMITED = tasks.limited.kind


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiting.forget()
    yield
    limiting.forget()


def limit_rows(text: str) -> dict[str, list[str]]:
    """The cells of each row of the limits table, by kind, as text."""
    section = text[text.index('id="limits"') : text.index('id="chart-hour"')]
    rows = re.findall(r'<tr class="limit-row[^"]*" data-kind="([^"]+)">(.*?)</tr>', section, re.S)
    return {
        kind: [
            " ".join(re.sub(r"<[^>]+>", " ", cell).split())
            for cell in re.findall(r"<td>(.*?)</td>", body, re.S)
        ]
        for kind, body in rows
    }


def test_the_dashboard_shows_each_limited_kind_its_limits_and_claims_now(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    set_limit(LIMITED, max_in_flight=2, actor="ops")
    for _ in range(3):
        job = tasks.limited.enqueue(0)
    set_state(job.id, status=Status.CLAIMED, claimed_by="w:1")
    settings = {"POLL_INTERVAL": 1, "LIMITS": {LIMITED: {"rate_limit": "100/s"}}}
    with override_settings(JOBQUEUE=settings):
        page = client_for(viewer).get(DASHBOARD)
    assert page.status_code == 200
    text = page.content.decode()
    rows = limit_rows(text)
    assert rows[LIMITED] == [LIMITED, "1", "2 (database)", "100/s (settings)"]
    assert rows[tasks.rated.kind] == [tasks.rated.kind, "0", "none", "3/m (task)"]
    assert rows["tests.one_at_a_time"] == ["tests.one_at_a_time", "0", "1 (task)", "none"]
    assert tasks.noop.kind not in rows
    assert 'class="limit-row"' in text  # none at its limit yet
    clear_limit(LIMITED)


def test_a_kind_at_its_max_in_flight_is_highlighted(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    job = tasks.one_at_a_time.enqueue(0)
    set_state(job.id, status=Status.CLAIMED, claimed_by="w:1")
    text = client_for(viewer).get(DASHBOARD).content.decode()
    assert 'class="limit-row jq-warn" data-kind="tests.one_at_a_time"' in text
    assert limit_rows(text)["tests.one_at_a_time"][1:3] == ["1", "1 (task)"]
