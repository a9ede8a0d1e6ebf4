"""The migrated database's functions and triggers are exactly their source files'
(``store/dialects/postgresql/sql/``, each function's highest version).

The comparison is PostgreSQL's own: the files are run into a scratch schema, in the
test's transaction (rolled back at its end), and each function's ``pg_get_functiondef``
there (signature, result, language, volatility, settings and body, as the server
renders them) is compared with the migrated one's, the schema's name aside; a trigger
is compared by ``pg_get_triggerdef`` once the files replaced it. A file edited without
its migration, a migration that changes a function without a file, a function or
trigger with no file, a file whose function is missing: each fails here, with a diff.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import pytest
from django.db import connection, transaction

from django_jobqueue.store.dialects.postgresql import functions
from tests.helpers import postgres_only

pytestmark = [pytest.mark.django_db, postgres_only]

SCRATCH = "jobqueue_sql_sources"
# The queue's functions and triggers: named for the package (django_jobqueue_...), or
# for the queue alone (jobqueue_...), as its indexes are.
OURS = r"^(django_)?jobqueue_"


@dataclass(frozen=True)
class Definitions:
    """The queue's functions (name: ``pg_get_functiondef`` without the schema) and
    triggers (name: ``pg_get_triggerdef``) in one schema."""

    functions: dict[str, str]
    triggers: dict[str, str]


def _read(schema: str, tables: str) -> Definitions:
    """The queue's functions in ``schema``, and the triggers on the queue's tables (in
    ``tables``) whose functions are in ``schema``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc AS p"
            " JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s AND p.proname ~ %s ORDER BY p.proname",
            [schema, OURS],
        )
        # The header names the function with its schema: the one thing that differs.
        found = {name: text.replace(f" {schema}.{name}(", f" {name}(", 1) for name, text in cursor}
        assert len(found) == len(set(found)), f"overloaded functions in {schema}: {found}"
        cursor.execute(
            "SELECT t.tgname, pg_get_triggerdef(t.oid), f.nspname FROM pg_trigger AS t"
            " JOIN pg_class AS c ON c.oid = t.tgrelid"
            " JOIN pg_namespace AS r ON r.oid = c.relnamespace"
            " JOIN pg_proc AS p ON p.oid = t.tgfoid"
            " JOIN pg_namespace AS f ON f.oid = p.pronamespace"
            " WHERE NOT t.tgisinternal AND r.nspname = %s"
            " AND (t.tgname ~ %s OR c.relname ~ %s) ORDER BY t.tgname",
            [tables, OURS, OURS],
        )
        # A trigger is the schema's whose function is: the files' replace the migrated.
        triggers = {name: text for name, text, where in cursor if where == schema}
    return Definitions(found, triggers)


def _schema() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        return str(cursor.fetchone()[0])


@pytest.fixture
def migrated() -> Definitions:
    schema = _schema()
    return _read(schema, schema)


@pytest.fixture
def from_files() -> Definitions:
    """The current files run into a scratch schema first on the search path (tables and
    types still found in the migrated schema) and read back, all of it then rolled back
    to a savepoint: the migrated functions and trigger are as they were."""
    tables = _schema()
    point = transaction.savepoint()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW search_path")
            (path,) = cursor.fetchone()
            cursor.execute(f"CREATE SCHEMA {SCRATCH}")
            cursor.execute(f"SET LOCAL search_path TO {SCRATCH}, {path}")
            for source in functions.current().values():
                cursor.execute(source.text())
            return _read(SCRATCH, tables)
    finally:
        transaction.savepoint_rollback(point)


def _differences(migrated: Definitions, files: Definitions) -> list[str]:
    """What the migrated database has that the files do not, and the other way round,
    each a diff or a sentence."""
    found = []
    for what, have, want in (
        ("function", migrated.functions, files.functions),
        ("trigger", migrated.triggers, files.triggers),
    ):
        for name in sorted(have.keys() - want.keys()):
            found.append(f"the database's {what} {name} has no source file")
        for name in sorted(want.keys() - have.keys()):
            found.append(f"the {what} {name} of the source files is not in the database")
        for name in sorted(have.keys() & want.keys()):
            if have[name] != want[name]:
                diff = difflib.unified_diff(
                    have[name].splitlines(),
                    want[name].splitlines(),
                    f"{name} as migrated",
                    f"{name} from its file",
                    lineterm="",
                )
                found.append("\n".join(diff))
    return found


def test_the_migrated_functions_and_triggers_are_exactly_the_source_files(
    migrated: Definitions, from_files: Definitions
) -> None:
    # The reads found what they look for (a retired function's last file, its DROP
    # alone, makes nothing: the comparison wants it absent from the database).
    assert migrated.functions
    assert migrated.triggers
    assert from_files.functions.keys() <= functions.current().keys()
    differences = _differences(migrated, from_files)
    assert not differences, "\n\n".join(differences)


def test_a_function_changed_without_its_file_is_told(from_files: Definitions) -> None:
    """The comparison has teeth: a body changed by one character, and a function no file
    defines, in the migrated schema, are each reported."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('django_jobqueue_free_slots'::regproc)")
        (text,) = cursor.fetchone()
        cursor.execute(text.replace("GREATEST(", "LEAST(", 1))
        cursor.execute(
            "CREATE FUNCTION jobqueue_unsourced() RETURNS integer LANGUAGE sql AS 'SELECT 1'"
        )
    schema = _schema()
    changed = _read(schema, schema)
    differences = _differences(changed, from_files)
    assert len(differences) == 2, differences
    assert "the database's function jobqueue_unsourced has no source file" in differences
    (diff,) = [d for d in differences if "django_jobqueue_free_slots as migrated" in d]
    assert "-    RETURN LEAST(" in diff
    assert "+    RETURN GREATEST(" in diff
