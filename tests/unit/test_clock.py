"""``clock.now`` tells the time as ``timezone.now`` does, and follows ``USE_TZ`` when a
test (or anything sending ``setting_changed``) changes it."""

from __future__ import annotations

from datetime import UTC, timedelta

from django.test import override_settings
from django.utils import timezone

from django_jobqueue import clock


def test_with_use_tz_the_time_is_aware_utc_as_djangos() -> None:
    before = timezone.now()
    now = clock.now()
    after = timezone.now()
    assert now.tzinfo is UTC
    assert before <= now <= after


def test_use_tz_changed_is_followed_both_ways() -> None:
    assert clock.now().tzinfo is UTC
    with override_settings(USE_TZ=False):
        naive = clock.now()
        assert naive.tzinfo is None
        assert abs(naive - timezone.now()) < timedelta(seconds=5)  # both local, naive
    assert clock.now().tzinfo is UTC
