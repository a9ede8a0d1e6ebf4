"""The admin answers "why": the jobs list's last-error column (read with the row, no
query per row), the job page's last error and folded traceback, its states said right,
the dashboard's numbers as links to the lists they count, the chart's failed runs and
dead jobs apart, one worker id format, the clean-up page's admin form and assets, and
"Job queue" in every breadcrumb."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.admin import tracebacks
from django_jobqueue.admin.dashboard import worker_id
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.testing import run_jobs
from tests.admin.conftest import jobs_in_every_state, set_state
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
DASHBOARD = f"{JOBS}dashboard/"
LATER = timedelta(days=1)  # run_jobs's clock: every backoff has passed


def dead_by_failing(n: int = 1) -> list[Job]:
    """Jobs of ``always_fails`` run by the queue's own executor until dead (three
    failures each, real tracebacks in their journal)."""
    handles = [tasks.always_fails.enqueue() for _ in range(n)]
    run_jobs(kinds=[tasks.always_fails], now=timezone.now() + LATER)
    return [Job.objects.get(id=h.id) for h in handles]


def error_cells(text: str) -> list[tuple[str, str]]:
    """(hover, shown) of each last-error cell of a jobs list."""
    cells = re.findall(r'<span class="jq-error" title="([^"]*)">([^<]*)</span>', text)
    return [(unescape(hover), unescape(shown)) for hover, shown in cells]


# --- the last error on the jobs list ----------------------------------------------------


def test_the_jobs_list_shows_each_jobs_last_error_with_the_whole_note_on_hover(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    dead_by_failing()
    tasks.add.enqueue(1, 1)  # never failed: an empty cell
    text = client_for(viewer).get(JOBS).content.decode()
    [(hover, shown)] = error_cells(text)
    assert shown == "ValueError: this always fails"
    assert hover.startswith("ValueError: this always fails\nTraceback (most recent call last):")
    assert "raise ValueError" in hover
    assert '<th scope="col" class="column-error">' in text


def test_the_last_error_column_costs_no_query_per_row(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    dead_by_failing(1)
    with CaptureQueriesContext(connections["default"]) as one:
        assert client.get(JOBS).status_code == 200
    dead_by_failing(6)
    with CaptureQueriesContext(connections["default"]) as seven:
        text = client.get(JOBS).content.decode()
    assert len(error_cells(text)) == 7
    assert len(seven.captured_queries) == len(one.captured_queries)


def test_a_requeued_job_shows_no_last_error_until_it_fails_again(
    operator: User, client_for: Callable[..., Client]
) -> None:
    [dead] = dead_by_failing()
    store.requeue(job_id=dead.id, actor="t")
    assert error_cells(client_for(operator).get(JOBS).content.decode()) == []


# --- the job page: last error, folded traceback, states -------------------------------


def test_the_job_page_leads_with_the_last_error_and_folds_library_frames(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    [dead] = dead_by_failing()
    text = client_for(viewer).get(f"{JOBS}{dead.id}/change/").content.decode()
    head = text.split('id="last-error"')[1].split('class="jq-section"')[0]
    assert "<code>ValueError: this always fails</code>" in head
    assert "Run 3" in head
    # The task's own frame is shown; the queue's executor frames that called it are folded.
    folded = re.findall(r'<details class="jq-lib"><summary>(\d+) library frames?</summary>', head)
    assert folded
    assert all(int(n) >= 1 for n in folded)
    shown = re.sub(r"<details.*?</details>", "", head, flags=re.S)
    assert "tests/taskapp/tasks.py" in shown
    assert "django_jobqueue/run/executor.py" not in shown
    assert 'class="jq-tb"' in text  # monospace (style.html), so the ^^^^ markers line up


def test_tracebacks_fold_runs_of_library_frames_and_keep_the_projects() -> None:
    import django

    lib = django.__file__.rsplit("/", 1)[0] + "/core/handlers/base.py"
    note = (
        "KeyError: 'sku'\n"
        "Traceback (most recent call last):\n"
        f'  File "{lib}", line 10, in inner\n'
        "    return f()\n"
        f'  File "{lib}", line 20, in f\n'
        "    g()\n"
        '  File "/srv/shop/orders.py", line 5, in g\n'
        "    items['sku']\n"
        "    ^^^^^^^^^^^^\n"
        "KeyError: 'sku'"
    )
    parts = tracebacks.parts(note)
    assert [p.frames for p in parts] == [0, 2, 0]
    assert parts[1].text.count('  File "') == 2
    assert parts[2].text.startswith('  File "/srv/shop/orders.py"')
    assert "    ^^^^^^^^^^^^" in parts[2].text
    assert tracebacks.first_line(note) == "KeyError: 'sku'"


def test_a_running_job_says_it_is_running_and_for_how_long(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.add.enqueue(1, 2)
    # Claimed five minutes ago under the default one-minute lease, renewed since.
    set_state(
        handle.id,
        status="claimed",
        run_count=1,
        claimed_by="app-1:4242",
        claim_expires_at=timezone.now() + timedelta(seconds=30),
    )
    text = unescape(client_for(viewer).get(f"{JOBS}{handle.id}/change/").content.decode())
    assert re.search(r'id="job-running">run 1 on app-1:4242, for at least 30s', text)
    assert "No entries yet: run 1 is running now." in text
    assert "the job has not run" not in text
    assert "runnable" not in text


def test_a_scheduled_job_says_when_and_a_finished_one_has_no_runnable_time(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    jobs = jobs_in_every_state()
    client = client_for(viewer)
    page = unescape(client.get(f"{JOBS}{jobs['scheduled'].id}/change/").content.decode())
    assert re.search(r'id="job-scheduled">[^<]+\(in (59m|1h)', page)
    assert ">scheduled</span>" in page  # its badge: not the runnable pending one
    pending = client.get(f"{JOBS}{jobs['pending'].id}/change/").content.decode()
    assert 'id="job-runnable"' in pending
    for name in ("completed", "dead", "cancelled"):
        done = client.get(f"{JOBS}{jobs[name].id}/change/").content.decode()
        assert "runnable" not in done, name
        assert "scheduled for" not in done, name


# --- the dashboard --------------------------------------------------------------------


def listed(client: Client, url: str) -> int:
    page = client.get(url)
    assert page.status_code == 200, url
    return int(page.context["cl"].result_count)


def test_every_dashboard_card_links_to_the_list_of_what_it_counts(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    jobs_in_every_state()
    client = client_for(viewer)
    cards = client.get(DASHBOARD).context["cards"]
    for label, value, _, url in cards:
        if label == "oldest pending":
            assert listed(client, url) == 1  # the runnable pending job it ages
            continue
        assert listed(client, url) == int(value.replace(",", "")), label


def test_per_kind_counts_link_to_their_filtered_lists(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    jobs_in_every_state()
    client = client_for(viewer)
    text = client.get(DASHBOARD).content.decode()
    [row] = client.get(DASHBOARD).context["kinds"]
    for column in ("pending", "claimed", "dead"):
        url = row["urls"][column]
        assert f'href="{url.replace("&", "&amp;")}"' in text
        assert listed(client, url) == row[column], column
    assert client.get(row["urls"]["failures"]).status_code == 200


def test_pause_and_resume_are_admin_buttons_and_workers_read_as_jobs_name_them(
    operator: User, client_for: Callable[..., Client]
) -> None:
    store.register_worker(
        worker_id="app-1:4242:0a1b2c3d", host="app-1", pid=4242, queues=[], kinds=[], concurrency=2
    )
    text = client_for(operator).get(DASHBOARD).content.decode()
    assert '<button class="button" type="submit" name="do" value="pause">Pause</button>' in text
    assert re.search(
        r'<tr class="worker-row"><td title="heartbeat app-1:4242:0a1b2c3d">app-1:4242<', text
    )
    assert worker_id("w:1") == "w:1"  # an id of one's own (--worker-id) stays whole


# --- the clean-up page and the breadcrumbs ---------------------------------------------


def test_the_cleanup_page_loads_the_admins_form_styles_and_widget_scripts(
    operator: User, client_for: Callable[..., Client]
) -> None:
    text = client_for(operator).get(f"{JOBS}cleanup/").content.decode()
    assert "admin/css/forms.css" in text  # which imports widgets.css: the icons
    assert "admin/js/admin/DateTimeShortcuts.js" in text
    assert "admin/js/calendar.js" in text
    assert 'class="submit-row"' in text
    assert 'class="form-row field-finished_before"' in text


@pytest.mark.parametrize(
    "page", ["dashboard/", "cleanup/", "{dead}/change/", "{dead}/act/requeue/", "bulk"]
)
def test_every_page_has_job_queue_in_its_breadcrumbs(
    page: str, operator: User, client_for: Callable[..., Client]
) -> None:
    dead = jobs_in_every_state()["dead"]
    client = client_for(operator)
    if page == "bulk":
        response = client.post(JOBS, {"action": "requeue", "_selected_action": [str(dead.id)]})
    else:
        response = client.get(JOBS + page.format(dead=dead.id))
    crumbs = response.content.decode().split('<div class="breadcrumbs">')[1].split("</div>")[0]
    assert '<a href="/admin/django_jobqueue/">Job queue</a>' in crumbs


def test_a_journal_entrys_note_is_shown_on_the_journal_list(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    [dead] = dead_by_failing()
    text = client_for(viewer).get("/admin/django_jobqueue/journalentry/").content.decode()
    assert '<td class="field-short_note">' in text
    assert JournalEntry.objects.filter(job_id=dead.id, outcome="dead").exists()
    assert ">ValueError: this always fails</span>" in text


def test_a_permanent_failures_reason_is_its_own_summary_with_no_traceback_block(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.permanent.enqueue(reason="order 7 has no address")
    run_jobs(kinds=[tasks.permanent])
    text = client_for(viewer).get(f"{JOBS}{handle.id}/change/").content.decode()
    head = text.split('id="last-error"')[1].split('class="jq-section"')[0]
    assert "<code>order 7 has no address</code>" in head
    assert 'class="jq-tb"' not in head
    assert "Library frames" not in head
