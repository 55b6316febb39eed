-- The run's hot writes as functions, as they are now: each is one
-- statement, so one round trip and one commit, instead of a transaction of
-- eight to twelve statements. The rules are those of the store traits
-- (crate agwire-store, src/runs.rs and src/threads.rs); the contract suite
-- (agwire-service's tests/store_contract.rs) holds these functions to them
-- exactly as it holds the SQLite backend (src/sqlite/write.rs), one test
-- per rule on both backends.
--
-- This file is the one place these functions are written. Every process
-- applies it when it connects (after the migrations, which hold only the
-- tables and indexes, and under a lock: `CREATE OR REPLACE` twice at once
-- would collide), so the database always runs the binary's version. The
-- migrations 0003-0006 also created earlier versions; those are history,
-- replaced here. A change of a function's arguments or result needs a
-- migration that drops the old one first (`CREATE OR REPLACE` cannot change
-- them).

-- A run's log is one row per write (src/log.rs): `seq` the number of its
-- first event, `n_events` how many, `events` their texts joined by
-- newlines. A run's last event number is its last row's seq + n_events - 1
-- (0 when its log is empty).

-- RunStore::accept_run. Outcome: accepted | started | replayed | conflict |
-- not_found | busy | not_pending | answered | closed | expired; nothing is written
-- unless accepted or started. A run its own replica can execute at once is
-- started by the accept itself (`p_owner`, `p_lease_ms`: the claim's owner
-- and lease). `p_strategy`: what a busy thread does (reject | enqueue |
-- interrupt | rollback); `stopped` answers the active runs an interrupt or
-- rollback stopped, oldest first, as [task, run, first] — `first` the number
-- of the first event of a waiting run's log, written here (RUN_STARTED,
-- RUN_FINISHED cancelled), NULL for a running run, which is marked to stop.
-- `p_answers`: the tool call ids the turn's tool messages answer; with
-- `p_strict` each must be pending (else the outcome names the first that is
-- not, in `task_id`; a call closed by a run this rollback takes back counts
-- as pending); then the thread's pending calls are closed by this run, as
-- answered or gone past. `p_shown`: which of the messages history shows;
-- `p_title`: what the turn's first user message calls the thread (kept if
-- the thread has no name yet and the messages go in now); `p_attachments`:
-- the attachments the turn's images refer to, recorded with the thread (the
-- user's own only). `p_runs_per_minute`, `p_tokens_per_day`: the user's
-- quotas (NULL: none), checked after the replay rule and before anything is
-- written — outcome `quota_runs` or `quota_tokens`, with the ms until a
-- retry would pass in `task_id`. With a runs quota, the user's accepts take
-- their turns on a lock of the user's (an advisory lock held to the
-- commit), so two replicas never both take the last place.
CREATE OR REPLACE FUNCTION agwire_accept(
    p_task TEXT, p_user TEXT, p_thread TEXT, p_run TEXT, p_hash TEXT, p_input TEXT,
    p_mode TEXT, p_options TEXT, p_strategy TEXT, p_dedupe BOOLEAN,
    p_ids TEXT[], p_roles TEXT[], p_bodies TEXT[], p_pending TEXT, p_now BIGINT,
    p_owner TEXT, p_lease_ms BIGINT, p_answers TEXT[], p_strict BOOLEAN,
    p_shown BOOLEAN[], p_title TEXT, p_attachments TEXT[], p_runs_per_minute INT,
    p_tokens_per_day BIGINT
) RETURNS TABLE (outcome TEXT, task_id TEXT, created BOOLEAN, waiting BOOLEAN, stopped JSONB)
LANGUAGE plpgsql AS $$
DECLARE
    v_existing RECORD;
    v_created BOOLEAN;
    v_owner TEXT;
    v_busy BIGINT;
    v_active TEXT[] := ARRAY[]::TEXT[];
    v_rolled TEXT[] := ARRAY[]::TEXT[];
    v_stopped JSONB := '[]'::JSONB;
    v_run RECORD;
    v_last BIGINT;
    v_start BOOLEAN;
    v_answer TEXT;
    v_call RECORD;
    v_nth BIGINT;
    v_tokens BIGINT;
