//! Automation jobs on SQLite: reads on the readers, writes through the
//! writer (see `records` for why).

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use crate::error::Error;
use crate::sql::{
    ADVANCE_JOB, CREATE_JOB_THREAD, DELETE_JOB, DUE_JOBS, INSERT_JOB, JOB, JOB_OF_THREAD, JOBS,
    UPDATE_JOB,
};
use crate::{JobRecord, JobStore};

/// A job row as the `job_columns!` texts read it.
fn job(row: &rusqlite::Row<'_>) -> rusqlite::Result<JobRecord> {
    Ok(JobRecord {
        id: row.get(0)?,
        user_id: row.get(1)?,
        name: row.get(2)?,
        schedule: row.get(3)?,
        timezone: row.get(4)?,
        prompt: row.get(5)?,
        config: row.get(6)?,
        enabled: row.get(7)?,
        thread_id: row.get(8)?,
        next_run_at: row.get(9)?,
        created_at: row.get(10)?,
        updated_at: row.get(11)?,
    })
}

#[async_trait]
impl JobStore for SqliteStore {
    async fn create_job(&self, job: &JobRecord) -> Result<(), Error> {
        let job = job.clone();
        self.writer
            .call(move |tx| {
                let inserted = tx.prepare_cached(CREATE_JOB_THREAD)?.execute(params![
                    job.thread_id,
                    job.user_id,
                    job.created_at
                ])?;
                if inserted != 1 {
                    return Err(Error::JobThreadTaken);
                }
                tx.prepare_cached(INSERT_JOB)?.execute(params![
                    job.id,
                    job.user_id,
                    job.name,
                    job.schedule,
                    job.timezone,
                    job.prompt,
                    job.config,
                    job.enabled,
                    job.thread_id,
                    job.next_run_at,
                    job.created_at,
                    job.updated_at
                ])?;
                Ok(())
            })
            .await
    }

    async fn update_job(&self, job: &JobRecord) -> Result<bool, Error> {
        let job = job.clone();
        self.writer
            .call(move |tx| {
                let changed = tx.prepare_cached(UPDATE_JOB)?.execute(params![
                    job.name,
                    job.schedule,
                    job.timezone,
                    job.prompt,
                    job.config,
                    job.enabled,
                    job.next_run_at,
                    job.updated_at,
                    job.id,
                    job.user_id
                ])?;
                Ok(changed == 1)
            })
            .await
    }

    async fn job(&self, user: &str, id: &str) -> Result<Option<JobRecord>, Error> {
        let (user, id) = (user.to_owned(), id.to_owned());
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(JOB)?
                    .query_row(params![user, id], job)
                    .optional()?)
            })
            .await
    }

    async fn job_of_thread(&self, user: &str, thread_id: &str) -> Result<Option<JobRecord>, Error> {
        let (user, thread_id) = (user.to_owned(), thread_id.to_owned());
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(JOB_OF_THREAD)?
                    .query_row(params![user, thread_id], job)
                    .optional()?)
            })
            .await
    }

    async fn jobs(&self, user: &str) -> Result<Vec<JobRecord>, Error> {
        let user = user.to_owned();
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(JOBS)?
                    .query_map([user], job)?
                    .collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn delete_job(&self, user: &str, id: &str) -> Result<bool, Error> {
        let (user, id) = (user.to_owned(), id.to_owned());
        self.writer
            .call(move |tx| Ok(tx.prepare_cached(DELETE_JOB)?.execute(params![user, id])? == 1))
            .await
    }

    async fn due_jobs(&self, now_ms: i64, limit: u32) -> Result<Vec<JobRecord>, Error> {
        self.readers
            .read(move |c| {
                Ok(c.prepare_cached(DUE_JOBS)?
                    .query_map(params![now_ms, limit], job)?
                    .collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn advance_job(&self, id: &str, due: i64, next: Option<i64>) -> Result<bool, Error> {
        let id = id.to_owned();
        self.writer
            .call(move |tx| {
                Ok(tx
                    .prepare_cached(ADVANCE_JOB)?
                    .execute(params![next, id, due])?
                    == 1)
            })
            .await
    }
}
