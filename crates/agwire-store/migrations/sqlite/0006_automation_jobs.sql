CREATE TABLE automation_jobs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    schedule TEXT NOT NULL,
    timezone TEXT NOT NULL,
    prompt TEXT NOT NULL,
    config TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    thread_id TEXT NOT NULL,
    next_run_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX jobs_by_user ON automation_jobs (user_id, created_at);
CREATE INDEX jobs_due ON automation_jobs (enabled, next_run_at);
