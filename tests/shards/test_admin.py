"""The admin over two queue databases: the jobs list and the dashboard show the chosen
one with a selector (HOME until chosen, kept in the session), a job's page and its
actions follow the job to the database holding it, and a bulk action on the list acts
on the database it lists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from django_jobqueue import routing
from django_jobqueue.admin.databases import SESSION_KEY
from django_jobqueue.models import Job
from tests.shards import layout
from tests.shards.conftest import DATABASES
from tests.taskapp import tasks

pytestmark = [
    pytest.mark.shards,
    pytest.mark.django_db(transaction=True, databases=DATABASES),
]

JOBS = "/admin/django_jobqueue/job/"


@pytest.fixture
def admin(sharded: object) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def one_on(alias: str) -> Job:
    """A pending job on ``alias``, by a key its stable hash puts there."""
    key = next(k for k in (f"key{n}" for n in range(100)) if routing.for_key(k) == alias)
    handle = tasks.noop.using(key=key).enqueue()
    return Job.objects.using(alias).get(id=handle.id)


def shown(job: Job, page: str) -> bool:
    return str(job.id)[-12:] in page  # UUIDv7s made together share their first digits


def test_the_lists_show_each_database_and_the_actions_reach_the_right_one(admin: Client) -> None:
    home, other = layout.ALIASES
    a = one_on(home)
    b = one_on(other)
    listed = admin.get(JOBS)
    assert listed.status_code == 200
    page = listed.content.decode()
    assert shown(a, page)  # HOME until chosen
    assert not shown(b, page)
    assert 'name="database"' in page  # the selector, naming both
    assert '<option value="shard_b">' in page
    chosen = admin.post(f"{JOBS}database/", {"database": other, "next": JOBS})
    assert chosen.status_code == 302
    assert chosen["Location"] == JOBS
    assert admin.session[SESSION_KEY] == other
    page = admin.get(JOBS).content.decode()
    assert shown(b, page)
    assert not shown(a, page)
    dashboard = admin.get(f"{JOBS}dashboard/").content.decode()
    assert 'id="jq-database"' in dashboard
    for other_list in ("workflow", "journalentry"):  # the other lists have it too
        listed = admin.get(f"/admin/django_jobqueue/{other_list}/").content.decode()
        assert f'<option value="{other}" selected>' in listed, other_list
    # A job's page follows its id to its database, whichever one the list shows.
    assert admin.get(f"{JOBS}{a.id}/change/").status_code == 200
    act = admin.post(f"{JOBS}{a.id}/act/cancel/", {"post": "yes"})
    assert act.status_code == 302
    assert Job.objects.using(home).get(id=a.id).status == "cancelled"
    # A bulk action on the list acts on the database it lists (shard_b now).
    bulk = admin.post(JOBS, {"action": "cancel", "_selected_action": [str(b.id)], "post": "yes"})
    assert bulk.status_code == 302
    assert Job.objects.using(other).get(id=b.id).status == "cancelled"


def test_the_selector_refuses_a_database_that_is_not_a_queue_database(admin: Client) -> None:
    refused = admin.post(f"{JOBS}database/", {"database": "default", "next": JOBS})
    assert refused.status_code == 403
    assert SESSION_KEY not in admin.session
    assert admin.get(f"{JOBS}database/").status_code == 405


@pytest.fixture
def replica(sharded: object) -> Iterator[str]:
    """shard_a read through its READ replica (``layout.REPLICA``: a second alias of the
    same database, as a replica's rows would be; which alias a page reads through is
    what the test looks at)."""
    jobqueue = {"DATABASES": layout.queue_databases(READ={"shard_a": layout.REPLICA})}
    with override_settings(JOBQUEUE=jobqueue):
        yield layout.REPLICA


def test_the_lists_and_the_dashboard_read_the_replica_and_actions_the_primary(
    admin: Client, replica: str
) -> None:
    job = one_on("shard_a")
    with (
        CaptureQueriesContext(connections[replica]) as read,
        CaptureQueriesContext(connections["shard_a"]) as primary,
    ):
        page = admin.get(JOBS).content.decode()
        admin.get(f"{JOBS}dashboard/")
    assert shown(job, page)
    assert '<option value="shard_a" selected>' in page  # the database, not its replica
    assert read.captured_queries  # the list and the dashboard through the replica
    assert not [q for q in primary.captured_queries if "django_jobqueue_job" in q["sql"]]
    with CaptureQueriesContext(connections[replica]) as read:
        bulk = admin.post(
            JOBS, {"action": "cancel", "_selected_action": [str(job.id)], "post": "yes"}
        )
    assert bulk.status_code == 302
    assert not read.captured_queries  # the action decides and writes on the primary
    assert Job.objects.using("shard_a").get(id=job.id).status == "cancelled"
