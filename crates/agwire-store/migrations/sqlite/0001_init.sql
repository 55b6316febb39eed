CREATE TABLE threads (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_active_at INTEGER NOT NULL
);
CREATE INDEX threads_by_user ON threads (user_id, last_active_at);
CREATE TABLE messages (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    run_id TEXT,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE runs (
    task_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    run_id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    created_thread INTEGER NOT NULL,
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    error TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    UNIQUE (user_id, run_id)
);
CREATE INDEX runs_by_thread ON runs (thread_id, status);
CREATE TABLE run_events (
    task_id TEXT NOT NULL REFERENCES runs (task_id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
