"""Issue 17 at the admin's edges: the changelists filter only by what they declare (no
lookup into payload, carry or result, for anyone), malformed parameters are a 400 or the
admin's "invalid parameter" page (never a 500), the list and the bulk confirmation do
not load the large JSON columns, secrets are hidden wherever they show (positional
arguments of Django Tasks, the extended ``REDACT`` words), and the example project's
pages cannot be framed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from django_jobqueue.models import Job, JournalEntry
from tests.admin.conftest import jobs_in_every_state
from tests.djtasks import tasks as djtasks
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
JOURNAL = "/admin/django_jobqueue/journalentry/"


@pytest.fixture
def superuser() -> User:
    return User.objects.create_superuser("root", password="pw")


def quiet(client: Client) -> Client:
    """A client that returns a 500 as a response instead of raising the view's error."""
    client.raise_request_exception = False
    return client


def refused(response: object) -> bool:
    """A 400, or the admin's redirect to its "invalid parameter" page (``?e=1``)."""
    status = getattr(response, "status_code", None)
    location = getattr(response, "headers", {}).get("Location", "")
    return status == 400 or (status == 302 and location.endswith("?e=1"))


# --- the changelists filter by what they declare, and nothing else ---------------------

UNDECLARED_JOB_LOOKUPS = [
    "payload__password__startswith=a",
    "payload__password__regex=%5Ea",
    "payload__note__icontains=a",
    "payload__icontains=hunter",
    "carry__token__startswith=a",
    "result__isnull=False",
    "kind__regex=.",
    "status__in=dead,pending",
    "claimed_by__startswith=w",
    "id__startswith=0",
]


@pytest.mark.parametrize("who", ["viewer", "superuser"])
@pytest.mark.parametrize("query", UNDECLARED_JOB_LOOKUPS)
def test_jobs_changelist_refuses_a_lookup_it_does_not_declare(
    who: str, query: str, request: pytest.FixtureRequest, client_for: Callable[..., Client]
) -> None:
    tasks.record.enqueue(n={"password": "abc", "note": "a"})
    user = request.getfixturevalue(who)
    response = quiet(client_for(user)).get(f"{JOBS}?{query}")
    assert response.status_code == 400, f"{query} was not refused"


@pytest.mark.parametrize(
    "query",
    ["attachment__token__startswith=a", "note__icontains=a", "outcome__regex=."],
)
def test_journal_changelist_refuses_a_lookup_it_does_not_declare(
    query: str, superuser: User, client_for: Callable[..., Client]
) -> None:
    response = quiet(client_for(superuser)).get(f"{JOURNAL}?{query}")
    assert response.status_code == 400, f"{query} was not refused"


def test_the_declared_filters_still_filter(viewer: User, client_for: Callable[..., Client]) -> None:
    jobs = jobs_in_every_state()
    entry = JournalEntry.objects.create(
        job_id=jobs["dead"].id, kind=jobs["dead"].kind, run_no=1, outcome="dead"
    )
    JournalEntry.objects.create(
        job_id=jobs["completed"].id, kind=jobs["completed"].kind, run_no=1, outcome="completed"
    )
    client = client_for(viewer)
    listed = client.get(f"{JOBS}?status__exact=dead&kind={tasks.add.kind}&queue=default")
    assert [j.id for j in listed.context["cl"].result_list] == [jobs["dead"].id]
    # the job page's link to its whole journal
    journal = client.get(f"{JOURNAL}?job__id__exact={jobs['dead'].id}&outcome=failure")
    assert [e.id for e in journal.context["cl"].result_list] == [entry.id]


# --- malformed parameters: a 400 or the "invalid parameter" page, never a 500 ----------


