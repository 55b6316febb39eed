-- Why a running run was asked to stop, kept with it: `cancel` (its owner
-- asked), `interrupt` or `rollback` (a run posted to its thread with that
-- multitask strategy). A rollback's run adds nothing to its thread when it
-- ends. NULL: nobody asked.
ALTER TABLE runs ADD COLUMN stop_requested TEXT;