BEGIN
    SELECT r.task_id, r.thread_id, r.request_hash, r.created_thread INTO v_existing
    FROM runs r WHERE r.user_id = p_user AND r.run_id = p_run;
    IF FOUND THEN
        IF v_existing.thread_id <> p_thread OR v_existing.request_hash <> p_hash THEN
            RETURN QUERY SELECT 'conflict'::TEXT, NULL::TEXT, FALSE, FALSE, NULL::JSONB;
        ELSE
            RETURN QUERY SELECT 'replayed'::TEXT, v_existing.task_id, v_existing.created_thread, FALSE,
                                NULL::JSONB;
        END IF;
        RETURN;
    END IF;
    IF p_runs_per_minute IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('agwire quota ' || p_user, 0));
        SELECT q.accepted_at INTO v_nth FROM quota_runs q
        WHERE q.user_id = p_user AND q.accepted_at > p_now - 60000
        ORDER BY q.accepted_at DESC LIMIT 1 OFFSET p_runs_per_minute - 1;
        IF FOUND THEN
            RETURN QUERY SELECT 'quota_runs'::TEXT, GREATEST(v_nth + 60000 - p_now, 1)::TEXT,
                                FALSE, FALSE, NULL::JSONB;
            RETURN;
        END IF;
    END IF;
    IF p_tokens_per_day IS NOT NULL THEN
        SELECT u.tokens INTO v_tokens FROM token_usage u
        WHERE u.user_id = p_user AND u.day = floor(p_now / 86400000.0)::BIGINT;
        IF COALESCE(v_tokens, 0) >= p_tokens_per_day THEN
            RETURN QUERY SELECT 'quota_tokens'::TEXT,
                                GREATEST((floor(p_now / 86400000.0)::BIGINT + 1) * 86400000 - p_now, 1)::TEXT,
                                FALSE, FALSE, NULL::JSONB;
            RETURN;
        END IF;
    END IF;
    -- A new thread holds no pending call: a turn answering one is refused
    -- before the thread is written.
    IF p_strict AND COALESCE(cardinality(p_answers), 0) > 0
       AND NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = p_thread) THEN
        RETURN QUERY SELECT 'not_pending'::TEXT, p_answers[1], FALSE, FALSE, NULL::JSONB;
        RETURN;
    END IF;
    INSERT INTO threads (id, user_id, created_at, last_active_at, derived_title)
    VALUES (p_thread, p_user, p_now, p_now, p_title) ON CONFLICT (id) DO NOTHING;
    v_created := FOUND;
    -- The thread's lock: accepts on one thread, and every addition of
    -- messages to it, take their turns here.
    SELECT t.user_id INTO v_owner FROM threads t WHERE t.id = p_thread FOR UPDATE;
    IF v_owner <> p_user THEN
        RETURN QUERY SELECT 'not_found'::TEXT, NULL::TEXT, FALSE, FALSE, NULL::JSONB;
        RETURN;
    END IF;
    SELECT COUNT(*), COALESCE(array_agg(r.run_id), ARRAY[]::TEXT[]) INTO v_busy, v_active FROM runs r
    WHERE r.thread_id = p_thread AND r.status IN ('queued', 'running');
    IF v_busy > 0 AND p_strategy = 'reject' THEN
        RETURN QUERY SELECT 'busy'::TEXT, NULL::TEXT, FALSE, FALSE, NULL::JSONB;
        RETURN;
    END IF;
    IF p_strategy = 'rollback' THEN
        v_rolled := v_active;
    END IF;
    IF p_strict THEN
        FOREACH v_answer IN ARRAY COALESCE(p_answers, ARRAY[]::TEXT[]) LOOP
            SELECT c.closed_by, c.answered, c.expired OR COALESCE(c.expires_at <= p_now, FALSE) AS expired
            INTO v_call
            FROM tool_calls c WHERE c.thread_id = p_thread AND c.id = v_answer;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 'not_pending'::TEXT, v_answer, FALSE, FALSE, NULL::JSONB;
                RETURN;
            ELSIF v_call.expired THEN
                RETURN QUERY SELECT 'expired'::TEXT, v_answer, FALSE, FALSE, NULL::JSONB;
                RETURN;
            ELSIF v_call.closed_by IS NOT NULL AND NOT (v_call.closed_by = ANY (v_rolled)) THEN
                RETURN QUERY SELECT CASE WHEN v_call.answered THEN 'answered' ELSE 'closed' END,
                                    v_answer, FALSE, FALSE, NULL::JSONB;
                RETURN;
            END IF;
        END LOOP;
    END IF;
    -- Every refusal is behind us: from here on the accept writes.
    IF p_runs_per_minute IS NOT NULL THEN
        INSERT INTO quota_runs (user_id, accepted_at) VALUES (p_user, p_now);
        DELETE FROM quota_runs q WHERE q.user_id = p_user AND q.accepted_at <= p_now - 60000;
    END IF;
    IF v_busy > 0 AND p_strategy IN ('interrupt', 'rollback') THEN
        v_busy := 0;
        FOR v_run IN
            SELECT r.task_id, r.run_id FROM runs r
            WHERE r.thread_id = p_thread AND r.status IN ('queued', 'running')
            ORDER BY r.position
        LOOP
            -- (Conditional: a claim on another replica may have taken a
            -- waiting run since it was read; then it is running.)
            UPDATE runs SET status = 'cancelled', finished_at = p_now
            WHERE runs.task_id = v_run.task_id AND status = 'queued';
            IF FOUND THEN
                INSERT INTO run_events (task_id, seq, n_events, events) VALUES
                    (v_run.task_id, 1, 2, jsonb_build_object('type', 'RUN_STARTED',
                        'threadId', p_thread, 'runId', v_run.run_id)::TEXT || E'\n' ||
                    jsonb_build_object('type', 'RUN_FINISHED',
                        'threadId', p_thread, 'runId', v_run.run_id,
                        'outcome', jsonb_build_object('type', 'cancelled'))::TEXT);
                PERFORM pg_notify('agwire', format('a 1 2 %s', v_run.task_id));
                v_stopped := v_stopped || jsonb_build_array(jsonb_build_array(v_run.task_id, v_run.run_id, 1));
            ELSE
                UPDATE runs SET stop_requested = p_strategy
                WHERE runs.task_id = v_run.task_id AND status = 'running';
                IF FOUND THEN
                    v_busy := v_busy + 1;
                    PERFORM pg_notify('agwire', 'c ' || v_run.task_id);
                    v_stopped := v_stopped || jsonb_build_array(jsonb_build_array(v_run.task_id, v_run.run_id, NULL));
                END IF;
            END IF;
        END LOOP;
        IF p_strategy = 'rollback' THEN
            DELETE FROM messages m WHERE m.thread_id = p_thread AND m.run_id = ANY (v_rolled);
            UPDATE tool_calls c SET closed_by = NULL, answered = FALSE
            WHERE c.thread_id = p_thread AND c.closed_by = ANY (v_rolled);
            -- A thread left without a user message is unnamed again.
            UPDATE threads t SET derived_title = NULL WHERE t.id = p_thread
            AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = p_thread AND m.role = 'user');
        END IF;
    END IF;
    -- (An expired call stays expired.)
    UPDATE tool_calls c SET closed_by = p_run, answered = (c.id = ANY (COALESCE(p_answers, ARRAY[]::TEXT[])))
    WHERE c.thread_id = p_thread AND c.closed_by IS NULL AND NOT c.expired
      AND (c.expires_at IS NULL OR c.expires_at > p_now);
    IF v_busy = 0 THEN
        SELECT COALESCE(MAX(m.seq), 0) INTO v_last FROM messages m WHERE m.thread_id = p_thread;
        INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at, shown)
        SELECT p_thread, v_last + ROW_NUMBER() OVER (ORDER BY t.n), t.id, p_run, t.role, t.body, p_now,
               COALESCE(t.shown, FALSE)
        FROM UNNEST(p_ids, p_roles, p_bodies, p_shown) WITH ORDINALITY AS t(id, role, body, shown, n)
        WHERE NOT p_dedupe
           OR NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = p_thread AND m.id = t.id);
    END IF;
    IF COALESCE(cardinality(p_attachments), 0) > 0 THEN
        INSERT INTO attachment_refs (thread_id, attachment_id)
        SELECT p_thread, a.id FROM attachments a WHERE a.id = ANY (p_attachments) AND a.user_id = p_user
        ON CONFLICT DO NOTHING;
    END IF;
    v_start := p_owner IS NOT NULL AND v_busy = 0;
    INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status,
                      input, created_at, pending_messages, runtime_mode, options,
                      started_at, owner, lease_until_ms)
    VALUES (p_task, p_user, p_thread, p_run, p_hash, v_created,
            CASE WHEN v_start THEN 'running' ELSE 'queued' END, p_input, p_now,
            CASE WHEN v_busy > 0 THEN p_pending END, p_mode, p_options,
            CASE WHEN v_start THEN p_now END,
            CASE WHEN v_start THEN p_owner END,
            CASE WHEN v_start THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + p_lease_ms END);
    IF NOT v_created THEN
        UPDATE threads SET last_active_at = p_now,
                           derived_title = COALESCE(derived_title, CASE WHEN v_busy = 0 THEN p_title END)
        WHERE id = p_thread;
    END IF;
    IF v_start THEN
        -- Started by its own replica: no other replica needs to hear of it.
        RETURN QUERY SELECT 'started'::TEXT, p_task, v_created, FALSE, v_stopped;
        RETURN;
    END IF;
    -- (Announced by the replica after the commit, not here: see accepts.rs.)
    RETURN QUERY SELECT 'accepted'::TEXT, p_task, v_created, v_busy > 0, v_stopped;
