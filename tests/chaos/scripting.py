"""What the long-run scripts (``campaign``, ``soak``) share: Django set up on the test
settings, a PostgreSQL database of their own, and ``runworker`` children on it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.concurrency.procs import WorkerProcesses


@contextmanager
def own_database(suffix: str) -> Iterator[WorkerProcesses]:
    """Create (and at the end drop) the DATABASE_URL's database name plus ``_<suffix>``,
    migrated, and yield a starter of ``runworker`` children that use it."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from django.conf import settings
    from django.db import connections

    from tests.concurrency.procs import WorkerProcesses

    default = settings.DATABASES["default"]
    if "postgresql" not in default["ENGINE"]:
        raise SystemExit(f"the {suffix} script needs PostgreSQL (DATABASE_URL=postgres://...)")
    default.setdefault("TEST", {})["NAME"] = f"{default['NAME']}_{suffix}"
    creation = connections["default"].creation
    creation.create_test_db(verbosity=0, autoclobber=True)
    procs = WorkerProcesses(Path(tempfile.mkdtemp(prefix=f"jobqueue-{suffix}-")))
    try:
        yield procs
    finally:
        procs.close()
        print(f"worker logs: {procs.log_dir}")
        connections.close_all()
        creation.destroy_test_db(default["NAME"], verbosity=0)
