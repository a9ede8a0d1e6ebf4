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

CREATE = """
CREATE FUNCTION django_jobqueue_key_slots(
    claim_kind text, most integer, after varchar, wanted integer, max_keys integer,
    max_steps integer, kind_space integer, kind_lock integer, key_space integer,
    worker text, settling uuid[], runs integer[]
) RETURNS TABLE (job_key varchar, part integer, n bigint, ids uuid[])
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    seen jsonb;
    held varchar[] := '{}';
    parts integer[] := '{}';
    room integer := 0;
    steps integer := 0;
    wrapped integer := 0;
    at_key varchar := after;
    nxt varchar;
    free integer;
BEGIN
    IF kind_lock IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared(kind_space, kind_lock);
    END IF;
    -- What each key holds now, to pass over the keys at their limit without a lock.
    SELECT coalesce(jsonb_object_agg(c.job_key, c.n), '{}') INTO seen FROM (
        SELECT j.job_key, count(*) AS n FROM django_jobqueue_job AS j
        WHERE j.status = 'claimed' AND j.kind = claim_kind AND j.job_key IS NOT NULL
        AND NOT (j.claimed_by = worker AND (j.id, j.run_count) IN (
            SELECT * FROM unnest(settling, runs)))
        GROUP BY j.job_key) AS c;
    WHILE room < wanted AND steps < max_steps AND cardinality(held) < max_keys LOOP
        IF at_key IS NULL THEN
            SELECT j.job_key INTO nxt FROM django_jobqueue_job AS j
            WHERE j.status = 'pending' AND j.kind = claim_kind AND j.job_key IS NOT NULL
            ORDER BY j.kind, j.job_key, j.priority, j.visible_at, j.id LIMIT 1;
        ELSE
            SELECT j.job_key INTO nxt FROM django_jobqueue_job AS j
            WHERE j.status = 'pending' AND j.kind = claim_kind AND j.job_key IS NOT NULL
            AND j.job_key > at_key
            ORDER BY j.kind, j.job_key, j.priority, j.visible_at, j.id LIMIT 1;
        END IF;
        IF nxt IS NULL OR (wrapped = 1 AND nxt > after) THEN
            EXIT WHEN wrapped = 1 OR after IS NULL;
            wrapped := 1;  -- round from the first key to the one the walk began after
            at_key := NULL;
            CONTINUE;
        END IF;
        steps := steps + 1;
        at_key := nxt;
        free := most - coalesce((seen ->> nxt)::integer, 0);
        IF free > 0 AND pg_try_advisory_xact_lock(
                key_space, hashtext(claim_kind || ' ' || nxt)) THEN
            held := held || nxt;
            parts := parts || wrapped;
            room := room + free;
        END IF;
    END LOOP;
    RETURN QUERY SELECT k.job_key, k.part, count(j.id), coalesce(array_agg(j.id) FILTER (
            WHERE j.id IS NOT NULL), '{}')
        FROM unnest(held, parts) AS k(job_key, part) LEFT JOIN django_jobqueue_job AS j
        ON j.job_key = k.job_key AND j.status = 'claimed' AND j.kind = claim_kind
        AND NOT (j.claimed_by = worker AND (j.id, j.run_count) IN (
            SELECT * FROM unnest(settling, runs)))
        GROUP BY k.job_key, k.part;
END
$$;
"""

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
