"""The cheaper reset after a transactional test (tests/reset.py): every table but the
content types and permissions empty afterwards, those two as post_migrate leaves them,
and Django's own flush where it is the better reset."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connections

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests import reset
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def rows_per_table() -> dict[str, int]:
    connection = connections["default"]
    names = connection.introspection.django_table_names(only_existing=True, include_views=False)
    return reset.capped_counts(connection, names)


def post_migrate_rows() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    kinds = set(ContentType.objects.values_list("app_label", "model"))
    perms = set(Permission.objects.values_list("content_type__app_label", "codename"))
    return kinds, perms


def test_the_reset_empties_every_table_written_and_keeps_what_post_migrate_writes() -> None:
    before = post_migrate_rows()
    assert before[0], "the test database has no content types"
    assert before[1], "the test database has no permissions"
    user = User.objects.create_user("reset")
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    handle = tasks.add.enqueue(a=1, b=2)
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    written = {t for t, n in rows_per_table().items() if n and t not in reset.KEPT}
    # The job, its journal, the user and the user's permission: rows in several tables,
    # some referring to others (and to the kept permissions).
    assert len(written) >= 4, written

    assert reset.empty_written_tables("default") is True

    left = {t: n for t, n in rows_per_table().items() if n and t not in reset.KEPT}
    assert left == {}
    assert post_migrate_rows() == before


def test_a_table_of_many_rows_gets_djangos_flush_on_postgresql_and_is_emptied_elsewhere() -> None:
    Group.objects.bulk_create(Group(name=f"group {i}") for i in range(reset.MANY))
    done = reset.empty_written_tables("default")
    if connections["default"].vendor == "postgresql":
        # TRUNCATE (Django's flush, in the teardown) then, not DELETE: nothing emptied yet.
        assert done is False
        assert Group.objects.count() == reset.MANY
    else:
        assert done is True
        assert Group.objects.count() == 0


def test_a_database_with_nothing_written_is_left_as_it_is() -> None:
    before = post_migrate_rows()
    assert reset.empty_written_tables("default") is True
    assert post_migrate_rows() == before
    assert {t for t, n in rows_per_table().items() if n} <= reset.KEPT
