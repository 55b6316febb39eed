//! Threads, profiles, attachments, calendar events and automation jobs on
//! PostgreSQL.

use async_trait::async_trait;
use sqlx::Row;

use super::PgStore;
use crate::error::Error;
use crate::store::{
    AttachmentRecord, AttachmentStore, CalendarEvent, CalendarStore, DeletedThread, JobRecord,
    JobStore, PendingToolCall, ProfileStore, StoredMessage, ThreadRecord, ThreadStore,
};

#[async_trait]
impl AttachmentStore for PgStore {
    async fn insert_attachment(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        bytes: &[u8],
        now_ms: i64,
    ) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO attachments (id, user_id, mime_type, size, created_at, bytes) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id)
        .bind(user)
        .bind(mime_type)
        .bind(i64::try_from(bytes.len()).unwrap_or(i64::MAX))
        .bind(now_ms)
        .bind(bytes)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn attachment(&self, id: &str) -> Result<Option<AttachmentRecord>, Error> {
        let row = sqlx::query("SELECT user_id, mime_type FROM attachments WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| {
            Ok(AttachmentRecord {
                user_id: r.try_get("user_id")?,
                mime_type: r.try_get("mime_type")?,
            })
        })
        .transpose()
    }

    async fn attachment_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        let bytes: Option<Option<Vec<u8>>> =
            sqlx::query_scalar("SELECT bytes FROM attachments WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(bytes.flatten())
    }

    async fn url_signing_key(&self) -> Result<Option<Vec<u8>>, Error> {
        let fresh: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
            .iter()
            .flat_map(|u| u.into_bytes())
            .collect();
        // The first replica's key wins; everyone reads the stored one.
        sqlx::query(
            "INSERT INTO service_keys (name, key) VALUES ('url-signing', $1) ON CONFLICT (name) DO NOTHING",
        )
        .bind(&fresh)
        .execute(&self.pool)
        .await?;
        let key: Vec<u8> =
            sqlx::query_scalar("SELECT key FROM service_keys WHERE name = 'url-signing'")
                .fetch_one(&self.pool)
                .await?;
        Ok(Some(key))
    }
}

impl PgStore {
    /// A transaction holding the thread's row lock (the one every accept
    /// and every addition of messages to the thread takes).
    async fn begin_locked(
        &self,
        thread_id: &str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT 1 FROM threads WHERE id = $1 FOR UPDATE")
            .bind(thread_id)
            .execute(&mut *tx)
            .await?;
        Ok(tx)
    }

    /// Nothing to do: an attachment's bytes are its row's, gone with it.
    #[allow(clippy::unused_async)] // the shape the shared delete calls
    async fn remove_attachment_bytes(&self, _ids: &[String]) {}
}

crate::store::records::shared_records!(PgStore, sqlx::postgres::PgRow);
