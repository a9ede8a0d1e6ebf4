"""Bulk actions over every job a filter matches (the changelist's "Select all N"): the
confirmation counts what matches and what it skips, the change runs in batches through
the store and journals every job, bounded and permission-checked as the selected-rows
form is; and each action's rule as a filter (``store.acts_on``) agrees with its
refusal, which decides one job at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.admin import whole_filter
from django_jobqueue.admin.actions import ACTIONS
from django_jobqueue.models import Job, JournalEntry
from tests.admin.conftest import jobs_in_every_state, make_user, set_state
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"


def dead_jobs(n: int, *, kind_task: Any = tasks.add) -> list[Job]:
    made = [kind_task.enqueue(1, i).id for i in range(n)]
    Job.objects.filter(id__in=made).update(
        status="dead", finished_at=timezone.now(), run_count=1, failure_count=3
    )
    return list(Job.objects.filter(id__in=made))


def across(client: Client, query: str, action: str, **extra: str) -> Any:
    """The changelist's action form with "Select all" ticked: select_across, and the
    page's rows as Django posts them (here one: what matters is the filter)."""
    any_id = str(Job.objects.values_list("id", flat=True).first())
    return client.post(
        f"{JOBS}?{query}",
        {"action": action, "select_across": "1", "index": "0", "_selected_action": any_id},
        follow=True,
        **extra,
    )


def confirm(client: Client, query: str, action: str, page: Any, **fields: str) -> Any:
    """Post the confirmation page's own form back, as its "Yes" button does."""
    text = page.content.decode()
    first = text.split('name="_selected_action" value="')[1].split('"')[0]
    data = {"action": action, "select_across": "1", "_selected_action": first, "post": "yes"}
    return client.post(f"{JOBS}?{query}", {**data, **fields}, follow=True)


@pytest.mark.parametrize("action", ["requeue", "cancel", "run_now", "delete"])
@pytest.mark.parametrize("force", [False, True])
def test_each_actions_filter_agrees_with_its_refusal(action: str, force: bool) -> None:
    jobs = jobs_in_every_state()
    step = tasks.add.enqueue(1, 9)
    set_state(step.id, status="completed", finished_at=timezone.now())
    by_name = {a.rule: a for a in ACTIONS.values()}
    rule = by_name[action]
    selected = set(Job.objects.filter(rule.acts_on(force=force)).values_list("id", flat=True))
    allowed = {j.id for j in Job.objects.all() if rule.refusal(j, force) is None}
    assert selected == allowed, sorted(j.status for j in Job.objects.filter(id__in=selected))
    assert jobs  # every state was there to disagree on


