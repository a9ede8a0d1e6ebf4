"""The worker's event loop holds no asyncio loop (nor its self-pipe sockets) until it
starts: a worker built and dropped without running leaves nothing unclosed behind."""

from __future__ import annotations

import gc
import warnings

import pytest

from django_jobqueue.worker.eventloop import EventLoop


async def _never(job: object, ctx: object) -> object:
    raise AssertionError("nothing runs")


def test_a_loop_never_started_leaves_no_unclosed_resource() -> None:
    loop = EventLoop(run=_never, on_result=lambda: None, db_threads=1)  # type: ignore[arg-type]
    loop.stop(timeout=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del loop
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_submitting_before_start_says_so() -> None:
    loop = EventLoop(run=_never, on_result=lambda: None, db_threads=1)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="before start"):
        loop.submit(object())  # type: ignore[arg-type]
    loop.stop(timeout=1)


def test_a_started_loop_is_closed_by_stop() -> None:
    loop = EventLoop(run=_never, on_result=lambda: None, db_threads=1)  # type: ignore[arg-type]
    loop.start()
    loop.stop(timeout=5)
    assert loop._loop.is_closed()
