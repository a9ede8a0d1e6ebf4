"""What a changelist lets a request ask for: its own declared filters, nothing else.

Django's ``lookup_allowed`` admits any lookup on a local field, so a query string could
filter by a JSON field's contents (``?payload__password__startswith=a``: a redacted
secret read one character at a time, by any user who may view the list) or force a
full-table scan (``__regex``, ``__icontains``). Here a lookup must be rooted at a
declared filter, and whatever the declared filters did not consume is refused (a 400),
superusers included. A value the database cannot compare (a NUL) is the admin's own
"invalid parameter" page, and a selection of ids that are not UUIDs is a 400: never a
500 from deep in the query.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.admin import ChoicesFieldListFilter, SimpleListFilter
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import BadRequest
from django.http import HttpRequest

# The columns a changelist and a bulk confirmation never read: they can hold megabytes.
LARGE_JOB_FIELDS = ("payload", "carry", "result", "trace_context")


def declared_roots(list_filter: Any) -> set[str]:
    """The names the declared filters take parameters under: a simple filter's
    ``parameter_name``, a field filter's field path."""
    roots: set[str] = set()
    for item in list_filter:
        if isinstance(item, type) and issubclass(item, SimpleListFilter):
            roots.add(str(item.parameter_name))
        elif isinstance(item, list | tuple):
            roots.add(str(item[0]))
        else:
            roots.add(str(item))
    return roots


def lookup_allowed(list_filter: Any, lookup: str) -> bool:
    """Whether ``lookup`` is a declared filter's parameter or one of its own lookups
    (``status__exact``, ``created_at__range__gte_0``); which of those a filter really
    takes is checked once the filters have read the query (``DeclaredChangeList``)."""
    return any(
        lookup == root or lookup.startswith(f"{root}__") for root in declared_roots(list_filter)
    )


def refuse_nul(request: HttpRequest) -> None:
    """A NUL in a parameter (PostgreSQL cannot compare one) is an invalid parameter."""
    for key, values in request.GET.lists():
        if "\x00" in key or any("\x00" in v for v in values):
            raise IncorrectLookupParameters(f"The parameter {key!r} contains a NUL character.")


class DeclaredChangeList(ChangeList):
    """A changelist that applies the declared filters and refuses any other parameter
    (Django would apply it as a lookup of its own)."""

    def get_filters(self, request: HttpRequest) -> Any:
        refuse_nul(request)
        specs, has_filters, remaining, duplicates, active = super().get_filters(request)
        fields = field_roots(self.list_filter)
        bare = sorted(key for key in remaining if key in fields)
        if bare:  # an operator's slip, not a probe: said on the list itself
            hints = "; ".join(f"use {key}__exact={request.GET.get(key, '')}" for key in bare)
            refuse(request, f"Filtering by {', '.join(bare)} needs a lookup: {hints}.")
        if remaining:
            raise DisallowedModelAdminLookup(
                f"Filtering by {', '.join(sorted(remaining))} is not allowed: this list "
                f"filters only by {', '.join(sorted(declared_roots(self.list_filter)))}."
            )
        for spec in specs:
            problem = unknown_value(spec)
            if problem:
                refuse(request, problem)
        return specs, has_filters, remaining, duplicates, active


def refuse(request: HttpRequest, text: str) -> None:
    """Refuses the query with ``text`` shown as an error on the unfiltered list (the
    admin answers an invalid parameter with a redirect to it, ``?e=1``)."""
    messages.error(request, text)
    raise IncorrectLookupParameters(text)


def field_roots(list_filter: Any) -> set[str]:
    """The declared filters that are a model field's (they take ``field__exact``)."""
    return {
        str(item[0]) if isinstance(item, list | tuple) else str(item)
        for item in list_filter
        if not (isinstance(item, type) and issubclass(item, SimpleListFilter))
    }


def unknown_value(spec: Any) -> str | None:
    """A value a filter of fixed choices does not offer is refused, naming the ones it
    does: such a filter would otherwise show every row (a simple filter ignores a value
    it does not know) or none, as if the filter were right. Filters that apply any value
    given (a kind, a key, a queue: ``open_values``) are left to do so."""
    if isinstance(spec, SimpleListFilter):
        value = spec.value()
        allowed = [str(choice) for choice, _ in spec.lookup_choices]
        if value is None or getattr(spec, "open_values", False) or value in allowed:
            return None
        return (
            f"{spec.parameter_name}={value!r} is not a value of the {spec.title} filter: "
            f"use one of {', '.join(allowed)}."
        )
    if isinstance(spec, ChoicesFieldListFilter):
        allowed = [str(choice) for choice, _ in spec.field.flatchoices]
        given = spec.lookup_val if isinstance(spec.lookup_val, list) else [spec.lookup_val]
        for value in given:
            if value is not None and value not in allowed:
                return (
                    f"{spec.lookup_kwarg}={value!r} is not a {spec.field.name}: use one of "
                    f"{', '.join(allowed)}."
                )
    return None


def selected_ids(request: HttpRequest) -> list[uuid.UUID]:
    """The ids a bulk action was posted with, each a UUID, else a 400 naming the value."""
    ids = []
    for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            raise BadRequest(f"{ACTION_CHECKBOX_NAME}: {value!r} is not a job id.") from None
    return ids
