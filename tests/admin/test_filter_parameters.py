"""Hand-typed filter parameters on the jobs and workflows lists (issue 30, item 10): a
bare field name is refused naming the exact parameter to use, an unknown value of a
known filter is refused naming the values it takes (never silently ignored, which shows
every row), and the right parameters still filter."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from tests.admin.conftest import OPERATOR_PERMS, jobs_in_every_state, make_user
from tests.admin.workflow_rows import make_workflow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
WORKFLOWS = "/admin/django_jobqueue/workflow/"


@pytest.fixture
def client(client_for: Callable[..., Client]) -> Client:
    return client_for(make_user("fran", [*OPERATOR_PERMS, "view_workflow"]))


def refusal(client: Client, url: str) -> str:
    """The error the list shows for ``url``: the admin redirects an invalid parameter to
    the unfiltered list (``?e=1``), which shows the message; asserted to happen so."""
    response = client.get(url)
    assert response.status_code == 302, f"{url} was not refused ({response.status_code})"
    assert response["Location"].endswith("?e=1")
    shown = client.get(response["Location"])
    assert shown.status_code == 200
    return " ".join(str(m) for m in get_messages(shown.wsgi_request))


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        (f"{JOBS}?status=dead", "use status__exact=dead"),
        (f"{JOBS}?priority=5", "use priority__exact=5"),
        (f"{WORKFLOWS}?status=running", "use status__exact=running"),
        (f"{WORKFLOWS}?shape=chord", "use shape__exact=chord"),
    ],
)
def test_a_bare_field_name_is_refused_naming_the_exact_parameter(
    client: Client, url: str, hint: str
) -> None:
    assert hint in refusal(client, url)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        (f"{JOBS}?parked=sleeping", ["sleep", "event"]),
        (f"{JOBS}?status__exact=deadd", ["pending", "claimed", "dead", "cancelled"]),
        (f"{WORKFLOWS}?status__exact=runing", ["running", "failed"]),
    ],
)
def test_an_unknown_value_of_a_known_filter_is_refused_naming_the_values(
    client: Client, url: str, allowed: list[str]
) -> None:
    text = refusal(client, url)
    assert "is not a" in text
    for value in allowed:
        assert value in text, f"{value} not named in {text!r}"


def test_the_right_parameters_still_filter_both_lists(client: Client) -> None:
    jobs = jobs_in_every_state()
    listed = client.get(f"{JOBS}?status__exact=dead")
    assert listed.status_code == 200
    assert [j.id for j in listed.context["cl"].result_list] == [jobs["dead"].id]
    assert client.get(f"{JOBS}?parked=sleep").context["cl"].result_list.count() == 0
    make_workflow("ok", {"a": "completed"}, [], status="completed")
    make_workflow("bad", {"a": "dead"}, [], status="failed")
    page = client.get(f"{WORKFLOWS}?status__exact=failed")
    assert page.status_code == 200
    assert [w.name for w in page.context["cl"].result_list] == ["bad"]


def test_a_refused_value_is_shown_escaped(client: Client) -> None:
    shown = client.get(client.get(f"{JOBS}?parked=%3Cscript%3Ex%3C/script%3E")["Location"])
    text = shown.content.decode()
    assert "&lt;script&gt;x&lt;/script&gt;" in text
    assert "<script>x</script>" not in text
