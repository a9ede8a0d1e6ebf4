from django.db import models


class Customer(models.Model):
    """A stand-in for business data that a job is enqueued with."""

    email = models.EmailField(unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.email
