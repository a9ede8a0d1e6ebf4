"""The function a worker's turn on PostgreSQL counts its joins with
(``store/dialects/postgresql/joining.py``): the children of the steps it completed,
then their workflows (``django_jobqueue_count_down``).

Every member of a chord writes the same two rows, its callback and its workflow, so
two workers' turns take turns on them. A turn calls the function last, once its own
settlements, journal entries and claims are written. The function locks the rows,
children then workflows, each in id order (waiting for a turn that holds one, until
that turn commits), and then counts on a snapshot taken once it holds them (VOLATILE:
each of its statements takes its own, as ``django_jobqueue_key_claims`` of 0015 does
after its locks). So it reads each counter as committed, another turn's count, an
operator's re-arm or cancel included, and the calling statement never writes a row
changed after it began, which PostgreSQL would re-check by starting that statement's
whole plan again.

The counts are those of ``rules.joins`` for completed parents: a child whose last open
parent this turn completed is released (``claimed`` by the calling worker when the
caller says it has room for it, ``take``, with its lease's expiry; else ``pending``), a
batch's ``on_failure`` callback (``join_when = 'failed'``) that no dead parent needs is
cancelled, and a workflow whose last open step this turn closed (a completed step, or a
child cancelled here) takes its final status. Cancelled children are locked too (a
re-arm counts its parents under that lock); only waiting ones are written.
"""

from django.db import migrations

from django_jobqueue.store.dialects.postgresql import functions

# The function's source file (store/dialects/postgresql/sql/), pinned by its digest.
CREATE = functions.pinned("django_jobqueue_count_down.v1@21a7c3098cc3b1df").text()

DROP = """
DROP FUNCTION IF EXISTS django_jobqueue_count_down(
    uuid[], integer[], boolean[], timestamptz[], uuid[], integer[], timestamptz, text
);
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("django_jobqueue", "0018_key_slots"),
    ]

    operations = [
        migrations.RunPython(create, drop, elidable=False),
    ]
