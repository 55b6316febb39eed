-- agwire's schema on PostgreSQL: the same data as the embedded SQLite
-- schema (store/sqlite/mod.rs), in one first version.
CREATE TABLE threads (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_active_at BIGINT NOT NULL
);
CREATE INDEX threads_by_user ON threads (user_id, last_active_at);

CREATE TABLE messages (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq BIGINT NOT NULL,
    id TEXT NOT NULL,
    run_id TEXT,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    ui_schema TEXT,
    PRIMARY KEY (thread_id, seq)
);
CREATE INDEX messages_by_id ON messages (thread_id, id);

-- `position` is the acceptance order (SQLite's rowid). `owner` and
-- `lease_until_ms` name the replica executing a running run and until when
-- its lease holds (set by replicas sharing the database).
CREATE TABLE runs (
    position BIGSERIAL NOT NULL UNIQUE,
    task_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    run_id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    created_thread BOOLEAN NOT NULL,
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    error TEXT,
    usage TEXT,
    pending_messages TEXT,
    runtime_mode TEXT,
    client_time TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    owner TEXT,
    lease_until_ms BIGINT,
    UNIQUE (user_id, run_id)
);
CREATE INDEX runs_by_thread ON runs (thread_id, status);
CREATE INDEX runs_active ON runs (position) WHERE status IN ('queued', 'running');

CREATE TABLE run_events (
    task_id TEXT NOT NULL REFERENCES runs (task_id),
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    settings TEXT NOT NULL DEFAULT '{}',
    updated_at BIGINT NOT NULL
);

CREATE TABLE attachments (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE calendar_events (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL,
    start_ms BIGINT NOT NULL,
    end_ms BIGINT NOT NULL,
    timezone TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX calendar_by_user ON calendar_events (user_id, start_ms);

CREATE TABLE automation_jobs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    schedule TEXT NOT NULL,
    timezone TEXT NOT NULL,
    prompt TEXT NOT NULL,
    config TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    thread_id TEXT NOT NULL,
    next_run_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX jobs_by_user ON automation_jobs (user_id, created_at);
CREATE INDEX jobs_due ON automation_jobs (next_run_at) WHERE enabled;
