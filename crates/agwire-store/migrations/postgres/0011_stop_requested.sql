-- Why a running run was asked to stop, kept with it (as on SQLite, 0015):
-- `cancel` (its owner asked), `interrupt` or `rollback` (a run posted to
-- its thread with that multitask strategy). A replica renewing its lease on
-- a run asked to stop hears it again, so a lost NOTIFY only delays the
-- stop; a rollback's run adds nothing to its thread when it ends.
ALTER TABLE runs ADD COLUMN stop_requested TEXT;
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
