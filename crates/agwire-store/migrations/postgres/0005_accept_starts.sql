-- A run its own replica can execute at once is started by the accept
-- itself (`p_owner`, `p_lease_ms`: the claim's owner and lease), so most
-- runs cost one write to begin and never pass through the queue's search;
-- the runs that do wait for a claim have an index of their own; and an end
-- wakes the replicas' dispatchers only when a run of its thread waits.

DROP FUNCTION agwire_accept(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN, BOOLEAN,
                            TEXT[], TEXT[], TEXT[], TEXT, BIGINT);

-- RunStore::accept_run. Outcome: accepted | started | replayed | conflict |
-- not_found | busy; nothing is written unless accepted or started.
CREATE FUNCTION agwire_accept(
    p_task TEXT, p_user TEXT, p_thread TEXT, p_run TEXT, p_hash TEXT, p_input TEXT,
    p_mode TEXT, p_client_time TEXT, p_enqueue BOOLEAN, p_dedupe BOOLEAN,
    p_ids TEXT[], p_roles TEXT[], p_bodies TEXT[], p_pending TEXT, p_now BIGINT,
    p_owner TEXT, p_lease_ms BIGINT
) RETURNS TABLE (outcome TEXT, task_id TEXT, created BOOLEAN, waiting BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
    v_existing RECORD;
    v_created BOOLEAN;
    v_owner TEXT;
    v_busy BIGINT;
    v_last BIGINT;
    v_start BOOLEAN;
BEGIN
    SELECT r.task_id, r.thread_id, r.request_hash, r.created_thread INTO v_existing
    FROM runs r WHERE r.user_id = p_user AND r.run_id = p_run;
    IF FOUND THEN
        IF v_existing.thread_id <> p_thread OR v_existing.request_hash <> p_hash THEN
            RETURN QUERY SELECT 'conflict'::TEXT, NULL::TEXT, FALSE, FALSE;
        ELSE
            RETURN QUERY SELECT 'replayed'::TEXT, v_existing.task_id, v_existing.created_thread, FALSE;
        END IF;
        RETURN;
    END IF;
    INSERT INTO threads (id, user_id, created_at, last_active_at)
    VALUES (p_thread, p_user, p_now, p_now) ON CONFLICT (id) DO NOTHING;
    v_created := FOUND;
    -- The thread's lock: accepts on one thread, and every addition of
    -- messages to it, take their turns here.
    SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread FOR UPDATE;
    IF v_owner <> p_user THEN
        RETURN QUERY SELECT 'not_found'::TEXT, NULL::TEXT, FALSE, FALSE;
        RETURN;
    END IF;
    SELECT COUNT(*) INTO v_busy FROM runs r
    WHERE r.thread_id = p_thread AND r.status IN ('queued', 'running');
    IF v_busy > 0 AND NOT p_enqueue THEN
        RETURN QUERY SELECT 'busy'::TEXT, NULL::TEXT, FALSE, FALSE;
        RETURN;
    END IF;
    IF v_busy = 0 THEN
        SELECT COALESCE(MAX(m.seq), 0) INTO v_last FROM messages m WHERE m.thread_id = p_thread;
        INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at)
        SELECT p_thread, v_last + ROW_NUMBER() OVER (ORDER BY t.n), t.id, p_run, t.role, t.body, p_now
        FROM UNNEST(p_ids, p_roles, p_bodies) WITH ORDINALITY AS t(id, role, body, n)
        WHERE NOT p_dedupe
           OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = p_thread AND m.id = t.id);
    END IF;
    v_start := p_owner IS NOT NULL AND v_busy = 0;
    INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status,
                      input, created_at, pending_messages, runtime_mode, client_time,
                      started_at, owner, lease_until_ms)
    VALUES (p_task, p_user, p_thread, p_run, p_hash, v_created,
            CASE WHEN v_start THEN 'running' ELSE 'queued' END, p_input, p_now,
            CASE WHEN v_busy > 0 THEN p_pending END, p_mode, p_client_time,
            CASE WHEN v_start THEN p_now END,
            CASE WHEN v_start THEN p_owner END,
            CASE WHEN v_start THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + p_lease_ms END);
    IF NOT v_created THEN
        UPDATE threads SET last_active_at = p_now WHERE id = p_thread;
    END IF;
    IF v_start THEN
        -- Started by its own replica: no other replica needs to hear of it.
        RETURN QUERY SELECT 'started'::TEXT, p_task, v_created, FALSE;
        RETURN;
    END IF;
    PERFORM pg_notify('agwire', 'r');
    RETURN QUERY SELECT 'accepted'::TEXT, p_task, v_created, v_busy > 0;
END $$;

CREATE OR REPLACE FUNCTION agwire_end(
    p_task TEXT, p_status TEXT, p_error TEXT, p_usage TEXT, p_terminal TEXT,
    p_ids TEXT[], p_roles TEXT[], p_bodies TEXT[], p_ui_answer TEXT, p_ui_schema TEXT,
    p_now BIGINT
) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    v_thread TEXT;
    v_run TEXT;
    v_last BIGINT;
    v_first BIGINT;
    v_seq BIGINT;
BEGIN
    UPDATE runs SET status = p_status, error = p_error, usage = p_usage, finished_at = p_now,
                    owner = NULL, lease_until_ms = NULL
    WHERE task_id = p_task AND status IN ('queued', 'running')
    RETURNING thread_id, run_id INTO v_thread, v_run;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT COALESCE(MAX(e.seq), 0) INTO v_last FROM run_events e WHERE e.task_id = p_task;
    v_first := v_last + 1;
    -- A run that ends before its first event was written still gets a valid
    -- log: RUN_STARTED first, then its one terminal event.
    IF v_last = 0 THEN
        INSERT INTO run_events (task_id, seq, event)
        VALUES (p_task, 1, jsonb_build_object('type', 'RUN_STARTED', 'threadId', v_thread, 'runId', v_run)::TEXT);
        v_last := 1;
    END IF;
    PERFORM 1 FROM threads t WHERE t.id = v_thread FOR UPDATE;
    SELECT COALESCE(MAX(m.seq), 0) INTO v_seq FROM messages m WHERE m.thread_id = v_thread;
    INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at)
    SELECT v_thread, v_seq + t.n, t.id, v_run, t.role, t.body, p_now
    FROM UNNEST(p_ids, p_roles, p_bodies) WITH ORDINALITY AS t(id, role, body, n);
    IF p_ui_answer IS NOT NULL THEN
        UPDATE messages SET ui_schema = p_ui_schema
        WHERE thread_id = v_thread AND run_id = v_run AND id = p_ui_answer;
    END IF;
    INSERT INTO run_events (task_id, seq, event) VALUES (p_task, v_last + 1, p_terminal);
    PERFORM pg_notify('agwire', format('a %s %s %s', v_first, v_last + 1, p_task));
    -- The thread's next run, if one waits, is runnable now.
    IF EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = v_thread AND r.status = 'queued') THEN
        PERFORM pg_notify('agwire', 'r');
    END IF;
    RETURN v_last + 1;
END $$;

CREATE INDEX runs_queued ON runs (position) WHERE status = 'queued';
