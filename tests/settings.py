"""Test settings: the example project plus an app of tasks made for the tests.

PostgreSQL by default (DATABASE_URL, else the local server); SQLite when
DATABASE_URL starts with sqlite://, for the second leg of the test script.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue")

from testproject.settings import *  # noqa: F403
from testproject.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.taskapp"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A file, not memory, so that worker threads share the test database.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.environ.get(
            "SQLITE_TEST_PATH", os.path.join(tempfile.gettempdir(), "jobqueue-test.sqlite3")
        )
    }
    DATABASES["default"]["OPTIONS"] = {  # noqa: F405
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL;",
    }

JOBQUEUE = {
    "POLL_INTERVAL": 1,
    "BACKOFF_BASE": 0,
    "BACKOFF_CAP": 0,
}

LOGGING = {"version": 1, "disable_existing_loggers": False}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