END $$;

-- Accepts grouped in one statement (and so one commit): `agwire_accept` for
-- each call of `p_calls` (an array of objects, one per call, its arguments
-- by name; `owner` null when the run is not to start here), as if in order
-- — a call sees the calls before it. One answer per call, numbered from 1.
--
-- The common call is written set-based, for the whole group at once: a turn
-- that opens a new thread (no quota, no answers, no attachments; its thread
-- and its runId in no other call of the group; its runId not taken). Its
-- outcome is known before anything is read: a new thread has no runs,
-- messages or tool calls, so nothing can refuse it. One INSERT per table
-- for all of them instead of `agwire_accept`'s dozen statements each:
-- PL/pgSQL starting each statement's executor was most of an accept's cost
-- (issue 47). It cannot change another call's answer (it shares no thread,
-- run or quota with one), so the rest go after it, one by one, in order.
-- A call whose thread turns out to exist (another replica opened it since
-- the statement began) goes with the rest.
--
-- A run it starts (`started`) is answered with what its agent reads besides
-- its input (`briefed`), so that it needs no round trip of its own to read
-- it: the owner's `settings` (NULL: none stored) and the thread's latest
-- `p_history` messages of the history roles, oldest first — NULL for a
-- thread the call created, whose history is the call's own messages (the
-- replica has them). An automation run's job config is not among them: its
-- replica reads the briefing apart.
CREATE OR REPLACE FUNCTION agwire_accept_many(p_calls JSONB, p_lease_ms BIGINT, p_history INT)
RETURNS TABLE (n INT, outcome TEXT, task_id TEXT, created BOOLEAN, waiting BOOLEAN, stopped JSONB,
               briefed BOOLEAN, settings TEXT, history TEXT[])
