"""Job ids: UUIDv7s in increasing order, and a time as a bound on them (``uuid7_floor``,
what a range of ``created_at`` is read along the primary key by)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings

from django_jobqueue.ids import uuid7, uuid7_floor, uuid7_many


def test_ids_drawn_in_one_go_and_one_at_a_time_increase() -> None:
    drawn = [*uuid7_many(500), uuid7(), *uuid7_many(3)]
    assert drawn == sorted(drawn)
    assert len(set(drawn)) == len(drawn)
    assert {u.version for u in drawn} == {7}


def test_the_floor_of_a_moment_bounds_the_ids_drawn_from_it_on() -> None:
    before = datetime.now(UTC)
    drawn = uuid7()
    assert uuid7_floor(before) <= drawn < uuid7_floor(before + timedelta(milliseconds=2))
    assert uuid7_floor(before).version == 7


def test_the_floor_is_the_moments_millisecond_with_no_random_bits() -> None:
    moment = datetime(2024, 3, 1, 12, 0, 0, 123_999, tzinfo=UTC)
    floor = uuid7_floor(moment)
    assert floor.int >> 80 == int(moment.timestamp() * 1000) == 1_709_294_400_123
    assert floor == uuid7_floor(moment.replace(microsecond=123_000))
    assert str(floor) == "018df9e2-b27b-7000-8000-000000000000"


@override_settings(TIME_ZONE="Asia/Tokyo")
def test_a_naive_moment_is_read_in_djangos_default_time_zone() -> None:
    naive = datetime(2024, 3, 1, 21, 0)
    assert uuid7_floor(naive) == uuid7_floor(naive.replace(tzinfo=ZoneInfo("Asia/Tokyo")))
    assert uuid7_floor(naive) == uuid7_floor(datetime(2024, 3, 1, 12, 0, tzinfo=UTC))


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def test_the_ends_of_datetimes_range_are_bounds_too(zone: str) -> None:
    """Before 1970 is before every id (time zero); year 9999 fits 48 bits of ms."""
    first = uuid7_floor(datetime.min.replace(tzinfo=ZoneInfo(zone)))
    last = uuid7_floor(datetime.max.replace(tzinfo=ZoneInfo(zone)))
    assert first.int >> 80 == 0
    assert first < uuid7() < last
    assert last.version == 7
