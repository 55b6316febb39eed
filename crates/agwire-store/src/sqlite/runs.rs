//! Runs and their event logs on SQLite.

use agwire_core::Event;
use async_trait::async_trait;
use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::write;
use crate::error::Error;
use crate::run::RunStatus;
use crate::sql::{EVENTS_AFTER, RUN, RUN_COLUMNS, RUN_STATUS, STATUS_COUNTS};
use crate::{Accepted, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStore};

#[async_trait]
impl RunStore for SqliteStore {
    fn database(&self) -> &'static str {
        "sqlite"
    }

    async fn accept_run(&self, run: NewRun<'_>) -> Result<Accepted, Error> {
        let accept = crate::rules::Accept::prepare(&run)?;
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
        let end = crate::rules::End::prepare(ending, now_ms)?;
        let task_id = task_id.to_owned();
        self.writer.call(move |tx| end.run(tx, &task_id)).await
    }

    async fn usage(&self, user: &str, now_ms: i64) -> Result<crate::Usage, Error> {
        let user = user.to_owned();
        self.readers
            .read(move |c| {
                let runs: i64 = c
                    .prepare_cached(crate::sql::RUNS_SINCE)?
                    .query_row(params![user, now_ms - crate::RUN_WINDOW_MS], |r| r.get(0))?;
                let tokens: Option<i64> = c
                    .prepare_cached(crate::sql::TOKENS_ON_DAY)?
                    .query_row(params![user, crate::utc_day(now_ms)], |r| r.get(0))
                    .optional()?;
                Ok(crate::Usage {
                    runs_last_minute: u64::try_from(runs).unwrap_or(0),
                    tokens_today: u64::try_from(tokens.unwrap_or(0)).unwrap_or(0),
                })
            })
            .await
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
        let task_id = task_id.to_owned();
        self.readers
            .read(move |c| {
                let mut statement = c.prepare_cached(EVENTS_AFTER)?;
                let mut rows = statement.query(params![task_id, crate::log::bound(after)])?;
                let mut events = Vec::new();
                while let Some(row) = rows.next()? {
                    let text: String = row.get(2)?;
                    crate::log::unpack(
                        &task_id,
                        row.get(0)?,
                        row.get(1)?,
                        &text,
                        after,
                        &mut events,
                    )?;
                }
                Ok(events)
            })
            .await
    }

    async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
        let (user, run_id) = (user.to_owned(), run_id.to_owned());
        self.readers
            .read(move |c| {
                c.prepare_cached(RUN)?
                    .query_row(params![user, run_id], record)
                    .optional()?
                    .transpose()
            })
            .await
    }

    async fn run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error> {
        let task_id = task_id.to_owned();
        let status: Option<String> = self
            .readers
            .read(move |c| {
                Ok(c.prepare_cached(RUN_STATUS)?
                    .query_row([task_id], |r| r.get(0))
                    .optional()?)
            })
            .await?;
        status.map(|s| s.parse()).transpose()
    }

    async fn interrupted_runs(&self) -> Result<Vec<RunRecord>, Error> {
        // One process owns an embedded database: whatever is running when it
        // starts was left by a process that is gone.
        self.records(
            format!("SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' ORDER BY rowid"),
            Vec::new(),
        )
        .await
    }

    async fn thread_runs(&self, thread_id: &str, limit: u32) -> Result<Vec<RunRecord>, Error> {
        self.records(
            format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = ?1 \
                 ORDER BY created_at DESC, rowid DESC LIMIT ?2"
            ),
            vec![
                Value::Text(thread_id.to_owned()),
                Value::Integer(i64::from(limit)),
            ],
        )
        .await
    }

    async fn status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
        let counts: Vec<(String, i64)> = self
            .readers
            .read(|c| {
                Ok(c.prepare_cached(STATUS_COUNTS)?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?)
            })
            .await?;
        counts
            .into_iter()
            .map(|(status, n)| Ok((status.parse()?, n)))
            .collect()
    }
}

impl SqliteStore {
    /// The runs `sql` selects (`RUN_COLUMNS`) with `values` bound.
    async fn records(&self, sql: String, values: Vec<Value>) -> Result<Vec<RunRecord>, Error> {
        self.readers
            .read(move |c| {
                let rows: Vec<Result<RunRecord, Error>> = c
                    .prepare_cached(&sql)?
                    .query_map(rusqlite::params_from_iter(values), record)?
                    .collect::<Result<_, _>>()?;
                rows.into_iter().collect()
            })
            .await
    }
}

/// A run row (`RUN_COLUMNS`); its status, unknown, is an error of its own.
fn record(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<RunRecord, Error>> {
    let status: String = row.get(4)?;
    Ok(Ok(RunRecord {
        task_id: row.get(0)?,
        user_id: row.get(1)?,
        thread_id: row.get(2)?,
        run_id: row.get(3)?,
        status: match status.parse() {
            Ok(status) => status,
            Err(error) => return Ok(Err(error)),
        },
        error: row.get(5)?,
        usage: row.get(6)?,
        created_at: row.get(7)?,
        started_at: row.get(8)?,
        finished_at: row.get(9)?,
        options: crate::rules::stored_options(
            &row.get::<_, String>(0)?,
            row.get::<_, Option<String>>(10)?.as_deref(),
        ),
    }))
}