-- (Generic plans for the statements of the calls it makes: a custom
-- plan is planned again at each execution, and none of them needs one.
-- Its joins look up the group's own rows by key: no hash or merge join,
-- as in agwire_write_many.)
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
LANGUAGE plpgsql AS $$
DECLARE
    v_call agwire_accept_call;
    v_opened INT[];
    v_tasks TEXT[];
    v_started BOOLEAN[];
    v_users TEXT[];
    i INT;
BEGIN
    WITH calls AS (
        SELECT c.*, c.ordinality::INT AS i,
               COUNT(*) OVER (PARTITION BY c.thread) AS on_thread,
               COUNT(*) OVER (PARTITION BY c."user", c.run) AS as_run
        FROM jsonb_populate_recordset(NULL::agwire_accept_call, p_calls) WITH ORDINALITY AS c
    ), plain AS (
        SELECT c.* FROM calls c
        WHERE c.on_thread = 1 AND c.as_run = 1
          AND c.runs_per_minute IS NULL AND c.tokens_per_day IS NULL
          AND COALESCE(cardinality(c.answers), 0) = 0
          AND COALESCE(cardinality(c.attachments), 0) = 0
          AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.user_id = c."user" AND r.run_id = c.run)
    ), opened AS (
        -- (In the group's order, by user then thread: see accepts.rs.)
        INSERT INTO threads (id, user_id, created_at, last_active_at, derived_title)
        SELECT p.thread, p."user", p.now, p.now, p.title FROM plain p ORDER BY p.i
        ON CONFLICT (id) DO NOTHING
        RETURNING threads.id
    ), fresh AS (
        SELECT p.* FROM plain p JOIN opened o ON o.id = p.thread
    ), said AS (
        INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at, shown)
        SELECT f.thread, t.k, t.id, f.run, t.role, t.body, f.now, COALESCE(t.shown, FALSE)
        FROM fresh f,
             UNNEST(f.ids, f.roles, f.bodies, f.shown) WITH ORDINALITY AS t(id, role, body, shown, k)
    ), accepted AS (
        INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status,
                          input, created_at, pending_messages, runtime_mode, options,
                          started_at, owner, lease_until_ms)
        SELECT f.task, f."user", f.thread, f.run, f.hash, TRUE,
               CASE WHEN f.owner IS NOT NULL THEN 'running' ELSE 'queued' END, f.input, f.now,
               NULL, f.mode, f.options,
               CASE WHEN f.owner IS NOT NULL THEN f.now END, f.owner,
               CASE WHEN f.owner IS NOT NULL
                    THEN (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT + p_lease_ms END
        FROM fresh f ORDER BY f.i
    )
    SELECT array_agg(f.i ORDER BY f.i), array_agg(f.task ORDER BY f.i),
           array_agg(f.owner IS NOT NULL ORDER BY f.i), array_agg(f."user" ORDER BY f.i)
    INTO v_opened, v_tasks, v_started, v_users
    FROM fresh f;
    v_opened := COALESCE(v_opened, ARRAY[]::INT[]);
    RETURN QUERY
        SELECT o.i, CASE WHEN o.started THEN 'started' ELSE 'accepted' END, o.task, TRUE, FALSE,
               '[]'::JSONB, o.started,
               CASE WHEN o.started THEN (SELECT u.settings FROM users u WHERE u.id = o."user") END,
               NULL::TEXT[]
        FROM UNNEST(v_opened, v_tasks, v_started, v_users) AS o(i, task, started, "user");
    FOR i IN 1 .. COALESCE(jsonb_array_length(p_calls), 0) LOOP
        CONTINUE WHEN i = ANY (v_opened);
        -- (The call's object read whole, arrays included: migration 0013.)
        v_call := jsonb_populate_record(NULL::agwire_accept_call, p_calls -> (i - 1));
        n := i;
        SELECT a.outcome, a.task_id, a.created, a.waiting, a.stopped
        INTO outcome, task_id, created, waiting, stopped
        FROM agwire_accept(
            v_call.task, v_call."user", v_call.thread, v_call.run, v_call.hash, v_call.input,
            v_call.mode, v_call.options, v_call.strategy, v_call.dedupe,
            COALESCE(v_call.ids, ARRAY[]::TEXT[]), COALESCE(v_call.roles, ARRAY[]::TEXT[]),
            COALESCE(v_call.bodies, ARRAY[]::TEXT[]), v_call.pending, v_call.now, v_call.owner,
            p_lease_ms, COALESCE(v_call.answers, ARRAY[]::TEXT[]), v_call."strict",
            COALESCE(v_call.shown, ARRAY[]::BOOLEAN[]), v_call.title,
            COALESCE(v_call.attachments, ARRAY[]::TEXT[]), v_call.runs_per_minute,
            v_call.tokens_per_day
        ) AS a;
        briefed := outcome = 'started';
        settings := NULL;
        history := NULL;
        IF briefed THEN
            -- (As ThreadStore::recent_messages_and_settings reads them.)
            SELECT u.settings INTO settings FROM users u WHERE u.id = v_call."user";
            history := ARRAY(
                SELECT m.body FROM (
                    SELECT m.body, m.seq FROM messages m
                    WHERE m.thread_id = v_call.thread
                      AND m.role IN ('user', 'assistant', 'tool', 'system', 'developer')
                    ORDER BY m.seq DESC LIMIT p_history) m
                ORDER BY m.seq);
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- RunStore::append_events: `p_n_events` events (`p_events`, their texts
-- joined by newlines) as one row; the first event's number, or NULL when
-- the run is not running (nothing written).
CREATE OR REPLACE FUNCTION agwire_append(p_task TEXT, p_events TEXT, p_n_events INT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    v_status TEXT;
    v_last BIGINT;
BEGIN
    SELECT r.status INTO v_status FROM runs r WHERE r.task_id = p_task FOR UPDATE;
    IF v_status IS DISTINCT FROM 'running' THEN
        RETURN NULL;
    END IF;
    -- (Written out, not a SQL function: one that is not inlined is planned
    -- again in every transaction that calls it.)
    SELECT COALESCE(MAX(e.seq + e.n_events - 1), 0) INTO v_last
    FROM (SELECT e.seq, e.n_events FROM run_events e WHERE e.task_id = p_task
          ORDER BY e.seq DESC LIMIT 1) e;
    IF p_n_events > 0 THEN
        INSERT INTO run_events (task_id, seq, n_events, events)
        VALUES (p_task, v_last + 1, p_n_events, p_events);
        PERFORM pg_notify('agwire', format('a %s %s %s', v_last + 1, v_last + p_n_events, p_task));
    END IF;
    RETURN v_last + 1;
END $$;

-- RunStore::end_run: the terminal event's number, or NULL when the run had
-- already ended (nothing written). `p_events`, `p_n_events`: the run's last
-- events (texts joined by newlines), written with the terminal event as one
-- row — only to a running run (with events, a queued run is not ended).
-- `p_call_*`: the frontend tool calls the run leaves pending for its client. `p_tokens`: what its usage adds up to,
-- added to its user's count for the UTC day of `p_now`. An end wakes the replicas' dispatchers
-- only when a run of its thread waits.
CREATE OR REPLACE FUNCTION agwire_end(
    p_task TEXT, p_status TEXT, p_error TEXT, p_usage TEXT, p_terminal TEXT,
    p_ids TEXT[], p_roles TEXT[], p_bodies TEXT[], p_ui_answer TEXT, p_ui_schema TEXT,
    p_now BIGINT, p_call_ids TEXT[], p_call_names TEXT[], p_call_args TEXT[], p_shown BOOLEAN[],
    p_calls_expire_at BIGINT, p_tokens BIGINT, p_events TEXT, p_n_events INT
) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    v_thread TEXT;
    v_run TEXT;
    v_rolled_back BOOLEAN;
    v_user TEXT;
    v_last BIGINT;
    v_row TEXT;
    v_n INT;
    v_seq BIGINT;
BEGIN
    p_n_events := COALESCE(p_n_events, 0);
    UPDATE runs SET status = p_status, error = p_error, usage = p_usage, finished_at = p_now,
                    owner = NULL, lease_until_ms = NULL
    WHERE task_id = p_task AND status IN ('queued', 'running')
      AND (p_n_events = 0 OR status = 'running')
    RETURNING thread_id, run_id, stop_requested IS NOT DISTINCT FROM 'rollback', user_id
    INTO v_thread, v_run, v_rolled_back, v_user;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF COALESCE(p_tokens, 0) > 0 THEN
        INSERT INTO token_usage AS u (user_id, day, tokens)
        VALUES (v_user, floor(p_now / 86400000.0)::BIGINT, p_tokens)
        ON CONFLICT (user_id, day) DO UPDATE SET tokens = u.tokens + EXCLUDED.tokens;
    END IF;
    SELECT COALESCE(MAX(e.seq + e.n_events - 1), 0) INTO v_last
    FROM (SELECT e.seq, e.n_events FROM run_events e WHERE e.task_id = p_task
          ORDER BY e.seq DESC LIMIT 1) e;
    IF p_n_events > 0 THEN
        v_row := p_events || E'\n' || p_terminal;
        v_n := p_n_events + 1;
    ELSIF v_last = 0 THEN
        -- A run that ends before its first event was written still gets a
        -- valid log: RUN_STARTED first, then its one terminal event.
        v_row := jsonb_build_object('type', 'RUN_STARTED', 'threadId', v_thread, 'runId', v_run)::TEXT
                 || E'\n' || p_terminal;
        v_n := 2;
    ELSE
        v_row := p_terminal;
        v_n := 1;
    END IF;
    -- A run a rollback took back adds nothing to its thread: its output,
    -- its tool calls and its UI stay out (its log still ends as given).
    IF v_rolled_back THEN
        -- (Every array emptied: UNNEST pads shorter ones with NULLs.)
        p_ids := ARRAY[]::TEXT[];
        p_roles := ARRAY[]::TEXT[];
        p_bodies := ARRAY[]::TEXT[];
        p_shown := ARRAY[]::BOOLEAN[];
        p_call_ids := ARRAY[]::TEXT[];
        p_call_names := ARRAY[]::TEXT[];
        p_call_args := ARRAY[]::TEXT[];
        p_ui_answer := NULL;
    END IF;
    PERFORM 1 FROM threads t WHERE t.id = v_thread FOR UPDATE;
    SELECT COALESCE(MAX(m.seq), 0) INTO v_seq FROM messages m WHERE m.thread_id = v_thread;
    INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at, shown)
    SELECT v_thread, v_seq + t.n, t.id, v_run, t.role, t.body, p_now, COALESCE(t.shown, FALSE)
    FROM UNNEST(p_ids, p_roles, p_bodies, p_shown) WITH ORDINALITY AS t(id, role, body, shown, n);
    IF p_ui_answer IS NOT NULL THEN
        -- A message that carries a UI shows in history.
        UPDATE messages SET ui_schema = p_ui_schema, shown = TRUE
        WHERE thread_id = v_thread AND run_id = v_run AND id = p_ui_answer;
    END IF;
    INSERT INTO tool_calls (thread_id, id, run_id, name, arguments, asked_at, expires_at)
    SELECT v_thread, c.id, v_run, c.name, c.args, p_now, p_calls_expire_at
    FROM UNNEST(p_call_ids, p_call_names, p_call_args) AS c(id, name, args)
    ON CONFLICT (thread_id, id) DO UPDATE SET run_id = EXCLUDED.run_id, name = EXCLUDED.name,
        arguments = EXCLUDED.arguments, asked_at = EXCLUDED.asked_at,
        expires_at = EXCLUDED.expires_at, closed_by = NULL, answered = FALSE, expired = FALSE;
    INSERT INTO run_events (task_id, seq, n_events, events) VALUES (p_task, v_last + 1, v_n, v_row);
    PERFORM pg_notify('agwire', format('a %s %s %s', v_last + 1, v_last + v_n, p_task));
    -- The thread's next run, if one waits, is runnable now.
    IF EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = v_thread AND r.status = 'queued') THEN
        PERFORM pg_notify('agwire', 'r');
    END IF;
    RETURN v_last + v_n;