def test_a_requeue_of_every_dead_job_matching_a_filter_counts_then_journals_each(
    operator: User, client_for: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(whole_filter, "BATCH", 7)  # several batches of a small table
    monkeypatch.setattr(store.operations, "REQUEUE_BATCH", 4)
    dead = dead_jobs(30)
    others = jobs_in_every_state()  # one dead job among them, of the same kind
    client = client_for(operator)
    query = "status__exact=dead"
    page = across(client, query, "requeue")
    text = page.content.decode()
    assert "Every job matching the filter: <strong>31 jobs</strong>" in text
    assert "Requeue will change 31 jobs</strong>." in text
    assert Job.objects.filter(status="dead").count() == 31  # nothing done yet
    done = confirm(client, query, "requeue", page)
    assert [str(m) for m in done.context["messages"]] == ["Requeued 31 jobs matching the filter."]
    requeued = [j.id for j in dead] + [others["dead"].id]
    assert Job.objects.filter(id__in=requeued, status="pending", failure_count=0).count() == 31
    entries = JournalEntry.objects.filter(job_id__in=requeued, outcome="requeued")
    assert entries.count() == 31
    assert set(entries.values_list("note", flat=True)) == {"requeued from dead by admin:olga"}
    # One admin log entry per batch (7, 7, 7, 7, 3), naming its count and the filter.
    logged = list(LogEntry.objects.order_by("id").values_list("object_repr", flat=True))
    assert logged == [f"Requeued {n} jobs matching {query}" for n in (7, 7, 7, 7, 3)]
    assert Job.objects.get(id=others["cancelled"].id).status == "cancelled"  # not matched


def test_the_confirmation_counts_what_it_skips_by_status_and_what_force_would_add(
    operator: User, client_for: Callable[..., Client]
) -> None:
    jobs_in_every_state()
    dead_jobs(3)
    page = across(client_for(operator), "", "requeue")
    assert page.context["n_matching"] == 10
    assert page.context["n_changes"] == 5  # four dead, one cancelled
    assert page.context["n_forceable"] == 1  # the completed one
    assert page.context["skip_reasons"] == [("claimed", 2), ("pending", 2)]


def test_a_filter_matching_more_than_the_bound_is_refused_and_nothing_changes(
    operator: User, client_for: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(whole_filter, "MAX_MATCHING", 4)
    dead_jobs(5)
    done = across(client_for(operator), "status__exact=dead", "requeue")
    [message] = [str(m) for m in done.context["messages"]]
    assert message.startswith("Requeue works on at most 4 jobs matching a filter")
    assert "narrow it" in message
    assert Job.objects.filter(status="dead").count() == 5
    assert not JournalEntry.objects.filter(outcome="requeued").exists()


def test_without_the_actions_permission_a_filter_wide_action_is_refused(
    client_for: Callable[..., Client],
) -> None:
    dead_jobs(3)
    viewer = make_user("ann", ["view_job", "cancel_job"])
    client = client_for(viewer)
    refused = client.post(
        f"{JOBS}?status__exact=dead",
        {"action": "requeue", "select_across": "1", "post": "yes", "_selected_action": "x"},
    )
    assert refused.status_code == 403
    assert Job.objects.filter(status="dead").count() == 3


def test_a_filter_wide_cancel_cancels_the_pending_and_asks_the_running_to_stop(
    operator: User, client_for: Callable[..., Client]
) -> None:
    jobs = jobs_in_every_state()
    client = client_for(operator)
    page = across(client, "", "cancel")
    assert page.context["n_changes"] == 3  # pending, scheduled and the running one
    done = confirm(client, "", "cancel", page)
    assert [str(m) for m in done.context["messages"]] == [
        "Cancelled 3 jobs matching the filter. Refused 4: their state does not allow it "
        "(1 cancelled, 1 claimed, 1 completed, 1 dead)."  # the claimed one already stopping
    ]
    assert Job.objects.get(id=jobs["pending"].id).status == "cancelled"
    assert Job.objects.get(id=jobs["claimed"].id).cancel_requested


def test_a_filter_wide_requeue_keeps_a_job_whose_key_another_active_job_holds(
    operator: User, client_for: Callable[..., Client]
) -> None:
    held = tasks.add.using(idempotency_key="order-7").enqueue(1, 1)
    set_state(held.id, status="dead", finished_at=timezone.now())
    tasks.add.using(idempotency_key="order-7").enqueue(1, 2)  # active, holds the key
    dead_jobs(2)
    client = client_for(operator)
    page = across(client, "status__exact=dead", "requeue")
    done = confirm(client, "status__exact=dead", "requeue", page)
    assert [str(m) for m in done.context["messages"]] == [
        "Requeued 2 jobs matching the filter. Skipped 1: refused when their turn came (a "
        "state changed since the count, or an idempotency key another active job holds)."
    ]
    assert Job.objects.get(id=held.id).status == "dead"


def test_the_filter_wide_confirmation_reads_no_large_column_and_no_per_row_subquery(
    operator: User, client_for: Callable[..., Client]
) -> None:
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    dead_jobs(3)
    client = client_for(operator)
    with CaptureQueriesContext(connections["default"]) as captured:
        page = across(client, "status__exact=dead", "requeue")
    assert page.context["n_changes"] == 3
    ops = connections["default"].ops
    journal = ops.quote_name(JournalEntry._meta.db_table)
    # The changelist's own page is not rendered: every statement here is the action's.
    for query in captured.captured_queries:
        sql = query["sql"]
        if ops.quote_name(Job._meta.db_table) not in sql:
            continue
        for column in ("payload", "carry", "result"):
            assert ops.quote_name(column) not in sql, sql
        assert journal not in sql, sql  # no last-run or last-error subquery per row
