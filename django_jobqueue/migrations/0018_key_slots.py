"""On PostgreSQL, a limit per key counted under a lock per key (issue 23).

``django_jobqueue_key_slots`` replaces 0015's ``django_jobqueue_key_claims`` (kept for
workers of the version before) in a claim of a kind with a limit per key. That one took
the kind's advisory lock and held it to the claim's commit, so two workers' claims of
the kind ran one after the other. This one takes a lock per key, and only tries it
(``pg_try_advisory_xact_lock``): a key another claim holds now is left to it, as ``SKIP
LOCKED`` leaves a row.

It walks the kind's keys with pending jobs (a probe of ``jobqueue_job_key_claim`` a key)
from the one after ``after`` round to it, passing over the keys at their limit (``most``)
by a count of its own, and tries each other key's lock until the keys it holds have room
for ``wanted`` jobs, hold ``max_keys`` keys, or it has passed ``max_steps``. It then counts
the claimed jobs of each key it holds on a snapshot newer than the locks (VOLATILE) and
returns them with their ids and ``part`` (1 for a key the walk came round to): the claim
probes those keys only, for no more than each has left, past the ids (rows its own older
snapshot still sees pending). Two claims never both take a key's last place: the second
takes the key's lock only once the first committed, and counts after that.

Both counts leave out the rows the statement settles for good (``settling``/``runs``:
their ids and run numbers, claimed by ``worker``): a worker's turn settles its ended runs
and claims in one statement, which commits both, so its finished jobs no longer hold their
keys' places for a turn. (A settlement back to pending is counted: an ordered key's next
job waits for its first's retry.)

``kind_lock``, when given, is the kind's own lock (0007's and 0015's), taken shared: a
worker of the version before, which takes it alone to count, and one of this version
never claim a key's last place both. None for a kind whose ``max_in_flight`` the same
claim locks alone anyway.
"""

from django.db import migrations

from django_jobqueue.store.dialects.postgresql import functions

# The function's source file (store/dialects/postgresql/sql/), pinned by its digest.
CREATE = functions.pinned("django_jobqueue_key_slots.v1@c5759077274509ee").text()

DROP = (
    "DROP FUNCTION IF EXISTS django_jobqueue_key_slots(text, integer, varchar, integer,"
    " integer, integer, integer, integer, integer, text, uuid[], integer[]);"
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("django_jobqueue", "0017_journal_unchecked"),
    ]

    operations = [
        migrations.RunPython(create, drop, elidable=False),
    ]
