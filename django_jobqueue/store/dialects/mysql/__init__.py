"""MySQL 8 and MariaDB 10.6+: row locks with SKIP LOCKED, but no UPDATE … RETURNING and
no data-modifying CTEs, so claims and settlements take a few statements in one
transaction there."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, ClassVar

from django.utils import timezone

from django_jobqueue.store.dialects.base import Dialect
from django_jobqueue.store.dialects.mysql.claiming import MySQLClaiming
from django_jobqueue.store.dialects.mysql.health import MySQLHealth
from django_jobqueue.store.dialects.mysql.storage import MySQLStorage


class MySQL(MySQLClaiming, MySQLStorage, MySQLHealth, Dialect):
    vendor: ClassVar[str] = "mysql"

    def job_id(self, value: uuid.UUID) -> Any:
        if self.conn.features.has_native_uuid_field:
            return str(value)  # MariaDB 10.7+: Django's column is the native UUID type
        return value.hex  # char(32) on MySQL

    def read_dt(self, value: Any) -> datetime | None:
        conn = self.conn
        if isinstance(value, datetime) and value.tzinfo is None and conn.timezone is not None:
            # MySQL's DATETIME is naive, stored in the connection's time zone.
            return timezone.make_aware(value, conn.timezone)
        return super().read_dt(value)
