-- django_jobqueue_free_slots, version 1: how many more jobs of a kind with a
-- max_in_flight a claim may take. It takes the claim's limited kinds' advisory locks in
-- key order (held to the commit), then counts the kind's claimed jobs on a snapshot
-- taken after the locks (VOLATILE). Called by the claim (dialects/postgresql/claiming.py).
-- Run by migration 0007_limits.
CREATE OR REPLACE FUNCTION django_jobqueue_free_slots(
    claim_kind text, most integer, lock_space integer, lock_keys integer[]
) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    lock_key integer;
BEGIN
    -- The locks of every limited kind of this claim, in key order (sorted by the
    -- caller), so that two claims never wait for each other in a circle. The first
    -- call takes them all; later calls of the same claim find them held.
    FOREACH lock_key IN ARRAY lock_keys LOOP
        PERFORM pg_advisory_xact_lock(lock_space, lock_key);
    END LOOP;
    RETURN GREATEST(
        most - (SELECT count(*) FROM django_jobqueue_job
                WHERE status = 'claimed' AND kind = claim_kind),
        0
    );
END
$$;
