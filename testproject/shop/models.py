from django.db import models


class Customer(models.Model):
    """A stand-in for business data that a job is enqueued with."""

    email = models.EmailField(unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.email


class Order(models.Model):
    """An order a customer pays for; ``mark_paid`` (an atomic task) records the payment."""

    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    total_cents = models.PositiveIntegerField()
    paid_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"order {self.pk}"
