"""The red-team suite's fixture: one world of hostile data per module (see world.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from django_jobqueue.task import limiting
from django_jobqueue.task.registry import registry
from tests.security.world import World, build_world


@pytest.fixture(scope="module")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[World]:
    """The module's data, rolled back when the module ends."""
    with django_db_blocker.unblock(), registry.isolated(), transaction.atomic():
        limiting.forget()
        yield build_world()
        transaction.set_rollback(True)
    limiting.forget()
