"""The dialect seam: only ``store/dialects/`` knows one database from another, and the
keyed insert's idempotency predicate is the model's constraint's, not a copy of it.

No database: the package's source is read as text, and the predicate is compiled on
backends' wrappers that never connect."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.loader import MigrationLoader
from django.db.models import UniqueConstraint
from django.db.utils import load_backend

import django_jobqueue
from django_jobqueue.models import Job
from django_jobqueue.store.dialects import Dialect, PostgreSQL, SQLite
from django_jobqueue.store.inserting import IDEMPOTENCY

pytestmark = pytest.mark.sqlite

PACKAGE = Path(django_jobqueue.__file__).parent
# Where knowing the database is the point: the dialects, and the migrations (frozen
# history, each written for the databases of its day).
ALLOWED = (PACKAGE / "store" / "dialects", PACKAGE / "migrations")

# A vendor named or compared, and a dialect answering by flag instead of by method.
VENDOR = re.compile(
    r"\bvendor\s*(==|!=)|\.vendor\s+(not\s+)?in\b|(==|!=)\s*\w*\.?vendor\b"
    r"|\bconnections?\b[^\n]*\.vendor\b|DatabaseWrapper\.vendor\b|mysql_is_mariadb"
)
FLAG = re.compile(
    r"\.(postgres|mysql|skip_locked|not_paused|materialized)\b(?!\s*\()"
    r"|\b(d|dialect|self\.dialect|\w+\.dialect)\.json\b"
)


def _offences(pattern: re.Pattern[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path.is_relative_to(allowed) for allowed in ALLOWED):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if pattern.search(code):
                where = str(path.relative_to(PACKAGE))
                found.setdefault(where, []).append(f"{number}: {line.strip()}")
    return found


def test_no_vendor_comparison_outside_the_dialects() -> None:
    found = _offences(VENDOR)
    assert not found, "ask the dialect instead:\n" + "\n".join(
        f"{where}:{line}" for where, lines in found.items() for line in lines
    )


def test_no_dialect_flag_outside_the_dialects() -> None:
    found = _offences(FLAG)
    assert not found, "a method of the dialect, not a flag:\n" + "\n".join(
        f"{where}:{line}" for where, lines in found.items() for line in lines
    )


def test_the_patterns_catch_what_they_are_for() -> None:
    for line in (
        'if connection.vendor == "mysql":',
        'if connections[alias].vendor != "postgresql":',
        'mariadb = getattr(conn, "mysql_is_mariadb", False)',
        'if conn.vendor in ("mysql", "sqlite"):',
    ):
        assert VENDOR.search(line), line
    for line in (
        "if d.postgres:",
        "if self.dialect.mysql:",
        "one = f'({d.json})'",
        "d.skip_locked",
    ):
        assert FLAG.search(line), line
    for line in ("qs.select_for_update(skip_locked=True)", "from django.utils import json"):
        assert not VENDOR.search(line), line
        assert not FLAG.search(line), line


# --- the idempotency predicate ---------------------------------------------------------


class Detached:
    """A dialect on a backend's wrapper that never connects (not in DATABASES)."""

    @staticmethod
    def of(cls: type[Dialect], engine: str) -> Dialect:
        settings_dict: dict[str, Any] = {"ENGINE": engine, "NAME": "x", "OPTIONS": {}}
        wrapper = load_backend(engine).DatabaseWrapper(settings_dict, "x")

        class On(cls):  # type: ignore[valid-type, misc]
            @property
            def conn(self) -> BaseDatabaseWrapper:
                return wrapper

        return On("x")  # type: ignore[no-any-return]


DIALECTS = [
    pytest.param(SQLite, "django.db.backends.sqlite3", id="sqlite"),
    pytest.param(PostgreSQL, "django.db.backends.postgresql", id="postgresql"),
]


def test_the_keyed_insert_takes_the_models_idempotency_constraint() -> None:
    [model] = [c for c in Job._meta.constraints if c.name == "jobqueue_job_idempotency_active"]
    assert IDEMPOTENCY is model


def test_the_migrated_constraint_is_the_models() -> None:
    """The index the database has (built by the migrations) has the model's condition,
    so the predicate enqueue takes from the model is the index's."""
    state = MigrationLoader(None, ignore_no_migrations=True).project_state()
    migrated = state.apps.get_model("django_jobqueue", "Job")._meta.constraints
    [built] = [c for c in migrated if c.name == IDEMPOTENCY.name]
    assert isinstance(built, UniqueConstraint)
    assert built.condition == IDEMPOTENCY.condition
    assert tuple(built.fields) == tuple(IDEMPOTENCY.fields)


@pytest.mark.parametrize(("cls", "engine"), DIALECTS)
def test_the_conflict_predicate_is_the_condition_django_builds_the_index_with(
    cls: type[Dialect], engine: str
) -> None:
    d = Detached.of(cls, engine)
    predicate = d.condition_sql(IDEMPOTENCY)
    assert "'pending'" in predicate
    assert "'claimed'" in predicate
    assert "IS NOT NULL" in predicate
    assert "%s" not in predicate  # constants, as ON CONFLICT needs to infer the index
    index = str(IDEMPOTENCY.create_sql(Job, d.conn.schema_editor()))
    assert index.endswith(f"WHERE {predicate}")
