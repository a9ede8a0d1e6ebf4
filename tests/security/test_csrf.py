"""CSRF: every POST endpoint of the queue's admin (each action, bulk and per job, Django's
delete view, the clean-up, queue pause and resume, and the views that refuse everyone),
and Django's own login, logout and password change, refused without a valid token, with
nothing changed; and, as the control, the same request with the token does its change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.security.pages import ENDPOINT_KEYS, ENDPOINTS, Endpoint
from tests.security.world import ROLES, World, fingerprint

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

SUPERUSER = next(r for r in ROLES if r.superuser)
BY_KEY = {e.key: e for e in ENDPOINTS}


def forged(client: Client) -> dict[str, str]:
    """A CSRF cookie and a form token that do not match (an attacker's guess)."""
    client.cookies["csrftoken"] = "a" * 32
    return {"csrfmiddlewaretoken": "b" * 32}


def no_token(client: Client) -> dict[str, str]:
    return {}


def cookie_only(client: Client) -> dict[str, str]:
    """A real cookie (the victim's), but no token in the form: what a cross-site form sends."""
    issue_cookie(client)
    assert "csrftoken" in client.cookies
    return {}


ATTEMPTS: dict[str, Callable[[Client], dict[str, str]]] = {
    "no token": no_token,
    "cookie without token": cookie_only,
    "forged token": forged,
}


def issue_cookie(client: Client) -> None:
    """Visit a page with a form, as the victim did: the login page, or the index."""
    client.get("/admin/login/")
    client.get("/admin/")


def token(client: Client) -> dict[str, str]:
    issue_cookie(client)
    return {"csrfmiddlewaretoken": client.cookies["csrftoken"].value}


def assert_csrf_refused(response: Any) -> None:
    assert response.status_code == 403
    assert b"CSRF verification failed" in response.content


@pytest.mark.parametrize("attempt", list(ATTEMPTS))
@pytest.mark.parametrize("key", ENDPOINT_KEYS)
def test_every_post_endpoint_refuses_a_request_without_a_valid_token(
    world: World, key: str, attempt: str
) -> None:
    endpoint = BY_KEY[key]
    data = endpoint.data(world)  # computed first: the clean-up's needs a count
    client = world.client(SUPERUSER, csrf=True)
    before = fingerprint()
    response = client.post(endpoint.url(world), {**data, **ATTEMPTS[attempt](client)})
    assert_csrf_refused(response)
    assert fingerprint() == before
    assert not endpoint.done(world)


@pytest.mark.parametrize("key", [e.key for e in ENDPOINTS if e.needs is not None])
def test_with_a_valid_token_the_same_request_does_its_change(world: World, key: str) -> None:
    # The control: the refusal above was the token's, not the endpoint's.
    endpoint: Endpoint = BY_KEY[key]
    data = endpoint.data(world)
    client = world.client(SUPERUSER, csrf=True)
    response = client.post(endpoint.url(world), {**data, **token(client)})
    assert response.status_code == 302
    assert endpoint.done(world)


def superuser_password(world: World) -> str:
    return User.objects.get(pk=world.users[SUPERUSER.name].pk).password


@pytest.mark.parametrize("attempt", list(ATTEMPTS))
def test_login_without_a_valid_token_logs_no_one_in(world: World, attempt: str) -> None:
    client = Client(enforce_csrf_checks=True)
    extra = ATTEMPTS[attempt](client)
    name = world.users[SUPERUSER.name].get_username()
    response = client.post("/admin/login/", {"username": name, "password": "pw", **extra})
    assert_csrf_refused(response)
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize("attempt", list(ATTEMPTS))
def test_logout_without_a_valid_token_keeps_the_session(world: World, attempt: str) -> None:
    client = world.client(SUPERUSER, csrf=True)
    response = client.post("/admin/logout/", ATTEMPTS[attempt](client))
    assert_csrf_refused(response)
    assert client.get("/admin/").status_code == 200  # still logged in


@pytest.mark.parametrize("attempt", list(ATTEMPTS))
def test_password_change_without_a_valid_token_changes_nothing(world: World, attempt: str) -> None:
    client = world.client(SUPERUSER, csrf=True)
    before = superuser_password(world)
    form = {"old_password": "pw", "new_password1": "Ch4nged-pw!", "new_password2": "Ch4nged-pw!"}
    response = client.post("/admin/password_change/", {**form, **ATTEMPTS[attempt](client)})
    assert_csrf_refused(response)
    assert superuser_password(world) == before


def test_the_example_projects_signup_refuses_a_request_without_a_token(world: World) -> None:
    from testproject.shop.models import Customer

    before = (Customer.objects.count(), fingerprint())
    response = Client(enforce_csrf_checks=True).post("/signup/", {"email": "eve@evil.example"})
    assert_csrf_refused(response)
    assert (Customer.objects.count(), fingerprint()) == before
