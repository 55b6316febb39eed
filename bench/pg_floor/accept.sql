-- pgbench script: the rows an accepted run writes (thread, user message,
-- run), in the service's schema, one transaction — PostgreSQL's floor for
-- `agwire serve`'s accepted runs (bench/replicas.sh). No service around it.
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
FROM t;
