"""Example tasks: one of each way a job can end."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from django_jobqueue import Context, Pause, Permanent, Priority, Task, task
from testproject.shop.models import Order


@task
def send_receipt(order_id: int, email: str) -> dict[str, Any]:
    """Succeeds at once."""
    return {"sent_to": email, "order": order_id}


@task(atomic=True)
def mark_paid(order_id: int) -> dict[str, Any]:
    """Marks an order paid and enqueues its receipt, in the run's own transaction: the
    payment, the receipt job and this job's completion commit together, once, however
    often the run is repeated (a worker killed mid-run, a lost lease)."""
    order = Order.objects.select_for_update().select_related("customer").get(pk=order_id)
    order.paid_at = timezone.now()
    order.save(update_fields=["paid_at"])
    receipt = send_receipt.enqueue(order_id=order.pk, email=order.customer.email)
    return {"order": order.pk, "receipt_job": str(receipt.id)}


@task(takes_context=True, priority=Priority.HIGH)
def charge_card(ctx: Context, order_id: int, fail_times: int = 2) -> str:
    """Fails ``fail_times`` times (a flaky payment gateway), then succeeds."""
    ctx.attach({"attempt": ctx.run_count})
    if ctx.failure_count < fail_times:
        raise ConnectionError(f"gateway timeout on attempt {ctx.run_count}")
    return f"charged order {order_id}"


@dataclass
class ExportOrders(Task):
    """Exports in pages, pausing after each with its cursor in carry, until done."""

    kind = "shop.export_orders"
    priority = Priority.LOW
    pages: int = 3

    def run(self, ctx: Context) -> dict[str, Any]:
        page = ctx.carry.get("page", 0) + 1
        ctx.carry["page"] = page
        ctx.attach({"page": page})
        if page < self.pages:
            raise Pause(resume_in=timedelta(0), note=f"page {page} of {self.pages} done")
        return {"pages": page}


@task
def import_legacy(path: str) -> None:
    """Fails permanently: the input can never be read."""
    raise Permanent(f"{path} is not a supported export format")


@task
def place_order(order_id: int, email: str) -> str:
    """Enqueues the order's follow-up jobs: a charge, then its receipt."""
    charge_card.enqueue(order_id=order_id, fail_times=0)
    send_receipt.enqueue(order_id=order_id, email=email)
    return f"order {order_id} placed"
