"""Python's cyclic garbage collector held off while a batch makes its objects.

A bulk enqueue makes several container objects per job that live until it returns
(each job's request, its row, its handle), hundreds of thousands for a large batch.
Each time enough of them have piled up the collector runs, and a full collection
walks every object the process holds (Django's, the project's, these): a batch of
50,000 jobs set off four or five and spent about 40 % of its CPU in them, to find
nothing, since none of these objects is garbage while the batch runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held_off() -> Iterator[None]:
    """No automatic collection while the block runs (nothing changes where the
    collector is already off); the collector is on again after, and collects then as
    it would have.

    The switch is the interpreter's, shared by its threads: another thread's cycles
    wait for the block's end too (a bulk's second or so), and two batches at once
    leave it to the one that turned it off to turn it on again."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


__all__ = ["held_off"]
