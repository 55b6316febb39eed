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

/// Schema versions, applied in order (`migrations/sqlite/`, one file each);
/// `PRAGMA user_version` records the last. A file, once released, never
/// changes: a change is a new file.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/sqlite/0001_init.sql"),
    include_str!("../../../migrations/sqlite/0002_users.sql"),
    include_str!("../../../migrations/sqlite/0003_attachments.sql"),
    include_str!("../../../migrations/sqlite/0004_run_usage.sql"),
    include_str!("../../../migrations/sqlite/0005_calendar_events.sql"),
    include_str!("../../../migrations/sqlite/0006_automation_jobs.sql"),
    include_str!("../../../migrations/sqlite/0007_message_ui_schema.sql"),
    include_str!("../../../migrations/sqlite/0008_runs_by_status.sql"),
    include_str!("../../../migrations/sqlite/0009_job_threads_owned.sql"),
    include_str!("../../../migrations/sqlite/0010_run_mode_and_client_time.sql"),
    include_str!("../../../migrations/sqlite/0011_thread_list_and_tool_calls.sql"),
    include_str!("../../../migrations/sqlite/0012_attachments_in_bucket.sql"),
    include_str!("../../../migrations/sqlite/0013_bounded_reads.sql"),
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
    /// Or in a bucket, when one is configured.
    bucket: Option<std::sync::Arc<crate::attachments::Bucket>>,
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
        let store = Self {
            pool,
            writer,
            files,
            bucket: None,
        };
        store.fill_derived_titles().await?;
        Ok(store)
    }

    /// New attachments go to `bucket` (those kept beside the database stay
    /// readable there).
    #[must_use]
    pub fn with_bucket(mut self, bucket: std::sync::Arc<crate::attachments::Bucket>) -> Self {
        self.bucket = Some(bucket);
        self
    }

    /// Where an attachment's bytes live (ids are UUIDs we mint: never a
    /// path).
    fn attachment_path(&self, id: &str) -> Result<std::path::PathBuf, Error> {
        uuid::Uuid::try_parse(id)
            .map(|_| self.files.join(id))
            .map_err(|_| Error::AttachmentNotFound)
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
