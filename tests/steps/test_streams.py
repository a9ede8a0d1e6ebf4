"""Job streams through the public API, runs inline (``run_jobs``): ``ctx.stream.write``
stores each write once, in order, with offsets 1, 2, … without gaps, whatever the
replays (a step that failed, a run retried after its writes, a durable sleep); a
stream is bounded (MAX_STREAM_ITEMS, MAX_STREAM_BYTES) and refuses a value it cannot
store; ``JobHandle.stream`` reads it from an offset, ends with the job, and refuses bad
arguments; a run that lost its claim stores nothing; the stream goes with its job."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from django_jobqueue import (
    InvalidArguments,
    JobNotFound,
    Status,
    StreamItem,
    cleanup,
    job,
)
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.models import StreamItem as StreamRow
from django_jobqueue.store import streams as stored
from django_jobqueue.task import streaming
from django_jobqueue.testing import run_jobs
from tests.taskapp import stream_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

LATER = timedelta(days=1)


def values(job_id: uuid.UUID) -> list[object]:
    return [item.value for item in job(job_id).stream(timeout=0)]


def offsets(job_id: uuid.UUID) -> list[int]:
    return [item.offset for item in job(job_id).stream(timeout=0)]


def last_note(job_id: uuid.UUID) -> str:
    notes = JournalEntry.objects.filter(job_id=job_id).order_by("-id").values_list("note")
    return (notes.first() or ("",))[0]


def test_writes_outside_steps_are_read_in_order_with_offsets_from_one() -> None:
    handle = stream_tasks.chunks.enqueue(n=5)
    run_jobs()
    items = list(job(handle.id).stream())  # the job is finished: the iteration ends
    assert items == [StreamItem(i + 1, {"chunk": i, "text": f"chunk {i}"}) for i in range(5)]


def test_a_reader_resumes_after_the_offset_it_was_given() -> None:
    handle = stream_tasks.chunks.enqueue(n=5)
    run_jobs()
    stream = job(handle.id).stream(after=3)
    assert [(i.offset, i.value["chunk"]) for i in stream] == [(4, 3), (5, 4)]
    assert stream.offset == 5
    assert stream.finished
    assert list(job(handle.id).stream(after=5)) == []


def test_the_items_of_a_step_that_failed_are_not_stored_and_its_retry_stores_them_once() -> None:
    handle = stream_tasks.flaky.enqueue(fail_in_step=True)
    run_jobs()  # the first retry comes at once (a backoff of 0)
    done = Job.objects.get(id=handle.id)
    assert (done.status, done.run_count) == (Status.COMPLETED, 2)
    assert values(handle.id) == ["before", "in step", "between", "end"]
    assert offsets(handle.id) == [1, 2, 3, 4]
    rows = StreamRow.objects.filter(job_id=handle.id).order_by("offset")
    # "in step" is the second run's: the first run's went with its failed step.
    assert [(r.run, r.step, r.write_no) for r in rows] == [
        (1, "", 0),
        (2, "s", None),
        (2, "", 1),
        (2, "", 2),
    ]


def test_a_retried_run_s_writes_outside_steps_are_not_written_twice() -> None:
    handle = stream_tasks.flaky.enqueue(fail_in_step=False)
    run_jobs()
    assert Job.objects.get(id=handle.id).run_count == 2
    assert values(handle.id) == ["before", "in step", "between", "end"]
    rows = StreamRow.objects.filter(job_id=handle.id).order_by("offset")
    assert [(r.run, r.step, r.write_no) for r in rows] == [
        (1, "", 0),
        (1, "s", None),
        (1, "", 1),
        (2, "", 2),
    ]


def test_the_replay_after_a_durable_sleep_writes_nothing_twice() -> None:
    handle = stream_tasks.sleepy.enqueue()
    run_jobs()
    assert Job.objects.get(id=handle.id).parked == "sleep"
    run_jobs(now=timezone.now() + LATER)
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    assert values(handle.id) == ["one", "two", "three"]


def test_a_write_past_max_stream_items_raises_stream_full_and_stores_nothing_of_it() -> None:
    handle = stream_tasks.writes.enqueue(values=["a", "b", "c", "d"])
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_STREAM_ITEMS": 3}):
        run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert values(handle.id) == ["a", "b", "c"]
    note = last_note(handle.id)
    assert "StreamFull" in note
    assert "would make 4 items, over MAX_STREAM_ITEMS (3)" in note


def test_a_write_past_max_stream_bytes_names_the_sizes_and_a_task_may_catch_it() -> None:
    big = "x" * 1000
    handle = stream_tasks.writes.enqueue(values=[big, big, big, "small"], catch=True)
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_STREAM_BYTES": 2500}):
        run_jobs()
    done = Job.objects.get(id=handle.id)
    assert (done.status, done.result) == (Status.COMPLETED, 3)  # the third was refused
    assert values(handle.id) == [big, big, "small"]


def test_a_value_that_is_not_json_raises_invalid_stream_item_naming_it() -> None:
    handle = stream_tasks.unserialisable.enqueue()
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert values(handle.id) == ["fine"]
    note = last_note(handle.id)
    assert "InvalidStreamItem" in note
    assert "the stream item is not JSON-serialisable (dict)" in note


def test_ctx_stream_in_an_async_task_says_it_works_in_sync_tasks_only() -> None:
    handle = stream_tasks.async_writer.enqueue()
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert "ctx.stream works in a run of a sync task" in last_note(handle.id)
    assert values(handle.id) == []


def test_a_pending_job_s_stream_ends_at_its_timeout_with_what_there_is() -> None:
    handle = stream_tasks.chunks.enqueue(n=3)
    stream = job(handle.id).stream(timeout=0.2)
    assert list(stream) == []
    assert not stream.finished


def test_bad_stream_arguments_are_refused_naming_them() -> None:
    handle = stream_tasks.chunks.enqueue(n=1)
    for bad in (-1, 1.5, "3", True, None):
        with pytest.raises(InvalidArguments, match=r"stream\(after=…\) takes an offset") as exc:
            job(handle.id).stream(after=bad)
        assert exc.value.argument == "after"
    for bad in (-1, float("nan"), "10", True):
        with pytest.raises(InvalidArguments, match=r"stream\(timeout=…\) takes seconds") as exc:
            job(handle.id).stream(timeout=bad)
        assert exc.value.argument == "timeout"


def test_the_stream_of_a_job_that_is_gone_raises_job_not_found() -> None:
    handle = stream_tasks.chunks.enqueue(n=1)
    stream = job(handle.id).stream(timeout=0)
    Job.objects.filter(id=handle.id).delete()
    with pytest.raises(JobNotFound, match=str(handle.id)):
        list(stream)


def test_a_write_by_a_run_that_lost_its_claim_stores_nothing() -> None:
    handle = stream_tasks.chunks.enqueue(n=1)
    item = stored.NewItem("late", 6, write_no=0)
    # The job is pending: no run holds it.
    assert not stored.append(job_id=handle.id, run_no=1, worker_id="nobody", item=item)
    assert values(handle.id) == []


def test_the_stream_is_removed_with_its_job_by_cleanup() -> None:
    handle = stream_tasks.chunks.enqueue(n=3)
    run_jobs()
    assert StreamRow.objects.filter(job_id=handle.id).count() == 3
    assert cleanup(finished_before=timezone.now() + timedelta(seconds=1)) == 1
    assert not StreamRow.objects.filter(job_id=handle.id).exists()


def test_a_rerun_from_a_step_cuts_the_stream_back_to_that_step_s_first_item() -> None:
    handle = stream_tasks.stepped.enqueue(n=3)
    run_jobs()
    assert values(handle.id) == stream_tasks.expected_stepped(3)
    job(handle.id).rerun_from("s1", actor="ops")
    assert values(handle.id) == ["start", "s0.a", "s0.b", "after s0"]
    run_jobs()
    assert values(handle.id) == stream_tasks.expected_stepped(3)
    assert offsets(handle.id) == list(range(1, 12))
    runs = StreamRow.objects.filter(job_id=handle.id).order_by("offset").values_list("run")
    assert [r for (r,) in runs] == [1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2]
    note = JournalEntry.objects.filter(job_id=handle.id, actor="ops").get().note
    assert "7 stream item(s)" in note


def test_a_reader_reads_a_stream_longer_than_one_batch_whole_and_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streaming, "BATCH", 7)  # 40 items: six reads, the last short
    handle = stream_tasks.chunks.enqueue(n=40)
    run_jobs()
    assert offsets(handle.id) == list(range(1, 41))
    assert [v["chunk"] for v in values(handle.id)] == list(range(40))
