-- Run control (issue 44).
--
-- Why a running run was asked to stop, kept with it (as on SQLite, 0015):
-- `cancel` (its owner asked), `interrupt` or `rollback` (a run posted to
-- its thread with that multitask strategy). A replica renewing its lease on
-- a run asked to stop hears it again, so a lost NOTIFY only delays the
-- stop; a rollback's run adds nothing to its thread when it ends.
ALTER TABLE runs ADD COLUMN stop_requested TEXT;
-- When a pending frontend tool call expires, and whether the sweep has
-- marked it expired (as on SQLite, 0015): an expired call is never pending
-- again.
ALTER TABLE tool_calls ADD COLUMN expires_at BIGINT;
ALTER TABLE tool_calls ADD COLUMN expired BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX tool_calls_expiring ON tool_calls (expires_at)
WHERE closed_by IS NULL AND NOT expired AND expires_at IS NOT NULL;
-- Standard Webhooks on run end (as on SQLite, 0015): an outbox row for each
-- run that reaches a final status, written by a trigger in the transaction
-- that ends it, while `webhook_settings.enabled` says so. The trigger's
-- function is functions.sql's `agwire_run_end_webhook` (a placeholder here,
-- replaced when the process connects).
CREATE TABLE webhook_settings (
    id INT PRIMARY KEY CHECK (id = 1),
    enabled BOOLEAN NOT NULL
);
INSERT INTO webhook_settings (id, enabled) VALUES (1, FALSE);
CREATE TABLE webhook_outbox (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    attempts INT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    lease_until BIGINT,
    delivered_at BIGINT,
    gave_up_at BIGINT,
    last_error TEXT
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at)
WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE FUNCTION agwire_run_end_webhook() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END $$;
CREATE TRIGGER runs_end_webhook AFTER UPDATE OF status ON runs FOR EACH ROW
WHEN (OLD.status IN ('queued', 'running')
      AND NEW.status IN ('succeeded', 'failed', 'cancelled', 'interrupted'))
EXECUTE FUNCTION agwire_run_end_webhook();
-- agwire_accept's `p_enqueue BOOLEAN` is now `p_strategy TEXT`, and it and
-- agwire_accept_many answer the runs they stopped: new functions
-- (functions.sql creates them when this process connects, after the
-- migrations), so the old ones go first.
DROP FUNCTION IF EXISTS agwire_accept(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN, BOOLEAN,
    TEXT[], TEXT[], TEXT[], TEXT, BIGINT, TEXT, BIGINT, TEXT[], BOOLEAN,
    BOOLEAN[], TEXT, TEXT[]
);
DROP FUNCTION IF EXISTS agwire_accept_many(JSONB, BIGINT);
-- agwire_end takes when the calls a run leaves pending expire.
DROP FUNCTION IF EXISTS agwire_end(
    TEXT, TEXT, TEXT, TEXT, TEXT, TEXT[], TEXT[], TEXT[], TEXT, TEXT,
    BIGINT, TEXT[], TEXT[], TEXT[], BOOLEAN[]
);
