"""The order of creation is the primary key's (issue 36): no ``(created_at, id)`` index.

A job's id is a UUIDv7 drawn when its row is made (``ids.py``), so the primary key
already sorts jobs by creation. The keyset index held the same order a second time,
and a status change is never a HOT update (the status is in the partial indexes'
conditions): every enqueue, claim and settlement wrote an entry to it, three of the
fourteen index entries a plain job wrote (eleven now). The admin's lists and ``history()``
now page along the primary key, and a range of ``created_at`` is read along it too,
between ids drawn from the range's ends (``store.reading.created_ids``). The kind index
follows: ``(kind, id)``, a kind's jobs in that order.

Dropping an index is quick (no scan); building the kind index reads the table once,
under a lock that holds writes to it back until it is built (seconds per million jobs):
on a big table, migrate in a quiet moment. Undone, both are built as before.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0028_drop_next_index")]

    operations = [
        migrations.RemoveIndex(model_name="job", name="jobqueue_job_keyset"),
        migrations.RemoveIndex(model_name="job", name="jobqueue_job_kind"),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(fields=["kind", "id"], name="jobqueue_job_kind"),
        ),
    ]
