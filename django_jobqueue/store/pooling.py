"""Whether a ``DATABASES`` entry looks like it goes through a transaction-pooling
connection pooler (PgBouncer, or one that behaves like it).

Behind such a pooler each transaction may run on a different server session, so
nothing may rely on session state: no server-side prepared statements (older
PgBouncers do not carry them between sessions), no session ``SET``, and no
``LISTEN`` (it would listen on a session that another client is using next). The
store asks this to turn preparing off, and the system checks to warn when wake-ups
would go through the pooler. Reads settings dicts only: it never connects. It asks
only about PostgreSQL entries (the other dialects' ``pooled_reason`` is None).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The port PgBouncer listens on by default.
PGBOUNCER_PORT = 6432


def pooled_reason(database: Mapping[str, Any]) -> str | None:
    """Why ``database`` (a PostgreSQL ``DATABASES`` entry) looks pooled in transaction
    mode, or None.

    The signs: ``DISABLE_SERVER_SIDE_CURSORS`` (which Django asks for behind a
    transaction pooler) or PgBouncer's port, 6432, in ``PORT`` or ``OPTIONS["port"]``.
    Django's own ``OPTIONS["pool"]`` is a pool of whole sessions, not a transaction
    pooler, and is not a sign.
    """
    if database.get("DISABLE_SERVER_SIDE_CURSORS"):
        return "it sets DISABLE_SERVER_SIDE_CURSORS, as a transaction pooler needs"
    options = database.get("OPTIONS") or {}
    for where, port in (("PORT", database.get("PORT")), ('OPTIONS["port"]', options.get("port"))):
        if str(port or "").strip() == str(PGBOUNCER_PORT):
            return f"its {where} is {PGBOUNCER_PORT}, PgBouncer's"
    return None
