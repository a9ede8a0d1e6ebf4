"""Settings for the example project: SQLite by default, PostgreSQL when DATABASE_URL is set."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "testproject-insecure-key-for-local-use-only")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rangefilter",  # the job admin's date-time range filters
    "django_jobqueue",
    "testproject.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # X-Frame-Options: DENY (Django's default), so no other site can frame the admin's
    # confirmation pages and trick an operator into a click (clickjacking).
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "testproject.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def _database() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL")
    if url:
        import dj_database_url

        return dict(dj_database_url.parse(url))
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SQLITE_PATH", str(BASE_DIR / "db.sqlite3")),
        # Writers take the lock when their transaction begins, so concurrent claims
        # queue up instead of failing; WAL lets readers go on meanwhile.
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASES = {"default": _database()}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

JOBQUEUE: dict[str, Any] = {
    # The demo's flaky task retries quickly so a first run finishes in seconds.
    "BACKOFF_BASE": 0.5,
    "POLL_INTERVAL": 2,
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # SQLite has one writer at a time: one job at a time (system check W002).
    JOBQUEUE["CONCURRENCY"] = 1

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django_jobqueue": {
            "handlers": ["console"],
            "level": os.environ.get("JOBQUEUE_LOG_LEVEL", "INFO"),
        }
    },
}
