CREATE TABLE users (
    id TEXT PRIMARY KEY,
    settings TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL
);
