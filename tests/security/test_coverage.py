"""The suite reaches every view: each named URL of each model admin the app registers is
requested by some page (GET) or endpoint (POST) of pages.py. A view added to the admin
without a line there fails here, before it can escape the XSS, CSRF and role tests."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.urls import resolve

from tests.security.pages import ENDPOINTS, admin_urls, pages
from tests.security.world import World

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_every_admin_view_of_the_app_is_requested_by_the_suite(world: World) -> None:
    urls = [p.url for p in pages(world)] + [e.url(world) for e in ENDPOINTS]
    reached = {resolve(urlsplit(url).path).url_name for url in urls}
    names = set(admin_urls())
    assert names, "the app registers no model admin"
    assert sorted(names - reached) == []


def test_every_action_the_admin_declares_has_a_page_and_endpoints(world: World) -> None:
    from django_jobqueue.admin import JobAdmin

    declared = {a.__name__ for a in JobAdmin.actions}  # type: ignore[union-attr]
    keys = {p.key for p in pages(world)} | {e.key for e in ENDPOINTS}
    for name in declared:
        assert {f"act {name}", f"bulk {name}"} <= keys, name