END $$;

-- Group commit, set-based: one batch of a replica's run writes — the event
-- appends of many runs, then the ends of others — in one statement and one
-- commit. The appends are one INSERT for the whole batch (not a function
-- call each), and their notifications go out as one payload of lines
-- instead of one notification per run: every replica's listener is woken
-- once per batch rather than once per run. The rules are agwire_append's
-- and agwire_end's exactly.
--
-- p_tasks: the appends' runs (no run twice); p_batches, p_counts: for each,
-- its events (texts joined by newlines) and how many, written as one row;
-- p_ends: a JSON array of agwire_end's arguments as objects (`events` and
-- `n_events` among them). Answers, for each append in order
-- (n = 1..), its first event's number (NULL when the run is not running),
-- then for each end (n continuing) its terminal event's number (NULL when
-- the run had already ended).
--
-- The common end is written set-based too, for the whole group at once: an
-- end that leaves no tool call pending and carries no UI, the only end of
-- its thread in the group. One statement ends them all and counts their
-- tokens, one locks their threads, and one writes their messages and log
-- rows — `agwire_end`'s rules exactly, without its dozen statements per
-- end (issue 47). The rest go after them, one by one, in order: they share
-- no run and no thread with them, so the order changes no answer.
CREATE OR REPLACE FUNCTION agwire_write_many(p_tasks TEXT[], p_batches TEXT[], p_counts INT[], p_ends JSONB)
RETURNS TABLE (n INT, first BIGINT)
-- (Generic plans for the statements of the calls it makes: a custom
-- plan is planned again at each execution, and none of them needs one.
-- Every join here looks up a group's own rows by key, so no hash or merge
-- join: a generic plan guesses 100 rows from a function scan, and with one
-- it read the whole runs table at every end — 9 ms at 6,600 runs, growing
-- with the table.)
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
LANGUAGE plpgsql AS $$
DECLARE
    v_count INT := COALESCE(cardinality(p_tasks), 0);
    v_live TEXT[];
    v_ns INT[];
    v_firsts BIGINT[];
    v_notes TEXT[];
    v_end agwire_end_call;
    v_plain INT[];
    v_ended INT[];
    v_threads TEXT[];
    v_runs TEXT[];
    v_rolled BOOLEAN[];
    v_lasts BIGINT[];
    v_waits BOOLEAN;
    i INT;
