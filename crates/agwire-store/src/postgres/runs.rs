//! Runs and their event logs on PostgreSQL.

use agwire_core::Event;
use async_trait::async_trait;
use sqlx::{PgConnection, PgPool, Row};

use super::{DB_NOW_MS, PgStore, notify};
use crate::error::Error;
use crate::rules::{self, Accept, End, MessageRow};
use crate::{Accepted, Change, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStatus, RunStore};

/// Whether an error is PostgreSQL refusing a duplicate key.
fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|e| e.code().as_deref() == Some("23505"))
}

/// Appends events (as JSON) to a run's log as one row, numbered on from its
/// last one, under the run's row lock; the first one's number.
async fn append(tx: &mut PgConnection, task_id: &str, events: &[String]) -> Result<u64, Error> {
    if events.is_empty() {
        return Ok(0);
    }
    sqlx::query("SELECT 1 FROM runs WHERE task_id = $1 FOR UPDATE")
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await?;
    let last: i64 = sqlx::query_scalar(
        "SELECT COALESCE((SELECT seq + n_events - 1 FROM run_events WHERE task_id = $1 \
         ORDER BY seq DESC LIMIT 1), 0)",
    )
    .bind(task_id)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query("INSERT INTO run_events (task_id, seq, n_events, events) VALUES ($1, $2, $3, $4)")
        .bind(task_id)
        .bind(last + 1)
        .bind(i32::try_from(events.len()).unwrap_or(i32::MAX))
        .bind(crate::log::join(events))
        .execute(&mut *tx)
        .await?;
    Ok(u64::try_from(last + 1).unwrap_or(0))
}

/// Appends `candidates` in order — with `dedupe`, only those whose id the
/// thread does not hold yet. The caller holds the thread's lock.
async fn add_new_messages(
    tx: &mut PgConnection,
    thread_id: &str,
    run_id: &str,
    candidates: &[MessageRow],
    dedupe: bool,
    now_ms: i64,
) -> Result<(), Error> {
    if !dedupe {
        return insert_messages(tx, thread_id, run_id, candidates, now_ms).await;
    }
    let ids: Vec<&str> = candidates.iter().map(|c| c.id.as_str()).collect();
    let held: Vec<String> =
        sqlx::query_scalar("SELECT id FROM messages WHERE thread_id = $1 AND id = ANY($2)")
            .bind(thread_id)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
    let new: Vec<MessageRow> = candidates
        .iter()
        .filter(|c| !held.contains(&c.id))
        .cloned()
        .collect();
    insert_messages(tx, thread_id, run_id, &new, now_ms).await
}

