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
