"""History: keyset pages on the primary key (a UUIDv7 of each job's creation) that stay
stable while rows come and go,
the filters, clear errors for bad input, and job(id) with its journal."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import JobHandle, Status, cancel, history, job, requeue, store
from django_jobqueue.models import Job, JournalEntry
from tests.helpers import id_at, journal_of, run_burst
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

Key = uuid.UUID


def key(row: Job) -> Key:
    """Where a job stands in history's order: its id, drawn when it was created."""
    return row.id


def new_job(created_at: datetime, **fields: Any) -> Job:
    fields.setdefault("kind", "tests.history")
    return Job(id=id_at(created_at), created_at=created_at, visible_at=created_at, **fields)


@pytest.mark.parametrize("newest_first", [False, True], ids=["oldest-first", "newest-first"])
def test_history_walk_of_a_hundred_pages_is_stable_while_rows_are_inserted_and_deleted(
    newest_first: bool,
) -> None:
    """Pages of 31 over 3,200 jobs, with 3 inserts and 3 deletes between pages, at random
    places (ahead of the cursor and behind it). A keyset walk must return exactly: the
    pre-existing rows minus those deleted while still ahead, plus the rows inserted ahead
    of the cursor (and not deleted later while still ahead), each once and in order.

    What a walk can get wrong happens at page boundaries, so the walk crosses a hundred
    or more (it was pages of 100 over 10,000 jobs: as many boundaries, three times the
    rows between them and a third of the churn per row). Three rows share each
    millisecond, their ids in random order within it (as concurrent enqueuers' are), and
    31 is not a multiple of three, so boundaries fall inside a millisecond at every
    offset."""
    rng = random.Random(20240607)
    base = timezone.now().replace(microsecond=0) - timedelta(days=1)
    n, size = 3_200, 31
    rows = [new_job(base + timedelta(milliseconds=i // 3)) for i in range(n)]
    rng.shuffle(rows)  # inserted out of order
    Job.objects.bulk_create(rows, batch_size=1000)
    assert Job.objects.count() == n
    span_ms = n // 3 + 2

    def ahead(k: Key, cursor: Key | None) -> bool:
        if cursor is None:
            return True
        return k < cursor if newest_first else k > cursor

    # Which rows the walk must return: decided as rows come and go, by where the cursor is.
    expected: dict[uuid.UUID, Key] = {r.id: key(r) for r in rows}
    present: dict[uuid.UUID, Key] = dict(expected)
    seen: list[Job] = []
    cursor_key: Key | None = None
    cursor: str | None = None
    pages = 0
    while True:
        page = history(limit=size, after=cursor, newest_first=newest_first)
        pages += 1
        seen.extend(page.jobs)
        assert len(page.jobs) <= size
        if page.next_cursor is None:
            break
        assert len(page.jobs) == size
        cursor = page.next_cursor
        cursor_key = key(page.jobs[-1])
        # Between requests: others insert jobs (some in the past, some now) and delete some.
        fresh = [
            new_job(base + timedelta(milliseconds=rng.randrange(span_ms))),
            new_job(base + timedelta(milliseconds=rng.randrange(span_ms))),
            new_job(timezone.now()),
        ]
        Job.objects.bulk_create(fresh)
        for row in fresh:
            present[row.id] = key(row)
            if ahead(key(row), cursor_key):
                expected[row.id] = key(row)
        doomed = rng.sample(sorted(present), 3)
        Job.objects.filter(id__in=doomed).delete()
        for job_id in doomed:
            if ahead(present.pop(job_id), cursor_key):
                expected.pop(job_id, None)

    seen_ids = [r.id for r in seen]
    assert len(seen_ids) == len(set(seen_ids)), "a row was returned twice"
    order = sorted(expected, key=expected.__getitem__, reverse=newest_first)
    assert seen_ids == order
    # Every pre-existing row that was not deleted before the walk reached it, exactly once.
    pre = {r.id for r in rows}
    deleted_pre = pre - set(present)
    seen_set = set(seen_ids)
    assert pre - deleted_pre <= seen_set
    assert pages >= 100


def test_history_cursor_stays_valid_when_its_own_row_is_deleted() -> None:
    base = timezone.now() - timedelta(hours=1)
    rows = [new_job(base + timedelta(seconds=i)) for i in range(5)]
    Job.objects.bulk_create(rows)

    first = history(limit=2)
    assert [r.id for r in first.jobs] == [rows[0].id, rows[1].id]
    Job.objects.filter(id=rows[1].id).delete()
    second = history(limit=2, after=first.next_cursor)
    assert [r.id for r in second.jobs] == [rows[2].id, rows[3].id]
    third = history(limit=2, after=second.next_cursor)
    assert [r.id for r in third.jobs] == [rows[4].id]
    assert third.next_cursor is None


def test_history_of_an_empty_table_is_one_empty_page() -> None:
    page = history()
    assert page.jobs == []
    assert page.next_cursor is None


# --- filters ------------------------------------------------------------------------------

T = datetime.fromisoformat("2024-03-01T12:00:00+00:00")


@pytest.fixture
def assorted() -> list[Job]:
    """30 jobs over kinds, queues and statuses, created an hour apart; finished ones 30 min
    after creation."""
    kinds = ["shop.sync", "shop.mail", "reports.render"]
    queues = ["default", "mail"]
    # A plain job's statuses (``waiting`` is a workflow step's), in a fixed order: the
    # filters' expected matches depend on how they fall over the 30 rows.
    statuses = ["pending", "claimed", "completed", "dead", "cancelled"]
    rows = []
    for i in range(30):
        status = statuses[i % len(statuses)]
        created = T + timedelta(hours=i)
        rows.append(
            Job(
                id=id_at(created),
                kind=kinds[i % 3],
                queue=queues[(i // 3) % 2],
                status=status,
                created_at=created,
                visible_at=created,
                finished_at=(
                    created + timedelta(minutes=30)
                    if status in ("completed", "dead", "cancelled")
                    else None
                ),
            )
        )
    Job.objects.bulk_create(rows)
    return rows


FILTERS: list[tuple[str, dict[str, Any], Callable[[Job], bool]]] = [
    ("kind", {"kind": "shop.mail"}, lambda j: j.kind == "shop.mail"),
    (
        "kinds",
        {"kind": ["shop.mail", "reports.render"]},
        lambda j: j.kind in ("shop.mail", "reports.render"),
    ),
    ("queue", {"queue": "mail"}, lambda j: j.queue == "mail"),
    ("status", {"status": "dead"}, lambda j: j.status == "dead"),
    (
        "statuses",
        {"status": ["pending", "claimed"]},
        lambda j: j.status in ("pending", "claimed"),
    ),
    (
        "created range (from inclusive, to exclusive)",
        {"created_after": T + timedelta(hours=5), "created_before": T + timedelta(hours=9)},
        lambda j: T + timedelta(hours=5) <= j.created_at < T + timedelta(hours=9),
    ),
    (
        "finished range",
        {
            "finished_after": T + timedelta(hours=10, minutes=30),
            "finished_before": T + timedelta(hours=20),
        },
        lambda j: (
            j.finished_at is not None
            and T + timedelta(hours=10, minutes=30) <= j.finished_at < T + timedelta(hours=20)
        ),
    ),
    (
        "combined",
        {
            "kind": "shop.sync",
            "queue": "default",
            "status": ["completed", "dead", "cancelled"],
            "created_after": T + timedelta(hours=2),
        },
        lambda j: (
            j.kind == "shop.sync"
            and j.queue == "default"
            and j.status in ("completed", "dead", "cancelled")
            and j.created_at >= T + timedelta(hours=2)
        ),
    ),
]


@pytest.mark.parametrize(
    ("filters", "predicate"), [f[1:] for f in FILTERS], ids=[f[0] for f in FILTERS]
)
def test_history_filters_select_exactly_the_matching_jobs(
    assorted: list[Job], filters: dict[str, Any], predicate: Callable[[Job], bool]
) -> None:
    expected = [r.id for r in sorted(assorted, key=key) if predicate(r)]
    assert expected, "the fixture should have matches for every filter"
    assert len(expected) < len(assorted)

    assert [r.id for r in history(limit=1000, **filters).jobs] == expected
    assert [r.id for r in history(limit=1000, newest_first=True, **filters).jobs] == expected[::-1]
    # Paged in twos, the filter holds on every page and nothing is skipped.
    walked: list[uuid.UUID] = []
    cursor = None
    while True:
        page = history(limit=2, after=cursor, **filters)
        walked.extend(r.id for r in page.jobs)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert walked == expected


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "2024-03-01T12:00:00+00:00|not-a-uuid",
        "yesterday|0190f0f0-0000-7000-8000-000000000000",
        "",
    ],
)
def test_history_rejects_an_invalid_cursor_with_a_value_error(cursor: str) -> None:
    Job.objects.bulk_create([new_job(timezone.now())])
    if cursor == "":
        # An empty cursor is "from the start", not an error.
        assert len(history(after=cursor).jobs) == 1
        return
    with pytest.raises(ValueError, match="Invalid history cursor"):
        history(after=cursor)


def test_history_rejects_an_unknown_status_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="Unknown status running; known: waiting, pending"):
        history(status="running")
    with pytest.raises(ValueError, match="Unknown status bogus"):
        history(status=["pending", "bogus"])


def test_history_rejects_an_unknown_filter_naming_the_known_ones() -> None:
    with pytest.raises(TypeError, match=r"unknown filter\(s\) kinds; known: kind, queue, status"):
        history(kinds=["a"])  # type: ignore[call-arg]


def test_every_operation_hands_back_job_handles_and_only_enqueue_a_disposition() -> None:
    handle = tasks.noop.enqueue()
    assert handle.disposition == "inserted"
    page = history(limit=10)
    cancelled = cancel(handle.id, actor="alice")
    requeued = requeue(handle.id, actor="alice")
    looked_up = job(handle.id)
    for h in (*page.jobs, cancelled, requeued, looked_up):
        assert isinstance(h, JobHandle)
        assert h.disposition is None
        assert "inserted" not in repr(h)
    assert (cancelled.status, requeued.status, looked_up.status) == (
        Status.CANCELLED,
        Status.PENDING,
        Status.PENDING,
    )
    assert [h.id for h in page.jobs] == [handle.id]


@pytest.mark.parametrize("limit", [0, -5])
def test_history_rejects_a_non_positive_limit(limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be a positive int"):
        history(limit=limit)


# --- one job ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_job_returns_the_job_and_its_journal_oldest_first() -> None:
    handle = tasks.fail_times.enqueue(times=2)
    run_burst()

    found = job(handle.id)
    same = job(str(handle.id))

    assert found.id == same.id == handle.id
    assert found.status == Status.COMPLETED
    assert found.result == "ok"
    assert found.kind == tasks.fail_times.kind
    journal = found.journal()
    assert [e.outcome for e in journal] == ["retried", "retried", "completed"]
    assert [e.run_no for e in journal] == [1, 2, 3]
    assert [e.id for e in journal] == sorted(e.id for e in journal)
    assert journal == journal_of(handle.id)


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_cursor_of_the_versions_that_paged_on_creation_time_continues_after_its_job() -> None:
    """Before migration 0029 a cursor was ``<created_at>|<id>``: one handed out then still
    pages on from its job (its time, with a zone or without, is not needed any more)."""
    now = timezone.now()
    rows = [new_job(now - timedelta(minutes=3 - i)) for i in range(3)]
    Job.objects.bulk_create(rows)
    for stamp in (rows[0].created_at.isoformat(), "2026-01-01T00:00:00"):
        page = store.history(after=f"{stamp}|{rows[0].id}")
        assert [j.id for j in page.jobs] == [rows[1].id, rows[2].id]
    assert store.history(after=str(rows[1].id)).jobs == [rows[2]]


@pytest.mark.django_db(transaction=True)
def test_the_journal_key_is_unchecked_and_every_delete_still_takes_the_entries() -> None:
    """The journal's key to its job has no database constraint (its deferred check was a
    lookup per entry at every turn's commit): the store's deletes and the ORM's take a
    job's entries with it, and the journal is still read through its (job, id) index."""
    field = JournalEntry._meta.get_field("job")
    assert (field.db_constraint, field.db_index) == (False, False)
    kept, pruned, dropped = (tasks.add.enqueue(i, 1) for i in range(3))
    assert run_burst() == 3
    assert {len(journal_of(h.id)) for h in (kept, pruned, dropped)} == {1}
    assert store.delete_finished(job_ids=[pruned.id]) == [pruned.id]
    Job.objects.filter(id=dropped.id).delete()
    left = JournalEntry.objects.values_list("job_id", flat=True)
    assert set(left) == {kept.id}
    assert set(Job.objects.values_list("id", flat=True)) == {kept.id}


@pytest.mark.parametrize("name", ["created_after", "created_before", "finished_after"])
def test_history_refuses_a_range_that_is_not_a_datetime_naming_it(name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a datetime, got '2024-03-01'"):
        history(**{name: "2024-03-01"})  # type: ignore[misc]


def test_a_creation_range_holds_a_job_whose_id_runs_ahead_of_its_clock() -> None:
    """A process whose clock stepped back keeps drawing ids of the time it had reached
    (ids.py keeps them increasing) until the clock catches up: such a job's id is ahead
    of its ``created_at``. The range's id bounds reach CLOCK_SKEW (an hour) beyond it,
    so the job is found by its ``created_at``, and a job outside the range is not."""
    stepped = Job(
        id=id_at(T + timedelta(minutes=50)),
        kind="tests.history",
        created_at=T,
        visible_at=T,
    )
    outside = new_job(T + timedelta(hours=2))
    Job.objects.bulk_create([stepped, outside, new_job(T - timedelta(minutes=1))])
    page = history(created_after=T, created_before=T + timedelta(minutes=1))
    assert [j.id for j in page.jobs] == [stepped.id]
