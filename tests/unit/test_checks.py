"""Each of the job queue's system checks, triggered through Django's ``run_checks`` by
the settings (or the task definitions) it reports, and quiet when they are put right.

Some tests add a ``DATABASES`` alias that nothing ever connects to (the checks read
settings only), which Django warns about in general: that warning is ignored here.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import CheckMessage, run_checks
from django.test import override_settings

from django_jobqueue import task
from django_jobqueue.checks import (
    check_task_kinds,
    claim_support_errors,
    database_warnings,
    unimported_task_warnings,
    unknown_kind_warnings,
)
from django_jobqueue.store.dialects import MySQL, for_settings
from django_jobqueue.task.registry import registry

pytestmark = [pytest.mark.sqlite, pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")]

POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "HOST": "db"}
SQLITE = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": "unused.sqlite3",
    "OPTIONS": {"transaction_mode": "IMMEDIATE"},
}


def ours(**kwargs: Any) -> list[CheckMessage]:
    return [m for m in run_checks(**kwargs) if str(m.id).startswith("django_jobqueue.")]


def ids(**kwargs: Any) -> list[str]:
    return sorted(str(m.id) for m in ours(**kwargs))


def with_databases(jobqueue: dict[str, Any], **extra: dict[str, Any]) -> Any:
    return override_settings(DATABASES={**settings.DATABASES, **extra}, JOBQUEUE=jobqueue)


@pytest.fixture(autouse=True)
def one_job_at_a_time() -> Iterator[None]:
    """On SQLite the suite runs jobs in parallel on purpose, which W002 warns about."""
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "CONCURRENCY": 1}):
        yield


def test_the_test_settings_pass_every_check() -> None:
    assert ours() == []


# --- E003 ---------------------------------------------------------------------------------


def test_a_jobs_database_the_claim_cannot_run_on_is_an_error_with_the_fix() -> None:
    dummy = {"ENGINE": "django.db.backends.dummy"}
    with with_databases({"DATABASE": "elsewhere"}, elsewhere=dummy):
        [error] = ours()
    assert error.id == "django_jobqueue.E003"
    assert "'elsewhere' (django.db.backends.dummy)" in error.msg
    assert "postgresql 12+" in error.msg
    assert "JOBQUEUE['DATABASE']" in error.hint


@pytest.mark.parametrize(
    ("database", "version"), [(POSTGRES, (11, 22)), (SQLITE, (3, 34, 1))], ids=["pg", "sqlite"]
)
def test_a_database_too_old_for_the_claim_is_an_error_naming_the_version_needed(
    database: dict[str, Any], version: tuple[int, ...]
) -> None:
    dialect = for_settings(database)
    assert dialect is not None
    least = dialect.minimum_version
    [error] = claim_support_errors("default", dialect, server=("db", version, least))
    assert error.id == "django_jobqueue.E003"
    assert ".".join(map(str, version)) in error.msg
    assert dialect.claim_needs in error.msg
    assert "Upgrade" in error.hint
    assert claim_support_errors("default", dialect, server=("db", (99,), least)) == []


@pytest.mark.parametrize(
    ("mariadb", "version", "refused"),
    [
        (True, (10, 5, 25), True),
        (True, (10, 6, 0), False),
        (True, (11, 4, 2), False),
        (False, (5, 7, 44), True),
        (False, (8, 0, 0), True),
        (False, (8, 0, 36), False),
    ],
)
def test_mysql_or_mariadb_without_skip_locked_is_an_error(
    mariadb: bool, version: tuple[int, ...], refused: bool
) -> None:
    # (What a live MySQL or MariaDB server says of itself, MySQL.server(), is tested on
    # the MariaDB leg: tests/db/test_dialect_storage.py.)
    server = "MariaDB" if mariadb else "mysql"
    least = MySQL.mariadb_minimum if mariadb else MySQL.minimum_version
    errors = claim_support_errors("jobs", MySQL, server=(server, version, least))
    if not refused:
        assert errors == []
        return
    [error] = errors
    assert error.id == "django_jobqueue.E003"
    assert f"is {server} {'.'.join(map(str, version))}" in error.msg
    assert "SKIP LOCKED" in error.msg
    assert ("10.6" if mariadb else "8.0.1") in error.hint


# --- W010, W011 ---------------------------------------------------------------------------


def test_mysql_gets_the_feature_warning_and_other_databases_do_not() -> None:
    [warning] = database_warnings("jobs", {"ENGINE": "django.db.backends.mysql"})
    assert warning.id == "django_jobqueue.W010"
    assert "poll" in warning.msg
    assert "(explanation/databases)" in warning.hint
    committed = {
        "ENGINE": "django.db.backends.mysql",
        "OPTIONS": {"isolation_level": "read committed"},
    }
    assert [m.id for m in database_warnings("jobs", committed)] == ["django_jobqueue.W010"]
    assert database_warnings("jobs", {"ENGINE": "django.db.backends.postgresql"}) == []
    assert database_warnings("jobs", SQLITE) == []


@pytest.mark.parametrize("level", ["repeatable read", "serializable"])
def test_mysql_above_read_committed_gets_the_isolation_warning(level: str) -> None:
    mysql = {"ENGINE": "django.db.backends.mysql", "OPTIONS": {"isolation_level": level}}
    [isolation, feature] = database_warnings("jobs", mysql)
    assert (isolation.id, feature.id) == ("django_jobqueue.W011", "django_jobqueue.W010")
    assert repr(level) in isolation.msg
    assert "read committed" in isolation.hint


# --- W002 ---------------------------------------------------------------------------------


def test_sqlite_running_several_jobs_at_once_is_a_warning() -> None:
    with with_databases({"DATABASE": "embedded", "CONCURRENCY": 4}, embedded=SQLITE):
        [warning] = ours()
    assert warning.id == "django_jobqueue.W002"
    assert "4 jobs at once" in warning.msg
    assert "CONCURRENCY" in warning.hint
    with with_databases({"DATABASE": "embedded", "CONCURRENCY": 1}, embedded=SQLITE):
        assert ours() == []
    with with_databases({"DATABASE": "server", "CONCURRENCY": 4}, server=POSTGRES):
        assert ours() == []


# --- W003 ---------------------------------------------------------------------------------


def test_a_pooled_jobs_database_without_a_listen_database_is_a_warning() -> None:
    pooled = {**POSTGRES, "DISABLE_SERVER_SIDE_CURSORS": True}
    with with_databases({"DATABASE": "pooled"}, pooled=pooled, direct=POSTGRES):
        [warning] = ours()
        assert warning.id == "django_jobqueue.W003"
        assert "DISABLE_SERVER_SIDE_CURSORS" in warning.msg
        assert "LISTEN_DATABASE" in warning.hint
    jobqueue = {"DATABASE": "pooled", "LISTEN_DATABASE": "direct"}
    with with_databases(jobqueue, pooled=pooled, direct=POSTGRES):
        assert ours() == []


def test_a_listen_database_that_is_not_postgresql_is_a_warning() -> None:
    jobqueue = {"DATABASE": "server", "LISTEN_DATABASE": "embedded"}
    with with_databases(jobqueue, server=POSTGRES, embedded=SQLITE):
        [warning] = ours()
    assert warning.id == "django_jobqueue.W003"
    assert "'embedded', which is not PostgreSQL" in warning.msg


def test_a_listen_database_that_is_pooled_too_is_a_warning() -> None:
    bouncer = {**POSTGRES, "PORT": "6432"}
    jobqueue = {"DATABASE": "pooled", "LISTEN_DATABASE": "also_pooled"}
    with with_databases(jobqueue, pooled=bouncer, also_pooled=bouncer):
        [warning] = ours()
    assert warning.id == "django_jobqueue.W003"
    assert "'also_pooled'" in warning.msg
    assert "PORT is 6432" in warning.msg


# --- E004 / W004 --------------------------------------------------------------------------


@pytest.fixture
def isolated() -> Iterator[None]:
    """Tasks defined in the test, standing for ones in an app's tasks.py (so W006, which
    would name them as defined outside one, is left out)."""
    discovered = registry.discovered
    registry.discovered = None
    try:
        with registry.isolated():
            yield
    finally:
        registry.discovered = discovered


@pytest.mark.usefixtures("isolated")
@pytest.mark.parametrize(
    ("first", "second"), [("reports.Render", "reports.render"), ("ﬁles.sync", "files.sync ")]
)
def test_kinds_that_differ_only_in_case_or_form_are_an_error(first: str, second: str) -> None:
    @task(kind=first)
    def one() -> None: ...

    @task(kind=second)
    def two() -> None: ...

    [error] = ours()
    assert error.id == "django_jobqueue.E004"
    assert repr(first) in error.msg
    assert repr(second) in error.msg
    assert "one" in error.msg
    assert "two" in error.msg


@pytest.mark.usefixtures("isolated")
def test_one_task_imported_under_two_module_names_is_a_warning(tmp_path: Path) -> None:
    source = tmp_path / "doubled_tasks.py"
    source.write_text(
        "from django_jobqueue import task\n\n@task\ndef charge(order_id: int) -> None: ...\n"
    )
    names = ["jq_check_shop.tasks", "jq_check_tasks"]
    try:
        for name in names:  # what "shop.tasks" beside "tasks" on sys.path does
            spec = importlib.util.spec_from_file_location(name, source)
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        [warning] = ours()
    finally:
        for name in names:
            sys.modules.pop(name, None)
    assert warning.id == "django_jobqueue.W004"
    assert "'jq_check_shop.tasks.charge'" in warning.msg
    assert "'jq_check_tasks.charge'" in warning.msg
    assert str(source) in warning.msg


@pytest.mark.usefixtures("isolated")
def test_one_function_under_two_kinds_on_purpose_is_not_reported() -> None:
    def sync() -> None: ...

    task(kind="accounts.sync")(sync)
    task(kind="accounts.sync_v1")(sync)  # the old name, while its jobs drain
    assert ours() == []


# --- W006 ---------------------------------------------------------------------------------


def test_a_task_registered_outside_any_tasks_module_after_start_up_is_a_warning() -> None:
    with registry.isolated():

        @task(kind="shop.send_receipt")
        def send_receipt(order_id: int) -> None: ...

        [warning] = [m for m in check_task_kinds() if m.id == "django_jobqueue.W006"]
    assert "'shop.send_receipt'" in warning.msg
    assert f"registered by {__name__}" in warning.msg
    assert "workers will not import it" in warning.msg
    assert warning.hint is not None
    assert "Define it at module level in an installed app's tasks.py" in warning.hint


def test_tasks_seen_at_start_up_or_in_a_tasks_module_are_not_reported() -> None:
    assert registry.discovered is not None
    assert "tests.taskapp.tasks.add" in registry.discovered  # an installed app's tasks.py
    assert [m for m in check_task_kinds() if m.id == "django_jobqueue.W006"] == []
    definitions = list(registry)
    # Registered at start-up by a module that is no tasks module (imported by one): seen.
    assert (
        unimported_task_warnings(
            definitions, discovered=frozenset(registry.kinds()), apps=["tests.taskapp"]
        )
        == []
    )
    # Registered later, but by an installed app's tasks module: seen too.
    assert (
        unimported_task_warnings(
            [d for d in definitions if d.kind == "tests.taskapp.tasks.add"],
            discovered=frozenset(),
            apps=["tests.taskapp"],
        )
        == []
    )
    [late] = unimported_task_warnings(
        [d for d in definitions if d.kind == "tests.taskapp.tasks.add"],
        discovered=frozenset(),
        apps=["shop"],
    )
    assert late.id == "django_jobqueue.W006"
    assert late.hint == (
        "Move add into an installed app's tasks.py, or import it there "
        "(from tests.taskapp.tasks import add)."
    )


# --- W005 ---------------------------------------------------------------------------------


def test_a_kind_concurrency_entry_for_an_unknown_kind_is_a_warning() -> None:
    caps = {
        "tests.taskapp.tasks.record": 1,
        "tests.taskapp.tasks.nope": 2,
        "Tests.Taskapp.Tasks.Add": 1,
    }
    with override_settings(JOBQUEUE={"KIND_CONCURRENCY": caps, "CONCURRENCY": 1}):
        warnings = ours()
    assert [w.id for w in warnings] == ["django_jobqueue.W005"] * 2
    nope, add = warnings
    assert "'tests.taskapp.tasks.nope'" in nope.msg
    assert "KIND_CONCURRENCY" in nope.msg
    assert "INSTALLED_APPS" in nope.hint
    assert add.hint == "Did you mean 'tests.taskapp.tasks.add'?"


def test_the_unknown_kind_helper_serves_any_setting_keyed_by_kind() -> None:
    [warning] = unknown_kind_warnings(
        "LIMITS", ["a.known", "a.unknown"], id="django_jobqueue.W999", known=["a.known"]
    )
    assert warning.id == "django_jobqueue.W999"
    assert "JOBQUEUE['LIMITS'] names kind 'a.unknown'" in warning.msg
