"""PostgreSQL's functions from their source files (issue 31).

Each function the migrations before made (0002's trigger function and its trigger,
0007's, 0015's, 0018's and 0019's functions) now lives in
``store/dialects/postgresql/sql/<function>.v<N>.sql``, and this migration runs version
1 of each: the definitions those migrations made, so on a database they made it
changes nothing. Each is named with its file's digest: the files this migration ran are
never edited. From here a new version of a function is its next file and a
migration of one line (``store/dialects/postgresql/functions.py`` says how). Other
databases: nothing. Reversed: nothing (the definitions stay those of the migrations
before).
"""

from django.db import migrations

from django_jobqueue.store.dialects.postgresql import functions


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobqueue", "0022_step_records"),
    ]

    operations = [
        functions.install(
            "django_jobqueue_notify.v1@7dd4d110c3ba38b3",
            "django_jobqueue_free_slots.v1@7c8c2e65c57177fa",
            "django_jobqueue_key_claims.v1@889ca3bc3606e54f",
            "django_jobqueue_key_slots.v1@294da33cc400dcc7",
            "django_jobqueue_count_down.v1@ec2d632881a757b1",
        ),
    ]
