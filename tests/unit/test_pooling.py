"""What a DATABASES entry says about a transaction pooler in front of it, and what the
store does about it: no prepared statements unless asked for, no session settings.
No database: the store's dialect is built on a backend's wrapper that never connects."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import load_backend

from django_jobqueue.store.dialects import PostgreSQL, for_settings
from django_jobqueue.store.pooling import pooled_reason

pytestmark = pytest.mark.sqlite

POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "HOST": "db"}


def test_what_looks_pooled() -> None:
    assert pooled_reason(POSTGRES) is None
    assert pooled_reason({**POSTGRES, "PORT": 5432}) is None
    assert pooled_reason({**POSTGRES, "PORT": 6432}) == "its PORT is 6432, PgBouncer's"
    assert pooled_reason({**POSTGRES, "OPTIONS": {"port": "6432"}}) is not None
    assert "DISABLE_SERVER_SIDE_CURSORS" in str(
        pooled_reason({**POSTGRES, "DISABLE_SERVER_SIDE_CURSORS": True})
    )
    # Django's own pool lends whole sessions: prepared statements and LISTEN hold.
    assert pooled_reason({**POSTGRES, "OPTIONS": {"pool": True}}) is None
    # Only PostgreSQL's dialect asks: a SQLite entry on PgBouncer's port is not pooled.
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x", "PORT": 6432}
    sqlite_dialect = for_settings(sqlite)
    assert sqlite_dialect is not None
    assert sqlite_dialect.pooled_reason(sqlite) is None
    postgres_dialect = for_settings(POSTGRES)
    assert postgres_dialect is not None
    assert postgres_dialect.pooled_reason({**POSTGRES, "PORT": 6432}) is not None


class Detached(PostgreSQL):
    """PostgreSQL's dialect on a wrapper that never connects (not in DATABASES)."""

    def __init__(self, wrapper: BaseDatabaseWrapper) -> None:
        super().__init__("x")
        self._wrapper = wrapper

    @property
    def conn(self) -> BaseDatabaseWrapper:
        return self._wrapper


def dialect(**entry: Any) -> PostgreSQL:
    settings_dict = {**POSTGRES, "OPTIONS": {}, **entry}
    return Detached(load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, "x"))


@pytest.mark.parametrize(
    ("entry", "pooled", "prepare"),
    [
        ({}, False, True),
        ({"OPTIONS": {"prepare_threshold": None}}, False, False),
        ({"OPTIONS": {"server_side_binding": True}}, False, False),
        ({"PORT": "6432"}, True, False),
        ({"DISABLE_SERVER_SIDE_CURSORS": True}, True, False),
        # PgBouncer 1.21+ with max_prepared_statements keeps them: the project says so.
        ({"PORT": "6432", "OPTIONS": {"prepare_threshold": 5}}, True, True),
    ],
)
def test_the_store_prepares_statements_only_where_they_survive(
    entry: dict[str, Any], pooled: bool, prepare: bool
) -> None:
    d = dialect(**entry)
    assert d.pooled is pooled
    assert d.prepare is prepare
