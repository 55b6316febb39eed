-- A run's log holds one row per write, not per event (issue 47): `seq` is
-- the number of the row's first event, `n_events` how many it holds, and
-- `events` their JSON texts joined by newlines (crate agwire-store,
-- src/log.rs). A row written before holds one event, which is the same
-- format with `n_events` 1: the old rows stay as they are.
ALTER TABLE run_events RENAME COLUMN event TO events;
ALTER TABLE run_events ADD COLUMN n_events INTEGER NOT NULL DEFAULT 1;
