"""Where a worker's runs go: sync tasks to the slot threads, ``async def`` ones to the
event loop, each with its own concurrency, and what each can take on next.

A worker with no async kind has no event loop, and claims exactly as it did with slot
threads alone: one group of every kind, as many as there are free slots. With both, it
claims each group for its own free room (``groups``), so a full set of slot threads never
holds back async runs, nor a thousand free awaits bring in a thousand sync jobs. Each
pool has a claim buffer of its own (``sizing``), sized from its own runs' durations.

The two claims of a turn are two round trips, and the jobs of the second start one
round trip later. A turn that only claims (a wake-up: nothing ended to settle) claims
first for the group whose last claim found work (``found``), so a job of a steady
stream of one kind of run is not made to wait behind an empty claim for the other. A
turn that settles claims first for the roomier group, its settlements in the same
statement: under a backlog, settlements written with a claim for many keyed kinds
cost the server more than the two apart (a probe at 1,000 jobs/s: 63 ms a turn
against 30 and 21).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from django_jobqueue.run.pipeline import Ended, Pipeline
from django_jobqueue.worker.eventloop import DB_THREADS, EventLoop
from django_jobqueue.worker.procpool import ProcessSlots
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.sizing import Sizing
from django_jobqueue.worker.slots import Slots


class Pools:
    """The slot threads and, when some kind is ``async def``, the event loop."""

    def __init__(
        self,
        *,
        pipe: Pipeline,
        on_result: Callable[[], None],
        concurrency: int,
        async_concurrency: int,
        kinds: Sequence[str],
        async_kinds: Collection[str],
        process: bool = False,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: int | None = None,
    ) -> None:
        self.concurrency = concurrency
        self.async_concurrency = async_concurrency
        self.async_kinds = frozenset(k for k in kinds if k in async_kinds)
        self.sync_kinds = [k for k in kinds if k not in self.async_kinds]
        self.all_kinds = list(kinds)
        # The process pool's slot threads each run their jobs in a child process.
        self.slots = (
            ProcessSlots(
                pipe=pipe,
                on_result=on_result,
                max_tasks=max_tasks_per_child,
                max_memory_mib=max_memory_per_child,
            )
            if process
            else Slots(run=pipe.run_one, on_result=on_result)
        )
        # The slot threads' claim buffer, and the event loop's, sized by what each measures.
        self.sizing = Sizing()
        self.loop_sizing = Sizing()
        # Whether the last claim that found work was the event loop's (None: none yet).
        self._found_async: bool | None = None
        self.loop = (
            EventLoop(
                run=pipe.arun_one,
                on_result=on_result,
                db_threads=DB_THREADS,
                limit=async_concurrency,
            )
            if self.async_kinds
            else None
        )

    def start(self) -> None:
        self.slots.start(self.concurrency)
        if self.loop is not None:
            self.loop.start()

    def stop(self) -> None:
        self.slots.stop()
        if self.loop is not None:
            self.loop.stop()

    def limited_from_start(self, kind: str) -> bool:
        """Whether a run of ``kind`` has its hard limit counted from when it starts in its
        child (the process pool's, told by the child) rather than from its dispatch."""
        return isinstance(self.slots, ProcessSlots) and kind not in self.async_kinds

    def submit(self, running: Running) -> None:
        if self.loop is not None and running.job.kind in self.async_kinds:
            self.loop.submit(running)
        else:
            self.slots.submit(running)

    def abandon(self, running: Running) -> str:
        """Give up on a run (its hard limit, a terminate) by the strongest means its pool
        has: a child process killed, a coroutine cancelled, a thread replaced. Returns
        which, in words, for its journal note."""
        if self.loop is not None and running.job.kind in self.async_kinds:
            self.loop.abandon(running)
            return "its coroutine cancelled"
        return self.slots.abandon(running)

    def results(self) -> Iterator[Ended]:
        if self.loop is None:
            return self.slots.results()
        return itertools.chain(self.slots.results(), self.loop.results())

    def longest_run(self) -> float:
        """Seconds the longest sync run going on now has been going."""
        return self.slots.longest_run()

    def ran(self, kind: str, seconds: float) -> None:
        """A run of ``kind`` ended after ``seconds``: its pool's buffer learns of it."""
        sizing = self.loop_sizing if kind in self.async_kinds else self.sizing
        sizing.ran(seconds)

    def turned(self, seconds: float) -> None:
        self.sizing.turned(seconds)
        self.loop_sizing.turned(seconds)

    def found(self, kinds: Collection[str], got: int) -> None:
        """A claim for ``kinds`` (one group of ``groups``) got ``got`` jobs."""
        if got and self.loop is not None and kinds:
            self._found_async = next(iter(kinds)) in self.async_kinds

    def going(self, running: Mapping[uuid.UUID, Running]) -> int:
        """How many of the slot threads' runs (queued or running) have not ended yet."""
        aside = self.async_kinds
        return sum(1 for r in running.values() if not r.ended and r.job.kind not in aside)

    def withdraw(self, *, waited: float = 0.0) -> list[Running]:
        """The runs still waiting for a slot thread or for room on the event loop that
        have waited ``waited`` seconds or more (all by default): none of them started."""
        waiting = self.slots.withdraw(waited=waited)
        if self.loop is not None:
            waiting += self.loop.withdraw(waited=waited)
        return waiting

    def groups(
        self,
        running: Mapping[uuid.UUID, Running],
        settling: Collection[uuid.UUID],
        *,
        extra: int = 0,
        settles: bool = False,
    ) -> list[tuple[list[str], int]]:
        """(kinds, free room) to claim for, in the order to claim: for a turn that
        ``settles``, the roomiest first; else the group whose last claim found work
        first (then the roomiest). Runs being settled this turn free their room
        already; ``extra`` is the slot threads' buffer (``sizing``), the event loop's
        is added here (``loop_sizing``)."""
        busy = [r for job_id, r in running.items() if job_id not in settling]
        if self.loop is None:
            return [(self.all_kinds, self.concurrency + extra - len(busy))]
        in_loop = sum(1 for r in busy if r.job.kind in self.async_kinds)
        loop_extra = self.loop_sizing.buffer(
            self.async_concurrency, longest_run=self.loop.longest_run()
        )
        found = [
            (self.sync_kinds, self.concurrency + extra - (len(busy) - in_loop)),
            (sorted(self.async_kinds), self.async_concurrency + loop_extra - in_loop),
        ]
        found = [(kinds, free) for kinds, free in found if kinds]
        first = None if settles else self._found_async

        def order(group: tuple[list[str], int]) -> tuple[bool, int]:
            kinds, free = group
            return (first is not None and (kinds[0] in self.async_kinds) != first, -free)

        return sorted(found, key=order)
