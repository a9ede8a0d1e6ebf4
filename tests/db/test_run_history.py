"""The run history (issue 34, item 7): the sampler adds what the run tally gained to the
current minute (exactly once, one sampler at a time), percentiles are read from the
minutes' duration buckets, retention prunes the minutes and markers past HISTORY_DAYS,
and deploy markers are set by ``mark()`` and ``jobqueue mark`` (bad labels refused,
nothing written)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

import django_jobqueue
from django_jobqueue import InvalidMarker, conf, store
from django_jobqueue.errors import InvalidFilter
from django_jobqueue.models import DeployMarker, RunHistoryCursor, RunMinute
from django_jobqueue.rules.lifecycle import Run, completed, failure
from django_jobqueue.store import DURATION_BUCKETS, bucket_percentile
from django_jobqueue.worker.services.base import Timings
from django_jobqueue.worker.services.history import HistorySampler
from django_jobqueue.worker.services.retention import Retention
from tests.helpers import WorkerThread, manage_in_process, row_locking, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKER = "w:1"
GAP = timedelta(seconds=8)
T0 = datetime(2026, 12, 1, 12, 0, 5, tzinfo=UTC)


def settle(count: int, *, ms: float, fail: bool = False, kind: str = tasks.add.kind) -> None:
    """``count`` runs of ``kind`` that each took ``ms``, completed (or retried)."""
    task = tasks.add if kind == tasks.add.kind else tasks.noop
    if task is tasks.add:
        task.enqueue_many([{"a": n, "b": n} for n in range(count)])
    else:
        task.enqueue_many([{}] * count)
    claimed = store.claim_jobs(
        worker_id=WORKER, request=store.ClaimRequest(limit=count, kinds=[kind])
    )
    assert len(claimed) == count
    duration = timedelta(milliseconds=ms)
    endings = []
    for c in claimed:
        run = Run(
            job_id=c.id,
            kind=c.kind,
            run_no=c.run_count,
            worker=WORKER,
            started_at=timezone.now() - duration,
            duration=duration,
        )
        endings.append(
            failure(run, failure_count=0, policy=conf.get().policy(), now=timezone.now(), note="no")
            if fail
            else completed(run, result=0)
        )
    assert store.settle(worker_id=WORKER, settlements=endings) == [True] * count


def minute_rows() -> dict[tuple[datetime, str, str], int]:
    return {(m.minute, m.kind, m.outcome): m.runs for m in RunMinute.objects.all()}


def test_the_first_sample_sets_the_cursor_and_puts_no_past_into_a_minute() -> None:
    settle(3, ms=20)
    assert store.sample_history(now=T0, min_gap=GAP) == 0
    assert minute_rows() == {}
    clock = RunHistoryCursor.objects.get(kind="")
    assert clock.sampled_at == T0
    assert RunHistoryCursor.objects.get(kind=tasks.add.kind, outcome="completed").runs == 3


def test_each_run_is_counted_once_in_the_minute_of_the_sample_after_it() -> None:
    store.sample_history(now=T0, min_gap=GAP)
    settle(4, ms=20)
    settle(2, ms=300, fail=True)
    assert store.sample_history(now=T0 + timedelta(seconds=10), min_gap=GAP) == 2
    minute = T0.replace(second=0)
    assert minute_rows() == {
        (minute, tasks.add.kind, "completed"): 4,
        (minute, tasks.add.kind, "retried"): 2,
    }
    # Nothing new: nothing added, whatever the time.
    assert store.sample_history(now=T0 + timedelta(seconds=20), min_gap=GAP) == 0
    # More in the same minute add to its rows; in the next minute, to a new one.
    settle(1, ms=20)
    store.sample_history(now=T0 + timedelta(seconds=30), min_gap=GAP)
    settle(5, ms=20)
    store.sample_history(now=T0 + timedelta(seconds=60), min_gap=GAP)
    assert minute_rows() == {
        (minute, tasks.add.kind, "completed"): 5,
        (minute, tasks.add.kind, "retried"): 2,
        (minute + timedelta(minutes=1), tasks.add.kind, "completed"): 5,
    }


def test_a_second_sampler_within_the_gap_does_nothing() -> None:
    store.sample_history(now=T0, min_gap=GAP)
    settle(2, ms=20)
    assert store.sample_history(now=T0 + timedelta(seconds=3), min_gap=GAP) is None
    assert minute_rows() == {}
    assert store.sample_history(now=T0 + timedelta(seconds=9), min_gap=GAP) == 1
    assert sum(minute_rows().values()) == 2


def test_the_minutes_keep_the_duration_buckets_and_percentiles_come_from_them() -> None:
    """90 runs of 20 ms and 10 of 3 s: p50 lies in the (10 ms, 25 ms] bucket, p95 in the
    (2.5 s, 5 s] one; the buckets are exactly the tally's."""
    store.sample_history(now=T0, min_gap=GAP)
    settle(90, ms=20)
    settle(10, ms=3000, kind=tasks.noop.kind)
    store.sample_history(now=T0 + timedelta(seconds=10), min_gap=GAP)
    h = store.read_history(
        since=T0 - timedelta(minutes=5), until=T0 + timedelta(minutes=1), step=timedelta(minutes=1)
    )
    [slot] = [s for s in h.slots if s.counts["completed"]]
    assert slot.at == T0.replace(second=0)
    assert (slot.counts["completed"], slot.timed) == (100, 100)
    assert slot.buckets == [90 * (b >= 0.02) + 10 * (b >= 3.0) for b in DURATION_BUCKETS]
    p50, p95 = slot.percentile(0.5), slot.percentile(0.95)
    assert p50 is not None
    assert 0.01 < p50 <= 0.025
    assert p95 is not None
    assert 2.5 < p95 <= 5.0
    assert set(h.kinds) == {tasks.add.kind, tasks.noop.kind}
    slow = h.kinds[tasks.noop.kind].percentile(0.5)
    assert slow is not None
    assert 2.5 < slow <= 5.0
    # One kind only.
    only = store.read_history(
        since=T0 - timedelta(minutes=5),
        until=T0 + timedelta(minutes=1),
        step=timedelta(minutes=1),
        kinds=[tasks.noop.kind],
    )
    assert sum(s.counts["completed"] for s in only.slots) == 10


