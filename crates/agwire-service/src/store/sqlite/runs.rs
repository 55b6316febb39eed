//! Runs and their event logs on SQLite.

use agwire_core::Event;
use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use super::write;
use crate::error::Error;
use crate::run::RunStatus;
use crate::store::{Accepted, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStore};

#[async_trait]
impl RunStore for SqliteStore {
    fn database(&self) -> &'static str {
        "sqlite"
    }

    async fn accept_run(&self, run: NewRun<'_>) -> Result<Accepted, Error> {
        let accept = crate::store::prepared::Accept::prepare(&run)?;
        let Some(start) = run.start.cloned() else {
            return self.writer.call(move |tx| accept.run(tx)).await;
        };
        let forget = start.forget;
        let undo = Box::new(move |accepted: &Accepted| {
            if let Some(run) = &accepted.started {
                forget(&run.task_id);
            }
        });
        let register = start.register;
        self.writer
            .call_or_undo(
                move |tx| {
                    let accepted = accept.run(tx)?;
                    if let Some(run) = &accepted.started {
                        register(&run.task_id);
                    }
                    Ok(accepted)
                },
                Some(undo),
            )
            .await
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
        self.read_events_after(task_id, after).await
    }

    async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
        self.read_run(user, run_id).await
    }

    async fn run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error> {
        self.read_run_status(task_id).await
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
        self.read_status_counts().await
    }
}

crate::store::records::shared_run_reads!(SqliteStore, sqlx::sqlite::SqliteRow);