/// Appends messages to a thread, numbered on (the caller holds its lock).
async fn insert_messages(
    tx: &mut PgConnection,
    thread_id: &str,
    run_id: &str,
    messages: &[MessageRow],
    now_ms: i64,
) -> Result<(), Error> {
    if messages.is_empty() {
        return Ok(());
    }
    let last: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE thread_id = $1")
            .bind(thread_id)
            .fetch_one(&mut *tx)
            .await?;
    let (ids, roles, bodies, shown) = columns(messages);
    sqlx::query(
        "INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at, shown) \
         SELECT $1, $2 + t.n, t.id, $3, t.role, t.body, $4, t.shown \
         FROM UNNEST($5::text[], $6::text[], $7::text[], $8::boolean[]) \
         WITH ORDINALITY AS t(id, role, body, shown, n)",
    )
    .bind(thread_id)
    .bind(last)
    .bind(run_id)
    .bind(now_ms)
    .bind(&ids)
    .bind(&roles)
    .bind(&bodies)
    .bind(&shown)
    .execute(&mut *tx)
    .await?;
    // The thread's first user message names it (an accept that waited
    // adds its messages here).
    if let Some(title) = messages.iter().find_map(|m| m.title.as_deref()) {
        sqlx::query(
            "UPDATE threads SET derived_title = $1 WHERE id = $2 AND derived_title IS NULL",
        )
        .bind(title)
        .bind(thread_id)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// Message rows as the arrays the functions take: ids, roles, bodies,
/// whether each is shown.
fn columns(messages: &[MessageRow]) -> (Vec<&str>, Vec<&str>, Vec<&str>, Vec<bool>) {
    let ids = messages.iter().map(|m| m.id.as_str()).collect();
    let roles = messages.iter().map(|m| m.role).collect();
    let bodies = messages.iter().map(|m| m.body.as_str()).collect();
    let shown = messages.iter().map(|m| m.shown).collect();
    (ids, roles, bodies, shown)
}

/// Takes a thread's lock (for adding messages outside an accept).
async fn lock_thread(tx: &mut PgConnection, thread_id: &str) -> Result<(), Error> {
    sqlx::query("SELECT 1 FROM threads WHERE id = $1 FOR UPDATE")
        .bind(thread_id)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(())
}

/// `RunStore::claim_runnable`'s statements in `tx`.
async fn claim(
    tx: &mut PgConnection,
    (limit, now_ms): (u32, i64),
    (replica, lease_ms): (&str, i64),
    register: &OnClaim,
) -> Result<Vec<Claimed>, Error> {
    // SKIP LOCKED: a run another replica is claiming (or cancelling) right
    // now is not ours to wait for. A run behind another active run of its
    // thread is never a candidate, locked or not.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "WITH picked AS ( \
           SELECT q.task_id FROM runs q WHERE q.status = 'queued' \
           AND q.position = (SELECT MIN(o.position) FROM runs o \
                             WHERE o.thread_id = q.thread_id AND o.status IN ('queued', 'running')) \
           ORDER BY q.position LIMIT $2 FOR UPDATE SKIP LOCKED) \
         UPDATE runs SET status = 'running', started_at = GREATEST($1, runs.created_at), owner = $3, \
                         lease_until_ms = {DB_NOW_MS} + $4 FROM picked \
         WHERE runs.task_id = picked.task_id \
         RETURNING runs.position, runs.task_id, runs.user_id, runs.thread_id, runs.run_id, runs.input, \
                   runs.pending_messages, runs.runtime_mode, runs.options"
    )))
    .bind(now_ms)
    .bind(i64::from(limit))
    .bind(replica)
    .bind(lease_ms)
    .fetch_all(&mut *tx)
    .await?;
    let mut picked: Vec<(i64, Claimed)> = Vec::with_capacity(rows.len());
    for row in &rows {
        let task_id: String = row.try_get("task_id")?;
        let thread_id: String = row.try_get("thread_id")?;
        let run_id: String = row.try_get("run_id")?;
        if let Some(document) = row.try_get::<Option<String>, _>("pending_messages")? {
            let (dedupe, messages) = rules::pending(&document)?;
            lock_thread(tx, &thread_id).await?;
            add_new_messages(tx, &thread_id, &run_id, &messages, dedupe, now_ms).await?;
            sqlx::query("UPDATE runs SET pending_messages = NULL WHERE task_id = $1")
                .bind(&task_id)
                .execute(&mut *tx)
                .await?;
        }
        let input: String = row.try_get("input")?;
        let mode: Option<String> = row.try_get("runtime_mode")?;
        let options: Option<String> = row.try_get("options")?;
        picked.push((
            row.try_get("position")?,
            rules::claimed(
                task_id,
                row.try_get("user_id")?,
                &input,
                mode.as_deref(),
                options.as_deref(),
            )?,
        ));
    }
    // Oldest first, whatever order RETURNING gave.
    picked.sort_by_key(|(position, _)| *position);
    let claimed: Vec<Claimed> = picked.into_iter().map(|(_, run)| run).collect();
    for run in &claimed {
        register(&run.task_id);
    }
    Ok(claimed)
}

/// `agwire_accept` for one prepared run on its own statement (started by
/// `owner` when given), retried once when it lost a race to the same
/// A deadlock or serialization failure: the statement was undone whole.
fn is_deadlock(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code == "40P01" || code == "40001")
}

/// runId's first post.
pub(super) async fn accept_alone(
    pool: &PgPool,
    run: &Accept,
    owner: Option<&str>,
    lease_ms: i64,
) -> Result<Accepted, Error> {
    let (ids, roles, bodies, shown) = columns(&run.candidates);
    // Two first posts of one (user, runId) can race past the lookup; the
    // loser's insert breaks the unique key (and writes nothing), and its
    // second attempt finds the winner's run (a replay, or a conflict). Two
    // replicas' accepts that stop one thread's runs at once can deadlock:
    // PostgreSQL undoes one of them whole, and it goes again (a few times).
    for attempt in 0..4 {
        let answer = sqlx::query(
            "SELECT outcome, task_id, created, waiting, stopped FROM agwire_accept(\
             $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
             $20, $21, $22, $23, $24)",
        )
        .bind(&run.task_id)
        .bind(&run.user)
        .bind(&run.thread_id)
        .bind(&run.run_id)
        .bind(&run.request_hash)
        .bind(&run.input_json)
        .bind(run.mode)
        .bind(run.options.as_deref())
        .bind(run.strategy.as_str())
        .bind(run.dedupe)
        .bind(&ids)
        .bind(&roles)
        .bind(&bodies)
        .bind(run.pending())
        .bind(run.now_ms)
        .bind(owner)
        .bind(lease_ms)
        .bind(&run.answers)
        .bind(run.strict_answers)
        .bind(&shown)
        .bind(run.title())
        .bind(&run.attachments)
        .bind(
            run.quotas
                .runs_per_minute
                .map(|n| i32::try_from(n).unwrap_or(i32::MAX)),
        )
        .bind(
            run.quotas
                .tokens_per_day
                .map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
        )
        .fetch_one(pool)
        .await;
        let row = match answer {
            Ok(row) => row,
            Err(error) if attempt == 0 && is_unique_violation(&error) => continue,
            Err(error) if attempt < 3 && is_deadlock(&error) => continue,
            Err(error) => return Err(error.into()),
        };
        return answered(
            run,
            &row.try_get::<String, _>("outcome")?,
            row.try_get("task_id")?,
            row.try_get("created")?,
            row.try_get("waiting")?,
            row.try_get("stopped")?,
        );
    }
    Err(Error::RunIdInFlight {
        run_id: run.run_id.clone(),
    })
}

