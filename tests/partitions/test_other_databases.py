"""SQLite and MariaDB keep the journal as one table: nothing is partitioned there, and
asking to partition it is refused, naming the database, with nothing changed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from django_jobqueue import store
from django_jobqueue.errors import PartitionError
from tests.helpers import is_postgres

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]


@pytest.mark.skipif(is_postgres(), reason="PostgreSQL partitions the journal")
def test_the_journal_is_one_table_and_partitioning_it_is_refused() -> None:
    assert store.journal_layout() is None
    name = connection.display_name
    with pytest.raises(PartitionError, match=f"on PostgreSQL only, not on {name}"):
        store.partition_journal(period="day", ahead=1)
    with pytest.raises(PartitionError, match="not partitioned"):
        store.make_ahead(ahead=1)
    with pytest.raises(PartitionError, match="not partitioned"):
        store.analyze_journal(every=timedelta(0))
    with pytest.raises(CommandError, match="PostgreSQL only"):
        call_command("jobqueue", "partitions", "--convert")
    assert store.journal_layout() is None
