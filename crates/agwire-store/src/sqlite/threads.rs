//! Threads and their messages on SQLite: reads on the readers, the rare
//! writes (a title, a deletion) through the writer.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::error::Error;
use crate::sql::{
    ACTIVE_RUNS, DELETE_THREAD, DELETE_THREAD_ATTACHMENTS, DELETE_THREAD_EVENTS,
    DELETE_THREAD_MESSAGES, DELETE_THREAD_REFS, DELETE_THREAD_RUNS, DELETE_THREAD_TOOL_CALLS,
    EXPIRE_TOOL_CALLS, JOB_OF_THREAD_ID, LAST_SHOWN_BEFORE, LATEST_THREAD, PENDING_TOOL_CALLS,
    RECENT_MESSAGES, SET_THREAD_TITLE, SHOWN_MESSAGES, THREAD, THREAD_MESSAGES, THREAD_OWNER,
    THREADS, stored_message,
};
use crate::{DeletedThread, PendingToolCall, StoredMessage, ThreadRecord, ThreadStore};

/// A message row as [`THREAD_MESSAGES`] and [`SHOWN_MESSAGES`] read it.
fn message(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, String, i64, Option<String>)> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

/// A thread row as [`THREADS`] and [`THREAD`] read it.
fn thread_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<ThreadRecord> {
    Ok(ThreadRecord {
        thread_id: row.get(0)?,
        title: row.get(1)?,
        derived_title: row.get(2)?,
        created_at: row.get(3)?,
        last_active_at: row.get(4)?,
        active_run_id: row.get(5)?,
        job_id: row.get(6)?,
    })
}

