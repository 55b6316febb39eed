//! Runs and their event logs on SQLite.

use agwire_core::{Event, Message};
use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use crate::error::Error;
use crate::store::{
    Accepted, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStatus, RunStore, run_started,
};
use crate::validate::{ClientTime, RuntimeMode};

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
        let NewRun {
            user,
            input,
            request_hash,
            mode,
            client_time,
            admission,
            now_ms,
        } = run;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let existing = sqlx::query(
            "SELECT task_id, thread_id, request_hash, created_thread FROM runs WHERE user_id = ? AND run_id = ?",
        )
        .bind(user)
        .bind(&input.run_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = existing {
            let same = row.get::<String, _>("thread_id") == input.thread_id
                && row.get::<String, _>("request_hash") == request_hash;
            if !same {
                return Err(Error::Conflict(format!(
                    "runId '{}' was already used with a different request",
                    input.run_id
                )));
            }
            return Ok(Accepted {
                task_id: row.get("task_id"),
                thread_id: input.thread_id.clone(),
                run_id: input.run_id.clone(),
                created: row.get::<i64, _>("created_thread") != 0,
                replayed: true,
                waiting: false,
            });
        }
        let owner: Option<String> = sqlx::query_scalar("SELECT user_id FROM threads WHERE id = ?")
            .bind(&input.thread_id)
            .fetch_optional(&mut *tx)
            .await?;
        let created = match owner {
            Some(owner) if owner != user => return Err(Error::NotFound("thread not found".into())),
            Some(_) => false,
            None => {
                sqlx::query(
                    "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES (?, ?, ?, ?)",
                )
                .bind(&input.thread_id)
                .bind(user)
                .bind(now_ms)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
                true
            }
        };
        let busy: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE thread_id = ? AND status IN ('queued', 'running')",
        )
        .bind(&input.thread_id)
        .fetch_one(&mut *tx)
        .await?;
        if busy > 0 && !admission.enqueue {
            return Err(Error::Busy(
                "the thread already has an active run; wait for it or cancel it".into(),
            ));
        }
        let candidates: Vec<&Message> = if admission.whole_history {
            input.messages.iter().collect()
        } else {
            // Seed 004 sends exactly one user message — the turn's new one —
            // and may add tool messages answering the previous turn's
            // frontend tool calls. Those answers come before it in the thread,
            // where the conversation needs them.
            let answers = input
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Tool(_)));
            let user = input
                .messages
                .iter()
                .filter(|m| matches!(m, Message::User(_)))
                .take(1);
            answers.chain(user).collect()
        };
        let waiting = busy > 0;
        // A run waiting behind another adds its messages when it starts (or
        // is cancelled), so the thread reads in the order turns happened.
        // Only a whole history is matched by id: a single-turn client may
        // reuse ids, and its message must never be dropped.
        let dedupe = admission.whole_history;
        let pending = if waiting {
            Some(serde_json::json!({"dedupe": dedupe, "messages": candidates}).to_string())
        } else {
            add_new_messages(
                &mut tx,
                &input.thread_id,
                &input.run_id,
                &candidates,
                dedupe,
                now_ms,
            )
            .await?;
            None
        };
        let task_id = uuid::Uuid::now_v7().to_string();
        sqlx::query(
            "INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at, pending_messages, runtime_mode, client_time) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
        )
        .bind(&task_id)
        .bind(user)
        .bind(&input.thread_id)
        .bind(&input.run_id)
        .bind(request_hash)
        .bind(i64::from(created))
        .bind(serde_json::to_string(input)?)
        .bind(now_ms)
        .bind(pending)
        .bind(mode.map(RuntimeMode::as_str))
        .bind(client_time.map(|t| t.to_json().to_string()))
        .execute(&mut *tx)
        .await?;
        if !created {
            sqlx::query("UPDATE threads SET last_active_at = ? WHERE id = ?")
                .bind(now_ms)
                .bind(&input.thread_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Accepted {
            task_id,
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            created,
            replayed: false,
            waiting,
        })
    }

    async fn claim_runnable(
        &self,
        limit: u32,
        now_ms: i64,
        register: OnClaim<'_>,
        forget: OnClaim<'_>,
    ) -> Result<Vec<Claimed>, Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(
            "UPDATE runs SET status = 'running', started_at = ?1 WHERE task_id IN ( \
               SELECT q.task_id FROM runs q WHERE q.status = 'queued' \
               AND q.rowid = (SELECT MIN(o.rowid) FROM runs o \
                              WHERE o.thread_id = q.thread_id AND o.status IN ('queued', 'running')) \
               ORDER BY q.rowid LIMIT ?2) \
             RETURNING task_id, user_id, thread_id, run_id, input, pending_messages, runtime_mode, client_time",
        )
        .bind(now_ms)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let task_id: String = row.get("task_id");
            let thread_id: String = row.get("thread_id");
            let run_id: String = row.get("run_id");
            if let Some(pending) = row.get::<Option<String>, _>("pending_messages") {
                flush_pending(&mut tx, &task_id, (&thread_id, &run_id), &pending, now_ms).await?;
            }
            let input: agwire_core::RunAgentInput =
                serde_json::from_str(&row.get::<String, _>("input"))?;
            claimed.push(Claimed {
                task_id,
                user_id: row.get("user_id"),
                input,
                mode: row
                    .get::<Option<String>, _>("runtime_mode")
                    .as_deref()
                    .and_then(RuntimeMode::parse),
                client_time: row
                    .get::<Option<String>, _>("client_time")
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .and_then(|t| ClientTime::from_json(&t)),
            });
        }
        for run in &claimed {
            register(&run.task_id);
        }
        if let Err(error) = tx.commit().await {
            for run in &claimed {
                forget(&run.task_id);
            }
            return Err(error.into());
        }
        Ok(claimed)
    }

    async fn append_events(&self, task_id: &str, events: &[Event]) -> Result<u64, Error> {
        append_in(&self.pool, task_id, events).await
    }

    async fn end_run(
        &self,
        task_id: &str,
        ending: &Ending<'_>,
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let moved = sqlx::query(
            "UPDATE runs SET status = ?, error = ?, usage = ?, finished_at = ? \
             WHERE task_id = ? AND status IN ('queued', 'running') RETURNING thread_id, run_id",
        )
        .bind(ending.status.as_str())
        .bind(ending.error.map(serde_json::Value::to_string))
        .bind(ending.usage.map(serde_json::Value::to_string))
        .bind(now_ms)
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = moved else {
            return Ok(None);
        };
        let (thread_id, run_id): (String, String) = (row.get("thread_id"), row.get("run_id"));
        // A run that ends before its first event was written (a crash right
        // after the claim, a failed setup) still gets a valid log:
        // `RUN_STARTED` first, then its one terminal event.
        let logged: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM run_events WHERE task_id = ? LIMIT 1")
                .bind(task_id)
                .fetch_optional(&mut *tx)
                .await?;
        if logged.is_none() {
            let started = run_started(&thread_id, &run_id);
            append_in(&mut *tx, task_id, std::slice::from_ref(&started)).await?;
        }
        insert_messages(&mut tx, &thread_id, &run_id, ending.output, now_ms).await?;
        let last_answer = ending
            .output
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Assistant(_)));
        if let (Some(schema), Some(answer)) = (ending.ui_schema, last_answer) {
            sqlx::query(
                "UPDATE messages SET ui_schema = ? WHERE thread_id = ? AND run_id = ? AND id = ?",
            )
            .bind(schema.to_string())
            .bind(&thread_id)
            .bind(&run_id)
            .bind(answer.id())
            .execute(&mut *tx)
            .await?;
        }
        let seq = append_in(&mut *tx, task_id, std::slice::from_ref(ending.terminal)).await?;
        tx.commit().await?;
        Ok(Some(seq))
    }

    async fn cancel_queued(
        &self,
        task_id: &str,
        events: &[Event],
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let result = sqlx::query(
            "UPDATE runs SET status = 'cancelled', finished_at = ? WHERE task_id = ? AND status = 'queued'",
        )
        .bind(now_ms)
        .bind(task_id)
        .execute(&mut *tx)
        .await?;
        if result.rows_affected() != 1 {
            return Ok(None);
        }
        // A run cancelled while it waited never reached its thread: its
        // messages stay in the run's stored input only, so the thread still
        // reads in the order turns happened.
        let first = append_in(&mut *tx, task_id, events).await?;
        tx.commit().await?;
        Ok(Some(first))
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

/// Appends `events` to a run's log in one statement (one round trip to the
/// database thread however many events: those trips, not SQLite, are what a
/// run's writes cost); returns the first's sequence number.
async fn append_in<'c, E>(executor: E, task_id: &str, events: &[Event]) -> Result<u64, Error>
where
    E: sqlx::Executor<'c, Database = sqlx::Sqlite>,
{
    use std::fmt::Write;
    if events.is_empty() {
        return Ok(0);
    }
    let mut sql = String::from(
        "WITH base(m) AS (SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE task_id = ?1) \
         INSERT INTO run_events (task_id, seq, event) \
         SELECT ?1, base.m + v.column1, v.column2 FROM base, (VALUES ",
    );
    for i in 0..events.len() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(sql, "{sep}({}, ?{})", i + 1, i + 2);
    }
    sql.push_str(") AS v RETURNING seq");
    let mut query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).bind(task_id);
    for event in events {
        query = query.bind(event.to_json());
    }
    let seqs = query.fetch_all(executor).await?;
    let first = seqs.into_iter().min().unwrap_or(0);
    Ok(u64::try_from(first).unwrap_or(0))
}

