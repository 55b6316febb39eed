//! Profiles, attachments and calendar events on SQLite: reads on the
//! readers, writes through the writer.
//!
//! Why the writer for these rare writes, not a connection of their own:
//! SQLite lets one connection write at a time anyway, so a second writing
//! connection would only wait for the writer's lock (and make the writer
//! wait for it, holding up every run's commit behind a busy timeout); in
//! the writer they are one more call of a batch, undone alone when they
//! fail.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::error::Error;
use crate::sql::{
    CALENDAR_EVENT, CALENDAR_EVENTS, DELETE_CALENDAR_EVENT, PUT_CALENDAR_EVENT, SET_SETTINGS,
    SETTINGS,
};
use crate::{AttachmentRecord, AttachmentStore, CalendarEvent, CalendarStore, ProfileStore};

/// Its size as SQLite stores it.
fn size(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

#[async_trait]
impl AttachmentStore for SqliteStore {
    async fn insert_attachment(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        bytes: &[u8],
        now_ms: i64,
    ) -> Result<(), Error> {
        let path = self.attachment_path(id)?;
        let (length, bytes) = (bytes.len(), bytes.to_vec());
        // `create_new`: an id is never reused, and its bytes never replaced.
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)?
                .write_all(&bytes)
        })
        .await
        .map_err(|e| Error::Internal(format!("writing an attachment: {e}")))??;
        let (id, user, mime_type) = (id.to_owned(), user.to_owned(), mime_type.to_owned());
        self.writer
            .call(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO attachments (id, user_id, mime_type, size, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![id, user, mime_type, size(length), now_ms])?;
                Ok(())
            })
            .await
    }

    async fn insert_attachment_in_bucket(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        length: usize,
        now_ms: i64,
    ) -> Result<(), Error> {
        let (id, user, mime_type) = (id.to_owned(), user.to_owned(), mime_type.to_owned());
        self.writer
            .call(move |tx| {
                tx.prepare_cached(
                    "INSERT INTO attachments (id, user_id, mime_type, size, created_at, in_bucket) \
                     VALUES (?1, ?2, ?3, ?4, ?5, 1)",
                )?
                .execute(params![id, user, mime_type, size(length), now_ms])?;
                Ok(())
            })
            .await
    }

    async fn moved_to_bucket(&self, id: &str) -> Result<(), Error> {
        let moved = id.to_owned();
        self.writer
            .call(move |tx| {
                tx.prepare_cached("UPDATE attachments SET in_bucket = 1 WHERE id = ?1")?
                    .execute([moved])?;
                Ok(())
            })
            .await?;
        self.remove_attachment_files(&[id.to_owned()]).await;
        Ok(())
    }

    async fn attachments_not_in_bucket(
        &self,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, Error> {
        let after = after.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(
                    "SELECT id FROM attachments WHERE in_bucket = 0 AND id > ?1 ORDER BY id LIMIT ?2",
                )?
                .query_map(params![after, limit], |r| r.get(0))?
                .collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn attachment_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        let Some(record) = self.attachment(id).await? else {
            return Ok(None);
        };
        if record.in_bucket {
            return crate::blobs::blob_bytes(self.blobs.as_deref(), id).await;
        }
        let path = self.attachment_path(id)?;
        let read = tokio::task::spawn_blocking(move || std::fs::read(path))
            .await
            .map_err(|e| Error::Internal(format!("reading an attachment: {e}")))?;
        match read {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn attachment(&self, id: &str) -> Result<Option<AttachmentRecord>, Error> {
        let id = id.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(
                    "SELECT user_id, mime_type, in_bucket FROM attachments WHERE id = ?1",
                )?
                .query_row([id], |r| {
                    Ok(AttachmentRecord {
                        user_id: r.get(0)?,
                        mime_type: r.get(1)?,
                        in_bucket: r.get::<_, i64>(2)? != 0,
                    })
                })
                .optional()?)
            })
            .await
    }
}

impl SqliteStore {
    /// Removes deleted attachments' bytes (after their records' commit: a
    /// record never outlives its bytes' removal by more than this call, and
    /// bytes left by a crash here are never served — their record is gone).
    pub(super) async fn remove_attachment_bytes(&self, ids: &[String]) {
        self.remove_attachment_files(ids).await;
        crate::blobs::remove_blobs(self.blobs.as_deref(), ids).await;
    }

    /// Removes attachments' files beside the database.
    async fn remove_attachment_files(&self, ids: &[String]) {
        for id in ids {
            let Ok(path) = self.attachment_path(id) else {
                continue;
            };
            if let Err(error) = tokio::fs::remove_file(&path).await
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(%error, attachment = %id, "could not remove a deleted attachment's file");
            }
        }
    }
}

#[async_trait]
impl ProfileStore for SqliteStore {
    async fn settings(
        &self,
        user: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
        let user = user.to_owned();
        let text: Option<String> = self
            .readers
            .read(move |c| {
                Ok(c.prepare_cached(SETTINGS)?
                    .query_row([user], |r| r.get(0))
                    .optional()?)
            })
            .await?;
        Ok(match text {
            Some(text) => serde_json::from_str(&text)?,
            None => serde_json::Map::new(),
        })
    }

    async fn set_settings(
        &self,
        user: &str,
        settings: &serde_json::Map<String, serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), Error> {
        let (user, settings) = (user.to_owned(), serde_json::to_string(settings)?);
        self.writer
            .call(move |tx| {
                tx.prepare_cached(SET_SETTINGS)?
                    .execute(params![user, settings, now_ms])?;
                Ok(())
            })
            .await
    }
}

/// An event row as [`CALENDAR_EVENT`] and [`CALENDAR_EVENTS`] read it.
fn calendar_event(row: &rusqlite::Row<'_>) -> rusqlite::Result<CalendarEvent> {
    Ok(CalendarEvent {
        id: row.get(0)?,
        user_id: row.get(1)?,
        title: row.get(2)?,
        start_ms: row.get(3)?,
        end_ms: row.get(4)?,
        timezone: row.get(5)?,
    })
}

#[async_trait]
impl CalendarStore for SqliteStore {
    async fn put_calendar_event(&self, event: &CalendarEvent, now_ms: i64) -> Result<bool, Error> {
        let event = event.clone();
        self.writer
            .call(move |tx| {
                let changed = tx.prepare_cached(PUT_CALENDAR_EVENT)?.execute(params![
                    event.id,
                    event.user_id,
                    event.title,
                    event.start_ms,
                    event.end_ms,
                    event.timezone,
                    now_ms
                ])?;
                Ok(changed == 1)
            })
            .await
    }

    async fn calendar_event(&self, user: &str, id: &str) -> Result<Option<CalendarEvent>, Error> {
        let (user, id) = (user.to_owned(), id.to_owned());
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(CALENDAR_EVENT)?
                    .query_row(params![user, id], calendar_event)
                    .optional()?)
            })
            .await
    }

    async fn delete_calendar_event(&self, user: &str, id: &str) -> Result<bool, Error> {
        let (user, id) = (user.to_owned(), id.to_owned());
        self.writer
            .call(move |tx| {
                let deleted = tx
                    .prepare_cached(DELETE_CALENDAR_EVENT)?
                    .execute(params![user, id])?;
                Ok(deleted == 1)
            })
            .await
    }

    async fn calendar_events(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<CalendarEvent>, Error> {
        let user = user.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(CALENDAR_EVENTS)?
                    .query_map(params![user, to_ms, from_ms, limit], calendar_event)?
                    .collect::<Result<_, _>>()?)
            })
            .await
    }
}
