//! Threads, profiles, attachments, calendar events and automation jobs on
//! SQLite.

use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use crate::error::Error;
use crate::store::{
    AttachmentRecord, AttachmentStore, CalendarEvent, CalendarStore, DeletedThread, JobRecord,
    JobStore, PendingToolCall, ProfileStore, StoredMessage, ThreadRecord, ThreadStore,
};

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
        let (size, bytes) = (bytes.len(), bytes.to_vec());
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
        sqlx::query("INSERT INTO attachments (id, user_id, mime_type, size, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(id)
            .bind(user)
            .bind(mime_type)
            .bind(i64::try_from(size).unwrap_or(i64::MAX))
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn insert_attachment_in_bucket(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        size: usize,
        now_ms: i64,
    ) -> Result<(), Error> {
        sqlx::query("INSERT INTO attachments (id, user_id, mime_type, size, created_at, in_bucket) VALUES (?, ?, ?, ?, ?, 1)")
            .bind(id)
            .bind(user)
            .bind(mime_type)
            .bind(i64::try_from(size).unwrap_or(i64::MAX))
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn moved_to_bucket(&self, id: &str) -> Result<(), Error> {
        sqlx::query("UPDATE attachments SET in_bucket = 1 WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        self.remove_attachment_files(&[id.to_owned()]).await;
        Ok(())
    }

    async fn attachments_not_in_bucket(
        &self,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM attachments WHERE in_bucket = 0 AND id > ? ORDER BY id LIMIT ?",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn attachment_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        let Some(record) = self.attachment(id).await? else {
            return Ok(None);
        };
        if record.in_bucket {
            return crate::store::bucket_bytes(self.bucket.as_deref(), id).await;
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
        let row = sqlx::query("SELECT user_id, mime_type, in_bucket FROM attachments WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| AttachmentRecord {
            user_id: r.get("user_id"),
            mime_type: r.get("mime_type"),
            in_bucket: r.get::<i64, _>("in_bucket") != 0,
        }))
    }

    fn bucket(&self) -> Option<&std::sync::Arc<crate::attachments::Bucket>> {
        self.bucket.as_ref()
    }
}

impl SqliteStore {
    /// A transaction holding the database's write lock from its start
    /// (`BEGIN IMMEDIATE`: the writer's transactions wait for it, and it for
    /// them).
    async fn begin_locked(
        &self,
        _thread_id: &str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, Error> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Removes deleted attachments' bytes (after their records' commit: a
    /// record never outlives its bytes' removal by more than this call, and
    /// bytes left by a crash here are never served — their record is gone).
    async fn remove_attachment_bytes(&self, ids: &[String]) {
        self.remove_attachment_files(ids).await;
        crate::store::remove_bucket_objects(self.bucket.as_deref(), ids).await;
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

crate::store::records::shared_records!(SqliteStore, sqlx::sqlite::SqliteRow);