/// Appends the messages of a run that waited (see `RunStore::accept_run`).
async fn flush_pending(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    task_id: &str,
    (thread_id, run_id): (&str, &str),
    pending: &str,
    now_ms: i64,
) -> Result<(), Error> {
    #[derive(serde::Deserialize)]
    struct Pending {
        dedupe: bool,
        messages: Vec<Message>,
    }
    let pending: Pending = serde_json::from_str(pending)?;
    let messages: Vec<&Message> = pending.messages.iter().collect();
    add_new_messages(tx, thread_id, run_id, &messages, pending.dedupe, now_ms).await?;
    sqlx::query("UPDATE runs SET pending_messages = NULL WHERE task_id = ?")
        .bind(task_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Appends `candidates` in order — with `dedupe`, only those whose id the
/// thread does not hold yet.
async fn add_new_messages(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    thread_id: &str,
    run_id: &str,
    candidates: &[&Message],
    dedupe: bool,
    now_ms: i64,
) -> Result<(), Error> {
    let mut new = Vec::with_capacity(candidates.len());
    for message in candidates {
        if !dedupe {
            new.push((*message).clone());
            continue;
        }
        let known: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM messages WHERE thread_id = ? AND id = ?")
                .bind(thread_id)
                .bind(message.id())
                .fetch_optional(&mut **tx)
                .await?;
        if known.is_none() {
            new.push((*message).clone());
        }
    }
    insert_messages(tx, thread_id, run_id, &new, now_ms).await
}

async fn insert_messages(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    thread_id: &str,
    run_id: &str,
    messages: &[Message],
    now_ms: i64,
) -> Result<(), Error> {
    let mut seq: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = ?")
            .bind(thread_id)
            .fetch_one(&mut **tx)
            .await?;
    for message in messages {
        seq += 1;
        sqlx::query(
            "INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(thread_id)
        .bind(seq)
        .bind(message.id())
        .bind(run_id)
        .bind(message.role().as_str())
        .bind(serde_json::to_string(message)?)
        .bind(now_ms)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}
