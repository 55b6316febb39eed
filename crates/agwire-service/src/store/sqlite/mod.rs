//! The embedded backend: SQLite in WAL mode, migrated by `PRAGMA
//! user_version`.
//!
//! Accepting a run is one `BEGIN IMMEDIATE` transaction (SQLite's writer
//! lock taken up front, so two requests on one thread cannot both see it
//! idle): find or create the thread, apply the idempotency and
//! one-active-run rules, append the turn's messages, insert the run. Events
//! are numbered per run (1, 2, ...): SSE frames carry that number as `id:`.

mod records;
mod runs;
mod write;
mod writer;

use std::path::Path;
use std::str::FromStr;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::error::Error;

/// Schema versions, applied in order; `PRAGMA user_version` records the last.
const MIGRATIONS: &[&str] = &[
    r"
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
",
    r"
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    settings TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL
);
",
    r"
CREATE TABLE attachments (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
",
    r"
ALTER TABLE runs ADD COLUMN usage TEXT;
ALTER TABLE runs ADD COLUMN pending_messages TEXT;
CREATE INDEX messages_by_id ON messages (thread_id, id);
",
    r"
CREATE TABLE calendar_events (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL,
    timezone TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX calendar_by_user ON calendar_events (user_id, start_ms);
",
    r"
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
",
    r"
ALTER TABLE messages ADD COLUMN ui_schema TEXT;
",
    // Claims scan the queued runs in acceptance order.
    r"
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status);
",
    // A job's thread belongs to the job's owner from the moment the job
    // exists (before, it was created by the first tick, and another user
    // could take it first). Jobs whose thread another user already holds
    // move to a fresh thread of their own.
    r"
UPDATE automation_jobs SET thread_id = lower(
    hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
    substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))
WHERE EXISTS (SELECT 1 FROM threads t WHERE t.id = automation_jobs.thread_id AND t.user_id <> automation_jobs.user_id);
INSERT INTO threads (id, user_id, created_at, last_active_at)
SELECT thread_id, user_id, created_at, created_at FROM automation_jobs j
WHERE NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = j.thread_id);
",
    // What validation established about a run, kept typed beside its input
    // (the engine does not parse forwardedProps again).
    r"
ALTER TABLE runs ADD COLUMN runtime_mode TEXT;
ALTER TABLE runs ADD COLUMN client_time TEXT;
UPDATE runs SET runtime_mode = json_extract(input, '$.forwardedProps.runtime_mode'),
    client_time = json(json_extract(input, '$.forwardedProps.client_time'))
WHERE status = 'queued';
",
];

/// The embedded database.
///
/// A run's writes (accept, claim, events, end, cancel) go through one
/// writer thread that commits many runs' work per transaction
/// (the `writer` module); reads, and the rare writes of profiles, attachments,
/// calendars and jobs, use a pool of connections (WAL: readers never wait
/// for the writer).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: writer::Writer,
    /// Attachments' bytes: one file each, beside the database.
    files: std::path::PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self, Error> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(std::time::Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        migrate(&pool).await?;
        let writer = writer::Writer::open(path)?;
        let files = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join("attachments");
        std::fs::create_dir_all(&files)?;
        Ok(Self {
            pool,
            writer,
            files,
        })
    }

    /// Where an attachment's bytes live (ids are UUIDs we mint: never a
    /// path).
    fn attachment_path(&self, id: &str) -> Result<std::path::PathBuf, Error> {
        uuid::Uuid::try_parse(id)
            .map(|_| self.files.join(id))
            .map_err(|_| Error::NotFound("attachment not found".into()))
    }
}

/// Brings the schema up to date (or refuses one newer than this binary).
async fn migrate(pool: &SqlitePool) -> Result<(), Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await?;
    let applied = usize::try_from(version).unwrap_or(0);
    if applied > MIGRATIONS.len() {
        return Err(Error::Config(format!(
            "the database's schema (version {applied}) is newer than this binary's ({}): upgrade agwire",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        let set = format!("PRAGMA user_version = {}", i + 1);
        sqlx::raw_sql(sqlx::AssertSqlSafe(set))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}
