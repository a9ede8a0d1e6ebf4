"""Test settings: the example project plus an app of tasks made for the tests.

PostgreSQL by default (DATABASE_URL, else the local server); SQLite when
DATABASE_URL starts with sqlite://, for the second leg of the test script; MariaDB or
MySQL when it starts with mysql:// (the third leg, needing the ``mysql`` extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

import django

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue")

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS

# Django's Tasks framework: core from Django 6.0, the django-tasks backport before.
TASKS_MODULE = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"

INSTALLED_APPS = [
    *INSTALLED_APPS,
    *(["django_tasks"] if TASKS_MODULE == "django_tasks" else []),
    "tests.taskapp",
    "tests.djtasks",
    "tests.celeryapp",
]

# The Django Tasks backend under test, and Django's ImmediateBackend that the shared
# suite compares it with. One attempt by default, as on ImmediateBackend; the tasks
# that retry say so themselves.
TASK_QUEUES = ["default", "mail", "reports"]
TASKS = {
    "default": {
        "BACKEND": "django_jobqueue.backend.JobQueueBackend",
        "QUEUES": TASK_QUEUES,
        "OPTIONS": {"MAX_ATTEMPTS": 1},
    },
    "immediate": {
        "BACKEND": f"{TASKS_MODULE}.backends.immediate.ImmediateBackend",
        "QUEUES": [*TASK_QUEUES, "elsewhere"],
    },
    "dummy": {
        "BACKEND": f"{TASKS_MODULE}.backends.dummy.DummyBackend",
        "QUEUES": TASK_QUEUES,
    },
}

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A file, not memory, so that worker threads share the test database.
    # One file per checkout, so two checkouts testing at once on one machine never share it.
    checkout = hashlib.sha1(os.path.dirname(os.path.abspath(__file__)).encode()).hexdigest()[:8]
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.environ.get(
            "SQLITE_TEST_PATH",
            os.path.join(tempfile.gettempdir(), f"jobqueue-test-{checkout}.sqlite3"),
        )
    }
    DATABASES["default"]["OPTIONS"] = {  # noqa: F405
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL;",
    }

if DATABASES["default"]["ENGINE"].endswith("mysql"):  # noqa: F405
    # Whatever the server's default character set, the test database is full UTF-8.
    DATABASES["default"].setdefault("OPTIONS", {})["charset"] = "utf8mb4"  # noqa: F405
    DATABASES["default"]["TEST"] = {"CHARSET": "utf8mb4"}  # noqa: F405

JOBQUEUE = {
    "POLL_INTERVAL": 1,
    "BACKOFF_BASE": 0,
    "BACKOFF_CAP": 0,
}
# Periodic schedules for the runworker children of a test (tests/concurrency), as JSON:
# never set in the test process itself, whose own workers must not run them.
if os.environ.get("JOBQUEUE_TEST_PERIODIC"):
    JOBQUEUE["PERIODIC"] = json.loads(os.environ["JOBQUEUE_TEST_PERIODIC"])

# The lease of a test's runworker children (tests/concurrency), in seconds: the
# supervisor's liveness bound is a third of it.
if os.environ.get("JOBQUEUE_TEST_LEASE"):
    JOBQUEUE["LEASE"] = float(os.environ["JOBQUEUE_TEST_LEASE"])

# A runworker child of the PgBouncer tests (tests/pgbouncer): its DATABASE_URL is the
# pooler, which it says as Django asks (no server-side cursors), and it LISTENs on a
# direct connection to the same database.
if os.environ.get("JOBQUEUE_TEST_LISTEN_URL"):
    import dj_database_url

    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True  # noqa: F405
    DATABASES["direct"] = dict(dj_database_url.parse(os.environ["JOBQUEUE_TEST_LISTEN_URL"]))  # noqa: F405
    JOBQUEUE["LISTEN_DATABASE"] = "direct"

# A runworker child of the shards tier (tests/shards): the two queue databases' aliases,
# each the test's database on a cluster of its own (JSON: alias -> URL), and the
# tier's DATABASES setting.
if os.environ.get("JOBQUEUE_TEST_SHARDS"):
    import dj_database_url

    from tests.shards import layout

    for _alias, _url in json.loads(os.environ["JOBQUEUE_TEST_SHARDS"]).items():
        DATABASES[_alias] = dict(dj_database_url.parse(_url))  # noqa: F405
    JOBQUEUE["DATABASES"] = layout.queue_databases()

LOGGING = {"version": 1, "disable_existing_loggers": False}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
