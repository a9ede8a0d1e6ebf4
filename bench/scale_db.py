"""``python -m bench.scale_db ACTION LAYOUT '{json params}'``: what ``bench.scale`` does
inside Django, on the database of DATABASE_URL, with the example project's settings
(its admin, the pages' users): one action, its result printed as JSON on the last line.

- ``load``: migrate, make the journal partitioned (``LAYOUT`` ``partitioned``), fill the
  history (``bench.history``); the seconds and the sizes on disk.
- ``pages``: every admin page of ``bench.admin_pages``, timed as it times them.
- ``retention``: the partitioned journal: the oldest day's partition dropped by the
  store's retention (``drop_older``), an empty partition dropped the same way, then the
  next fortnight's partitions in one call, each timed with the entries it held; the
  plain journal: the oldest day's entries deleted row by row (rolled back), timed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

SETTINGS = "testproject.settings"


def load(layout: str, journal: int, jobs: int) -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connections

    from bench.history import fill_history, partition_by_day, sizes

    call_command("migrate", verbosity=0)
    if layout == "partitioned":
        partition_by_day()
    with connections["default"].cursor() as cursor:
        if journal or jobs:
            filled = fill_history(cursor, journal=journal, jobs=jobs)
        else:
            filled = {"jobs": 0, "journal": 0}
        return {**filled, "sizes": sizes(cursor)}


def pages(layout: str) -> dict[str, Any]:
    from bench.admin_pages import staff_client, timings

    return {
        name: {"median_ms": median, "max_ms": most}
        for name, median, most in timings(staff_client())
    }


def _timed_drop(before: Any) -> dict[str, Any]:
    from django_jobqueue.store.partitions import drop_older, journal_layout

    layout = journal_layout()
    assert layout is not None
    going = [p for p in layout.partitions if p.upper is not None and p.upper <= before]
    started = time.perf_counter()
    dropped = drop_older(before=before, layout=layout)
    seconds = time.perf_counter() - started
    if dropped is None:
        raise RuntimeError("retention did not have the journal's lock within its wait")
    return {
        "seconds": seconds,
        "partitions": len(dropped),
        "entries": sum(p.rows for p in going),
        "bytes": sum(p.bytes for p in going),
    }


def _delete_day() -> dict[str, Any]:
    """The plain journal's oldest day deleted row by row, timed, then rolled back."""
    from django.db import connections, transaction

    from bench.history import tables

    journal = tables()[1]
    with transaction.atomic(), connections["default"].cursor() as cursor:
        cursor.execute(f"SELECT min(recorded_at) FROM {journal}")  # noqa: S608 (the model's)
        (oldest,) = cursor.fetchone()
        started = time.perf_counter()
        day = f"DELETE FROM {journal} WHERE recorded_at < %s"  # noqa: S608 (the model's)
        cursor.execute(day, [oldest + timedelta(days=1)])
        seconds, entries = time.perf_counter() - started, cursor.rowcount
        transaction.set_rollback(True)
    return {"delete_day": {"seconds": seconds, "entries": entries}}


def retention(layout: str) -> dict[str, Any]:
    from django_jobqueue.store import sql
    from django_jobqueue.store.partitions import LOCK_WAIT, journal_layout

    found = journal_layout()
    if found is None:
        return _delete_day()
    days = [p for p in found.partitions if p.upper is not None and p.lower is not None]
    oldest_full = next((p for p in days if p.rows > 0), None)
    if oldest_full is None or oldest_full.upper is None:
        # Each run drops a day and a fortnight: a database kept through --reuse runs
        # has none left after the second.
        return {"skipped": "no day of entries left to drop (earlier runs dropped them)"}
    dropped_day = _timed_drop(oldest_full.upper)
    empty = days[-1]  # the newest, made ahead: no entry yet
    started = time.perf_counter()
    if not sql.dialect().drop_journal_partition(empty.name, wait=LOCK_WAIT):
        raise RuntimeError("retention did not have the journal's lock within its wait")
    small = {"seconds": time.perf_counter() - started, "entries": empty.rows, "bytes": empty.bytes}
    fortnight = _timed_drop(oldest_full.upper + timedelta(days=14))
    return {"drop_day": dropped_day, "drop_empty": small, "drop_fortnight": fortnight}


ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "load": load,
    "pages": pages,
    "retention": retention,
}


def main(argv: list[str]) -> int:
    action, layout, params = argv[1], argv[2], json.loads(argv[3] if len(argv) > 3 else "{}")
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()
    result = ACTIONS[action](layout, **params)
    print(json.dumps({"result": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
