"""Settings for the ``runworker`` children of the autovacuum soak: the test settings with
``RETENTION`` on, so finished jobs are deleted all the time, as in production.

How long completed jobs are kept and how often each worker prunes come from the
environment (seconds), set by ``autovacuum_soak.py``.
"""

from __future__ import annotations

import os

from tests.settings import *  # noqa: F403
from tests.settings import JOBQUEUE as _BASE

JOBQUEUE = {
    **_BASE,
    "RETENTION": {"completed": float(os.environ.get("JOBQUEUE_SOAK_KEEP", "60"))},
    "RETENTION_INTERVAL": float(os.environ.get("JOBQUEUE_SOAK_PRUNE_EVERY", "15")),
}