/// `agwire_accept`'s `stopped`: `[task, run, first]` for each run it stopped.
pub(super) type StoppedJson = sqlx::types::Json<Vec<(String, String, Option<u64>)>>;

/// What `agwire_accept`'s answer means for `run` (see its outcomes).
pub(super) fn answered(
    run: &Accept,
    outcome: &str,
    task_id: Option<String>,
    created: bool,
    waiting: bool,
    stopped: Option<StoppedJson>,
) -> Result<Accepted, Error> {
    let stopped: Vec<crate::Stopped> = stopped
        .map(|json| json.0)
        .unwrap_or_default()
        .into_iter()
        .map(|(task_id, run_id, ended)| crate::Stopped {
            task_id,
            run_id,
            ended,
        })
        .collect();
    let named = |task_id: Option<String>| {
        task_id.ok_or_else(|| {
            Error::Internal(format!("agwire_accept answered {outcome} without an id"))
        })
    };
    let accepted = |replayed, started| -> Result<Accepted, Error> {
        Ok(Accepted {
            task_id: named(task_id.clone())?,
            thread_id: run.thread_id.clone(),
            run_id: run.run_id.clone(),
            created,
            replayed,
            waiting,
            started,
            stopped: stopped.clone(),
        })
    };
    match outcome {
        "accepted" => accepted(false, None),
        "started" => accepted(false, run.start.clone()),
        "replayed" => accepted(true, None),
        "conflict" => Err(Error::RunIdReused {
            run_id: run.run_id.clone(),
        }),
        "not_found" => Err(Error::ThreadNotFound),
        "busy" => Err(Error::ThreadBusy),
        "not_pending" => Err(Error::ToolCallNotPending {
            tool_call_id: named(task_id)?,
        }),
        "answered" => Err(Error::ToolCallAnswered {
            tool_call_id: named(task_id)?,
        }),
        "closed" => Err(Error::ToolCallClosed {
            tool_call_id: named(task_id)?,
        }),
        "expired" => Err(Error::ToolCallExpired {
            tool_call_id: named(task_id)?,
        }),
        "quota_runs" | "quota_tokens" => {
            let retry_after_ms: i64 = named(task_id)?.parse().map_err(|_| {
                Error::Internal(format!("agwire_accept answered {outcome} without a wait"))
            })?;
            // The function reads its clock before it waits for the user's
            // lock (see `runs_retry_after`): never more than the window.
            let retry_after_ms = if outcome == "quota_runs" {
                retry_after_ms.clamp(1, crate::RUN_WINDOW_MS)
            } else {
                retry_after_ms
            };
            Err(Error::QuotaExceeded {
                quota: if outcome == "quota_runs" {
                    crate::Quota::RunsPerMinute(run.quotas.runs_per_minute.unwrap_or(0))
                } else {
                    crate::Quota::TokensPerDay(run.quotas.tokens_per_day.unwrap_or(0))
                },
                retry_after_ms,
            })
        }
        other => Err(Error::Internal(format!("agwire_accept answered {other}"))),
    }
}

