"""Django signals for a job's life: ``job_enqueued``, ``job_started`` and ``job_finished``.

Each is sent only when a receiver is connected (an empty receiver list costs the hot
paths one attribute read), and always with ``send_robust``: a receiver that raises is
logged and the next one still runs; it never breaks an enqueue, a run or a worker.

- ``job_enqueued`` is sent once the enqueue's transaction commits (at once in
  autocommit), so a receiver never hears of a job that was rolled back. Keyword
  arguments: ``job`` (the ``JobHandle`` the enqueue returned), ``kind``, ``queue`` and
  ``disposition`` (``inserted``, ``merged`` or ``reused``).
- ``job_started`` is sent on the thread that runs the job, just before it runs:
  ``job`` (a ``JobHandle``, status ``claimed``), ``kind``, ``queue``, ``run_no`` (1 on
  the first run) and ``worker`` (the worker's ``host:pid``).
- ``job_finished`` is sent by the worker's loop thread once a run's settlement is
  written (for a run that settled itself in its own transaction, an atomic task's,
  once that committed): ``job`` (a ``JobHandle`` whose ``status`` is the job's new status and whose
  ``result`` is the run's result), ``kind``, ``run_no``, ``outcome`` (the journal
  outcome: ``completed``, ``paused``, ``retried``, ``dead``, ``released`` or
  ``cancelled``), ``duration`` (a ``timedelta``; None for a run released at shutdown),
  ``note`` (the journal note, such as the error text) and ``worker``.

``sender`` is the task: the ``@task`` function, or the ``Task`` subclass (for a job
of the Django Tasks backend, its registry entry).

The Signal objects live here, at the bottom of the package, so that connecting a
receiver imports nothing else; ``task.signalling`` sends them (and shows enqueues to the
test kit's ``captured_jobs()``), for the enqueue paths and for ``run.announce``.
"""

from __future__ import annotations

from django.dispatch import Signal

job_enqueued = Signal()
job_started = Signal()
job_finished = Signal()
