//! Threads, profiles, attachments, calendar events and automation jobs on
//! PostgreSQL.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::error::Error;
use crate::sql::{
    ACTIVE_RUNS, ADVANCE_JOB, CALENDAR_EVENT, CALENDAR_EVENTS, CREATE_JOB_THREAD,
    DELETE_CALENDAR_EVENT, DELETE_JOB, DELETE_THREAD, DELETE_THREAD_ATTACHMENTS,
    DELETE_THREAD_EVENTS, DELETE_THREAD_MESSAGES, DELETE_THREAD_REFS, DELETE_THREAD_RUNS,
    DELETE_THREAD_TOOL_CALLS, DUE_JOBS, EXPIRE_TOOL_CALLS, INSERT_JOB, JOB, JOB_OF_THREAD,
    JOB_OF_THREAD_ID, JOBS, LAST_SHOWN_BEFORE, LATEST_THREAD, NAME_THREAD, PENDING_TOOL_CALLS,
    PUT_CALENDAR_EVENT, RECENT_MESSAGES, SET_SETTINGS, SET_THREAD_TITLE, SETTINGS, SHOWN_MESSAGES,
    THREAD, THREAD_MESSAGES, THREAD_OWNER, THREADS, UNNAMED_THREADS, UPDATE_JOB,
};
use crate::{
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
            Some((true, _)) => crate::blobs::blob_bytes(self.blobs.as_deref(), id).await,
            Some((false, bytes)) => Ok(bytes),
            None => Ok(None),
        }
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

/// [`RECENT_MESSAGES`] and [`SETTINGS`] in one statement, one round trip:
/// `$1` the user, `$2` the thread, `$3` how many messages.
const RECENT_MESSAGES_AND_SETTINGS: &str = "SELECT (SELECT settings FROM users WHERE id = $1), \
     ARRAY(SELECT body FROM messages WHERE thread_id = $2 \
     AND role IN ('user', 'assistant', 'tool', 'system', 'developer') ORDER BY seq DESC LIMIT $3)";

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
        crate::blobs::remove_blobs(self.blobs.as_deref(), ids).await;
    }
}

