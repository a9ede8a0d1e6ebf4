"""The DATABASES setting: each bad value refused with an error naming what is wrong,
a good one read as written, and the stable hash every process agrees on."""

from __future__ import annotations

from typing import Any

import pytest

from django_jobqueue.databases_setting import QueueDatabases, parse
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.routing import stable_index

KNOWN = {"default": {}, "jobs_a": {}, "jobs_b": {}, "jobs_a_ro": {}}


def read(raw: Any, default: str = "default") -> QueueDatabases | None:
    return parse(raw, default=default, known=KNOWN)


def test_unset_is_one_database_and_a_good_value_is_read_as_written() -> None:
    assert read(None) is None
    found = read(
        {
            "ALIASES": ["jobs_a", "jobs_b"],
            "ROUTE": "queue",
            "QUEUES": {"mail": "jobs_b"},
            "READ": {"jobs_a": "jobs_a_ro"},
        }
    )
    assert found == QueueDatabases(
        aliases=("jobs_a", "jobs_b"),
        home="jobs_a",  # DATABASE ("default") is not one of them: the first
        route="queue",
        queues={"mail": "jobs_b"},
        read={"jobs_a": "jobs_a_ro"},
    )
    assert read({"ALIASES": ["jobs_a", "jobs_b"]}, default="jobs_b").home == "jobs_b"  # type: ignore[union-attr]
    routed = read({"ALIASES": ["jobs_a"], "ROUTE": "tests.shards.layout.by_kind"})
    assert routed is not None
    assert routed.router is not None
    assert routed.router(kind="x.add", queue="q", key=None) == "shard_b"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (["jobs_a"], "must be a dict"),
        ({"ALIASES": ["jobs_a"], "SHARDS": 2}, "unknown key(s) 'SHARDS'"),
        ({}, "ALIASES must be a non-empty list"),
        ({"ALIASES": "jobs_a"}, "ALIASES must be a non-empty list"),
        ({"ALIASES": []}, "ALIASES must be a non-empty list"),
        ({"ALIASES": ["jobs_c"]}, "'jobs_c' is not an alias in settings.DATABASES"),
        ({"ALIASES": ["jobs_a", "jobs_a"]}, "names an alias twice"),
        ({"ALIASES": ["jobs_a"], "HOME": "jobs_b"}, "HOME must be one of ALIASES"),
        ({"ALIASES": ["jobs_a"], "ROUTE": "hash"}, 'ROUTE must be "key", "queue" or a dotted'),
        ({"ALIASES": ["jobs_a"], "ROUTE": "no.such.router"}, "cannot be imported"),
        ({"ALIASES": ["jobs_a"], "ROUTE": "tests.shards.layout.ALIASES"}, "is not callable"),
        ({"ALIASES": ["jobs_a"], "QUEUES": ["mail"]}, "QUEUES must be a dict"),
        ({"ALIASES": ["jobs_a"], "QUEUES": {"mail": "jobs_b"}}, "QUEUES['mail'] must be one of"),
        ({"ALIASES": ["jobs_a"], "QUEUES": {"": "jobs_a"}}, "each key must be a queue name"),
        ({"ALIASES": ["jobs_a"], "READ": {"jobs_b": "jobs_a_ro"}}, "each key must be one of"),
        ({"ALIASES": ["jobs_a"], "READ": {"jobs_a": "nowhere"}}, "READ['jobs_a'] must be one of"),
    ],
)
def test_a_bad_value_is_refused_naming_what_is_wrong(raw: Any, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        read(raw)
    assert str(caught.value).startswith("DATABASES ")
    assert says in str(caught.value)
    assert caught.value.facts["key"] == "DATABASES"


def test_the_stable_hash_is_crc32_the_same_in_every_process_and_release() -> None:
    # Written down: a key's database never depends on the process (``hash()`` is salted
    # per process) nor on the release (keys must stay where their jobs are).
    keys = ("tenant:1", "tenant:2", "shop:7")
    assert [stable_index(k, 3) for k in keys] == [4268526953 % 3, 1734728915 % 3, 1066800691 % 3]
    assert [stable_index(k, 2) for k in keys] == [1, 1, 1]
    assert [stable_index(k, 3) for k in keys] == [2, 2, 1]
