"""The admin never fails on a stored value (issue 17, findings 2 and 3): a job scheduled
"never" or "since year 0" (clamped at enqueue) and a row whose JSON cannot be decoded
(written by raw SQL) are listed, shown and offered for deletion, in any time zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone

from django_jobqueue.admin.common import short_id
from django_jobqueue.models import JournalEntry, Status
from tests.admin.conftest import set_state
from tests.db.test_stored_values import AT_ONCE, NEVER, NOT_JSON, TOO_DEEP, jobqueue, write_raw
from tests.helpers import is_postgres
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
# UTC+14 and UTC-10: the local time of either end of the range is still a date.
ZONES = ["UTC", "Pacific/Kiritimati", "Pacific/Honolulu"]


def pages_of(client: Client, job_id: object, *, finished: bool) -> dict[str, str]:
    """The changelist, the job page and (a finished job's) delete page, each 200."""
    urls = {"changelist": JOBS, "job": f"{JOBS}{job_id}/change/"}
    if finished:
        urls["delete"] = f"{JOBS}{job_id}/delete/"
    out = {}
    for name, url in urls.items():
        page = client.get(url)
        assert page.status_code == 200, (name, page.status_code)
        out[name] = page.content.decode()
    return out


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(
    "when", [NEVER, *AT_ONCE], ids=["max-in-new-york", "min-in-tokyo", "min-at-plus-14"]
)
def test_a_job_scheduled_beyond_what_can_be_stored_is_listed_and_shown(
    operator: User, client_for: Callable[..., Client], when: datetime, zone: str
) -> None:
    handle = tasks.add.using(run_at=when).enqueue(1, 2)
    done = tasks.add.using(run_at=when).enqueue(3, 4)
    set_state(done.id, status=Status.COMPLETED, finished_at=timezone.now(), result=7)
    client = client_for(operator)
    with override_settings(TIME_ZONE=zone):
        for job_id, finished in ((handle.id, False), (done.id, True)):
            pages = pages_of(client, job_id, finished=finished)
            assert short_id(job_id) in pages["changelist"]


def undecodable_cases() -> list[object]:
    cases = [
        pytest.param(column, TOO_DEEP, id=f"{column}-too-deep")
        for column in ("payload", "carry", "result")
    ]
    if not is_postgres():  # jsonb holds only valid JSON
        cases += [
            pytest.param(column, NOT_JSON, id=f"{column}-not-json")
            for column in ("payload", "carry", "result")
        ]
    return cases


@pytest.mark.parametrize(("column", "text"), undecodable_cases())
def test_a_row_that_cannot_be_decoded_is_listed_and_its_page_says_undecodable(
    operator: User, viewer: User, client_for: Callable[..., Client], column: str, text: str
) -> None:
    bad = tasks.add.enqueue(1, 2)
    set_state(bad.id, status=Status.DEAD, finished_at=timezone.now())
    write_raw(bad.id, column, text)
    for user in (viewer, operator):
        client = client_for(user)
        listing = client.get(JOBS)
        assert listing.status_code == 200
        assert short_id(bad.id) in listing.content.decode()
        page = client.get(f"{JOBS}{bad.id}/change/")
        assert page.status_code == 200
        assert "(undecodable: " in page.content.decode()
    assert client_for(operator).get(f"{JOBS}{bad.id}/delete/").status_code == 200


@pytest.mark.skipif(is_postgres(), reason="PostgreSQL's CHECK keeps times in the queue's range")
@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Pacific/Honolulu"])
def test_a_time_at_either_end_of_what_the_database_holds_is_shown_in_utc_not_a_500(
    operator: User, client_for: Callable[..., Client], zone: str
) -> None:
    """Written around the queue (by the ORM, raw): a time whose local form in TIME_ZONE
    would be year 0 or 10000."""
    ends = {
        "max": datetime(9999, 12, 31, 23, 0, tzinfo=UTC),
        "min": datetime(1, 1, 1, 1, 0, tzinfo=UTC),
    }
    jobs = {}
    for name, moment in ends.items():
        handle = tasks.add.enqueue(1, 2)
        set_state(handle.id, status=Status.DEAD, visible_at=moment, finished_at=moment)
        jobs[name] = handle.id
    client = client_for(operator)
    with override_settings(TIME_ZONE=zone):
        pages = [pages_of(client, job_id, finished=True)["job"] for job_id in jobs.values()]
        shown = [jobqueue("show", str(job_id)) for job_id in jobs.values()]
    # In either zone one end has no local form: that one is shown in UTC.
    assert any(" UTC" in page for page in pages)
    assert any("+0000" in text for text in shown)


@pytest.mark.parametrize("text", [TOO_DEEP, NOT_JSON], ids=["too-deep", "not-json"])
def test_a_journal_attachment_that_cannot_be_decoded_is_listed_and_shown_as_such(
    viewer: User, client_for: Callable[..., Client], text: str
) -> None:
    if text is NOT_JSON and is_postgres():
        pytest.skip("jsonb holds only valid JSON")
    handle = tasks.add.enqueue(1, 2)
    entry = JournalEntry.objects.create(job_id=handle.id, kind=handle.kind, outcome="dead")
    write_raw(entry.id, "attachment", text, model=JournalEntry)
    client = client_for(viewer)
    listing = client.get("/admin/django_jobqueue/journalentry/")
    assert listing.status_code == 200
    assert "(undecodable: " in listing.content.decode()
    page = client.get(f"/admin/django_jobqueue/journalentry/{entry.id}/change/")
    assert page.status_code == 200
    assert "undecodable" in page.content.decode()
    job_page = client.get(f"{JOBS}{handle.id}/change/")
    assert job_page.status_code == 200
    assert "(undecodable: " in job_page.content.decode()
