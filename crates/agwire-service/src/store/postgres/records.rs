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

    async fn insert_attachment_in_bucket(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        size: usize,
        now_ms: i64,
    ) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO attachments (id, user_id, mime_type, size, created_at, in_bucket) \
             VALUES ($1, $2, $3, $4, $5, true)",
        )
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
        sqlx::query("UPDATE attachments SET in_bucket = true, bytes = NULL WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn attachments_not_in_bucket(
        &self,
        after: &str,
        limit: u32,
    ) -> Result<Vec<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM attachments WHERE NOT in_bucket AND id > $1 ORDER BY id LIMIT $2",
        )
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn attachment(&self, id: &str) -> Result<Option<AttachmentRecord>, Error> {
        let row =
            sqlx::query("SELECT user_id, mime_type, in_bucket FROM attachments WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|r| {
            Ok(AttachmentRecord {
                user_id: r.try_get("user_id")?,
                mime_type: r.try_get("mime_type")?,
                in_bucket: r.try_get("in_bucket")?,
            })
        })
        .transpose()
    }

    async fn attachment_bytes(&self, id: &str) -> Result<Option<Vec<u8>>, Error> {
        let row: Option<(bool, Option<Vec<u8>>)> =
            sqlx::query_as("SELECT in_bucket, bytes FROM attachments WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        match row {
            Some((true, _)) => crate::store::bucket_bytes(self.bucket.as_deref(), id).await,
            Some((false, bytes)) => Ok(bytes),
            None => Ok(None),
        }
    }

    fn bucket(&self) -> Option<&std::sync::Arc<crate::attachments::Bucket>> {
        self.bucket.as_ref()
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

    /// An attachment's bytes are its row's, gone with it — or its object
    /// in the bucket, removed now (after the commit; see SQLite's).
    async fn remove_attachment_bytes(&self, ids: &[String]) {
        crate::store::remove_bucket_objects(self.bucket.as_deref(), ids).await;
    }
}

crate::store::records::shared_records!(PgStore, sqlx::postgres::PgRow);
