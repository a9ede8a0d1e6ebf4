"""Keys per job (issue 23): the ``key`` field (column ``job_key``, KEY
being reserved in MySQL), its partial indexes, the run-time
per-key limits (``KindLimit.per_key``), and on PostgreSQL the function a claim calls to
count a kind's claimed jobs per key.

``django_jobqueue_key_claims`` takes the advisory locks of the claim's limited kinds, in
key order (as ``django_jobqueue_free_slots`` of 0007 does, and with the same locks), and
then counts the kind's claimed jobs by key. It is VOLATILE, so its count runs on a
snapshot taken after the locks were granted: it sees every claim of the kind committed
before, which a count on the claim statement's own snapshot could miss.

On MySQL/MariaDB the key is in the binary collation of the other names (0008) and the
two claim indexes lead with the kind, the key and the status (no index conditions).
"""

from django.db import migrations, models

from django_jobqueue.store.dialects.postgresql import functions

# The function's source file (store/dialects/postgresql/sql/), pinned by its digest.
CREATE = functions.pinned("django_jobqueue_key_claims.v1@baa3b148998529a8").text()

DROP = "DROP FUNCTION IF EXISTS django_jobqueue_key_claims(text, integer, integer[]);"

# name: the columns built instead of Django's whole-table ones on MySQL/MariaDB.
MYSQL_INDEXES = {
    "jobqueue_job_key_claim": "kind, job_key, status, priority, visible_at, id",
    "jobqueue_job_key_fifo": "kind, job_key, status, id",
}
BINARY = {True: "utf8mb4_nopad_bin", False: "utf8mb4_0900_bin"}  # as in 0008


def create(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "postgresql":
        schema_editor.execute(CREATE)
    elif connection.vendor == "mysql":
        binary = BINARY[connection.mysql_is_mariadb]
        schema_editor.execute(
            "ALTER TABLE django_jobqueue_job MODIFY job_key varchar(255)"
            f" CHARACTER SET utf8mb4 COLLATE {binary} NULL"
        )
        changes = ", ".join(
            f"DROP INDEX {name}, ADD INDEX {name} ({columns})"
            for name, columns in MYSQL_INDEXES.items()
        )
        schema_editor.execute(f"ALTER TABLE django_jobqueue_job {changes}")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobqueue', '0014_steps'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='key',
            field=models.CharField(blank=True, db_column='job_key', max_length=255, null=True),
        ),
        migrations.AddField(
            model_name='kindlimit',
            name='per_key',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('status', 'pending')), fields=['kind', 'key', 'priority', 'visible_at', 'id'], name='jobqueue_job_key_claim'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('key__isnull', False), ('status', 'pending')), fields=['kind', 'key', 'id'], name='jobqueue_job_key_fifo'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('key__isnull', False)), fields=['key', 'created_at'], name='jobqueue_job_key'),
        ),
        # Not atomic: MySQL cannot roll DDL back (as 0008).
        migrations.RunPython(create, drop, atomic=False, elidable=False),
    ]
