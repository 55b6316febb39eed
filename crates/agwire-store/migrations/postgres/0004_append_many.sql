-- Group commit: the appends of many runs (each a JSON array of event texts)
-- in one statement and one commit; answers each one's first number, in
-- order (NULL for a run that is not running, as agwire_append).
CREATE FUNCTION agwire_append_many(p_tasks TEXT[], p_events JSONB)
RETURNS TABLE (n INT, first BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    i INT;
BEGIN
    -- (The loop has a variable of its own: a FOR loop's variable would hide
    -- the output column n.)
    FOR i IN 1 .. COALESCE(cardinality(p_tasks), 0) LOOP
        n := i;
        first := agwire_append(
            p_tasks[i],
            ARRAY(SELECT jsonb_array_elements_text(p_events -> (i - 1)))
        );
        RETURN NEXT;
    END LOOP;
END $$;
