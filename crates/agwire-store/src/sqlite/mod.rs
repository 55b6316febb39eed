//! The embedded backend: SQLite in WAL mode, migrated by `PRAGMA
//! user_version`, on rusqlite alone.
//!
//! Accepting a run is one `BEGIN IMMEDIATE` transaction (SQLite's writer
//! lock taken up front, so two requests on one thread cannot both see it
//! idle): find or create the thread, apply the idempotency and
//! one-active-run rules, append the turn's messages, insert the run. Events
//! are numbered per run (1, 2, ...): SSE frames carry that number as `id:`.

mod connection;
mod jobs;
mod migrate;
mod read;
mod records;
mod runs;
mod threads;
mod webhooks;
mod write;
mod writer;

use std::path::Path;

use crate::error::Error;

/// The embedded database.
///
/// Every write (a run's: accept, claim, events, end, cancel; and the rare
/// ones of threads, profiles, attachments, calendars and jobs) goes
/// through one writer thread that commits many calls per transaction (the
/// `writer` module); reads go to a few connections of their own (`read`;
/// WAL: readers never wait for the writer).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    readers: read::Readers,
    writer: writer::Writer,
    /// Attachments' bytes: one file each, beside the database.
    files: std::path::PathBuf,
    /// Or in a bucket, when one is configured.
    blobs: Option<std::sync::Arc<dyn crate::Blobs>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self, Error> {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || Self::open_blocking(&path))
            .await
            .map_err(|e| Error::Internal(format!("opening the database: {e}")))?
    }

    /// [`SqliteStore::open`], on this thread.
    fn open_blocking(path: &Path) -> Result<Self, Error> {
        let mut setup = connection::open(path, connection::Role::Migrate)?;
        migrate::migrate(&mut setup)?;
        migrate::fill_derived_titles(&setup)?;
        drop(setup);
        let writer = writer::Writer::open(path)?;
        let readers = read::Readers::open(path)?;
        let files = path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join("attachments");
        std::fs::create_dir_all(&files)?;
        Ok(Self {
            readers,
            writer,
            files,
            blobs: None,
        })
    }

    /// Attachments recorded as in a bucket are read and removed through
    /// `blobs` (the service puts them there).
    #[must_use]
    pub fn with_blobs(mut self, blobs: std::sync::Arc<dyn crate::Blobs>) -> Self {
        self.blobs = Some(blobs);
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
