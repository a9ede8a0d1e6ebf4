"""Roles: every page and every POST endpoint as each kind of user: anonymous, active
non-staff and inactive staff (to the login page, whatever their permissions), staff with
no permission (refused, not listed), view-only staff (sees, changes nothing) and staff
with one operator permission, alone or on top of viewing (that one works, no other).

What a role may do is derived from the permissions each page and endpoint declares
(pages.py) and the admin's declared actions; the database says whether anything changed.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from django_jobqueue.admin.actions import ACTIONS
from django_jobqueue.models import Job
from tests.security.pages import ENDPOINT_KEYS, ENDPOINTS, page_keys, pages
from tests.security.world import ROLES, Role, World, fingerprint

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

ROLE_NAMES = [r.name for r in ROLES]
BY_NAME = {r.name: r for r in ROLES}
BY_KEY = {e.key: e for e in ENDPOINTS}
ADMITTED = [r.name for r in ROLES if r.admitted]
JOBS = "/admin/django_jobqueue/job/"


def assert_sent_to_login(response: object, url: str) -> None:
    assert response.status_code == 302  # type: ignore[attr-defined]
    location = urlsplit(response["Location"])  # type: ignore[index]
    assert location.path == "/admin/login/"
    assert parse_qs(location.query)["next"] == [url]


def may_see(role: Role, needs: frozenset[str] | None, any_of: bool) -> bool:
    if needs is None or not any_of:
        return role.may(needs)
    return any(role.may(frozenset({perm})) for perm in needs)


@pytest.mark.parametrize("key", page_keys(roles=True))
@pytest.mark.parametrize("role_name", ROLE_NAMES)
def test_each_role_gets_each_page_only_with_its_permissions(
    world: World, role_name: str, key: str
) -> None:
    role = BY_NAME[role_name]
    page = {p.key: p for p in pages(world)}[key]
    response = world.client(role).get(page.url)
    if not role.admitted:
        assert_sent_to_login(response, page.url)
    elif may_see(role, page.needs, page.any_of):
        assert response.status_code == page.shown
    else:
        assert response.status_code == page.refused


@pytest.mark.parametrize("key", ENDPOINT_KEYS)
@pytest.mark.parametrize("role_name", ROLE_NAMES)
def test_each_role_changes_something_only_with_its_permission(
    world: World, role_name: str, key: str
) -> None:
    role = BY_NAME[role_name]
    endpoint = BY_KEY[key]
    data = endpoint.data(world)
    before = fingerprint()
    url = endpoint.url(world)
    response = world.client(role).post(url, data)
    if role.may(endpoint.needs):
        assert response.status_code == 302
        assert endpoint.done(world)
        return
    assert fingerprint() == before
    assert not endpoint.done(world)
    if not role.admitted:
        assert_sent_to_login(response, url)
    elif endpoint.needs is not None:
        assert response.status_code == 403
    else:  # no one may: a refusal, a read-only page, or "no action selected"
        assert response.status_code in (200, 302, 403)


@pytest.mark.parametrize("role_name", ADMITTED)
def test_the_admin_index_lists_the_queue_only_to_those_who_may_see_it(
    world: World, role_name: str
) -> None:
    role = BY_NAME[role_name]
    text = world.client(role).get("/admin/").content.decode()
    # Linked for those who may view; named, unlinked, for those who may only delete.
    linked = role.may(frozenset({"view_job"}))
    assert ('href="/admin/django_jobqueue/job/"' in text) == linked
    named = linked or role.may(frozenset({"delete_job"}))
    assert ("model-job" in text) == named
    journal = 'href="/admin/django_jobqueue/journalentry/"' in text
    assert journal == role.may(frozenset({"view_journalentry"}))


VIEWERS = [r.name for r in ROLES if r.may(frozenset({"view_job"}))]


@pytest.mark.parametrize("role_name", VIEWERS)
def test_the_changelist_offers_exactly_the_actions_the_role_holds(
    world: World, role_name: str
) -> None:
    role = BY_NAME[role_name]
    response = world.client(role).get(JOBS)
    assert response.status_code == 200
    held = [n for n, a in ACTIONS.items() if role.may(frozenset({a.permission}))]
    form = response.context["action_form"]
    offered = [name for name, _ in form.fields["action"].choices if name] if form else []
    assert offered == held
    assert response.context["can_cleanup"] == role.may(frozenset({"cleanup_job"}))


@pytest.mark.parametrize("role_name", VIEWERS)
def test_the_job_page_and_dashboard_offer_only_what_the_role_holds(
    world: World, role_name: str
) -> None:
    role = BY_NAME[role_name]
    client = world.client(role)
    for job in world.hostile.values():
        page = client.get(f"{JOBS}{job.pk}/change/")
        shown = {a.name for a in page.context["allowed"]}
        held = {n for n, a in ACTIONS.items() if role.may(frozenset({a.permission}))}
        assert shown <= held
        for name in ACTIONS:
            assert (f"{JOBS}{job.pk}/act/{name}/" in page.content.decode()) == (name in shown)
    dashboard = client.get(f"{JOBS}dashboard/")
    can_pause = role.may(frozenset({"pause_queue"}))
    assert dashboard.context["can_pause"] == can_pause
    assert ('id="pause-other"' in dashboard.content.decode()) == can_pause


@pytest.mark.parametrize("state", ["pending", "scheduled", "claimed"])
def test_no_one_deletes_an_active_job_by_any_route(world: World, state: str) -> None:
    # The superuser holds every permission: what it cannot do, no role can.
    job = world.hostile[state]
    client = world.client(BY_NAME["superuser"])
    routes = [
        (JOBS, {"action": "delete_selected", "_selected_action": [job.pk], "post": "yes"}),
        (JOBS, {"action": "delete_selected", "select_across": "1", "index": "0", "post": "yes"}),
        (f"{JOBS}{job.pk}/act/delete_selected/", {"post": "yes"}),
        (f"{JOBS}{job.pk}/delete/", {"post": "yes"}),
    ]
    for url, data in routes:
        client.post(url, data)
        assert Job.objects.filter(pk=job.pk, status=job.status).exists(), url
