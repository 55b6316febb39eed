-- pgbench script: what one token's append writes and locks on PostgreSQL
-- (agwire_append, written out): the run's row locked, its last event number
-- read, one log row, the NOTIFY that wakes the other replicas' followers —
-- one transaction, committed (flushed) before the token may be published.
-- Run with one client, its per-transaction latencies logged (-l): the
-- floor of a token's provider -> SSE latency on PostgreSQL, p50 and p99.
-- Needs the run `floor-append` (status running), made by bench/replicas.sh.
BEGIN;
SELECT status FROM runs WHERE task_id = 'floor-append' FOR UPDATE;
SELECT COALESCE(MAX(e.seq + e.n_events - 1), 0) AS last
FROM (SELECT seq, n_events FROM run_events WHERE task_id = 'floor-append'
      ORDER BY seq DESC LIMIT 1) e \gset
INSERT INTO run_events (task_id, seq, n_events, events)
VALUES ('floor-append', :last + 1, 1, '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"word "}');
SELECT pg_notify('agwire', format('a %s %s %s', :last + 1, :last + 1, 'floor-append'));
COMMIT;
