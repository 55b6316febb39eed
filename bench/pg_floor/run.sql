-- pgbench script: the rows a whole run writes — its accept (as accept.sql),
-- its start, its 25 events (RUN_STARTED, a 20-token text message, the
-- terminal event) as the log stores them, one row per write (`-D writes=N`:
-- the events split into N rows, as the service's runs in the same bench
-- wrote them), its end and its answer — in the service's schema, in the
-- three commits the contract needs: the accept (durable before its 202: a
-- crash never loses an accepted run), the start (the claim that keeps
-- other replicas off the run), and the events with the end. PostgreSQL's
-- floor for `agwire serve`'s end-to-end runs.
BEGIN;
WITH t AS (
  INSERT INTO threads (id, user_id, created_at, last_active_at)
  VALUES (gen_random_uuid()::text, 'local', 1795000000000, 1795000000000)
  RETURNING id
), m AS (
  INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at)
  SELECT id, 1, 'u', 'r', 'user', '{"id":"u","role":"user","content":"hello there"}', 1795000000000 FROM t
)
INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at, runtime_mode)
SELECT gen_random_uuid()::text, 'local', id, gen_random_uuid()::text, 'hash', true, 'queued',
       '{"threadId":"t","runId":"r","state":{},"messages":[{"id":"u","role":"user","content":"hello there"}],"tools":[],"context":[],"forwardedProps":{"runtime_mode":"chat"}}',
       1795000000000, 'chat'
FROM t
RETURNING task_id AS task, thread_id AS thread \gset
COMMIT;
BEGIN;
UPDATE runs SET status = 'running', started_at = 1795000000000 WHERE task_id = ':task';
COMMIT;
BEGIN;
INSERT INTO run_events (task_id, seq, n_events, events)
SELECT ':task', min(g), count(*),
       string_agg('{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"word' || g || ' "}', E'\n' ORDER BY g)
FROM generate_series(1, 25) g GROUP BY (g - 1) / ceil(25.0 / :writes)::int;
UPDATE runs SET status = 'succeeded', finished_at = 1795000000000 WHERE task_id = ':task';
INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at)
VALUES (':thread', 2, 'm', 'r', 'assistant', '{"id":"m","role":"assistant","content":"word0 word1 word2"}', 1795000000000);
COMMIT;
