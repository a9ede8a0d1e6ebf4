"""Retention: finished jobs and journal entries past their retention, pruned, the
events ``emit`` sent past EVENT_RETENTION, the run history's minutes and deploy markers
past HISTORY_DAYS, and the merge locks no enqueue holds. Where the journal is
partitioned (PostgreSQL), its entries go by whole partitions past ``journal`` instead of
with their jobs, row by row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

from django.db import DatabaseError
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.errors import PartitionError
from django_jobqueue.worker.services.base import DbCall, Service, logger

if TYPE_CHECKING:
    from django_jobqueue.store.dialects.base.partitions import JournalLayout


class Retention(Service):
    """Delete finished jobs older than each status's ``RETENTION``, events older than
    ``events`` and the run history older than ``history`` (None: none), and the
    merge-lock rows no enqueue holds (always: a row per key ever merged would otherwise
    stay forever). A partitioned journal's partitions older than ``journal`` are dropped
    (None: none are)."""

    name = "retention"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        keep: Mapping[str, timedelta],
        events: timedelta | None = None,
        history: timedelta | None = None,
        journal: timedelta | None = None,
    ) -> None:
        self.db = db
        self.interval = interval
        self.keep = keep
        self.events = events
        self.history = history
        self.journal = journal

    def run(self) -> None:
        # Nothing to keep or drop by: no catalog read.
        layout = self.db(partial(store.journal_layout)) if self.keep or self.journal else None
        for status, keep in self.keep.items():
            self.db(
                partial(
                    store.cleanup,
                    finished_before=timezone.now() - keep,
                    status=status,
                    journal=layout is None,
                )
            )
        if layout is not None and self.journal is not None:
            self._drop(layout, self.journal)
        if self.events is not None:
            self.db(partial(store.prune_events, emitted_before=timezone.now() - self.events))
        if self.history is not None:
            self.db(partial(store.prune_history, before=timezone.now() - self.history))
        self.db(partial(store.prune_merge_locks))

    def _drop(self, layout: JournalLayout, keep: timedelta) -> None:
        try:
            dropped = self.db(
                partial(store.drop_older, before=timezone.now() - keep, layout=layout)
            )
        except (DatabaseError, PartitionError) as exc:  # never the worker's end
            logger.warning("journal partitions' retention failed, tried again later: %s", exc)
            return
        if dropped:
            logger.info("journal partitions dropped: %s", ", ".join(dropped))
