-- django_jobqueue_key_claims, version 1: a kind's claimed jobs counted per key, under
-- the kind's advisory lock. Called by no worker of this version: kept for workers built
-- before migration 0018_key_slots, which replaced it with django_jobqueue_key_slots
-- (see the changelog for when it is dropped).
-- Run by migration 0015_keys.
CREATE OR REPLACE FUNCTION django_jobqueue_key_claims(
    claim_kind text, lock_space integer, lock_keys integer[]
) RETURNS TABLE (job_key varchar, n bigint) LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    lock_key integer;
BEGIN
    FOREACH lock_key IN ARRAY lock_keys LOOP
        PERFORM pg_advisory_xact_lock(lock_space, lock_key);
    END LOOP;
    RETURN QUERY SELECT j.job_key, count(*) FROM django_jobqueue_job AS j
        WHERE j.status = 'claimed' AND j.kind = claim_kind AND j.job_key IS NOT NULL
        GROUP BY j.job_key;
END
$$;
