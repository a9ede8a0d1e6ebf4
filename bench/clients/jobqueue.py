"""django_jobqueue's enqueue side (Django set up with settings_jobqueue, autocommit)."""

from __future__ import annotations

import time

from django.core.management import call_command

from bench.benchapp.tasks import noop, stamp, ten_steps
from bench.clients import WARMUP, paced, per_request, timed_calls


def install() -> None:
    call_command("migrate", verbosity=0, interactive=False)


def enqueue_each(n: int) -> float:
    """``noop.enqueue()`` ``n`` times, each call its own transaction."""
    return timed_calls(noop.enqueue, n)


def enqueue_requests(n: int) -> float:
    """``noop.enqueue()`` once per simulated request (``per_request``)."""
    return per_request(noop.enqueue, n)


def enqueue_bulk(n: int) -> float:
    """One ``enqueue_many`` call of ``n`` jobs."""
    noop.enqueue_many([{} for _ in range(WARMUP)])
    items: list[dict[str, object]] = [{} for _ in range(n)]
    start = time.perf_counter()
    noop.enqueue_many(items)
    return time.perf_counter() - start


def preload(n: int) -> None:
    """``n`` no-op jobs before a drain, by the fastest path: one ``enqueue_many``."""
    noop.enqueue_many([{} for _ in range(n)])


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    def submit(label: str) -> None:
        stamp.enqueue(label=label)

    return paced(count, gap, warmup, submit)


def stamp_pairs(count: int, gap: float, warmup: int, queues: list[str]) -> dict[str, float]:
    """``stamp_series`` over two queues: each label's job goes to both, one after the
    other ``gap`` apart, the first of each pair in turn (``a<i>`` on the first queue,
    ``b<i>`` on the second), so that each queue's worker sees the same moments."""
    first, second = queues
    committed: dict[str, float] = {}

    def submit(label: str) -> None:
        order = ((f"a{label}", first), (f"b{label}", second))
        for name, queue in order if int(label.lstrip("wj") or 0) % 2 == 0 else order[::-1]:
            stamp.using(queue=queue).enqueue(label=name)
            if not label.startswith("w"):
                committed[name] = time.time()
            time.sleep(gap)

    paced(count, 0.0, warmup, submit)
    return committed


# --- the workflow measures (bench/workflows.py) ---------------------------------------------


def chord_write(n: int, callback: str) -> dict[str, float]:
    """Seconds for one ``enqueue_many`` of ``n`` no-ops, then for one chord of ``n`` no-op
    members (its signatures built inside the clock: ``enqueue_many`` checks its items
    inside its own), after an untimed small one of each."""
    from django_jobqueue import chord

    noop.enqueue_many([{} for _ in range(WARMUP)])
    chord([noop.s() for _ in range(WARMUP)], stamp.s(label="warmup")).enqueue()
    items: list[dict[str, object]] = [{} for _ in range(n)]
    start = time.perf_counter()
    noop.enqueue_many(items)
    plain = time.perf_counter() - start
    start = time.perf_counter()
    chord([noop.s() for _ in range(n)], stamp.s(label=callback)).enqueue()
    return {"plain": plain, "chord": time.perf_counter() - start}


def preload_chord(n: int, callback: str) -> None:
    """A chord of ``n`` no-op members and a stamp callback, before a drain."""
    from django_jobqueue import chord

    chord([noop.s() for _ in range(n)], stamp.s(label=callback)).enqueue()


def enqueue_chain(n: int, prefix: str) -> None:
    """A chain of ``n`` stamp steps, labelled ``<prefix><position>``."""
    from django_jobqueue import chain

    chain(*(stamp.s(label=f"{prefix}{i}") for i in range(n))).enqueue()


def preload_steps(n: int) -> None:
    """``n`` jobs of ten memoized steps (bench/steps.py), before a drain."""
    ten_steps.enqueue_many([{} for _ in range(n)])


# --- the workload measures (bench/workloads.py; settings_jobqueue_work) ---------------------


def preload_work(task: str, n: int, kwargs: dict[str, object]) -> None:
    """``n`` jobs of the workload task ``task`` (bench.workapp.tasks), one ``enqueue_many``."""
    from bench.workapp import tasks

    getattr(tasks, task).enqueue_many([dict(kwargs) for _ in range(n)])