def test_bucket_percentile_interpolates_within_its_bucket() -> None:
    buckets = [0] * len(DURATION_BUCKETS)
    assert bucket_percentile(buckets, 0, 0.5) is None
    # 10 runs, all in the first bucket (0, 5 ms]: the median half way.
    first = [10] * len(DURATION_BUCKETS)
    assert bucket_percentile(first, 10, 0.5) == pytest.approx(0.0025)
    # Beyond the last bound: the last bound.
    assert bucket_percentile(buckets, 4, 0.5) == DURATION_BUCKETS[-1]


def test_read_history_refuses_a_step_of_part_minutes_or_an_empty_window() -> None:
    with pytest.raises(InvalidFilter, match="step must be whole minutes"):
        store.read_history(since=T0, until=T0 + timedelta(hours=1), step=timedelta(seconds=90))
    with pytest.raises(ValueError, match="until must be after since"):
        store.read_history(since=T0, until=T0, step=timedelta(minutes=1))


def test_retention_prunes_minutes_and_markers_past_the_window() -> None:
    old, recent = T0 - timedelta(days=8), T0 - timedelta(days=1)
    RunMinute.objects.create(minute=old, kind="k", outcome="completed", runs=1)
    RunMinute.objects.create(minute=recent, kind="k", outcome="completed", runs=1)
    DeployMarker.objects.create(label="old", at=old)
    DeployMarker.objects.create(label="recent", at=recent)
    assert store.prune_history(before=T0 - timedelta(days=7)) == 2
    assert list(RunMinute.objects.values_list("minute", flat=True)) == [recent]
    assert list(DeployMarker.objects.values_list("label", flat=True)) == ["recent"]


