"""Changelists that stay fast on millions of rows: a paginator that never counts the
whole table, filters whose choices come from indexes (not ``SELECT DISTINCT`` over the
table), date-time ranges with quick links, and a search that looks ids, kinds and keys
up by index only."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.paginator import Paginator
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from rangefilter.filters import DateTimeRangeQuickSelectListFilter

from django_jobqueue import store
from django_jobqueue.models import Job
from django_jobqueue.store import graphs
from django_jobqueue.task.registry import registry

if TYPE_CHECKING:  # generic in the stubs only
    BasePaginator = Paginator[Any]
else:
    BasePaginator = Paginator


class EstimatingPaginator(BasePaginator):
    """Counts at most ``store.COUNT_CAP`` rows; past that it takes PostgreSQL's estimate,
    and offers only the pages within the cap (deeper pages would read every row before
    them: narrow the filter instead)."""

    @cached_property
    def counted(self) -> store.Count:
        return store.count(cast(QuerySet[Any], self.object_list))

    @cached_property
    def count(self) -> int:
        return self.counted.value

    @property
    def estimated(self) -> bool:
        return self.counted.estimated

    @cached_property
    def num_pages(self) -> int:
        pages = super().num_pages
        if self.estimated:
            pages = min(pages, max(1, store.COUNT_CAP // self.per_page))
        return pages


class RecentRangeFilter(DateTimeRangeQuickSelectListFilter):  # type: ignore[misc]
    """rangefilter's date-time range, with quick links for the last hour, day and week,
    and a message (not a silent no-op) when a typed date or time does not parse."""

    def __init__(self, field: Any, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        super().__init__(field, request, *args, **kwargs)
        now = timezone.localtime(timezone.now())
        self.links = (
            ("Any time", {}),
            *tuple(
                (label, self._since(now - delta, now))
                for label, delta in (
                    ("Last hour", timedelta(hours=1)),
                    ("Last 24 hours", timedelta(days=1)),
                    ("Last 7 days", timedelta(days=7)),
                )
            ),
        )

    def _since(self, start: Any, end: Any) -> dict[str, str]:
        end = end + timedelta(minutes=1)  # a little ahead, so "now" keeps meaning now
        return {
            f"{self.lookup_kwarg_gte}_0": start.date().isoformat(),
            self.lookup_kwarg_gte_time: start.strftime("%H:%M:%S"),
            f"{self.lookup_kwarg_lte}_0": end.date().isoformat(),
            self.lookup_kwarg_lte_time: end.strftime("%H:%M:%S"),
        }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.form.is_bound and not self.form.is_valid():
            problems = "; ".join(str(e) for errs in self.form.errors.values() for e in errs)
            messages.error(
                request,
                f"The {self.title} range was ignored: {problems or 'it is not a date-time'}. "
                "Enter a date as YYYY-MM-DD and a time as HH:MM[:SS].",
            )
            return queryset
        return super().queryset(request, queryset)  # type: ignore[no-any-return]


class CreatedRangeFilter(RecentRangeFilter):
    """The jobs' creation range, read along the primary key: ``created_at`` has no index
    of its own, and the ids of a creation range lie between ids drawn from its ends
    (``store.created_ids``), so the range is an id range as well."""

    def _make_query_filter(self, request: HttpRequest, validated_data: Any) -> dict[str, Any]:
        lookups: dict[str, Any] = super()._make_query_filter(request, validated_data)
        after = lookups.get(f"{self.field_path}__gte")
        before = lookups.get(f"{self.field_path}__lte")
        # rangefilter's end is inclusive; created_ids takes the first moment past it
        end = None if before is None else before + timedelta(milliseconds=1)
        return {**lookups, **store.created_ids(after, end)}


class ValuesFilter(admin.SimpleListFilter):
    """A filter on one column whose choices are given by ``values()``; it applies any
    value given (an unknown one lists nothing), so the guard lets any through."""

    open_values = True

    def values(self) -> list[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(v, v) for v in self.values()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{str(self.parameter_name): value}) if value else queryset


def kind_filter(model: type[Model]) -> type[ValuesFilter]:
    """A kind filter for ``model`` whose choices are read by a loose scan of its kind index."""

    class KindFilter(ValuesFilter):
        title = "kind"
        parameter_name = "kind"

        def values(self) -> list[str]:
            return store.distinct_values(model, "kind")

    return KindFilter


class KeyFilter(ValuesFilter):
    """The jobs of one key (issue 23): the first ``SHOWN`` keys in order (a loose scan of
    the key index), and any other given in the address (``?key=tenant:42``)."""

    title = "key"
    parameter_name = "key"
    SHOWN = 50

    def values(self) -> list[str]:
        found = store.distinct_values(Job, str(Job._meta.get_field("key").column), limit=self.SHOWN)
        value = self.value()
        return found if not value or value in found else [*found, str(value)]


class WorkflowFilter(admin.SimpleListFilter):
    """A workflow's steps (the workflow page's summary nodes link here). It offers only
    the workflow it is given: there is no list of workflows to choose from here."""

    title = "workflow"
    parameter_name = "workflow"
    open_values = True  # any workflow id given is offered (or refused as no id)

    def workflow_id(self) -> uuid.UUID | None:
        value = self.value()
        if not value:
            return None
        try:
            return uuid.UUID(str(value))
        except ValueError:
            raise IncorrectLookupParameters(f"workflow={value!r} is not a workflow id") from None

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # Offered whenever given, so that it applies (Django applies only the filters
        # that offer something): an id of no workflow lists no steps.
        key = self.workflow_id()
        if key is None:
            return []
        found = graphs.get_workflow(workflow_id=key)
        return [(str(key), f"{found.name if found else 'no such workflow'} {str(key)[:13]}…")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        key = self.workflow_id()
        return queryset.filter(workflow_id=key) if key else queryset


class RunnableFilter(admin.SimpleListFilter):
    """Pending jobs runnable now, or scheduled for later (a delay, a backoff, a pause):
    the dashboard's "pending now" and "scheduled" cards link here."""

    title = "pending"
    parameter_name = "runnable"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("now", "runnable now"), ("later", "scheduled for later")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        now = timezone.now()
        if value == "now":
            return queryset.filter(status="pending", visible_at__lte=now)
        if value == "later":
            # Parked jobs (a durable sleep, a wait for an event) have cards of their own.
            return queryset.filter(status="pending", visible_at__gt=now, parked="")
        raise IncorrectLookupParameters(f"runnable={value!r}: now or later")