#[async_trait]
impl RunStore for PgStore {
    fn database(&self) -> &'static str {
        "postgres"
    }

    async fn accept_run(&self, run: NewRun<'_>) -> Result<Accepted, Error> {
        let start = run.start.cloned();
        let run = Accept::prepare(&run)?;
        let Some(start) = start else {
            return self.accepts.accept(run).await;
        };
        // Registered before the write; forgotten unless the write started
        // the run (it waits, was a replay, was refused, or failed).
        (start.register)(&run.task_id);
        let task_id = run.task_id.clone();
        let accepted = self.accepts.accept(run).await;
        if !accepted.as_ref().is_ok_and(|a| a.started.is_some()) {
            (start.forget)(&task_id);
        }
        accepted
    }

    async fn claim_runnable(
        &self,
        limit: u32,
        now_ms: i64,
        register: OnClaim,
        forget: OnClaim,
    ) -> Result<Vec<Claimed>, Error> {
        let mut tx = self.pool.begin().await?;
        let claimed = claim(
            &mut tx,
            (limit, now_ms),
            (&self.replica, self.lease_ms),
            &register,
        )
        .await?;
        if let Err(error) = tx.commit().await {
            // A claim whose commit fails was never made.
            for run in &claimed {
                forget(&run.task_id);
            }
            return Err(error.into());
        }
        Ok(claimed)
    }

    async fn append_events(&self, task_id: &str, events: &[Event]) -> Result<u64, Error> {
        let events: Vec<String> = events.iter().map(Event::to_json).collect();
        if events.is_empty() {
            return Ok(0);
        }
        let first = self.writer.append(task_id, events).await?;
        match first {
            Some(first) => Ok(u64::try_from(first).unwrap_or(0)),
            None => Err(Error::RunNotRunning {
                task_id: task_id.to_owned(),
            }),
        }
    }

    async fn end_run(
        &self,
        task_id: &str,
        ending: &Ending<'_>,
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let end = End::prepare(ending, now_ms)?;
        let terminal = self
            .writer
            .end(super::batch::EndCall {
                task_id: task_id.to_owned(),
                end,
            })
            .await?;
        Ok(terminal.map(|seq| u64::try_from(seq).unwrap_or(0)))
    }

    async fn usage(&self, user: &str, now_ms: i64) -> Result<crate::Usage, Error> {
        let runs: i64 = sqlx::query_scalar(crate::sql::RUNS_SINCE)
            .bind(user)
            .bind(now_ms - crate::RUN_WINDOW_MS)
            .fetch_one(&self.pool)
            .await?;
        let tokens: Option<i64> = sqlx::query_scalar(crate::sql::TOKENS_ON_DAY)
            .bind(user)
            .bind(crate::utc_day(now_ms))
            .fetch_optional(&self.pool)
            .await?;
        Ok(crate::Usage {
            runs_last_minute: u64::try_from(runs).unwrap_or(0),
            tokens_today: u64::try_from(tokens.unwrap_or(0)).unwrap_or(0),
        })
    }

    async fn cancel_queued(
        &self,
        task_id: &str,
        events: &[Event],
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let events: Vec<String> = events.iter().map(Event::to_json).collect();
        let mut tx = self.pool.begin().await?;
        let changed = sqlx::query(
            "UPDATE runs SET status = 'cancelled', finished_at = $1 WHERE task_id = $2 AND status = 'queued'",
        )
        .bind(now_ms)
        .bind(task_id)
        .execute(&mut *tx)
        .await?;
        if changed.rows_affected() != 1 {
            return Ok(None);
        }
        // A run cancelled while it waited never reached its thread: its
        // messages stay in the run's stored input only.
        let first = append(&mut tx, task_id, &events).await?;
        if !events.is_empty() {
            let last = first + events.len() as u64 - 1;
            notify(&mut tx, &format!("a {first} {last} {task_id}")).await?;
        }
        notify(&mut tx, "r").await?;
        tx.commit().await?;
        Ok(Some(first))
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
        // Other replicas may be executing runs right now: only those whose
        // lease ran out were left by a process that is gone.
        self.abandoned_runs().await
    }

    async fn abandoned_runs(&self) -> Result<Vec<RunRecord>, Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE status = 'running' \
             AND (lease_until_ms IS NULL OR lease_until_ms < {DB_NOW_MS}) ORDER BY position"
        )))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    fn replica_id(&self) -> Option<String> {
        Some(self.replica.to_string())
    }

    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        Some(self.changes.subscribe())
    }

    async fn request_cancel(&self, task_id: &str) -> Result<(), Error> {
        // Kept with the run (a strategy's reason stays), and said to every
        // replica when this commits.
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE runs SET stop_requested = COALESCE(stop_requested, 'cancel') \
             WHERE task_id = $1 AND status = 'running'",
        )
        .bind(task_id)
        .execute(&mut *tx)
        .await?;
        notify(&mut tx, &format!("c {task_id}")).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
        self.read_status_counts().await
    }

    async fn thread_runs(&self, thread_id: &str, limit: u32) -> Result<Vec<RunRecord>, Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = $1 \
             ORDER BY created_at DESC, position DESC LIMIT $2"
        )))
        .bind(thread_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }
}

crate::sql::shared_run_reads!(PgStore, sqlx::postgres::PgRow);
