//! Runs and their event logs on SQLite.

use agwire_core::Event;
use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use super::write;
use crate::error::Error;
use crate::store::{Accepted, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStatus, RunStore};

const RUN_COLUMNS: &str = "task_id, user_id, thread_id, run_id, status, error, usage, created_at, started_at, finished_at";

fn record(row: &sqlx::sqlite::SqliteRow) -> Result<RunRecord, Error> {
    Ok(RunRecord {
        task_id: row.get("task_id"),
        user_id: row.get("user_id"),
        thread_id: row.get("thread_id"),
        run_id: row.get("run_id"),
        status: row.get::<String, _>("status").parse()?,
        error: row.get("error"),
        usage: row.get("usage"),
        created_at: row.get("created_at"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
    })
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn accept_run(&self, run: NewRun<'_>) -> Result<Accepted, Error> {
        let accept = crate::store::prepared::Accept::prepare(&run)?;
        self.writer.call(move |tx| accept.run(tx)).await
    }

    async fn claim_runnable(
        &self,
        limit: u32,
        now_ms: i64,
        register: OnClaim,
        forget: OnClaim,
    ) -> Result<Vec<Claimed>, Error> {
        // A claim whose commit fails was never made: its runs are forgotten.
        let undo = Box::new(move |claimed: &Vec<Claimed>| {
            for run in claimed {
                forget(&run.task_id);
            }
        });
        self.writer
            .call_or_undo(
                move |tx| write::claim(tx, limit, now_ms, &register),
                Some(undo),
            )
            .await
    }

    async fn append_events(&self, task_id: &str, events: &[Event]) -> Result<u64, Error> {
        let events: Vec<String> = events.iter().map(Event::to_json).collect();
        let task_id = task_id.to_owned();
        self.writer
            .call(move |tx| write::append_running(tx, &task_id, &events))
            .await
    }

    async fn end_run(
        &self,
        task_id: &str,
        ending: &Ending<'_>,
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let end = crate::store::prepared::End::prepare(ending, now_ms)?;
        let task_id = task_id.to_owned();
        self.writer.call(move |tx| end.run(tx, &task_id)).await
    }

    async fn cancel_queued(
        &self,
        task_id: &str,
        events: &[Event],
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let events: Vec<String> = events.iter().map(Event::to_json).collect();
        let task_id = task_id.to_owned();
        self.writer
            .call(move |tx| write::cancel_queued(tx, &task_id, &events, now_ms))
            .await
    }

    async fn events_after(&self, task_id: &str, after: u64) -> Result<Vec<(u64, Event)>, Error> {
        let rows = sqlx::query(
            "SELECT seq, event FROM run_events WHERE task_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(task_id)
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.get("seq");
                let text: String = row.get("event");
                let event = Event::from_json(&text)?.value;
                Ok((u64::try_from(seq).unwrap_or(0), event))
            })
            .collect()
    }

    async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE user_id = ? AND run_id = ?"
        )))
        .bind(user)
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(record).transpose()
    }

    async fn run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error> {
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM runs WHERE task_id = ?")
                .bind(task_id)
                .fetch_optional(&self.pool)
                .await?;
        status.map(|s| s.parse()).transpose()
    }

    async fn interrupted_runs(&self) -> Result<Vec<RunRecord>, Error> {
        // One process owns an embedded database: whatever is running when it
        // starts was left by a process that is gone.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' ORDER BY rowid"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    async fn thread_runs(&self, thread_id: &str, limit: u32) -> Result<Vec<RunRecord>, Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?"
        )))
        .bind(thread_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    async fn status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| Ok((row.get::<String, _>("status").parse()?, row.get("n"))))
            .collect()
    }
}