class QueueFilter(ValuesFilter):
    """Queues the registered tasks use, the paused ones and ``default`` (there is no index
    on the queue column to read them from)."""

    title = "queue"
    parameter_name = "queue"

    def values(self) -> list[str]:
        return self.known()

    @staticmethod
    def known() -> list[str]:
        names = {"default", *(d.queue for d in registry)}
        names.update(p.queue for p in store.paused_queues())
        return sorted(names)


_HEX = re.compile(r"[0-9a-f]{8,32}")
_SHORT = re.compile(r"(?P<head>[0-9a-f-]{8,36})(?:…|\.\.\.)(?P<tail>[0-9a-f]{1,12})")


def id_range(term: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The ids a prefix covers: 8 to 32 hex digits, dashes anywhere."""
    digits = term.strip().lower().replace("-", "")
    if not _HEX.fullmatch(digits):
        return None
    return (
        uuid.UUID(digits.ljust(32, "0")),
        uuid.UUID(digits.ljust(32, "f")),
    )


def by_id(queryset: QuerySet[Any], term: str) -> QuerySet[Any] | None:
    """Jobs whose id starts with ``term`` or, for a short id (``head…tail``), starts with
    its head and ends with its tail: a primary-key range either way. None if ``term``
    is neither."""
    short = _SHORT.fullmatch(term.strip().lower())
    ids = id_range(short["head"] if short else term)
    if ids is None:
        return None
    found = queryset.filter(id__gte=ids[0], id__lte=ids[1])
    return found.filter(id__endswith=short["tail"]) if short else found


def search_jobs(queryset: QuerySet[Any], term: str) -> QuerySet[Any]:
    """An id or its shown prefix (a primary-key range), a kind (its index) or a dedup or
    idempotency key (their partial indexes): equality only, never ``LIKE '%term%'``."""
    term = term.strip()
    if not term:
        return queryset
    found = by_id(queryset, term)
    if found is not None:
        return found
    if term in store.distinct_values(queryset.model, "kind"):
        return queryset.filter(kind=term)
    return queryset.filter(Q(dedup_key=term) | Q(idempotency_key=term))
