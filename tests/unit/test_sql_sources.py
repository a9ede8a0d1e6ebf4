"""PostgreSQL's functions' source files (``store/dialects/postgresql/sql/``): named by
the convention, every version run by a migration that pins its digest, and a file
edited after its migration, or named wrong, refused with a message saying what to do.

No database: files and migrations' source are read as text (the comparison with a
migrated database is tests/db/test_sql_functions.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from django_jobqueue.store.dialects.postgresql import functions

MIGRATIONS = Path(functions.__file__).parents[3] / "migrations"
PINNED = re.compile(r"""["']([a-z][a-z0-9_]*\.v[0-9]+)@([0-9a-f]+)["']""")


def _pinned_by_migrations() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(MIGRATIONS.glob("[0-9]*.py")):
        for name, digest in PINNED.findall(path.read_text(encoding="utf-8")):
            found[name] = digest
    return found


def test_each_function_has_its_versions_from_one_without_a_gap() -> None:
    versions: dict[str, list[int]] = {}
    for s in functions.sources():
        versions.setdefault(s.function, []).append(s.version)
    assert versions, "no source files found"
    for function, numbers in versions.items():
        assert numbers == list(range(1, len(numbers) + 1)), function
        assert function.startswith("django_jobqueue_"), function


def test_every_source_file_is_run_by_a_migration_that_pins_its_digest() -> None:
    pinned = _pinned_by_migrations()
    assert set(pinned) == {s.name for s in functions.sources()}
    for name, digest in pinned.items():
        assert functions.pinned(f"{name}@{digest}").digest == digest


def test_the_current_version_is_each_functions_highest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(functions, "SOURCES", tmp_path)
    for name in ("jobqueue_a.v1", "jobqueue_a.v2", "jobqueue_a.v10", "jobqueue_b.v1"):
        (tmp_path / f"{name}.sql").write_text(f"-- {name}\n")
    assert {f: s.name for f, s in functions.current().items()} == {
        "jobqueue_a": "jobqueue_a.v10",
        "jobqueue_b": "jobqueue_b.v1",
    }


@pytest.mark.parametrize(
    "file", ["count_down.sql", "django_jobqueue_x.v0.sql", "django_jobqueue_x.V1.sql", "README.md"]
)
def test_a_file_named_against_the_convention_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: str
) -> None:
    monkeypatch.setattr(functions, "SOURCES", tmp_path)
    (tmp_path / file).write_text("SELECT 1;\n")
    with pytest.raises(ValueError, match=re.escape(file) + r".*<function>\.v<N>\.sql"):
        functions.sources()


def test_an_unknown_version_is_refused_naming_it_and_the_known_ones() -> None:
    with pytest.raises(LookupError, match=r"'django_jobqueue_count_down\.v99'.*there are: .*"):
        functions.source("django_jobqueue_count_down.v99")


def test_a_file_edited_since_its_migration_is_refused_with_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(functions, "SOURCES", tmp_path)
    path = tmp_path / "jobqueue_f.v1.sql"
    path.write_text(
        "CREATE OR REPLACE FUNCTION jobqueue_f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
    )
    digest = functions.source("jobqueue_f.v1").digest
    assert functions.pinned(f"jobqueue_f.v1@{digest}").name == "jobqueue_f.v1"
    path.write_text(path.read_text().replace("SELECT 1", "SELECT 2"))
    edited = functions.source("jobqueue_f.v1").digest
    assert edited != digest
    with pytest.raises(ValueError, match=f"digest '{digest}'.*is '{edited}'.*never edited"):
        functions.install(f"jobqueue_f.v1@{digest}")
    with pytest.raises(ValueError, match=f"names no digest.*jobqueue_f.v1@{edited}"):
        functions.install("jobqueue_f.v1")


def test_a_files_digest_is_the_same_whatever_its_line_endings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(functions, "SOURCES", tmp_path)
    path = tmp_path / "jobqueue_f.v1.sql"
    path.write_bytes(b"SELECT 1;\nSELECT 2;\n")
    unix = functions.source("jobqueue_f.v1").digest
    path.write_bytes(b"SELECT 1;\r\nSELECT 2;\r\n")
    assert functions.source("jobqueue_f.v1").digest == unix