BEGIN
    IF v_count > 0 THEN
        -- The runs' locks, in one order for every batch: two batches never
        -- wait for each other in a circle.
        -- Which of them run, read under those locks by key (a join on
        -- status would scan runs_active, dead entries and all).
        SELECT COALESCE(array_agg(l.task_id) FILTER (WHERE l.status = 'running'), ARRAY[]::TEXT[])
        INTO v_live
        FROM (SELECT r.task_id, r.status FROM runs r WHERE r.task_id = ANY (p_tasks)
              ORDER BY r.task_id FOR UPDATE) l;
        WITH calls AS (
            SELECT c.n::INT AS n, c.task, c.batch, c.size
            FROM UNNEST(p_tasks, p_batches, p_counts) WITH ORDINALITY AS c(task, batch, size, n)
        ), live AS (
            SELECT calls.n, calls.task, calls.batch, calls.size,
                   COALESCE((SELECT e.seq + e.n_events - 1 FROM run_events e WHERE e.task_id = calls.task
                             ORDER BY e.seq DESC LIMIT 1), 0) AS last
            FROM calls WHERE calls.task = ANY (v_live)
        ), written AS (
            INSERT INTO run_events (task_id, seq, n_events, events)
            SELECT live.task, live.last + 1, live.size, live.batch FROM live WHERE live.size > 0
        )
        SELECT array_agg(live.n ORDER BY live.n),
               array_agg(live.last + 1 ORDER BY live.n),
               array_agg(format('a %s %s %s', live.last + 1, live.last + live.size, live.task)
                         ORDER BY live.n) FILTER (WHERE live.size > 0)
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
    IF COALESCE(jsonb_array_length(p_ends), 0) > 0 THEN
        -- The common ends: the runs ended, their tokens counted.
        WITH calls AS (
            SELECT c.*, c.ordinality::INT AS i
            FROM jsonb_populate_recordset(NULL::agwire_end_call, p_ends) WITH ORDINALITY AS c
        ), placed AS (
            SELECT c.*, COUNT(*) OVER (PARTITION BY r.thread_id) AS on_thread,
                   COUNT(*) OVER (PARTITION BY c.task) AS as_task
            FROM calls c JOIN runs r ON r.task_id = c.task
        ), plain AS (
            SELECT p.* FROM placed p
            WHERE p.on_thread = 1 AND p.as_task = 1
              AND COALESCE(cardinality(p.call_ids), 0) = 0 AND p.ui_answer IS NULL
        ), ended AS (
            UPDATE runs r SET status = p.status, error = p.error, usage = p.usage,
                              finished_at = p.now, owner = NULL, lease_until_ms = NULL
            FROM plain p
            WHERE r.task_id = p.task AND r.status IN ('queued', 'running')
              AND (COALESCE(p.n_events, 0) = 0 OR r.status = 'running')
            RETURNING p.i, r.thread_id, r.run_id, r.user_id, p.tokens, p.now,
                      r.stop_requested IS NOT DISTINCT FROM 'rollback' AS rolled_back
        ), counted AS (
            INSERT INTO token_usage AS u (user_id, day, tokens)
            SELECT e.user_id, floor(e.now / 86400000.0)::BIGINT, SUM(e.tokens)::BIGINT
            FROM ended e WHERE COALESCE(e.tokens, 0) > 0
            GROUP BY 1, 2 ORDER BY 1, 2
            ON CONFLICT (user_id, day) DO UPDATE SET tokens = u.tokens + EXCLUDED.tokens
        )
        SELECT (SELECT COALESCE(array_agg(p.i), ARRAY[]::INT[]) FROM plain p),
               COALESCE(array_agg(e.i ORDER BY e.i), ARRAY[]::INT[]),
               array_agg(e.thread_id ORDER BY e.i), array_agg(e.run_id ORDER BY e.i),
               array_agg(e.rolled_back ORDER BY e.i)
        INTO v_plain, v_ended, v_threads, v_runs, v_rolled
        FROM ended e;
        IF cardinality(v_ended) > 0 THEN
            -- Their threads' locks (accepts add messages under them), in
            -- one order; then the messages numbered on from what is there.
            PERFORM 1 FROM threads t WHERE t.id = ANY (v_threads) ORDER BY t.id FOR UPDATE;
            WITH calls AS (
                SELECT c.*, c.ordinality::INT AS i
                FROM jsonb_populate_recordset(NULL::agwire_end_call, p_ends) WITH ORDINALITY AS c
            ), done AS (
                SELECT c.*, d.thread, d.run, d.rolled_back,
                       COALESCE((SELECT e.seq + e.n_events - 1 FROM run_events e WHERE e.task_id = c.task
                                 ORDER BY e.seq DESC LIMIT 1), 0) AS last,
                       COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.thread_id = d.thread), 0) AS said
                FROM UNNEST(v_ended, v_threads, v_runs, v_rolled) AS d(i, thread, run, rolled_back)
                JOIN calls c ON c.i = d.i
            ), logged AS (
                -- The row: the last events and the terminal one; a run
                -- that ends before its first event was written still gets
                -- a valid log (RUN_STARTED first).
                SELECT d.*,
                       CASE WHEN COALESCE(d.n_events, 0) > 0 THEN d.events || E'\n' || d.terminal
                            WHEN d.last = 0 THEN jsonb_build_object('type', 'RUN_STARTED',
                                'threadId', d.thread, 'runId', d.run)::TEXT || E'\n' || d.terminal
                            ELSE d.terminal END AS row_events,
                       CASE WHEN COALESCE(d.n_events, 0) > 0 THEN d.n_events + 1
                            WHEN d.last = 0 THEN 2 ELSE 1 END AS row_n
                FROM done d
            ), output AS (
                -- (A run a rollback took back adds nothing to its thread.)
                INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at, shown)
                SELECT l.thread, l.said + t.k, t.id, l.run, t.role, t.body, l.now, COALESCE(t.shown, FALSE)
                FROM logged l,
                     UNNEST(l.ids, l.roles, l.bodies, l.shown) WITH ORDINALITY AS t(id, role, body, shown, k)
                WHERE NOT l.rolled_back
            ), written AS (
                INSERT INTO run_events (task_id, seq, n_events, events)
                SELECT l.task, l.last + 1, l.row_n, l.row_events FROM logged l ORDER BY l.task
            )
            SELECT array_agg(l.last + l.row_n ORDER BY l.i),
                   array_agg(format('a %s %s %s', l.last + 1, l.last + l.row_n, l.task) ORDER BY l.i),
                   bool_or(EXISTS (SELECT 1 FROM runs r WHERE r.thread_id = l.thread AND r.status = 'queued'))
            INTO v_lasts, v_notes, v_waits
            FROM logged l;
            FOR i IN 0 .. (cardinality(v_notes) - 1) / 100 LOOP
                PERFORM pg_notify('agwire', array_to_string(v_notes[i * 100 + 1 : i * 100 + 100], E'\n'));
            END LOOP;
            -- A thread's next run, if one waits, is runnable now.
            IF v_waits THEN
                PERFORM pg_notify('agwire', 'r');
            END IF;
        END IF;
        RETURN QUERY
            SELECT v_count + p.i, w.last
            FROM UNNEST(v_plain) AS p(i)
            LEFT JOIN UNNEST(v_ended, v_lasts) AS w(i, last) ON w.i = p.i;
    END IF;
    FOR i IN 1 .. COALESCE(jsonb_array_length(p_ends), 0) LOOP
        CONTINUE WHEN i = ANY (v_plain);
        -- (The end's object read whole, arrays included: migration 0013.)
        v_end := jsonb_populate_record(NULL::agwire_end_call, p_ends -> (i - 1));
        n := v_count + i;
        first := agwire_end(
            v_end.task, v_end.status, v_end.error, v_end.usage, v_end.terminal,
            COALESCE(v_end.ids, ARRAY[]::TEXT[]), COALESCE(v_end.roles, ARRAY[]::TEXT[]),
            COALESCE(v_end.bodies, ARRAY[]::TEXT[]), v_end.ui_answer, v_end.ui_schema, v_end.now,
            COALESCE(v_end.call_ids, ARRAY[]::TEXT[]), COALESCE(v_end.call_names, ARRAY[]::TEXT[]),
            COALESCE(v_end.call_args, ARRAY[]::TEXT[]), COALESCE(v_end.shown, ARRAY[]::BOOLEAN[]),
            v_end.calls_expire_at, v_end.tokens, v_end.events, v_end.n_events
        );
        RETURN NEXT;
    END LOOP;
END $$;

-- The `runs_end_webhook` trigger (migration 0011): a run that reached a final
-- status gets its Standard Webhooks message in the outbox, in the same
-- transaction, while webhooks are enabled. The body is fixed now: every
-- attempt sends the same bytes.
CREATE OR REPLACE FUNCTION agwire_run_end_webhook() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT s.enabled FROM webhook_settings s WHERE s.id = 1) THEN
        INSERT INTO webhook_outbox (id, task_id, payload, created_at, next_attempt_at)
        VALUES ('msg_' || NEW.task_id, NEW.task_id, jsonb_build_object(
            'type', 'run.' || NEW.status,
            'timestamp', to_char(to_timestamp(COALESCE(NEW.finished_at, 0) / 1000.0) AT TIME ZONE 'UTC',
                                 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'data', jsonb_build_object(
                'taskId', NEW.task_id, 'threadId', NEW.thread_id, 'runId', NEW.run_id,
                'userId', NEW.user_id, 'status', NEW.status,
                'createdAt', NEW.created_at, 'startedAt', NEW.started_at,
                'finishedAt', NEW.finished_at,
                'error', NEW.error::JSONB, 'usage', NEW.usage::JSONB))::TEXT,
            COALESCE(NEW.finished_at, 0), COALESCE(NEW.finished_at, 0))
        ON CONFLICT (id) DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
