"""A workflow's steps take their keys' rate tokens (``rate_limit_per_key``) at the
workflow's enqueue, as ``enqueue`` and ``enqueue_many`` take them: before, a step took
only its kind's (``rate_limit``), so a key's rate let any number of workflow steps by
(found by the conformance matrix, tests/conformance)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from django_jobqueue import RateLimited, chain, group
from django_jobqueue.models import Job
from django_jobqueue.models import Workflow as WorkflowRow
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

KEYED = tasks.keyed.kind
SHOP = tasks.per_shop.kind


def _rate_per_key(*kinds: str) -> override_settings:
    per_key = {kind: {"rate_limit_per_key": "1/h"} for kind in kinds}
    return override_settings(JOBQUEUE={**settings.JOBQUEUE, "LIMITS": per_key})


def test_a_step_takes_its_explicit_and_its_computed_keys_token() -> None:
    with _rate_per_key(KEYED, SHOP):
        chain(
            tasks.wf_value.s(x=1),
            tasks.keyed.using(key="tenant-a").s(n=1),
            tasks.per_shop.s(shop=3, seconds=0),
        ).enqueue()

        with pytest.raises(RateLimited) as explicit:
            tasks.keyed.using(key="tenant-a").enqueue(n=2)
        with pytest.raises(RateLimited) as computed:
            tasks.per_shop.enqueue(shop=3, seconds=0)
        assert explicit.value.kind == f"{KEYED} key 'tenant-a'"
        assert computed.value.kind == f"{SHOP} key 'shop:3'"
        tasks.keyed.using(key="tenant-b").enqueue(n=3)  # another key's bucket is full
        tasks.per_shop.enqueue(shop=4, seconds=0)


def test_a_workflow_needing_more_of_a_keys_tokens_than_there_are_writes_nothing() -> None:
    with _rate_per_key(KEYED):
        flow = group([tasks.keyed.using(key="a").s(n=i) for i in (1, 2)])
        with pytest.raises(RateLimited) as refused:
            flow.enqueue()
        assert refused.value.kind == f"{KEYED} key 'a'"
        assert refused.value.retry_after is None  # two at once never fit a bucket of one
        assert not Job.objects.filter(kind=KEYED).exists()
        assert not WorkflowRow.objects.exists()
        tasks.keyed.using(key="a").enqueue(n=3)  # and no token was taken
