-- Run control (issue 44).
--
-- Why a running run was asked to stop, kept with it: `cancel` (its owner
-- asked), `interrupt` or `rollback` (a run posted to its thread with that
-- multitask strategy). A rollback's run adds nothing to its thread when it
-- ends. NULL: nobody asked.
ALTER TABLE runs ADD COLUMN stop_requested TEXT;
-- When a pending frontend tool call expires (ms since the epoch; NULL:
-- never, for calls asked before expiry existed), and whether the sweep has
-- marked it expired. An expired call is never pending again: an answer to
-- it is refused, and a later turn leaves it as it is.
ALTER TABLE tool_calls ADD COLUMN expires_at INTEGER;
ALTER TABLE tool_calls ADD COLUMN expired INTEGER NOT NULL DEFAULT 0;
-- The sweep's way to the calls due to expire: pending ones only.
CREATE INDEX tool_calls_expiring ON tool_calls (expires_at)
WHERE closed_by IS NULL AND expired = 0 AND expires_at IS NOT NULL;
-- Standard Webhooks on run end: an outbox row for each run that reaches a
-- final status, written by a trigger in the transaction that ends it (so
-- every way a run ends — its executor, a cancel while it waited, a multitask
-- strategy, a survivor ending an abandoned run — is covered, and a crash
-- never loses one), while `webhook_settings.enabled` (set by the process
-- from `[webhooks]`) says so. `id` is the message's `webhook-id`, the same
-- on every attempt; `payload` its body, fixed when the run ended.
CREATE TABLE webhook_settings (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    enabled INTEGER NOT NULL
);
INSERT INTO webhook_settings (id, enabled) VALUES (1, 0);
CREATE TABLE webhook_outbox (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_until INTEGER,
    delivered_at INTEGER,
    gave_up_at INTEGER,
    last_error TEXT
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at)
WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE TRIGGER runs_end_webhook AFTER UPDATE OF status ON runs
WHEN OLD.status IN ('queued', 'running')
 AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'interrupted')
 AND (SELECT enabled FROM webhook_settings WHERE id = 1) = 1
BEGIN
    INSERT OR IGNORE INTO webhook_outbox (id, task_id, payload, created_at, next_attempt_at)
    VALUES ('msg_' || NEW.task_id, NEW.task_id, json_object(
        'type', 'run.' || NEW.status,
        'timestamp', strftime('%Y-%m-%dT%H:%M:%fZ', COALESCE(NEW.finished_at, 0) / 1000.0, 'unixepoch'),
        'data', json_object(
            'taskId', NEW.task_id, 'threadId', NEW.thread_id, 'runId', NEW.run_id,
            'userId', NEW.user_id, 'status', NEW.status,
            'createdAt', NEW.created_at, 'startedAt', NEW.started_at, 'finishedAt', NEW.finished_at,
            'error', json(NEW.error), 'usage', json(NEW.usage))),
        COALESCE(NEW.finished_at, 0), COALESCE(NEW.finished_at, 0));
END;
