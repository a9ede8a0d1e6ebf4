"""The admin answering "why", in headless Chromium at 1,280 px with the sidebar open:
the jobs list shows every column and each job's last error; a dead job's page leads
with its last error and folds its traceback's library frames; a dashboard card leads to
the list it counts; and a requeue of every dead job matching a filter (5,000 of them,
bulk-loaded) is confirmed with its count and journals each job. Screenshots along the
way (docs/howto/admin.md shows them).
"""

from __future__ import annotations

import re
import sysconfig
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.models import Value
from django.db.models.functions import Replace
from django.utils import timezone

from django_jobqueue import Status, store
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.testing import run_jobs
from testproject.shop import tasks as shop
from tests.browser.conftest import messages_after
from tests.browser.test_admin_flows import WORKER, login
from tests.helpers import postgres_only, run_burst

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

ROOT = str(Path(__file__).resolve().parents[2])
WIDTH = 1280
DEAD = 5000
SMTP = sysconfig.get_paths()["stdlib"] + "/smtplib.py"
# The note a dead send_receipt run journals: as the worker writes one (the exception's
# class and message, then the traceback), two standard-library frames under the task's.
NOTE = (
    "SMTPServerDisconnected: Connection unexpectedly closed\n"
    "Traceback (most recent call last):\n"
    '  File "/srv/shop/shop/tasks.py", line 18, in send_receipt\n'
    "    mailer.send(order_id, email)\n"
    f'  File "{SMTP}", line 255, in __init__\n'
    "    (code, msg) = self.connect(host, port)\n"
    "                  ^^^^^^^^^^^^^^^^^^^^^^^^\n"
    f'  File "{SMTP}", line 405, in getreply\n'
    '    raise SMTPServerDisconnected("Connection unexpectedly closed")\n'
    "smtplib.SMTPServerDisconnected: Connection unexpectedly closed"
)


def seed(settings: Any) -> Job:
    """The example project's jobs in each state, and one that failed until it died
    (after three failures, not the default 25)."""
    for n in range(3):
        shop.send_receipt.enqueue(order_id=n, email=f"user{n}@example.com")
        shop.charge_card.enqueue(order_id=n, fail_times=1)
    shop.import_legacy.enqueue(path="orders-1999.xls")
    shop.send_receipt.using(delay=timedelta(minutes=18)).enqueue(order_id=9, email="l@example.com")
    run_burst(worker_id=WORKER)
    doomed = shop.charge_card.enqueue(order_id=7, fail_times=99)
    settings.JOBQUEUE = {**getattr(settings, "JOBQUEUE", {}), "MAX_FAILURES": 3}
    run_jobs(kinds=[shop.charge_card], now=timezone.now() + timedelta(days=1))
    under_srv(doomed.id)
    running = shop.send_receipt.enqueue(order_id=8, email="now@example.com")
    Job.objects.filter(id=running.id).update(
        status=Status.CLAIMED,
        claimed_by=WORKER,
        run_count=1,
        claim_expires_at=timezone.now() + timedelta(seconds=40),
    )
    job = Job.objects.get(id=doomed.id)
    assert job.status == Status.DEAD
    return job


def under_srv(job_id: Any) -> None:
    """Show a job's failure notes with the project's frames (the example project's, the
    test app's) under a path of their own, not this checkout's: the screenshots name no
    machine's paths. The queue's own frames keep theirs, so they stay folded."""
    note: Any = "note"
    for tree in ("testproject", "tests"):
        note = Replace(note, Value(f"{ROOT}/{tree}/"), Value(f"/srv/app/{tree}/"))
    JournalEntry.objects.filter(job_id=job_id).update(note=note)


def fits(page: Any) -> None:
    """The changelist needs no horizontal scroll, and every column is inside the window."""
    assert page.locator("#main.shifted").count() == 1  # the sidebar is open
    overflow = page.evaluate(
        "() => { const r = document.querySelector('#changelist .results');"
        " return [r.scrollWidth - r.clientWidth,"
        " document.documentElement.scrollWidth - window.innerWidth]; }"
    )
    assert overflow == [0, 0], overflow
    for th in page.locator("#result_list thead th").all():
        box = th.bounding_box()
        assert box["x"] + box["width"] <= WIDTH, th.inner_text()


