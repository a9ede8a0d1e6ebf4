"""The Context a running job sees: who it is, its history, its carry, and a cancel flag."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django_jobqueue.errors import SettleError


class Context:
    """Handed to a task's run; everything on it is about this one run of one job."""

    def __init__(
        self,
        *,
        job_id: uuid.UUID,
        kind: str,
        run_count: int,
        failure_count: int,
        carry: dict[str, Any] | None = None,
        history_loader: Callable[[], Sequence[Any]] | None = None,
        cancelled: threading.Event | None = None,
        parents_loader: Callable[[], Mapping[str, Any]] | None = None,
        batch_loader: Callable[[], Any] | None = None,
    ) -> None:
        self.job_id = job_id
        self.kind = kind
        self.run_count = run_count
        self.failure_count = failure_count
        # A stored carry that could not be decoded (not a dict) starts the run empty.
        self.carry: dict[str, Any] = dict(carry) if isinstance(carry, dict) else {}
        self.cancelled = cancelled or threading.Event()
        self._history_loader = history_loader
        self._history: Sequence[Any] | None = None
        # A workflow step's parents' results and its batch, read on first use (the
        # loaders are the store's, handed in: this module knows no database).
        self._parents_loader = parents_loader
        self._parents: Mapping[str, Any] | None = None
        self._batch_loader = batch_loader
        self._batch: Any = None
        self.attachment: Any = None
        # The job as the claim handed it over (``store.Claimed``; set by ``for_job``), for
        # task wrappers that need more of it than the fields above (the Django Tasks
        # backend reads its enqueue time and claimant instead of the row).
        self._claimed: Any = None
        # Set by the worker for each run it starts (see ``atomic.InTransaction``).
        self._settle_now: Callable[[Any], None] | None = None

    @classmethod
    def for_job(
        cls,
        job: Any,
        *,
        history_loader: Callable[[], Sequence[Any]] | None = None,
        parents_loader: Callable[[], Mapping[str, Any]] | None = None,
        batch_loader: Callable[[], Any] | None = None,
    ) -> Context:
        """The context for a claimed job's run (``job`` as ``store.claim_jobs`` returns it)."""
        ctx = cls(
            job_id=job.id,
            kind=job.kind,
            run_count=job.run_count,
            failure_count=job.failure_count,
            carry=job.carry,
            history_loader=history_loader,
            parents_loader=parents_loader,
            batch_loader=batch_loader,
        )
        ctx._claimed = job
        return ctx

    @property
    def claimed(self) -> Any:
        """The claimed job this run belongs to, as the worker holds it (None outside one)."""
        return self._claimed

    @property
    def history(self) -> Sequence[Any]:
        """The job's earlier journal entries, oldest first (loaded on first use)."""
        if self._history is None:
            self._history = list(self._history_loader()) if self._history_loader else []
        return self._history

    @property
    def parents(self) -> Mapping[str, Any]:
        """A workflow step's parents' results by step name (one query, on first use;
        empty for a plain job or a step without parents)."""
        if self._parents is None:
            self._parents = dict(self._parents_loader()) if self._parents_loader else {}
        return self._parents

    @property
    def batch(self) -> Any:
        """In a step of a batch, its ``BatchContext`` (``add`` a member, read
        ``members()``); None elsewhere."""
        if self._batch is None and self._batch_loader is not None:
            self._batch = self._batch_loader()
            self._batch_loader = None
        return self._batch

    def settle_now(self, result: Any = None) -> None:
        """Complete this run inside the transaction open on the jobs database, now.

        The job's completion (status, ``result``, journal entry) is written in the current
        ``transaction.atomic()`` block and commits with the task's own writes there, or
        not at all: a long task does its slow work first, then opens a short transaction
        for its writes and ends it with this. If the claim was lost meanwhile, raises
        ``ClaimLost``, which rolls the transaction back; let it propagate. Once the
        transaction commits, what the run returns is not stored.
        """
        if self._settle_now is None:
            raise SettleError(
                f"{self.kind}: settle_now() settles a run a worker started; this context "
                "belongs to none"
            )
        self._settle_now(result)

    def attach(self, value: Any) -> None:
        """Record JSON evidence on this run's journal entry; the last call wins."""
        self.attachment = value

    def __repr__(self) -> str:
        return f"<Context {self.kind} {self.job_id} run {self.run_count}>"
