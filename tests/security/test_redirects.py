"""Open redirects: an absolute or scheme-relative URL to another site, in every place a
redirect could take it from (``next`` in the query or the form, ``_changelist_filters``,
the Referer, the path itself), never sends the browser off-site: not from the login or
logout, not after an action, a deletion, a clean-up or a queue pause, not from the admin's
own path redirects."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import pytest
from django.test import Client

from tests.security.pages import ENDPOINTS
from tests.security.world import ROLES, World

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

EVIL = [
    "https://evil.example/",
    "//evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "https:/evil.example",
    "/\t/evil.example",
    " //evil.example",
    "https://testserver@evil.example/",
    "javascript:alert(document.domain)",
]
SUPERUSER = next(r for r in ROLES if r.superuser)
BY_KEY = {e.key: e for e in ENDPOINTS}


def assert_on_site(response: Any) -> str:
    """The redirect's target, which must stay on this site (as a browser reads it:
    backslashes as slashes, tabs and newlines dropped, leading spaces trimmed)."""
    assert response.status_code in (301, 302, 303, 307, 308)
    location = str(response["Location"])
    read = location.strip().replace("\\", "/")
    for c in "\t\n\r":
        read = read.replace(c, "")
    parts = urlsplit(read)
    assert parts.scheme in ("", "http", "https"), location
    # "https:/evil.example" is off-site to a browser on http: a scheme needs our host.
    assert parts.netloc == ("testserver" if parts.scheme else ""), location
    assert not read.startswith("//"), location
    return location


@pytest.mark.parametrize("evil", EVIL)
def test_the_check_catches_each_off_site_target(evil: str) -> None:
    from django.http import HttpResponse

    response = HttpResponse(status=302)
    response["Location"] = evil
    with pytest.raises(AssertionError):
        assert_on_site(response)


def login(client: Client, world: World, query: str, **data: str) -> Any:
    name = world.users[SUPERUSER.name].get_username()
    return client.post(f"/admin/login/?{query}", {"username": name, "password": "pw", **data})


@pytest.mark.parametrize("evil", EVIL)
def test_login_never_sends_the_user_off_site(world: World, evil: str) -> None:
    for query, form in ((urlencode({"next": evil}), {}), ("", {"next": evil})):
        client = Client()
        response = login(client, world, query, **form)
        assert_on_site(response)
        assert "_auth_user_id" in client.session  # logged in, and only then redirected


@pytest.mark.parametrize("evil", EVIL)
def test_an_already_logged_in_visit_to_login_stays_on_site(world: World, evil: str) -> None:
    response = world.client(SUPERUSER).get(f"/admin/login/?{urlencode({'next': evil})}")
    assert assert_on_site(response) == "/admin/"


@pytest.mark.parametrize("evil", EVIL)
def test_logout_never_sends_the_user_off_site(world: World, evil: str) -> None:
    client = world.client(SUPERUSER)
    response = client.post(f"/admin/logout/?{urlencode({'next': evil})}", {"next": evil})
    if response.status_code == 200:  # Django's "logged out" page, no redirect at all
        assert "evil.example" not in response.get("Location", "")
    else:
        assert_on_site(response)


TRICKS = ["https://evil.example/", "//evil.example", "/\\evil.example"]
CHANGING = [e.key for e in ENDPOINTS if e.needs is not None]


@pytest.mark.parametrize("evil", TRICKS)
@pytest.mark.parametrize("key", CHANGING)
def test_no_post_endpoint_redirects_off_site_from_the_query(
    world: World, key: str, evil: str
) -> None:
    # On the changelist, unknown parameters are refused (the admin's "?e=1" redirect, on
    # site too, or a 400): no redirect off-site either way.
    endpoint = BY_KEY[key]
    data = endpoint.data(world)
    tricks = urlencode({"next": evil, "_changelist_filters": evil, "_redirect": evil})
    response = world.client(SUPERUSER).post(f"{endpoint.url(world)}?{tricks}", data)
    if response.status_code != 400:
        assert_on_site(response)


@pytest.mark.parametrize("evil", TRICKS)
@pytest.mark.parametrize("key", CHANGING)
def test_no_post_endpoint_redirects_off_site_from_the_form_or_referer(
    world: World, key: str, evil: str
) -> None:
    endpoint = BY_KEY[key]
    data = endpoint.data(world)
    tricks = {"next": evil, "_redirect": evil, "_changelist_filters": evil}
    response = world.client(SUPERUSER).post(
        endpoint.url(world), {**data, **tricks}, HTTP_REFERER=evil
    )
    assert_on_site(response)
    assert endpoint.done(world)  # it did its change, and only then redirected


@pytest.mark.parametrize("evil", EVIL)
def test_the_login_redirect_of_an_anonymous_visit_stays_on_site(world: World, evil: str) -> None:
    response = Client().get(f"/admin/django_jobqueue/job/?{urlencode({'next': evil})}")
    location = assert_on_site(response)
    assert location.startswith("/admin/login/?next=")


@pytest.mark.parametrize("evil", EVIL)
def test_the_admins_path_redirects_stay_on_site(world: World, evil: str) -> None:
    # The trailing-slash redirect of the catch-all view, the object URL's redirect to its
    # change page, and the "view on site" shortcut (a job has no page on the site).
    client = world.client(SUPERUSER)
    path = quote(evil, safe="")
    for url in (f"/admin/{path}", f"/admin/django_jobqueue/job/{path}/", "/admin//evil.example"):
        response = client.get(url)
        if response.status_code != 404:
            assert_on_site(response)
    from django.contrib.contenttypes.models import ContentType

    from django_jobqueue.models import Job

    job = world.hostile["dead"]
    content_type = ContentType.objects.get_for_model(Job).pk
    assert client.get(f"/admin/r/{content_type}/{job.pk}/").status_code == 404
