"""The example project's view enqueues inside the transaction that creates its data."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.models import Job
from django_jobqueue.run import transactional
from django_jobqueue.run.context import Context
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from testproject.shop.models import Customer, Order
from testproject.shop.tasks import mark_paid, send_receipt
from tests.helpers import WorkerThread, wait_for

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


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


@pytest.mark.django_db(transaction=True)
def test_mark_paid_pays_the_order_and_enqueues_one_receipt_with_its_completion() -> None:
    customer = Customer.objects.create(email="grace@example.com")
    order = Order.objects.create(customer=customer, total_cents=4200)
    handle = mark_paid.enqueue(order_id=order.pk)
    worker = WorkerThread(kinds=[mark_paid.kind], concurrency=1).start()
    try:
        wait_for(lambda: Job.objects.get(id=handle.id).status == "completed")
    finally:
        worker.stop()
    order.refresh_from_db()
    assert order.paid_at is not None
    assert order.paid_at <= timezone.now()
    [receipt] = Job.objects.filter(kind=send_receipt.kind)
    assert receipt.payload == {"order_id": order.pk, "email": "grace@example.com"}
    assert Job.objects.get(id=handle.id).result == {
        "order": order.pk,
        "receipt_job": str(receipt.id),
    }


def test_mark_paid_whose_claim_was_lost_neither_pays_nor_enqueues() -> None:

    customer = Customer.objects.create(email="alan@example.com")
    order = Order.objects.create(customer=customer, total_cents=100)
    handle = mark_paid.enqueue(order_id=order.pk)
    # Claimed by a worker that then lost the claim (another took the job over) before its
    # run ended: run it as that worker, with its stale claim.
    [claimed] = store.claim_jobs(
        worker_id="old", request=store.ClaimRequest(limit=1, kinds=[mark_paid.kind])
    )
    Job.objects.filter(id=handle.id).update(claimed_by="new", run_count=2)
    result = transactional.run(
        registry.find(mark_paid.kind),
        claimed,
        Context.for_job(claimed),
        alias="default",
        worker_id="old",
        max_output_bytes=1 << 20,
    )
    assert result.lost
    order.refresh_from_db()
    assert order.paid_at is None
    assert not Job.objects.filter(kind=send_receipt.kind).exists()
    assert not Job.objects.get(id=handle.id).journal.exists()
