"""The example project's tests in Django's ``TestCase`` style, with the queue's test kit.

Run with ``python manage.py test`` from ``testproject/``, or by pytest with the suite.
``TestCase`` wraps each test in a transaction: ``captured_jobs()`` and ``run_jobs()``
work inside it; on-commit work (``job_enqueued``) needs ``captureOnCommitCallbacks``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import TestCase
from django.utils import timezone

from django_jobqueue import job_enqueued
from django_jobqueue.testing import assert_enqueued, captured_jobs, run_jobs
from testproject.shop.models import Customer
from testproject.shop.tasks import ExportOrders, charge_card, place_order, send_receipt

pytestmark = pytest.mark.sqlite  # also in the SQLite leg when pytest runs them


class SignupTests(TestCase):
    def test_signup_enqueues_a_receipt_that_runs_to_completion(self) -> None:
        with captured_jobs() as jobs:
            response = self.client.post("/signup/", {"email": "ada@example.com"})
        self.assertEqual(response.status_code, 200)
        customer = Customer.objects.get()
        [job] = jobs
        self.assertEqual(job.kind, send_receipt.kind)
        self.assertEqual(job.payload, {"order_id": customer.pk, "email": "ada@example.com"})
        self.assertEqual(job.options["queue"], "default")

        [ran] = run_jobs()
        self.assertEqual(ran.id, job.handle.id)
        self.assertEqual(ran.result, {"sent_to": "ada@example.com", "order": customer.pk})

    def test_job_enqueued_is_sent_when_the_signup_commits(self) -> None:
        heard: list[str] = []

        def receiver(sender: Any, kind: str, **kwargs: Any) -> None:
            heard.append(kind)

        job_enqueued.connect(receiver)
        self.addCleanup(job_enqueued.disconnect, receiver)
        with self.captureOnCommitCallbacks(execute=True):
            self.client.post("/signup/", {"email": "ada@example.com"})
        self.assertEqual(heard, [send_receipt.kind])


class OrderTests(TestCase):
    def test_placing_an_order_runs_its_follow_up_jobs(self) -> None:
        place_order.enqueue(order_id=7, email="ada@example.com")
        ran = run_jobs()  # runs place_order, then the two jobs it enqueued
        self.assertEqual(
            [h.kind for h in ran], [place_order.kind, charge_card.kind, send_receipt.kind]
        )
        self.assertTrue(all(h.status == "completed" for h in ran))

    def test_a_flaky_charge_is_retried_until_it_succeeds(self) -> None:
        handle = charge_card.enqueue(order_id=7, fail_times=2)
        # Retries back off: a later clock runs them without waiting.
        later = timezone.now() + timedelta(hours=1)
        ran = run_jobs(now=later)
        self.assertEqual([h.status for h in ran], ["pending", "pending", "completed"])
        self.assertEqual(handle.refresh().result, "charged order 7")

    def test_an_export_pauses_after_each_page(self) -> None:
        ExportOrders(pages=3).enqueue()
        assert_enqueued(ExportOrders, pages=3)
        self.assertEqual(len(run_jobs()), 3)
