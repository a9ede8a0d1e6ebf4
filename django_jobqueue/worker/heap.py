"""A worker process's start-up heap, kept out of the garbage collector's walks.

Once Django, the project's apps, their tasks and the queue are imported, a worker
process holds some 70,000 objects the cyclic collector tracks, nearly all of them for
the life of the process. Every full collection (of the oldest generation) walks all of
them: on a drain of no-ops one came about every 6,000 jobs and took 28 to 37 ms, with
the interpreter's lock held, so every thread of the process (the loop's claims and
lease renewals, the runs) stood still for it, and it cost the worker about 5 µs of CPU
a job (``docs/explanation/performance.md``, "The start-up heap frozen").

``frozen`` collects once (start-up's own garbage is freed, not kept), then moves what
is left to the collector's permanent generation (``gc.freeze``): later collections
leave it alone, and what the runs allocate is collected as before. The supervisor
freezes before it forks its first worker processes, so their collections do not write
to the pages they share with it either (the copy-on-write the Python documentation
warns of). On the way out it unfreezes: a command run inside another program (a
test's ``call_command``) hands back that program's heap as the collector had it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen() -> Iterator[None]:
    """The objects tracked now left out of every collection until the block ends."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
