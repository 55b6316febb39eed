-- A run's log holds one row per write, not per event (issue 47): `seq` is
-- the number of the row's first event, `n_events` how many it holds, and
-- `events` their JSON texts joined by newlines (crate agwire-store,
-- src/log.rs). A row written before holds one event, which is the same
-- format with `n_events` 1: the old rows stay as they are (adding a column
-- with a constant default and renaming one rewrite nothing).
ALTER TABLE run_events RENAME COLUMN event TO events;
ALTER TABLE run_events ADD COLUMN n_events INTEGER NOT NULL DEFAULT 1;
-- The functions whose arguments change (functions.sql writes them again).
DROP FUNCTION IF EXISTS agwire_append(TEXT, TEXT[]);
DROP FUNCTION IF EXISTS agwire_end(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT[], TEXT[], TEXT[], TEXT, TEXT,
                                   BIGINT, TEXT[], TEXT[], TEXT[], BOOLEAN[], BIGINT, BIGINT);
DROP FUNCTION IF EXISTS agwire_write_many(TEXT[], JSONB, JSONB);
