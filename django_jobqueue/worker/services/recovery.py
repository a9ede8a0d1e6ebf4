"""Stale-lease recovery: claimed jobs whose lease ran out go back to pending (or dead)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from django.utils import timezone

from django_jobqueue import store

if TYPE_CHECKING:
    from django_jobqueue.rules.lifecycle import Policy
from django_jobqueue.worker.services.base import DbCall, Running, Service


class Recovery(Service):
    """Send jobs whose lease ran out (their worker died) back to pending."""

    name = "recover"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        policy_for: Callable[[str], Policy],
        running: Mapping[uuid.UUID, Running],
    ) -> None:
        self.db = db
        self.interval = interval
        self.policy_for = policy_for
        self.running = running
        # The earliest lease end an idle worker saw; set by the worker while it idles.
        self.next_expiry: datetime | None = None

    def run(self) -> None:
        self.db(partial(store.recover_expired, policy_for=self.policy_for))

    def wake_in(self, since_run: float) -> float | None:
        if self.running:
            return self.interval - since_run
        if self.next_expiry is None:
            return None  # idle and no lease anywhere: nothing can expire
        # Not before the sweep is due again, so an expiry that another worker is
        # recovering right now does not make this one spin.
        until = (self.next_expiry - timezone.now()).total_seconds()
        return max(until, self.interval - since_run)
