-- A thread's own title (NULL: its first user message names it), the
-- thread list's order, the job of a thread, and the frontend tool calls
-- runs left for their clients to answer (as on SQLite, 0011).
ALTER TABLE threads ADD COLUMN title TEXT;
CREATE INDEX threads_by_user_activity ON threads (user_id, last_active_at, id);
DROP INDEX threads_by_user;
CREATE INDEX jobs_by_thread ON automation_jobs (thread_id);
CREATE TABLE tool_calls (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    asked_at BIGINT NOT NULL,
    closed_by TEXT,
    answered BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (thread_id, id)
);
-- agwire_accept and agwire_end take the turn's answers and the run's
-- pending calls (functions.sql): their old signatures go.
DROP FUNCTION IF EXISTS agwire_accept(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, BOOLEAN, BOOLEAN,
    TEXT[], TEXT[], TEXT[], TEXT, BIGINT, TEXT, BIGINT);
DROP FUNCTION IF EXISTS agwire_end(TEXT, TEXT, TEXT, TEXT, TEXT, TEXT[], TEXT[], TEXT[], TEXT, TEXT, BIGINT);
