"""What every model module shares: the JSON field that reads an undecodable value
safely, and the filter of Django's partial-index warnings for this app's models."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage
from django.db import connections, models
from django.db.models.fields.json import KeyTransform

from django_jobqueue.validation import decode

# Django's warnings that a database cannot build an index condition (W037) or a
# conditional unique constraint (W036). Where the database has no partial indexes
# (MySQL/MariaDB) this app builds their equivalents itself (migration 0008), and its own
# check django_jobqueue.W010 says what differs there; the two are dropped for its models
# only, never for a project's. Asked of Django's features, as Django itself decides to
# warn (the models sit below the store's dialects, which they cannot ask).
_REPLACED = {"models.W036", "models.W037"}


def without_replaced(messages: list[CheckMessage], databases: Any) -> list[CheckMessage]:
    names = {
        connections[alias].display_name
        for alias in databases or ()
        if not connections[alias].features.supports_partial_indexes
    }
    return [
        m for m in messages if not (m.id in _REPLACED and any(m.msg.startswith(n) for n in names))
    ]


class StoredJSONField(models.JSONField):
    """A JSONField whose stored value, if it cannot be decoded (not JSON, or nested too
    deeply: written around the queue), reads as a ``validation.Undecodable`` instead
    of raising, so no page or worker fails on one row. Migrations see a plain
    JSONField: the column is the same."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if isinstance(value, str | bytes) and not isinstance(expression, KeyTransform):
            return decode(value)
        return super().from_db_value(value, expression, connection)

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
