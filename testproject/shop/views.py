from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from testproject.shop.models import Customer
from testproject.shop.tasks import send_receipt


@require_POST
def signup(request: HttpRequest) -> HttpResponse:
    """Creates a customer and enqueues their receipt in the same transaction."""
    email = request.POST.get("email", "")
    if not email:
        return JsonResponse({"error": "email is required"}, status=400)
    with transaction.atomic():
        customer = Customer.objects.create(email=email)
        job = send_receipt.enqueue(order_id=customer.pk, email=email)
    return JsonResponse({"customer": customer.pk, "job": str(job.id), "status": job.status})
