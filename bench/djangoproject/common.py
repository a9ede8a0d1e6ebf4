"""Settings both Django systems share: the database from DATABASE_URL, kept open.

DEBUG stays off so that Django does not keep every query in memory (and db_worker
does not start its autoreloader); connections persist (CONN_MAX_AGE=None) as a
production worker's would, unless BENCH_CONN_MAX_AGE is ``0`` (Django's default, as a
web process left at its defaults has: the ``enqueue_request`` measure).
"""

from __future__ import annotations

import os
from typing import Any

import dj_database_url

SECRET_KEY = "bench-insecure-key-for-local-use-only"  # noqa: S105 (a local benchmark)
DEBUG = False
ALLOWED_HOSTS: list[str] = []
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def database() -> dict[str, Any]:
    """The database the harness created for this run, from DATABASE_URL."""
    config = dict(dj_database_url.parse(os.environ["DATABASE_URL"]))
    config["CONN_MAX_AGE"] = 0 if os.environ.get("BENCH_CONN_MAX_AGE") == "0" else None
    return config
