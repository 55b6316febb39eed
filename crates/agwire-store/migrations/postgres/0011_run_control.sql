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
