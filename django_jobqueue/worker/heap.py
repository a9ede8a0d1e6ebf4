"""A worker process's garbage collector, tuned for its loop: the start-up heap kept out
of its walks, and its youngest generation sized to a turn.

Once Django, the project's apps, their tasks and the queue are imported, a worker
process holds some 70,000 objects the cyclic collector tracks, nearly all of them for
the life of the process. Every full collection (of the oldest generation) walks all of
them: on a drain of no-ops one came about every 6,000 jobs and took 28 to 45 ms, with
the interpreter's lock held, so every thread of the process (the loop's claims and
lease renewals, the runs) stood still for it, and it cost the worker 5 to 7.5 µs of
CPU a job (``docs/explanation/performance.md``, "The collector tuned for the loop").

``tuned`` collects once (start-up's own garbage is freed, not kept), then moves what
is left to the collector's permanent generation (``gc.freeze``): later collections
leave it alone, and what the runs allocate is collected as before. The supervisor
freezes before it forks its first worker processes, so their collections do not write
to the pages they share with it either (the copy-on-write the Python documentation
warns of).

The youngest generation is collected after 10,000 more container objects made than
freed, not Python's default 700, while the loop runs: a turn keeps a few thousand of
them alive until the next turn settles its jobs (each claimed job's row, context and
settlement), so at 700 the youngest generation was collected about every 50 jobs,
each time walking those live objects to promote them, 1.2 to 2.4 µs a job of the
worker's CPU; at 10,000 it came 150 times in 60,000 jobs, not 1,200. Cyclic garbage
a task leaves (an exception and its frames) waits for up to that many allocations
instead, which a task that queries the database makes in a few runs.

On the way out both are undone: a command run inside another program (a test's
``call_command``) hands back that program's heap and thresholds as it found them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Container objects made (less those freed) between two collections of the youngest
#: generation while the loop runs: more than a turn keeps alive.
YOUNG_THRESHOLD = 10_000


@contextmanager
def tuned() -> Iterator[None]:
    """Until the block ends: the objects tracked now left out of every collection, and
    the youngest generation collected at ``YOUNG_THRESHOLD`` (or the threshold already
    set, when higher)."""
    gc.collect()
    gc.freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(thresholds[0], YOUNG_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
