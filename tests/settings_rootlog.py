"""The test settings with a root log handler, as many projects configure logging: the
worker must then not add a handler of its own (each line would come out twice)."""

from __future__ import annotations

from tests.settings import *  # noqa: F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"root": {"format": "ROOT %(levelname)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "root"}},
    "root": {"handlers": ["stderr"], "level": "INFO"},
}
