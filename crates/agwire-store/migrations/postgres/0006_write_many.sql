-- Group commit, set-based: one batch of a replica's run writes — the event
-- appends of many runs, then the ends of others — in one statement and one
-- commit. The appends are one INSERT for the whole batch (not a function
-- call each), and their notifications go out as one payload of lines
-- instead of one notification per run: every replica's listener is woken
-- once per batch rather than once per run. The rules are agwire_append's
-- and agwire_end's exactly.
--
-- p_tasks: the appends' runs (no run twice); p_events: a JSON array with,
-- for each, the JSON array of its event texts; p_ends: a JSON array of
-- agwire_end's arguments as objects. Answers, for each append in order
-- (n = 1..), its first event's number (NULL when the run is not running),
-- then for each end (n continuing) its terminal event's number (NULL when
-- the run had already ended).
CREATE FUNCTION agwire_write_many(p_tasks TEXT[], p_events JSONB, p_ends JSONB)
RETURNS TABLE (n INT, first BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    v_count INT := COALESCE(cardinality(p_tasks), 0);
    v_ns INT[];
    v_firsts BIGINT[];
    v_notes TEXT[];
    v_end JSONB;
    i INT;
BEGIN
    IF v_count > 0 THEN
        -- The runs' locks, in one order for every batch: two batches never
        -- wait for each other in a circle.
        PERFORM 1 FROM runs r WHERE r.task_id = ANY (p_tasks) ORDER BY r.task_id FOR UPDATE;
        WITH calls AS (
            SELECT c.n::INT AS n, c.task, p_events -> (c.n::INT - 1) AS events
            FROM UNNEST(p_tasks) WITH ORDINALITY AS c(task, n)
        ), live AS (
            SELECT calls.n, calls.task, calls.events,
                   (SELECT COALESCE(MAX(e.seq), 0) FROM run_events e WHERE e.task_id = calls.task) AS last
            FROM calls JOIN runs r ON r.task_id = calls.task AND r.status = 'running'
        ), written AS (
            INSERT INTO run_events (task_id, seq, event)
            SELECT live.task, live.last + x.i, x.event
            FROM live, jsonb_array_elements_text(live.events) WITH ORDINALITY AS x(event, i)
        )
        SELECT array_agg(live.n ORDER BY live.n),
               array_agg(live.last + 1 ORDER BY live.n),
               array_agg(format('a %s %s %s', live.last + 1,
                                live.last + jsonb_array_length(live.events), live.task) ORDER BY live.n)
        INTO v_ns, v_firsts, v_notes
        FROM live;
        -- A notification's payload stays well under PostgreSQL's 8000 bytes.
        IF cardinality(v_notes) > 0 THEN
            FOR i IN 0 .. (cardinality(v_notes) - 1) / 100 LOOP
                PERFORM pg_notify('agwire', array_to_string(v_notes[i * 100 + 1 : i * 100 + 100], E'\n'));
            END LOOP;
        END IF;
        RETURN QUERY
            SELECT c.n::INT, w.first
            FROM generate_series(1, v_count) AS c(n)
            LEFT JOIN UNNEST(v_ns, v_firsts) AS w(n, first) ON w.n = c.n
            ORDER BY c.n;
    END IF;
    FOR i IN 1 .. COALESCE(jsonb_array_length(p_ends), 0) LOOP
        v_end := p_ends -> (i - 1);
        n := v_count + i;
        first := agwire_end(
            v_end ->> 'task', v_end ->> 'status', v_end ->> 'error', v_end ->> 'usage',
            v_end ->> 'terminal',
            ARRAY(SELECT jsonb_array_elements_text(v_end -> 'ids')),
            ARRAY(SELECT jsonb_array_elements_text(v_end -> 'roles')),
            ARRAY(SELECT jsonb_array_elements_text(v_end -> 'bodies')),
            v_end ->> 'ui_answer', v_end ->> 'ui_schema', (v_end ->> 'now')::BIGINT
        );
        RETURN NEXT;
    END LOOP;
END $$;

-- Replaced by agwire_write_many.
DROP FUNCTION agwire_append_many(TEXT[], JSONB);
