-- A thread's own title (NULL: its first user message names it), the
-- thread list's order, the job of a thread, and the frontend tool calls
-- runs left for their clients to answer.
ALTER TABLE threads ADD COLUMN title TEXT;
CREATE INDEX threads_by_user_activity ON threads (user_id, last_active_at, id);
DROP INDEX threads_by_user;
CREATE INDEX jobs_by_thread ON automation_jobs (thread_id);
-- `closed_by`: the run whose turn answered the call (`answered` = 1) or
-- went on without answering it (0); NULL while it is pending.
CREATE TABLE tool_calls (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    asked_at INTEGER NOT NULL,
    closed_by TEXT,
    answered INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, id)
);
