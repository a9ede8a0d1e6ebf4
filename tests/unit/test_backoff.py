from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from django_jobqueue.rules.backoff import Backoff, delay, fib


def test_fib_starts_one_one_two() -> None:
    assert [fib(n) for n in range(1, 9)] == [1, 1, 2, 3, 5, 8, 13, 21]


def test_delay_without_jitter_follows_fibonacci_minus_one() -> None:
    base = timedelta(seconds=1)
    got = [
        delay(n, base=base, cap=timedelta(hours=1), jitter=0, job_id="j").total_seconds()
        for n in range(1, 8)
    ]
    assert got == [1, 2, 4, 7, 12, 20, 33]


def test_delay_is_capped() -> None:
    assert delay(
        30, base=timedelta(seconds=1), cap=timedelta(minutes=5), jitter=0, job_id="j"
    ) == timedelta(minutes=5)


def test_jitter_is_deterministic_per_job_and_attempt_and_within_bounds() -> None:
    base, cap = timedelta(seconds=10), timedelta(hours=1)
    job = uuid.uuid4()
    first = delay(4, base=base, cap=cap, jitter=0.2, job_id=job)
    assert first == delay(4, base=base, cap=cap, jitter=0.2, job_id=job)
    full = timedelta(seconds=70)
    assert full * 0.8 <= first <= full
    spread = {delay(4, base=base, cap=cap, jitter=0.2, job_id=uuid.uuid4()) for _ in range(20)}
    assert len(spread) > 10


def test_no_failures_means_no_delay() -> None:
    assert delay(0, base=timedelta(seconds=5), cap=timedelta(hours=1), jitter=0, job_id=1) == (
        timedelta(0)
    )


def test_backoff_rejects_negative_durations() -> None:
    with pytest.raises(ValueError, match="base"):
        Backoff(base=timedelta(seconds=-1))


@pytest.mark.parametrize("failures", [60, 80, 89, 500])
def test_the_delay_of_a_job_that_retries_forever_stays_at_the_cap(failures: int) -> None:
    """base x fib(n) outgrows timedelta after about 70 failures; a job with
    max_failures=None must still get the cap, not an OverflowError in the worker."""
    cap = timedelta(hours=1)
    assert delay(failures, base=timedelta(seconds=10), cap=cap, jitter=0.0, job_id="j") == cap
