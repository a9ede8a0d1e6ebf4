"""The collector held off around a batch's allocations (``allocations.held_off``)."""

from __future__ import annotations

import gc

import pytest

from django_jobqueue.allocations import held_off


def test_the_collector_is_off_in_the_block_and_on_again_after_it_even_on_an_error() -> None:
    assert gc.isenabled()
    with held_off():
        assert not gc.isenabled()
    assert gc.isenabled()
    seen: list[bool] = []

    def bad_batch() -> None:
        with held_off():
            seen.append(gc.isenabled())
            raise RuntimeError("a bad item")

    with pytest.raises(RuntimeError):
        bad_batch()
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_already_off_is_left_off() -> None:
    gc.disable()
    try:
        with held_off():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_blocks_leave_it_to_the_outer_one() -> None:
    with held_off():
        with held_off():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
