"""The operators' tools over two queue databases: metrics labelled by database (and
one that is down said so, not a failed scrape), ``jobqueue --database`` and the
commands that find a job's database or go through each, ``runworker --database``
refusing an alias that holds no queue, and the system check on limits (W007)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from django_jobqueue import routing
from django_jobqueue.checks import check_limits_across_databases
from tests.shards import layout
from tests.shards.conftest import DATABASES
from tests.taskapp import tasks

pytestmark = [pytest.mark.shards, pytest.mark.django_db(transaction=True, databases=DATABASES)]


def keyed_on(alias: str, prefix: str = "m") -> str:
    return next(k for k in (f"{prefix}{n}" for n in range(100)) if routing.for_key(k) == alias)


def pending(text: str) -> dict[str, float]:
    """The pending gauge of tests.taskapp.tasks.add, by database."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "jobqueue_pending_jobs" and s.labels["kind"].endswith(".add"):
                found[s.labels["database"]] = found.get(s.labels["database"], 0) + s.value
            if s.name == "jobqueue_database_up":
                found[f"up:{s.labels['database']}"] = s.value
    return found


def test_metrics_carry_a_database_label_and_say_which_database_is_down(
    sharded: dict[str, object],
) -> None:
    home, other = layout.ALIASES
    tasks.add.using(key=keyed_on(home)).enqueue(1, 1)
    for _ in range(2):
        tasks.add.using(key=keyed_on(other)).enqueue(1, 1)
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    seen = pending(client.get("/metrics/").content.decode())
    assert seen == {home: 1, other: 2, f"up:{home}": 1, f"up:{other}": 1}
    server = sharded[other]
    server.stop()  # type: ignore[attr-defined]
    connections[other].close()
    try:
        response = client.get("/metrics/")
        assert response.status_code == 200
        assert pending(response.content.decode()) == {home: 1, f"up:{home}": 1, f"up:{other}": 0}
    finally:
        server.start()  # type: ignore[attr-defined]
        connections[other].close()


def test_jobqueue_takes_database_finds_a_job_and_goes_through_each(sharded: object) -> None:
    home, other = layout.ALIASES
    there = tasks.add.using(key=keyed_on(other)).enqueue(2, 2)
    tasks.add.using(key=keyed_on(home)).enqueue(3, 3)
    out = StringIO()
    call_command("jobqueue", "--database", other, "list", "--ids", stdout=out)
    assert out.getvalue().split() == ["==", "database", other, str(there.id)]
    out = StringIO()
    call_command("jobqueue", "show", str(there.id), stdout=out)  # found on its database
    assert f"== database {other}" in out.getvalue()
    assert str(there.id) in out.getvalue()
    out = StringIO()
    call_command("jobqueue", "list", "--ids", stdout=out)  # each in turn
    assert [line for line in out.getvalue().splitlines() if line.startswith("==")] == [
        f"== database {home}",
        f"== database {other}",
    ]
    call_command("jobqueue", "cancel", str(there.id), stdout=StringIO())
    assert there.refresh().status == "cancelled"
    with pytest.raises(CommandError, match="'default' is not a queue database"):
        call_command("jobqueue", "--database", "default", "list")
    with pytest.raises(CommandError, match="--json reads one queue database"):
        call_command("jobqueue", "stats", "--json")


def test_runworker_refuses_an_alias_that_holds_no_queue(sharded: object) -> None:
    with pytest.raises(CommandError, match="--database: 'nowhere' is not a queue database"):
        call_command("runworker", "--database", "nowhere", "--burst")


def test_limits_with_several_databases_are_warned_of_as_per_database(sharded: object) -> None:
    kind = tasks.add.kind
    assert not [m for m in check_limits_across_databases() if kind in m.msg]
    limits = {kind: {"max_in_flight": 4}}
    jobqueue = {"DATABASES": layout.queue_databases(), "LIMITS": limits}
    with override_settings(JOBQUEUE=jobqueue):
        (warning,) = [m for m in check_limits_across_databases() if kind in m.msg]
    assert warning.id == "django_jobqueue.W007"
    assert "max_in_flight holds on each of the 2 queue databases apart" in warning.msg
    # Per-key limits stay whole under ROUTE "key"; routed by queue, a key may spread.
    assert not [m for m in check_limits_across_databases() if "tests.per_shop" in m.msg]
    by_queue = {"DATABASES": layout.queue_databases(ROUTE="queue")}
    with override_settings(JOBQUEUE=by_queue):
        found = [m for m in check_limits_across_databases() if "tests.per_shop" in m.msg]
    assert "max_in_flight_per_key" in found[0].msg
    with override_settings(JOBQUEUE={"LIMITS": limits}):  # one database: nothing to say
        assert check_limits_across_databases() == []


def test_health_reports_each_database_and_names_the_one_that_is_down(
    sharded: dict[str, object],
) -> None:
    home, other = layout.ALIASES
    server = sharded[other]
    server.stop()  # type: ignore[attr-defined]
    connections[other].close()
    out, err = StringIO(), StringIO()
    try:
        with pytest.raises(CommandError, match=f"health failed on {other}$"):
            call_command("jobqueue", "health", "--tables", stdout=out, stderr=err)
    finally:
        server.start()  # type: ignore[attr-defined]
        connections[other].close()
    assert f"== database {home}" in out.getvalue()  # read, and reported
    assert f"== database {other}" in out.getvalue()
    assert err.getvalue().startswith(f"{other}: ")