def test_the_jobs_list_at_1280_px_shows_every_column_and_why_a_job_died(
    page: Any, live_server: Any, screenshots: Path, settings: Any
) -> None:
    dead = seed(settings)
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/")
    headers = page.locator("#result_list thead th").all_inner_texts()
    assert [" ".join(h.split()).lower() for h in headers[1:]] == [
        "id",
        "kind",
        "queue / priority",
        "status",
        "created",
        "scheduled for",
        "runs / failures (last run)",
        "claimed by (lease end)",
        "last error",
    ]
    fits(page)
    error = page.locator(f"tr:has(a[href*='{dead.id}']) td.field-error .jq-error")
    assert error.inner_text() == "ConnectionError: gateway timeout on attempt 3"
    assert error.get_attribute("title").startswith("ConnectionError: gateway timeout")
    page.screenshot(path=screenshots / "admin-jobs-1280.png", full_page=True)

    page.goto(f"{base}/admin/django_jobqueue/journalentry/")
    fits(page)
    page.screenshot(path=screenshots / "admin-journal-1280.png", full_page=True)
    assert "gateway timeout" in page.locator("td.field-short_note").first.inner_text()

    # The dead job's page: its last error first, its traceback in monospace, the
    # queue's own frames folded until asked for.
    page.goto(f"{base}/admin/django_jobqueue/job/{dead.id}/change/")
    summary = page.locator("#last-error .jq-error-summary code")
    assert summary.inner_text() == "ConnectionError: gateway timeout on attempt 3"
    font = page.locator("#last-error .jq-tb").evaluate("e => getComputedStyle(e).fontFamily")
    assert "mono" in font.lower()
    folded = page.locator("#last-error details.jq-lib").first
    assert folded.get_attribute("open") is None
    assert "testproject/shop/tasks.py" in page.locator("#last-error .jq-tb").inner_text()
    assert "run/executor.py" not in page.locator("#last-error .jq-tb > div").all_inner_texts()[1]
    page.screenshot(path=screenshots / "admin-job-last-error.png", full_page=True)
    folded.locator("summary").click()
    assert folded.get_attribute("open") is not None
    # the queue's frames nearest the raise; the executor's further out were dropped
    # when the note was stored, with a marker counting them
    assert "/django_jobqueue/task/" in folded.inner_text()
    assert "library frames omitted" in page.locator("#last-error .jq-tb").inner_text()


def bulk_load_dead(n: int) -> None:
    """``n`` dead send_receipt jobs in one statement, and each one's dead run in one more."""
    jobs, journal = Job._meta.db_table, JournalEntry._meta.db_table
    kind = shop.send_receipt.kind
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {jobs} (id, kind, queue, payload, priority, status, created_at,"
            " visible_at, claimed_by, run_count, failure_count, carry, cancel_requested,"
            " cancel_actor, finished_at)"
            " SELECT gen_random_uuid(), %s, 'mail', jsonb_build_object('order_id', i,"
            " 'email', 'user' || i || '@example.com'), 0, 'dead', now() - i * interval '1 s',"
            " now() - i * interval '1 s', '', 3, 3, '{}'::jsonb, false, '', now()"
            " FROM generate_series(1, %s) AS i",
            [kind, n],
        )
        cursor.execute(
            f"INSERT INTO {journal} (job_id, kind, run_no, outcome, started_at, recorded_at,"
            " duration, note, worker, actor)"
            " SELECT id, kind, 3, 'dead', now(), now(), interval '0.2 s', %s, %s, ''"
            f" FROM {jobs} WHERE kind = %s AND status = 'dead'",
            [NOTE, WORKER, kind],
        )
        cursor.execute(f"ANALYZE {jobs}")


def test_a_dashboard_card_leads_to_its_list_and_a_requeue_of_every_dead_job_it_lists(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    bulk_load_dead(DEAD)
    shop.send_receipt.enqueue(order_id=1, email="ann@example.com")  # pending: not matched
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/dashboard/")
    card = page.locator("#cards a.jq-card:has-text('dead jobs')")
    assert card.locator(".value").inner_text() == f"{DEAD:,}"
    page.screenshot(path=screenshots / "admin-dashboard-dead.png", full_page=True)
    card.click()
    page.wait_for_url(re.compile(r"status__exact=dead"))
    # Past the list's count cap its count is PostgreSQL's estimate; the confirmation
    # below counts exactly.
    assert "about" in page.inner_text(".paginator")

    # Every dead job the filter matches, not the 50 on the page.
    page.check("#action-toggle")
    page.click(".actions .question a")  # "Select all 5000 jobs"
    page.select_option("select[name=action]", "requeue")
    page.click("button[name=index]")
    assert f"Every job matching the filter: {DEAD} jobs" in page.inner_text("#matching")
    assert f"Requeue will change {DEAD} jobs" in page.inner_text("#summary")
    page.screenshot(path=screenshots / "admin-confirm-requeue-filter.png", full_page=True)
    shown = messages_after(page, lambda: page.click("input[type=submit][value='Yes, requeue']"))
    assert f"Requeued {DEAD:,} jobs matching the filter." in shown
    requeued = JournalEntry.objects.filter(outcome="requeued", actor="admin:olga")
    assert requeued.count() == DEAD  # every job journalled
    assert requeued.values("job_id").distinct().count() == DEAD
    assert Job.objects.filter(status=Status.PENDING).count() == DEAD + 1
    assert store.history_count(status=["dead"]) == 0