#[async_trait]
impl ThreadStore for PgStore {
    async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, Error> {
        Ok(sqlx::query_scalar(THREAD_OWNER)
            .bind(thread_id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn latest_thread(&self, user: &str) -> Result<Option<String>, Error> {
        Ok(sqlx::query_scalar(LATEST_THREAD)
            .bind(user)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn thread_messages(
        &self,
        thread_id: &str,
        roles: &[&str],
    ) -> Result<Vec<StoredMessage>, Error> {
        let rows = sqlx::query(THREAD_MESSAGES)
            .bind(thread_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .filter(|row| roles.contains(&row.get::<String, _>("role").as_str()))
            .map(stored_message)
            .collect()
    }

    async fn last_shown_before(
        &self,
        thread_id: &str,
        before_ms: i64,
    ) -> Result<Option<i64>, Error> {
        Ok(sqlx::query_scalar(LAST_SHOWN_BEFORE)
            .bind(thread_id)
            .bind(before_ms)
            .fetch_one(&self.pool)
            .await?)
    }

    async fn shown_messages(
        &self,
        thread_id: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredMessage>, Error> {
        let rows = sqlx::query(SHOWN_MESSAGES)
            .bind(thread_id)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(stored_message).collect()
    }

    async fn recent_messages(&self, thread_id: &str, limit: u32) -> Result<Vec<String>, Error> {
        let mut bodies: Vec<String> = sqlx::query_scalar(RECENT_MESSAGES)
            .bind(thread_id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        bodies.reverse();
        Ok(bodies)
    }

    async fn recent_messages_and_settings(
        &self,
        user: &str,
        thread_id: &str,
        limit: u32,
    ) -> Result<Option<(Option<String>, Vec<String>)>, Error> {
        let (settings, mut bodies): (Option<String>, Vec<String>) =
            sqlx::query_as(RECENT_MESSAGES_AND_SETTINGS)
                .bind(user)
                .bind(thread_id)
                .bind(i64::from(limit))
                .fetch_one(&self.pool)
                .await?;
        bodies.reverse();
        Ok(Some((settings, bodies)))
    }

    async fn threads(
        &self,
        user: &str,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<Vec<ThreadRecord>, Error> {
        // No cursor: everything is "after" (i64::MAX, "").
        let (active, id) = after.unwrap_or((i64::MAX, ""));
        let rows = sqlx::query(THREADS)
            .bind(user)
            .bind(active)
            .bind(id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(thread_record).collect()
    }

    async fn thread(&self, user: &str, thread_id: &str) -> Result<Option<ThreadRecord>, Error> {
        let row = sqlx::query(THREAD)
            .bind(user)
            .bind(thread_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(thread_record).transpose()
    }

    async fn set_thread_title(
        &self,
        user: &str,
        thread_id: &str,
        title: Option<&str>,
    ) -> Result<bool, Error> {
        let result = sqlx::query(SET_THREAD_TITLE)
            .bind(title)
            .bind(thread_id)
            .bind(user)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn expire_tool_calls(&self, now_ms: i64) -> Result<u64, Error> {
        let expired = sqlx::query(EXPIRE_TOOL_CALLS)
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(expired.rows_affected())
    }

    async fn pending_tool_calls(
        &self,
        thread_id: &str,
        now_ms: i64,
    ) -> Result<Vec<PendingToolCall>, Error> {
        let rows = sqlx::query(PENDING_TOOL_CALLS)
            .bind(thread_id)
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(PendingToolCall {
                    tool_call_id: row.try_get("id")?,
                    name: row.try_get("name")?,
                    arguments: row.try_get("arguments")?,
                    run_id: row.try_get("run_id")?,
                    asked_at: row.try_get("asked_at")?,
                    expires_at: row.try_get("expires_at")?,
                })
            })
            .collect()
    }

    async fn delete_thread(&self, user: &str, thread_id: &str) -> Result<DeletedThread, Error> {
        // Locked against every write of the thread (an accept waits, or
        // sees it gone and starts a new one).
        let mut tx = self.begin_locked(thread_id).await?;
        let owner: Option<String> = sqlx::query_scalar(THREAD_OWNER)
            .bind(thread_id)
            .fetch_optional(&mut *tx)
            .await?;
        if owner.as_deref() != Some(user) {
            return Err(Error::ThreadNotFound);
        }
        let job: Option<String> = sqlx::query_scalar(JOB_OF_THREAD_ID)
            .bind(thread_id)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(job_id) = job {
            return Err(Error::ThreadOfJob { job_id });
        }
        let active: i64 = sqlx::query_scalar(ACTIVE_RUNS)
            .bind(thread_id)
            .fetch_one(&mut *tx)
            .await?;
        if active > 0 {
            return Err(Error::ThreadBusy);
        }
        let attachments: Vec<String> = sqlx::query_scalar(DELETE_THREAD_ATTACHMENTS)
            .bind(user)
            .bind(thread_id)
            .fetch_all(&mut *tx)
            .await?;
        let mut deleted = [0; 6];
        for (n, sql) in [
            DELETE_THREAD_REFS,
            DELETE_THREAD_EVENTS,
            DELETE_THREAD_RUNS,
            DELETE_THREAD_MESSAGES,
            DELETE_THREAD_TOOL_CALLS,
            DELETE_THREAD,
        ]
        .into_iter()
        .enumerate()
        {
            deleted[n] = sqlx::query(sql)
                .bind(thread_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        self.remove_attachment_bytes(&attachments).await;
        Ok(DeletedThread {
            runs: deleted[2],
            messages: deleted[3],
            attachments,
        })
    }
}

impl PgStore {
    /// Names the threads stored before names were stored with them
    /// (`derived_title`, from their first user message), in pages: once a
    /// thread has a user message its name is never NULL again, so after the
    /// first start this finds nothing.
    pub(super) async fn fill_derived_titles(&self) -> Result<u64, Error> {
        let mut named = 0;
        loop {
            let rows = sqlx::query(UNNAMED_THREADS).fetch_all(&self.pool).await?;
            if rows.is_empty() {
                return Ok(named);
            }
            for row in &rows {
                let id: String = row.try_get("id")?;
                let title = crate::sql::derived_title(row.try_get("first")?);
                sqlx::query(NAME_THREAD)
                    .bind(title)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                named += 1;
            }
        }
    }
}

/// A message row (`seq`, `body`, `created_at`, `ui_schema`).
fn stored_message(row: &PgRow) -> Result<StoredMessage, Error> {
    crate::sql::stored_message(
        row.try_get("seq")?,
        row.try_get("body")?,
        row.try_get("created_at")?,
        row.try_get("ui_schema")?,
    )
}

fn thread_record(row: &PgRow) -> Result<ThreadRecord, Error> {
    Ok(ThreadRecord {
        thread_id: row.try_get("id")?,
        title: row.try_get("title")?,
        derived_title: row.try_get("derived_title")?,
        created_at: row.try_get("created_at")?,
        last_active_at: row.try_get("last_active_at")?,
        active_run_id: row.try_get("active_run")?,
        job_id: row.try_get("job_id")?,
    })
}

#[async_trait]
impl ProfileStore for PgStore {
    async fn settings(
        &self,
        user: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
        let text: Option<String> = sqlx::query_scalar(SETTINGS)
            .bind(user)
            .fetch_optional(&self.pool)
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
        sqlx::query(SET_SETTINGS)
            .bind(user)
            .bind(serde_json::to_string(settings)?)
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl CalendarStore for PgStore {
    async fn put_calendar_event(&self, event: &CalendarEvent, now_ms: i64) -> Result<bool, Error> {
        let result = sqlx::query(PUT_CALENDAR_EVENT)
            .bind(&event.id)
            .bind(&event.user_id)
            .bind(&event.title)
            .bind(event.start_ms)
            .bind(event.end_ms)
            .bind(&event.timezone)
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn calendar_event(&self, user: &str, id: &str) -> Result<Option<CalendarEvent>, Error> {
        let row = sqlx::query(CALENDAR_EVENT)
            .bind(user)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(calendar_event))
    }

    async fn delete_calendar_event(&self, user: &str, id: &str) -> Result<bool, Error> {
        let result = sqlx::query(DELETE_CALENDAR_EVENT)
            .bind(user)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn calendar_events(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<CalendarEvent>, Error> {
        let rows = sqlx::query(CALENDAR_EVENTS)
            .bind(user)
            .bind(to_ms)
            .bind(from_ms)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(calendar_event).collect())
    }
}

fn calendar_event(row: &PgRow) -> CalendarEvent {
    CalendarEvent {
        id: row.get("id"),
        user_id: row.get("user_id"),
        title: row.get("title"),
        start_ms: row.get("start_ms"),
        end_ms: row.get("end_ms"),
        timezone: row.get("timezone"),
    }
}

fn job(row: &PgRow) -> JobRecord {
    JobRecord {
        id: row.get("id"),
        user_id: row.get("user_id"),
        name: row.get("name"),
        schedule: row.get("schedule"),
        timezone: row.get("timezone"),
        prompt: row.get("prompt"),
        config: row.get("config"),
        enabled: row.get("enabled"),
        thread_id: row.get("thread_id"),
        next_run_at: row.get("next_run_at"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    }
}

#[async_trait]
impl JobStore for PgStore {
    async fn create_job(&self, job: &JobRecord) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(CREATE_JOB_THREAD)
            .bind(&job.thread_id)
            .bind(&job.user_id)
            .bind(job.created_at)
            .execute(&mut *tx)
            .await?;
        if inserted.rows_affected() != 1 {
            return Err(Error::JobThreadTaken);
        }
        sqlx::query(INSERT_JOB)
            .bind(&job.id)
            .bind(&job.user_id)
            .bind(&job.name)
            .bind(&job.schedule)
            .bind(&job.timezone)
            .bind(&job.prompt)
            .bind(&job.config)
            .bind(job.enabled)
            .bind(&job.thread_id)
            .bind(job.next_run_at)
            .bind(job.created_at)
            .bind(job.updated_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn update_job(&self, job: &JobRecord) -> Result<bool, Error> {
        let result = sqlx::query(UPDATE_JOB)
            .bind(&job.name)
            .bind(&job.schedule)
            .bind(&job.timezone)
            .bind(&job.prompt)
            .bind(&job.config)
            .bind(job.enabled)
            .bind(job.next_run_at)
            .bind(job.updated_at)
            .bind(&job.id)
            .bind(&job.user_id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn job(&self, user: &str, id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(JOB)
            .bind(user)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(job))
    }

    async fn job_of_thread(&self, user: &str, thread_id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(JOB_OF_THREAD)
            .bind(user)
            .bind(thread_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(job))
    }

    async fn jobs(&self, user: &str) -> Result<Vec<JobRecord>, Error> {
        let rows = sqlx::query(JOBS).bind(user).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(job).collect())
    }

    async fn delete_job(&self, user: &str, id: &str) -> Result<bool, Error> {
        let result = sqlx::query(DELETE_JOB)
            .bind(user)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    async fn due_jobs(&self, now_ms: i64, limit: u32) -> Result<Vec<JobRecord>, Error> {
        let rows = sqlx::query(DUE_JOBS)
            .bind(now_ms)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(job).collect())
    }

    async fn advance_job(&self, id: &str, due: i64, next: Option<i64>) -> Result<bool, Error> {
        let result = sqlx::query(ADVANCE_JOB)
            .bind(next)
            .bind(id)
            .bind(due)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }
}
