"""A process-pool child (``runworker --pool process``): runs the jobs its slot sends it,
one at a time, through the same run pipeline as a slot thread.

The child is a fresh interpreter (``multiprocessing``'s ``spawn``): it inherits no
database connection, no lock and no thread of the worker, sets Django up itself, and
opens its own connection. What a run writes on it is what a slot thread's run writes
on its own: an atomic task's writes and its guarded settlement, a durable step's
record, each under the claim of the worker (the pipeline's ``worker_id`` is the
worker's), so a child killed mid-transaction leaves nothing, and a child that settled
before it was killed leaves a settlement the worker's own then cannot repeat.

Messages (pickled, over the ``multiprocessing`` pipe, between processes of one
worker; nothing read from the database is ever unpickled):

- worker → child: ``("run", job, soft_seconds)``, ``("cancel", job_id, run_no)``,
  ``("stop",)``;
- child → worker: ``("started", job_id, run_no)`` as a run starts (its hard limit
  counts from then: a new child's Django start-up is not the run's time),
  ``("progress", job_id, run_no, progress)`` about twice a second while a run
  reports, ``("ended", ended, rss_mib)`` after each run.

Its main thread runs the task, so a ``soft_time_limit`` (SIGALRM, set per run) raises
``SoftTimeLimitExceeded`` in the task itself; SIGTERM (a hard limit or a terminate,
``SIGKILL`` following after a grace) raises ``SystemExit`` in it, and the child exits
once the run has unwound, sending nothing. A reader thread takes the worker's
messages; the worker's end closing (the worker died) ends the child at once, so no
run outlives the worker that claimed it.

This module imports nothing of Django or of the queue at import time: the child
imports it before ``django.setup()``.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

# How often the child sends the progress a run reported (the worker writes it about
# once a second).
PROGRESS_EVERY = 0.5


@dataclass
class Config:
    """What a child needs of its worker: the pipeline's three values."""

    worker_id: str
    alias: str
    max_output_bytes: int


@dataclass
class _State:
    """The run going on in this child (None: idle), and whether it is to end."""

    current: Any = None  # the run's Context
    key: tuple[Any, int] | None = None
    terminating: bool = False
    soft_seconds: float | None = None
    send_lock: threading.Lock = field(default_factory=threading.Lock)


def main(conn: Any, config: Config) -> None:
    """The child's entry point (``multiprocessing.Process`` target)."""
    import django

    # A process group of its own: a terminal's Ctrl-C or a signal to the worker's group
    # reaches the worker, which stops its children itself (a run released, not killed).
    os.setpgrp()
    django.setup()
    state = _State()
    jobs: queue.SimpleQueue[tuple[Any, float | None] | None] = queue.SimpleQueue()
    signal.signal(signal.SIGTERM, lambda signum, frame: _on_term(state))
    signal.signal(signal.SIGALRM, lambda signum, frame: _on_soft_limit(state, frame))
    threading.Thread(target=_read, args=(conn, state, jobs), daemon=True).start()
    threading.Thread(target=_report, args=(conn, state), daemon=True).start()
    from django_jobqueue.worker.heap import tuned

    with tuned():  # the collector tuned for its loop, as a worker's (``worker.heap``)
        _serve(conn, config, state, jobs)


def _serve(
    conn: Any,
    config: Config,
    state: _State,
    jobs: queue.SimpleQueue[tuple[Any, float | None] | None],
) -> None:
    from django.db import connections

    from django_jobqueue.run.connguard import ThreadConnections
    from django_jobqueue.run.pipeline import Pipeline
    from django_jobqueue.worker.supervisor import current_rss_mib

    pipe = Pipeline(config.worker_id, config.alias, config.max_output_bytes)
    guard = ThreadConnections()
    try:
        while (item := jobs.get()) is not None:
            job, soft = item
            ctx = pipe.context(job)
            state.current, state.key = ctx, (job.id, job.run_count)
            with state.send_lock:  # its limits count from now, not from its claim
                conn.send(("started", job.id, job.run_count))
            if soft:
                signal.setitimer(signal.ITIMER_REAL, soft)
            try:
                ended = pipe.run_one(job, ctx, guard)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                state.current, state.key = None, None
            if state.terminating:
                break
            pipe._spans.clear()  # a span is the worker's to end: it settles the run
            with state.send_lock:
                conn.send(("ended", ended, current_rss_mib()))
    finally:
        connections.close_all()
    os._exit(0)


def _on_term(state: _State) -> None:
    """SIGTERM: end the run now (its ``finally`` blocks and its transaction's rollback
    run), then the child; an idle child ends at once."""
    state.terminating = True
    if state.current is None:
        os._exit(0)
    state.current._given_up = True  # the worker settles (and reports) the run
    raise SystemExit("the run's process was told to stop (time limit or terminate)")


def _on_soft_limit(state: _State, frame: FrameType | None) -> None:
    from django_jobqueue.rules.control import SoftTimeLimitExceeded

    if state.current is not None and not state.terminating:
        raise SoftTimeLimitExceeded(f"soft_time_limit of {state.current.kind} exceeded")


def _read(
    conn: Any, state: _State, jobs: queue.SimpleQueue[tuple[Any, float | None] | None]
) -> None:
    """Take the worker's messages; its end closing means it is gone: exit now."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(1)
        if message[0] == "run":
            jobs.put((message[1], message[2]))
        elif message[0] == "cancel":
            ctx = state.current
            if ctx is not None and state.key == (message[1], message[2]):
                ctx.cancelled.set()
        elif message[0] == "stop":
            jobs.put(None)


def _report(conn: Any, state: _State) -> None:
    """Send what the run going on reported with ``ctx.progress``, when it changed."""
    sent: Any = None
    stop = threading.Event()
    while not stop.wait(PROGRESS_EVERY):
        ctx, key = state.current, state.key
        if ctx is None or key is None:
            continue
        value = ctx.reported
        if value is None or value is sent:
            continue
        sent = value
        try:
            with state.send_lock:
                conn.send(("progress", key[0], key[1], value))
        except OSError:
            return