def test_the_services_sample_and_prune_through_the_worker_db_call() -> None:
    calls: list[str] = []

    def db(call: object) -> object:
        calls.append(call.func.__name__)  # type: ignore[attr-defined]
        return call()  # type: ignore[operator]

    HistorySampler(db, interval=10.0, clock=lambda: T0).run()
    assert RunHistoryCursor.objects.get(kind="").sampled_at == T0
    Retention(db, interval=300.0, keep={}, history=timedelta(days=7)).run()
    assert calls == ["sample_history", "prune_history", "prune_merge_locks"]


def test_mark_records_label_author_and_time_and_refuses_bad_input() -> None:
    marker = django_jobqueue.mark("deploy 1.4.2", by="ci")
    assert (marker.label, marker.by) == ("deploy 1.4.2", "ci")
    assert abs((timezone.now() - marker.at).total_seconds()) < 60
    for label, by, argument in [
        ("", "", "label"),
        ("   ", "", "label"),
        ("x" * 201, "", "label"),
        ("ok", "y" * 256, "by"),
        ("ok", 3, "by"),
        (None, "", "label"),
    ]:
        with pytest.raises(InvalidMarker) as info:
            django_jobqueue.mark(label, by=by)  # type: ignore[arg-type]
        assert info.value.argument == argument
    assert DeployMarker.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_jobqueue_mark_sets_a_marker_the_history_reads() -> None:
    ran = manage_in_process("jobqueue", "mark", "deploy 1.4.2")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("marked 'deploy 1.4.2' at ")
    assert "by manage.py jobqueue (" in ran.stdout
    ran = manage_in_process("jobqueue", "mark", "hotfix", "--by", "alice")
    assert ran.returncode == 0, ran.stderr
    refused = manage_in_process("jobqueue", "mark", "  ")
    assert refused.returncode == 1
    assert "A marker needs a label" in refused.stderr
    now = timezone.now()
    h = store.read_history(since=now - timedelta(hours=1), until=now, step=timedelta(minutes=1))
    assert [(m.label, m.by) for m in h.markers][-1] == ("hotfix", "alice")
    assert [m.label for m in h.markers] == ["deploy 1.4.2", "hotfix"]


@row_locking
@pytest.mark.django_db(transaction=True)
def test_two_samplers_at_once_count_each_run_once() -> None:
    """Two workers' samplers at the same moment: the clock row's lock lets one in, the
    other finds the clock moved and does nothing; the runs are in one minute once."""
    store.sample_history(now=T0, min_gap=GAP)
    settle(6, ms=20)
    barrier = threading.Barrier(2)
    results: list[int | None] = []

    def sample() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(store.sample_history(now=T0 + timedelta(seconds=10), min_gap=GAP))
        finally:
            connection.close()

    threads = [threading.Thread(target=sample) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results, key=str) == [1, None]
    assert sum(minute_rows().values()) == 6


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_feeds_the_history_from_its_own_runs() -> None:
    """A real worker's maintenance loop samples the tally: its runs reach the minute
    rows without anything else calling the sampler (a short sampling interval here)."""
    worker = WorkerThread(
        kinds=[tasks.add.kind], timings=Timings(history=0.2, heartbeat=60.0)
    ).start()
    try:
        wait_for(lambda: RunHistoryCursor.objects.filter(kind="").exists(), timeout=30)
        tasks.add.enqueue_many([{"a": n, "b": n} for n in range(7)])
        wait_for(
            lambda: (
                sum(
                    RunMinute.objects.filter(kind=tasks.add.kind, outcome="completed").values_list(
                        "runs", flat=True
                    )
                )
                == 7
            ),
            timeout=30,
        )
    finally:
        worker.stop()
