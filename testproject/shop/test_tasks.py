"""The example project's tests in pytest style (pytest-django), with the queue's test kit."""

from __future__ import annotations

import pytest
from django.test import Client

from django_jobqueue.testing import TooManyJobs, assert_not_enqueued, captured_jobs, run_jobs
from testproject.shop.tasks import charge_card, import_legacy, place_order, send_receipt

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_a_signup_without_email_enqueues_nothing(client: Client) -> None:
    with captured_jobs() as jobs:
        response = client.post("/signup/", {})
    assert response.status_code == 400
    assert jobs == []
    assert_not_enqueued(send_receipt)


def test_placing_an_order_enqueues_a_charge_and_a_receipt() -> None:
    with captured_jobs() as jobs:
        place_order.enqueue(order_id=7, email="ada@example.com")
        run_jobs()
    assert [(j.kind, j.payload) for j in jobs] == [
        (place_order.kind, {"order_id": 7, "email": "ada@example.com"}),
        (charge_card.kind, {"order_id": 7, "fail_times": 0}),
        (send_receipt.kind, {"order_id": 7, "email": "ada@example.com"}),
    ]
    assert [j.handle.refresh().status for j in jobs] == ["completed"] * 3


def test_an_unreadable_import_dies_at_once() -> None:
    handle = import_legacy.enqueue("orders-1999.xls")
    [ran] = run_jobs()
    assert ran.status == "dead"
    assert [e.outcome for e in handle.journal()] == ["dead"]


def test_run_jobs_stops_at_its_bound() -> None:
    for n in range(3):
        place_order.enqueue(order_id=n, email=f"{n}@example.com")
    with pytest.raises(TooManyJobs):
        run_jobs(max_jobs=5)  # 3 orders make 9 jobs
