"""The claim-support check (E003) asks the database its version when checks may query
it (``check --database``, ``migrate``); the test database is new enough."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.db import connection

from django_jobqueue.checks import MINIMUM_VERSIONS, claim_support_errors
from django_jobqueue.store.dialects import for_alias

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_the_test_database_can_run_the_claim() -> None:
    messages = run_checks(databases=["default"])
    assert [m for m in messages if m.id == "django_jobqueue.E003"] == []
    version = tuple(connection.get_database_version())
    assert version >= MINIMUM_VERSIONS[connection.vendor]
    # ... and the same version, were it older than needed, would be reported.
    name, version, least = for_alias("default").server()
    assert version >= least
    older = (least[0] - 1,)
    [error] = claim_support_errors(
        "default", type(for_alias("default")), server=(name, older, least)
    )
    assert error.id == "django_jobqueue.E003"
