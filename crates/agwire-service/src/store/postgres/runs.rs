//! Runs and their event logs on PostgreSQL.

use agwire_core::Event;
use async_trait::async_trait;
use sqlx::{PgConnection, Row};

use super::{DB_NOW_MS, PgStore, notify, to_i64};
use crate::error::Error;
use crate::store::prepared::{self, Accept, End, MessageRow};
use crate::store::{
    Accepted, Change, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStatus, RunStore, run_started,
};

const RUN_COLUMNS: &str = "task_id, user_id, thread_id, run_id, status, error, usage, created_at, started_at, finished_at";

fn record(row: &sqlx::postgres::PgRow) -> Result<RunRecord, Error> {
    Ok(RunRecord {
        task_id: row.try_get("task_id")?,
        user_id: row.try_get("user_id")?,
        thread_id: row.try_get("thread_id")?,
        run_id: row.try_get("run_id")?,
        status: row.try_get::<String, _>("status")?.parse()?,
        error: row.try_get("error")?,
        usage: row.try_get("usage")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
    })
}

/// Whether an error is PostgreSQL refusing a duplicate key.
fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|e| e.code().as_deref() == Some("23505"))
}

/// The rules of `RunStore::accept_run`, in its order, in `tx`.
async fn accept(tx: &mut PgConnection, run: &Accept) -> Result<Accepted, Error> {
    let existing = sqlx::query(
        "SELECT task_id, thread_id, request_hash, created_thread FROM runs \
         WHERE user_id = $1 AND run_id = $2",
    )
    .bind(&run.user)
    .bind(&run.run_id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(existing) = existing {
        let thread_id: String = existing.try_get("thread_id")?;
        let hash: String = existing.try_get("request_hash")?;
        if thread_id != run.thread_id || hash != run.request_hash {
            return Err(Error::Conflict(format!(
                "runId '{}' was already used with a different request",
                run.run_id
            )));
        }
        return Ok(Accepted {
            task_id: existing.try_get("task_id")?,
            thread_id,
            run_id: run.run_id.clone(),
            created: existing.try_get("created_thread")?,
            replayed: true,
            waiting: false,
        });
    }
    let inserted = sqlx::query(
        "INSERT INTO threads (id, user_id, created_at, last_active_at) VALUES ($1, $2, $3, $3) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&run.thread_id)
    .bind(&run.user)
    .bind(run.now_ms)
    .execute(&mut *tx)
    .await?;
    let created = inserted.rows_affected() == 1;
    // The thread's lock: accepts on one thread, and every addition of
    // messages to it, take their turns here.
    let owner: String = sqlx::query_scalar("SELECT user_id FROM threads WHERE id = $1 FOR UPDATE")
        .bind(&run.thread_id)
        .fetch_one(&mut *tx)
        .await?;
    if owner != run.user {
        return Err(Error::NotFound("thread not found".into()));
    }
    let busy: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM runs WHERE thread_id = $1 AND status IN ('queued', 'running')",
    )
    .bind(&run.thread_id)
    .fetch_one(&mut *tx)
    .await?;
    if busy > 0 && !run.enqueue {
        return Err(Error::Busy(
            "the thread already has an active run; wait for it or cancel it".into(),
        ));
    }
    let waiting = busy > 0;
    // A run waiting behind another adds its messages when it starts (or is
    // cancelled), so the thread reads in the order turns happened.
    let pending = if waiting {
        Some(run.pending.as_str())
    } else {
        add_new_messages(
            tx,
            &run.thread_id,
            &run.run_id,
            &run.candidates,
            run.dedupe,
            run.now_ms,
        )
        .await?;
        None
    };
    let task_id = uuid::Uuid::now_v7().to_string();
    sqlx::query(
        "INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, \
         input, created_at, pending_messages, runtime_mode, client_time) \
         VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10, $11)",
    )
    .bind(&task_id)
    .bind(&run.user)
    .bind(&run.thread_id)
    .bind(&run.run_id)
    .bind(&run.request_hash)
    .bind(created)
    .bind(&run.input_json)
    .bind(run.now_ms)
    .bind(pending)
    .bind(run.mode)
    .bind(run.client_time.as_deref())
    .execute(&mut *tx)
    .await?;
    if !created {
        sqlx::query("UPDATE threads SET last_active_at = $1 WHERE id = $2")
            .bind(run.now_ms)
            .bind(&run.thread_id)
            .execute(&mut *tx)
            .await?;
    }
    Ok(Accepted {
        task_id,
        thread_id: run.thread_id.clone(),
        run_id: run.run_id.clone(),
        created,
        replayed: false,
        waiting,
    })
}

/// Appends events (as JSON) to a run's log, numbered on from its last one,
/// under the run's row lock; the first one's number.
async fn append(tx: &mut PgConnection, task_id: &str, events: &[String]) -> Result<u64, Error> {
    if events.is_empty() {
        return Ok(0);
    }
    sqlx::query("SELECT 1 FROM runs WHERE task_id = $1 FOR UPDATE")
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await?;
    let last: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE task_id = $1")
            .bind(task_id)
            .fetch_one(&mut *tx)
            .await?;
    sqlx::query(
        "INSERT INTO run_events (task_id, seq, event) \
         SELECT $1, $2 + t.n, t.event FROM UNNEST($3::text[]) WITH ORDINALITY AS t(event, n)",
    )
    .bind(task_id)
    .bind(last)
    .bind(events)
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
    let ids: Vec<&str> = candidates.iter().map(|c| c.0.as_str()).collect();
    let held: Vec<String> =
        sqlx::query_scalar("SELECT id FROM messages WHERE thread_id = $1 AND id = ANY($2)")
            .bind(thread_id)
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?;
    let new: Vec<MessageRow> = candidates
        .iter()
        .filter(|c| !held.contains(&c.0))
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
    let ids: Vec<&str> = messages.iter().map(|m| m.0.as_str()).collect();
    let roles: Vec<&str> = messages.iter().map(|m| m.1).collect();
    let bodies: Vec<&str> = messages.iter().map(|m| m.2.as_str()).collect();
    sqlx::query(
        "INSERT INTO messages (thread_id, seq, id, run_id, role, body, created_at) \
         SELECT $1, $2 + t.n, t.id, $3, t.role, t.body, $4 \
         FROM UNNEST($5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS t(id, role, body, n)",
    )
    .bind(thread_id)
    .bind(last)
    .bind(run_id)
    .bind(now_ms)
    .bind(&ids)
    .bind(&roles)
    .bind(&bodies)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Takes a thread's lock (for adding messages outside an accept).
async fn lock_thread(tx: &mut PgConnection, thread_id: &str) -> Result<(), Error> {
    sqlx::query("SELECT 1 FROM threads WHERE id = $1 FOR UPDATE")
        .bind(thread_id)
        .fetch_optional(&mut *tx)
        .await?;
    Ok(())
}

/// `RunStore::end_run` in `tx`.
async fn end(tx: &mut PgConnection, task_id: &str, end: &End) -> Result<Option<u64>, Error> {
    let moved = sqlx::query(
        "UPDATE runs SET status = $1, error = $2, usage = $3, finished_at = $4, \
         owner = NULL, lease_until_ms = NULL \
         WHERE task_id = $5 AND status IN ('queued', 'running') RETURNING thread_id, run_id",
    )
    .bind(end.status.as_str())
    .bind(end.error.as_deref())
    .bind(end.usage.as_deref())
    .bind(end.now_ms)
    .bind(task_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(moved) = moved else {
        return Ok(None);
    };
    let thread_id: String = moved.try_get("thread_id")?;
    let run_id: String = moved.try_get("run_id")?;
    // A run that ends before its first event was written still gets a
    // valid log: `RUN_STARTED` first, then its one terminal event.
    let logged: Option<i64> =
        sqlx::query_scalar("SELECT seq FROM run_events WHERE task_id = $1 LIMIT 1")
            .bind(task_id)
            .fetch_optional(&mut *tx)
            .await?;
    let started = match logged {
        Some(_) => None,
        None => Some(append(tx, task_id, &[run_started(&thread_id, &run_id).to_json()]).await?),
    };
    lock_thread(tx, &thread_id).await?;
    insert_messages(tx, &thread_id, &run_id, &end.output, end.now_ms).await?;
    if let Some((answer, schema)) = &end.ui_schema {
        sqlx::query(
            "UPDATE messages SET ui_schema = $1 WHERE thread_id = $2 AND run_id = $3 AND id = $4",
        )
        .bind(schema)
        .bind(&thread_id)
        .bind(&run_id)
        .bind(answer)
        .execute(&mut *tx)
        .await?;
    }
    let terminal = append(tx, task_id, std::slice::from_ref(&end.terminal)).await?;
    let first = started.unwrap_or(terminal);
    notify(tx, &format!("a {first} {terminal} {task_id}")).await?;
    // The thread's next run, if one waits, is runnable now.
    notify(tx, "r").await?;
    Ok(Some(terminal))
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
         UPDATE runs SET status = 'running', started_at = $1, owner = $3, \
                         lease_until_ms = {DB_NOW_MS} + $4 FROM picked \
         WHERE runs.task_id = picked.task_id \
         RETURNING runs.position, runs.task_id, runs.user_id, runs.thread_id, runs.run_id, runs.input, \
                   runs.pending_messages, runs.runtime_mode, runs.client_time"
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
            let (dedupe, messages) = prepared::pending(&document)?;
            lock_thread(tx, &thread_id).await?;
            add_new_messages(tx, &thread_id, &run_id, &messages, dedupe, now_ms).await?;
            sqlx::query("UPDATE runs SET pending_messages = NULL WHERE task_id = $1")
                .bind(&task_id)
                .execute(&mut *tx)
                .await?;
        }
        let input: String = row.try_get("input")?;
        let mode: Option<String> = row.try_get("runtime_mode")?;
        let client_time: Option<String> = row.try_get("client_time")?;
        picked.push((
            row.try_get("position")?,
            prepared::claimed(
                task_id,
                row.try_get("user_id")?,
                &input,
                mode.as_deref(),
                client_time.as_deref(),
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

#[async_trait]
impl RunStore for PgStore {
    async fn accept_run(&self, run: NewRun<'_>) -> Result<Accepted, Error> {
        let run = Accept::prepare(&run)?;
        // Two first posts of one (user, runId) can race past the lookup; the
        // loser's insert breaks the unique key, and its second attempt finds
        // the winner's run (a replay, or a conflict).
        for attempt in 0..2 {
            let mut tx = self.pool.begin().await?;
            let accepted = match accept(&mut tx, &run).await {
                Ok(accepted) if !accepted.replayed => notify(&mut tx, "r").await.map(|()| accepted),
                other => other,
            };
            match accepted {
                Ok(accepted) => match tx.commit().await {
                    Ok(()) => return Ok(accepted),
                    Err(error) if attempt == 0 && is_unique_violation(&error) => continue,
                    Err(error) => return Err(error.into()),
                },
                Err(Error::Database(error)) if attempt == 0 && is_unique_violation(&error) => {}
                Err(error) => return Err(error),
            }
        }
        Err(Error::Conflict(format!(
            "runId '{}' is being accepted by another request",
            run.run_id
        )))
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
        let mut tx = self.pool.begin().await?;
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM runs WHERE task_id = $1 FOR UPDATE")
                .bind(task_id)
                .fetch_optional(&mut *tx)
                .await?;
        if status.as_deref() != Some("running") {
            return Err(Error::Conflict(format!("run {task_id} is not running")));
        }
        let first = append(&mut tx, task_id, &events).await?;
        let last = first + events.len() as u64 - 1;
        notify(&mut tx, &format!("a {first} {last} {task_id}")).await?;
        tx.commit().await?;
        Ok(first)
    }

    async fn end_run(
        &self,
        task_id: &str,
        ending: &Ending<'_>,
        now_ms: i64,
    ) -> Result<Option<u64>, Error> {
        let ending = End::prepare(ending, now_ms)?;
        let mut tx = self.pool.begin().await?;
        let terminal = end(&mut tx, task_id, &ending).await?;
        tx.commit().await?;
        Ok(terminal)
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
        let rows = sqlx::query(
            "SELECT seq, event FROM run_events WHERE task_id = $1 AND seq > $2 ORDER BY seq",
        )
        .bind(task_id)
        .bind(to_i64(after))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                let text: String = row.try_get("event")?;
                let event = Event::from_json(&text)?.value;
                Ok((u64::try_from(seq).unwrap_or(0), event))
            })
            .collect()
    }

    async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE user_id = $1 AND run_id = $2"
        )))
        .bind(user)
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(record).transpose()
    }

    async fn run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error> {
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM runs WHERE task_id = $1")
                .bind(task_id)
                .fetch_optional(&self.pool)
                .await?;
        status.map(|s| s.parse()).transpose()
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
        let mut connection = self.pool.acquire().await?;
        notify(&mut connection, &format!("c {task_id}")).await
    }

    async fn status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("status")?.parse()?,
                    row.try_get("n")?,
                ))
            })
            .collect()
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
