"""croniter is imported by the first cron expression parsed, not by the package: a
worker, a web process or a management command of a project with no schedule never
loads it (0.6 MiB and 6 ms of each process's start)."""

from __future__ import annotations

import textwrap

from tests.helpers import run_program

PROGRAM = textwrap.dedent(
    """
    import sys
    from django.conf import settings
    settings.configure(
        INSTALLED_APPS=["django_jobqueue"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        USE_TZ=True,
    )
    import django
    django.setup()
    from django_jobqueue import task  # the task API, periodic tasks included
    from django_jobqueue.management.commands import runworker  # and the worker
    from django_jobqueue.worker import loop
    from django_jobqueue.worker.services import scheduler
    from django_jobqueue import conf
    conf.get()  # the settings read, PERIODIC included
    assert "croniter" not in sys.modules, "croniter imported with no schedule"
    from datetime import UTC, datetime
    from django_jobqueue.rules.cron import Cron
    cron = Cron.parse("*/5 * * * *", name="schedule", error=ValueError)
    assert cron.next_after(datetime(2026, 1, 1, 0, 1, tzinfo=UTC)).minute == 5
    assert "croniter" in sys.modules
    try:
        Cron.parse("61 * * * *", name="nightly", error=ValueError)
    except ValueError as exc:
        assert "nightly" in str(exc) and "61 * * * *" in str(exc), exc
    else:
        raise AssertionError("a bad expression was accepted")
    print("ok")
    """
)


def test_croniter_is_imported_by_the_first_cron_expression_only() -> None:
    run_program(PROGRAM)