#[async_trait]
impl ThreadStore for SqliteStore {
    async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, Error> {
        let thread_id = thread_id.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(THREAD_OWNER)?
                    .query_row([thread_id], |r| r.get(0))
                    .optional()?)
            })
            .await
    }

    async fn latest_thread(&self, user: &str) -> Result<Option<String>, Error> {
        let user = user.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(LATEST_THREAD)?
                    .query_row([user], |r| r.get(0))
                    .optional()?)
            })
            .await
    }

    async fn thread_messages(
        &self,
        thread_id: &str,
        roles: &[&str],
    ) -> Result<Vec<StoredMessage>, Error> {
        let thread_id = thread_id.to_owned();
        let roles: Vec<String> = roles.iter().map(|&r| r.to_owned()).collect();
        self.readers
            .read(move |c| {
                let mut statement = c.prepare_cached(THREAD_MESSAGES)?;
                let mut rows = statement.query([thread_id])?;
                let mut messages = Vec::new();
                while let Some(row) = rows.next()? {
                    let role: String = row.get(4)?;
                    if roles.contains(&role) {
                        let (seq, body, created_at, ui_schema) = message(row)?;
                        messages.push(stored_message(
                            seq,
                            &body,
                            created_at,
                            ui_schema.as_deref(),
                        )?);
                    }
                }
                Ok(messages)
            })
            .await
    }

    async fn last_shown_before(
        &self,
        thread_id: &str,
        before_ms: i64,
    ) -> Result<Option<i64>, Error> {
        let thread_id = thread_id.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(LAST_SHOWN_BEFORE)?
                    .query_row(params![thread_id, before_ms], |r| r.get(0))?)
            })
            .await
    }

    async fn shown_messages(
        &self,
        thread_id: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredMessage>, Error> {
        let thread_id = thread_id.to_owned();
        self.readers
            .read(move |c| {
                let rows: Vec<_> = c
                    .prepare_cached(SHOWN_MESSAGES)?
                    .query_map(params![thread_id, from_ms, to_ms], message)?
                    .collect::<Result<_, _>>()?;
                rows.into_iter()
                    .map(|(seq, body, created_at, ui_schema)| {
                        stored_message(seq, &body, created_at, ui_schema.as_deref())
                    })
                    .collect()
            })
            .await
    }

    async fn recent_messages(&self, thread_id: &str, limit: u32) -> Result<Vec<String>, Error> {
        let thread_id = thread_id.to_owned();
        self.readers
            .read(move |c| {
                let mut bodies: Vec<String> = c
                    .prepare_cached(RECENT_MESSAGES)?
                    .query_map(params![thread_id, limit], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                bodies.reverse();
                Ok(bodies)
            })
            .await
    }

    async fn threads(
        &self,
        user: &str,
        after: Option<(i64, &str)>,
        limit: u32,
    ) -> Result<Vec<ThreadRecord>, Error> {
        // No cursor: everything is "after" (i64::MAX, "").
        let (active, id) = after.unwrap_or((i64::MAX, ""));
        let (user, id) = (user.to_owned(), id.to_owned());
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(THREADS)?
                    .query_map(params![user, active, id, limit], thread_record)?
                    .collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn thread(&self, user: &str, thread_id: &str) -> Result<Option<ThreadRecord>, Error> {
        let (user, thread_id) = (user.to_owned(), thread_id.to_owned());
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(THREAD)?
                    .query_row(params![user, thread_id], thread_record)
                    .optional()?)
            })
            .await
    }

    async fn set_thread_title(
        &self,
        user: &str,
        thread_id: &str,
        title: Option<&str>,
    ) -> Result<bool, Error> {
        let (user, thread_id) = (user.to_owned(), thread_id.to_owned());
        let title = title.map(str::to_owned);
        self.writer
            .call(move |tx| {
                let changed = tx
                    .prepare_cached(SET_THREAD_TITLE)?
                    .execute(params![title, thread_id, user])?;
                Ok(changed == 1)
            })
            .await
    }

    async fn pending_tool_calls(
        &self,
        thread_id: &str,
        now_ms: i64,
    ) -> Result<Vec<PendingToolCall>, Error> {
        let thread_id = thread_id.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(PENDING_TOOL_CALLS)?
                    .query_map(params![thread_id, now_ms], |row| {
                        Ok(PendingToolCall {
                            tool_call_id: row.get(0)?,
                            name: row.get(1)?,
                            arguments: row.get(2)?,
                            run_id: row.get(3)?,
                            asked_at: row.get(4)?,
                            expires_at: row.get(5)?,
                        })
                    })?
                    .collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn expire_tool_calls(&self, now_ms: i64) -> Result<u64, Error> {
        self.writer
            .call(move |tx| {
                let expired = tx.prepare_cached(EXPIRE_TOOL_CALLS)?.execute([now_ms])?;
                Ok(expired as u64)
            })
            .await
    }

    async fn delete_thread(&self, user: &str, thread_id: &str) -> Result<DeletedThread, Error> {
        let (user, thread_id) = (user.to_owned(), thread_id.to_owned());
        // In the writer's transaction: every write of the thread (an
        // accept) comes before it or after it (and then sees it gone and
        // starts a new one). A refusal rolls back only this call.
        let deleted = self
            .writer
            .call(move |tx| {
                let owner: Option<String> = tx
                    .prepare_cached(THREAD_OWNER)?
                    .query_row([&thread_id], |r| r.get(0))
                    .optional()?;
                if owner.as_deref() != Some(user.as_str()) {
                    return Err(Error::ThreadNotFound);
                }
                let job: Option<String> = tx
                    .prepare_cached(JOB_OF_THREAD_ID)?
                    .query_row([&thread_id], |r| r.get(0))
                    .optional()?;
                if let Some(job_id) = job {
                    return Err(Error::ThreadOfJob { job_id });
                }
                let active: i64 = tx
                    .prepare_cached(ACTIVE_RUNS)?
                    .query_row([&thread_id], |r| r.get(0))?;
                if active > 0 {
                    return Err(Error::ThreadBusy);
                }
                let attachments: Vec<String> = tx
                    .prepare_cached(DELETE_THREAD_ATTACHMENTS)?
                    .query_map(params![user, thread_id], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                let delete = |sql: &str| -> Result<u64, Error> {
                    let n = tx.prepare_cached(sql)?.execute([&thread_id])?;
                    Ok(u64::try_from(n).unwrap_or(u64::MAX))
                };
                delete(DELETE_THREAD_REFS)?;
                delete(DELETE_THREAD_EVENTS)?;
                let runs = delete(DELETE_THREAD_RUNS)?;
                let messages = delete(DELETE_THREAD_MESSAGES)?;
                delete(DELETE_THREAD_TOOL_CALLS)?;
                delete(DELETE_THREAD)?;
                Ok(DeletedThread {
                    runs,
                    messages,
                    attachments,
                })
            })
            .await?;
        self.remove_attachment_bytes(&deleted.attachments).await;
        Ok(deleted)
    }
}