@pytest.mark.parametrize(
    "query",
    [
        "kind=a%00b",
        "queue=%00",
        "status__exact=dead%00",
        "q=a%00b",
    ],
)
def test_a_malformed_jobs_filter_is_refused_not_a_500(
    query: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    tasks.add.enqueue(1, 2)
    response = quiet(client_for(viewer)).get(f"{JOBS}?{query}")
    assert refused(response), (query, response.status_code)


@pytest.mark.parametrize("query", ["outcome=dead%00", "kind=%00", "recorded_at__range__gte_0=%00"])
def test_a_malformed_journal_filter_is_refused_not_a_500(
    query: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    response = quiet(client_for(viewer)).get(f"{JOURNAL}?{query}")
    assert refused(response), (query, response.status_code)


@pytest.mark.parametrize("selected", ["not-a-uuid", "1", "\x00"])
def test_a_bulk_action_on_a_non_uuid_selection_is_a_400(
    selected: str, operator: User, client_for: Callable[..., Client]
) -> None:
    job = tasks.add.enqueue(1, 2)
    response = quiet(client_for(operator)).post(
        JOBS, {"action": "cancel", "_selected_action": [str(job.id), selected]}
    )
    assert response.status_code == 400
    assert Job.objects.get(id=job.id).status == "pending"


def test_what_held_on_main_still_holds_with_the_guard(
    operator: User, client_for: Callable[..., Client]
) -> None:
    """Not a finding (these held before issue 17): a guard that the declared-filters
    changelist and the deferred queryset did not open them."""
    client = quiet(client_for(operator))
    for object_id in ("not-a-uuid", "12345", "%00"):
        for tail in ("change/", "act/cancel/", "delete/", "history/"):
            response = client.get(f"{JOBS}{object_id}/{tail}")
            assert response.status_code in (302, 404), (object_id, tail, response.status_code)
    for query in ("priority__exact=x", "priority__exact=%00"):
        assert refused(client.get(f"{JOBS}?{query}")), query
    assert refused(client.get(f"{JOURNAL}?job__id__exact=not-a-uuid"))
    assert refused(client.get(f"{JOURNAL}?job__payload__password=abc"))


# --- the changelist and the bulk confirmation leave the large columns in the table ----


def selects_of_jobs(queries: list[dict[str, str]]) -> list[str]:
    table = connections["default"].ops.quote_name(Job._meta.db_table)
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith("SELECT") and table in q["sql"]
    ]


def assert_no_large_column(sqls: list[str]) -> None:
    ops = connections["default"].ops
    assert sqls, "no SELECT of the jobs table was captured"
    for column in ("payload", "carry", "result"):
        quoted = ops.quote_name(column)
        assert not [s for s in sqls if quoted in s], f"{column} was selected"


def test_the_jobs_changelist_does_not_select_payload_carry_or_result(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    tasks.record.enqueue(n={"big": "x" * 1000})
    client = client_for(viewer)
    with CaptureQueriesContext(connections["default"]) as captured:
        assert client.get(JOBS).status_code == 200
    assert_no_large_column(selects_of_jobs(captured.captured_queries))


@pytest.mark.parametrize("action", ["requeue", "cancel", "run_now", "delete_selected"])
def test_the_bulk_confirmation_does_not_select_payload_carry_or_result(
    action: str, operator: User, client_for: Callable[..., Client]
) -> None:
    ids = [str(j.id) for j in jobs_in_every_state().values()]
    client = client_for(operator)
    with CaptureQueriesContext(connections["default"]) as captured:
        page = client.post(JOBS, {"action": action, "_selected_action": ids})
    assert page.status_code == 200
    assert "are you sure?" in page.content.decode()
    assert_no_large_column(selects_of_jobs(captured.captured_queries))


# --- redaction where a secret can show -----------------------------------------------


def job_page(client: Client, job_id: object) -> str:
    page = client.get(f"{JOBS}{job_id}/change/")
    assert page.status_code == 200
    return page.content.decode()


def test_django_tasks_positional_secrets_are_redacted_on_the_job_page(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    result = djtasks.log_in.enqueue("ann", "hunter2", "key-one", "key-two")
    text = job_page(client_for(viewer), result.id)
    assert "ann" in text  # not a secret's name: shown
    for secret in ("hunter2", "key-one", "key-two"):
        assert secret not in text
    # stored as given: the task receives the real values
    assert Job.objects.get(id=result.id).payload["args"] == ["ann", "hunter2", "key-one", "key-two"]


def test_django_tasks_keyword_secrets_stay_redacted_on_the_job_page(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    result = djtasks.log_in.enqueue(user="ann", password="hunter2")
    text = job_page(client_for(viewer), result.id)
    assert "ann" in text
    assert "hunter2" not in text


NEW_WORDS = ["api_key", "apikey", "passwd", "credential", "private_key", "cookie", "session"]


@pytest.mark.parametrize("field", [*NEW_WORDS, "X-Api-Key", "aws_credentials", "sessionid"])
def test_each_new_default_redact_word_hides_its_field(
    field: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.record.enqueue(n={field: "s3cr3t-value", "user": "ann"})
    text = job_page(client_for(viewer), handle.id)
    assert "s3cr3t-value" not in text
    assert "ann" in text


# --- the example project's pages cannot be framed ------------------------------------


def test_admin_pages_and_confirmations_send_x_frame_options(
    operator: User, client_for: Callable[..., Client]
) -> None:
    job = tasks.add.enqueue(1, 2)
    client = client_for(operator)
    pages = [
        client.get(JOBS),
        client.get(f"{JOBS}{job.id}/change/"),
        client.get(f"{JOBS}{job.id}/act/cancel/"),
        client.post(JOBS, {"action": "cancel", "_selected_action": [str(job.id)]}),
        client.get(f"{JOBS}cleanup/"),
    ]
    for page in pages:
        assert page.status_code == 200
        assert page.headers.get("X-Frame-Options") in ("DENY", "SAMEORIGIN")
