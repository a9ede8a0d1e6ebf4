"""The example project's view enqueues inside the transaction that creates its data."""

from __future__ import annotations

import pytest
from django.test import Client

from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from testproject.shop.models import Customer
from testproject.shop.tasks import send_receipt

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def test_signup_commits_the_customer_and_its_job_together() -> None:
    response = Client().post("/signup/", {"email": "ada@example.com"})
    assert response.status_code == 200
    body = response.json()
    customer = Customer.objects.get(pk=body["customer"])
    job = Job.objects.get(id=body["job"])
    assert job.kind == send_receipt.kind
    assert job.payload == {"order_id": customer.pk, "email": "ada@example.com"}
    assert body["status"] == "pending"
    [ran] = run_jobs()
    assert ran.result == {"sent_to": "ada@example.com", "order": customer.pk}


def test_failed_signup_leaves_neither_customer_nor_job() -> None:
    Client().post("/signup/", {"email": "ada@example.com"})
    client = Client(raise_request_exception=False)
    response = client.post("/signup/", {"email": "ada@example.com"})
    assert response.status_code == 500  # unique email violated inside the transaction
    assert Customer.objects.count() == 1
    assert Job.objects.count() == 1


def test_signup_without_email_is_rejected_without_writing() -> None:
    response = Client().post("/signup/", {})
    assert response.status_code == 400
    assert Job.objects.count() == 0
