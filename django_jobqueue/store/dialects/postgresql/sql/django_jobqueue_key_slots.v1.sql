-- django_jobqueue_key_slots, version 1: a limit per key counted under a lock per key,
-- only tried. It walks the kind's keys with pending jobs from the one after `after`,
-- passes over the keys at their limit, takes the others' locks until the keys it holds
-- have room for `wanted` jobs, and returns each key held with its claimed jobs (counted
-- after the locks, VOLATILE, less the rows the calling turn settles for good). Called by
-- the claim (dialects/postgresql/keyed.py); migration 0018_key_slots says why.
-- Run by migration 0018_key_slots.
CREATE OR REPLACE FUNCTION django_jobqueue_key_slots(
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
