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

-- One call of a group (`agwire_accept_many`, `agwire_write_many`'s ends) as
-- a row: `jsonb_populate_record` reads the call's object into it in one
-- step, its arrays included, where reading each argument out of the JSON
-- (an `ARRAY(SELECT jsonb_array_elements_text(...))` per array) cost each
-- call a dozen subqueries. Fields are named as the objects' keys.
CREATE TYPE agwire_accept_call AS (
    task TEXT, "user" TEXT, thread TEXT, run TEXT, hash TEXT, input TEXT, mode TEXT,
    options TEXT, strategy TEXT, dedupe BOOLEAN, ids TEXT[], roles TEXT[], bodies TEXT[],
    pending TEXT, now BIGINT, owner TEXT, answers TEXT[], strict BOOLEAN, shown BOOLEAN[],
    title TEXT, attachments TEXT[], runs_per_minute INT, tokens_per_day BIGINT
);
CREATE TYPE agwire_end_call AS (
    task TEXT, status TEXT, error TEXT, usage TEXT, terminal TEXT, ids TEXT[], roles TEXT[],
    bodies TEXT[], ui_answer TEXT, ui_schema TEXT, now BIGINT, call_ids TEXT[],
    call_names TEXT[], call_args TEXT[], shown BOOLEAN[], calls_expire_at BIGINT,
    tokens BIGINT, events TEXT, n_events INT
);
