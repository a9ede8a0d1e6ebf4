"""django_jobqueue with the benchmark's tasks and two queue databases: ``default`` (from
DATABASE_URL) and ``shard_b`` (from BENCH_SHARD_B_URL), jobs routed by key; one
``runworker`` serves both, a worker process each (``bench.shards``)."""

from __future__ import annotations

import os

import dj_database_url

from bench.djangoproject.common import database
from bench.djangoproject.settings_jobqueue import *  # noqa: F403
from bench.djangoproject.settings_jobqueue import JOBQUEUE

DATABASES = {
    "default": database(),
    "shard_b": {**dj_database_url.parse(os.environ["BENCH_SHARD_B_URL"]), "CONN_MAX_AGE": None},
}
JOBQUEUE = {**JOBQUEUE, "DATABASES": {"ALIASES": ["default", "shard_b"], "ROUTE": "key"}}
