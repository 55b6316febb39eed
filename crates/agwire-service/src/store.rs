//! Persistence on embedded SQLite (WAL): threads and their messages, runs,
//! and each run's event log — the source of truth every stream is read from.
//!
//! Accepting a run is one `BEGIN IMMEDIATE` transaction (SQLite's writer lock
//! taken up front, so two requests on one thread cannot both see it idle):
//! find or create the thread, apply the idempotency and one-active-run rules,
//! append the user message, insert the run. Events are appended with a
//! per-run sequence number (1, 2, ...) that SSE frames carry as `id:`.

use std::path::Path;
use std::str::FromStr;

use agwire_core::{Event, Message};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use agwire_core::RunAgentInput;

use crate::error::Error;

/// Schema versions, applied in order; `PRAGMA user_version` records the last.
const MIGRATIONS: &[&str] = &[
    r"
CREATE TABLE threads (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_active_at INTEGER NOT NULL
);
CREATE INDEX threads_by_user ON threads (user_id, last_active_at);
CREATE TABLE messages (
    thread_id TEXT NOT NULL REFERENCES threads (id),
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    run_id TEXT,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE runs (
    task_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    thread_id TEXT NOT NULL REFERENCES threads (id),
    run_id TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    created_thread INTEGER NOT NULL,
    status TEXT NOT NULL,
    input TEXT NOT NULL,
    error TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    UNIQUE (user_id, run_id)
);
CREATE INDEX runs_by_thread ON runs (thread_id, status);
CREATE TABLE run_events (
    task_id TEXT NOT NULL REFERENCES runs (task_id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
",
    r"
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    settings TEXT NOT NULL DEFAULT '{}',
    updated_at INTEGER NOT NULL
);
",
    r"
CREATE TABLE attachments (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
",
    r"
ALTER TABLE runs ADD COLUMN usage TEXT;
ALTER TABLE runs ADD COLUMN pending_messages TEXT;
CREATE INDEX messages_by_id ON messages (thread_id, id);
",
    r"
CREATE TABLE calendar_events (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    title TEXT NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms INTEGER NOT NULL,
    timezone TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX calendar_by_user ON calendar_events (user_id, start_ms);
",
    r"
CREATE TABLE automation_jobs (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    schedule TEXT NOT NULL,
    timezone TEXT NOT NULL,
    prompt TEXT NOT NULL,
    config TEXT NOT NULL,
    enabled INTEGER NOT NULL,
    thread_id TEXT NOT NULL,
    next_run_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX jobs_by_user ON automation_jobs (user_id, created_at);
CREATE INDEX jobs_due ON automation_jobs (enabled, next_run_at);
",
    r"
ALTER TABLE messages ADD COLUMN ui_schema TEXT;
",
];

/// Run states. `queued` and `running` are active; the rest are final.
pub const ACTIVE: [&str; 2] = ["queued", "running"];

/// The answer to an accepted run (`TaskAcceptedResponse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The task (this service's id for the run).
    pub task_id: String,
    /// The thread.
    pub thread_id: String,
    /// The client's run id.
    pub run_id: String,
    /// Whether the original request created the thread.
    pub created: bool,
    /// Whether this was a re-post of an accepted request (nothing new stored).
    pub replayed: bool,
    /// Whether the run waits behind the thread's active run (it starts when
    /// that one ends).
    pub waiting: bool,
}

/// How a run is admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admission {
    /// A thread with an active run takes the new one as queued instead of
    /// refusing it.
    pub enqueue: bool,
    /// The request carries the whole conversation (a standard AG-UI client):
    /// its messages not yet in the thread are appended, in order. Otherwise
    /// (seed 004) its one user message is the turn's new message.
    pub whole_history: bool,
}

/// The embedded database.
///
/// One pool for reads and writes. (A separate one-connection writer pool
/// was measured slower: 231–300 vs 324–428 accepted runs/s, because every
/// statement is a round trip to that connection's thread, and they queue.)
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub async fn open(path: &Path) -> Result<Self, Error> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(std::time::Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        let store = Self { pool };
        store.migrate().await?;
        Ok(store)
    }

    async fn migrate(&self) -> Result<(), Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let version: i64 = sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&mut *tx)
            .await?;
        let applied = usize::try_from(version).unwrap_or(0);
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
            sqlx::raw_sql(*sql).execute(&mut *tx).await?;
            let set = format!("PRAGMA user_version = {}", i + 1);
            sqlx::raw_sql(sqlx::AssertSqlSafe(set))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Accepts a validated run for `user`, or explains why not.
    ///
    /// `request_hash` identifies the request body: re-posting the same body
    /// (same thread and run id) answers the original acceptance again; the
    /// same ids with another body are a conflict. A thread of another user
    /// does not exist for this one. A thread with an active run is busy.
    pub async fn accept_run(
        &self,
        user: &str,
        input: &RunAgentInput,
        request_hash: &str,
        admission: Admission,
        now_ms: i64,
    ) -> Result<Accepted, Error> {
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
            "INSERT INTO runs (task_id, user_id, thread_id, run_id, request_hash, created_thread, status, input, created_at, pending_messages) VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
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

    /// Appends `event` to the run's log; returns its sequence number.
    pub async fn append_event(&self, task_id: &str, event: &Event) -> Result<u64, Error> {
        let seq: i64 = sqlx::query_scalar(
            "INSERT INTO run_events (task_id, seq, event) \
             VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM run_events WHERE task_id = ?1), ?2) \
             RETURNING seq",
        )
        .bind(task_id)
        .bind(event.to_json())
        .fetch_one(&self.pool)
        .await?;
        Ok(u64::try_from(seq).unwrap_or(0))
    }

    /// Appends several events in one transaction (one commit for a burst, not
    /// one per event); returns the sequence number of the first.
    pub async fn append_events(&self, task_id: &str, events: &[Event]) -> Result<u64, Error> {
        append_in(&self.pool, task_id, events).await
    }

    /// The run's events after sequence number `after`, in order.
    pub async fn events_after(
        &self,
        task_id: &str,
        after: u64,
    ) -> Result<Vec<(u64, Event)>, Error> {
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

    /// The status of a run (`queued`, `running`, `succeeded`, `failed`,
    /// `cancelled`, `interrupted`), if `user` has a run with this id.
    pub async fn run_status(&self, user: &str, run_id: &str) -> Result<Option<String>, Error> {
        Ok(
            sqlx::query_scalar("SELECT status FROM runs WHERE user_id = ? AND run_id = ?")
                .bind(user)
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Moves a run to `status`, unless it already reached a final one (a late
    /// success never overwrites a cancel). Returns whether it moved.
    pub async fn set_status(
        &self,
        task_id: &str,
        status: &str,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let done = !ACTIVE.contains(&status);
        let result = sqlx::query(
            "UPDATE runs SET status = ?1, \
               started_at = CASE WHEN ?1 = 'running' THEN ?2 ELSE started_at END, \
               finished_at = CASE WHEN ?3 THEN ?2 ELSE finished_at END \
             WHERE task_id = ?4 AND status IN ('queued', 'running')",
        )
        .bind(status)
        .bind(now_ms)
        .bind(done)
        .bind(task_id)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Takes a queued run for execution (`queued` → `running`). False when it
    /// is no longer queued: a cancel got there first.
    pub async fn claim(&self, task_id: &str, now_ms: i64) -> Result<bool, Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let claimed = sqlx::query(
            "UPDATE runs SET status = 'running', started_at = ? WHERE task_id = ? AND status = 'queued' \
             RETURNING thread_id, run_id, pending_messages",
        )
        .bind(now_ms)
        .bind(task_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = claimed else {
            return Ok(false);
        };
        if let Some(pending) = row.get::<Option<String>, _>("pending_messages") {
            flush_pending(
                &mut tx,
                task_id,
                (
                    &row.get::<String, _>("thread_id"),
                    &row.get::<String, _>("run_id"),
                ),
                &pending,
                now_ms,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Cancels a run that has not started (`queued` → `cancelled`) and
    /// appends `events` (its whole log) in the same transaction. Returns the
    /// first event's sequence number, or `None` when a worker already took
    /// the run (nothing is written).
    pub async fn cancel_queued(
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

    /// The oldest queued run of a thread (the next to start there).
    pub async fn next_queued(&self, thread_id: &str) -> Result<Option<RunRecord>, Error> {
        let row = sqlx::query(
            "SELECT task_id, thread_id, run_id, status, input, error, usage, created_at, started_at, finished_at \
             FROM runs WHERE thread_id = ? AND status = 'queued' ORDER BY created_at, rowid LIMIT 1",
        )
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| record(&row)))
    }

    /// How many runs are in each status.
    pub async fn status_counts(&self) -> Result<Vec<(String, i64)>, Error> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM runs GROUP BY status")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|row| (row.get("status"), row.get("n")))
            .collect())
    }
}

/// A run as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// The task id.
    pub task_id: String,
    /// The thread.
    pub thread_id: String,
    /// The client's run id.
    pub run_id: String,
    /// Its state.
    pub status: String,
    /// The stored `RunAgentInput` (JSON).
    pub input: String,
    /// Why it failed (`{message, code}` JSON).
    pub error: Option<String>,
    /// Token usage (AG-UI `TokenUsage` JSON).
    pub usage: Option<String>,
    /// When it was accepted, started and finished (ms since the epoch).
    pub created_at: i64,
    /// Start time.
    pub started_at: Option<i64>,
    /// End time.
    pub finished_at: Option<i64>,
}

impl Store {
    /// `user`'s run with this id.
    pub async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
        let row = sqlx::query(
            "SELECT task_id, thread_id, run_id, status, input, error, usage, created_at, started_at, finished_at \
             FROM runs WHERE user_id = ? AND run_id = ?",
        )
        .bind(user)
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|row| record(&row)))
    }

    /// Runs left active (by a crash, or queued): what a starting service must
    /// finish or run.
    pub async fn active_runs(&self) -> Result<Vec<RunRecord>, Error> {
        let rows = sqlx::query(
            "SELECT task_id, thread_id, run_id, status, input, error, usage, created_at, started_at, finished_at \
             FROM runs WHERE status IN ('queued', 'running') ORDER BY created_at, rowid",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(record).collect())
    }
}

fn record(row: &sqlx::sqlite::SqliteRow) -> RunRecord {
    RunRecord {
        task_id: row.get("task_id"),
        thread_id: row.get("thread_id"),
        run_id: row.get("run_id"),
        status: row.get("status"),
        input: row.get("input"),
        error: row.get("error"),
        usage: row.get("usage"),
        created_at: row.get("created_at"),
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
    }
}

/// Everything the end of a run changes (see [`Store::end_run`]).
#[derive(Debug)]
pub struct Ending<'a> {
    /// `succeeded`, `failed`, `cancelled` or `interrupted`.
    pub status: &'a str,
    /// Why it failed (`{message, code}`).
    pub error: Option<&'a serde_json::Value>,
    /// Token usage (AG-UI `TokenUsage`).
    pub usage: Option<&'a serde_json::Value>,
    /// The `RUN_FINISHED` or `RUN_ERROR` event.
    pub terminal: &'a Event,
    /// What the run said (assistant and tool messages), for its thread.
    pub output: &'a [Message],
    /// The turn's `UiSchemaRenderer`, kept on its last assistant message.
    pub ui_schema: Option<&'a serde_json::Value>,
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

/// Appends the messages of a run that waited (see [`Store::accept_run`]).
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

/// A message of a thread, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Position in the thread (1, 2, ...).
    pub seq: i64,
    /// The message, as AG-UI.
    pub message: Message,
    /// When it was stored (ms since the epoch).
    pub created_at: i64,
    /// The `UiSchemaRenderer` shown under an assistant message.
    pub ui_schema: Option<serde_json::Value>,
}

impl Store {
    /// Appends what a run produced (assistant and tool messages) to its
    /// thread, after the turn's user message.
    pub async fn append_run_output(
        &self,
        thread_id: &str,
        run_id: &str,
        messages: &[Message],
        now_ms: i64,
    ) -> Result<(), Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        insert_messages(&mut tx, thread_id, run_id, messages, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends an active run in one transaction: its final status, error and
    /// usage, its output appended to the thread, and its terminal event
    /// appended to the log — so a crash leaves either all of it or none,
    /// and whoever sees the terminal event finds the status and the
    /// history already final. Returns the terminal event's sequence number,
    /// or `None` when the run had already ended (nothing is written).
    pub async fn end_run(
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
        .bind(ending.status)
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

    /// `user`'s most recently active thread.
    pub async fn latest_thread(&self, user: &str) -> Result<Option<String>, Error> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM threads WHERE user_id = ? ORDER BY last_active_at DESC, created_at DESC LIMIT 1",
        )
        .bind(user)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Who owns a thread.
    pub async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, Error> {
        Ok(
            sqlx::query_scalar("SELECT user_id FROM threads WHERE id = ?")
                .bind(thread_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// A thread's messages of the given roles, in order.
    pub async fn thread_messages(
        &self,
        thread_id: &str,
        roles: &[&str],
    ) -> Result<Vec<StoredMessage>, Error> {
        let rows = sqlx::query(
            "SELECT seq, role, body, created_at, ui_schema FROM messages WHERE thread_id = ? ORDER BY seq",
        )
        .bind(thread_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .filter(|row| roles.contains(&row.get::<String, _>("role").as_str()))
            .map(|row| {
                let body: String = row.get("body");
                Ok(StoredMessage {
                    seq: row.get("seq"),
                    message: serde_json::from_str(&body)?,
                    created_at: row.get("created_at"),
                    ui_schema: row
                        .get::<Option<String>, _>("ui_schema")
                        .and_then(|u| serde_json::from_str(&u).ok()),
                })
            })
            .collect()
    }
}

impl Store {
    /// A user's profile settings (`{}` for a user who never set any).
    pub async fn settings(
        &self,
        user: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
        let text: Option<String> = sqlx::query_scalar("SELECT settings FROM users WHERE id = ?")
            .bind(user)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match text {
            Some(text) => serde_json::from_str(&text)?,
            None => serde_json::Map::new(),
        })
    }

    /// Replaces a user's profile settings.
    pub async fn set_settings(
        &self,
        user: &str,
        settings: &serde_json::Map<String, serde_json::Value>,
        now_ms: i64,
    ) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO users (id, settings, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (id) DO UPDATE SET settings = ?2, updated_at = ?3",
        )
        .bind(user)
        .bind(serde_json::to_string(settings)?)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

impl Store {
    /// Records an uploaded attachment.
    pub async fn insert_attachment(
        &self,
        id: &str,
        user: &str,
        mime_type: &str,
        size: usize,
        now_ms: i64,
    ) -> Result<(), Error> {
        sqlx::query("INSERT INTO attachments (id, user_id, mime_type, size, created_at) VALUES (?, ?, ?, ?, ?)")
            .bind(id)
            .bind(user)
            .bind(mime_type)
            .bind(i64::try_from(size).unwrap_or(i64::MAX))
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// An attachment's owner and type.
    pub async fn attachment(&self, id: &str) -> Result<Option<(String, String)>, Error> {
        let row = sqlx::query("SELECT user_id, mime_type FROM attachments WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| (r.get("user_id"), r.get("mime_type"))))
    }
}

/// A calendar event as stored (instants in UTC, plus the zone it was
/// written in, for display).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarEvent {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub user_id: String,
    /// What it is.
    pub title: String,
    /// Start (ms since the epoch).
    pub start_ms: i64,
    /// End (ms since the epoch).
    pub end_ms: i64,
    /// The IANA zone it was written in (`event_timezone`).
    pub timezone: String,
}

impl Store {
    /// Creates the event, or updates `user`'s event with that id. False when
    /// the id belongs to another user (nothing written).
    pub async fn put_calendar_event(
        &self,
        event: &CalendarEvent,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let result = sqlx::query(
            "INSERT INTO calendar_events (id, user_id, title, start_ms, end_ms, timezone, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) \
             ON CONFLICT (id) DO UPDATE SET title = ?3, start_ms = ?4, end_ms = ?5, timezone = ?6, updated_at = ?7 \
             WHERE calendar_events.user_id = ?2",
        )
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

    /// `user`'s event with this id.
    pub async fn calendar_event(
        &self,
        user: &str,
        id: &str,
    ) -> Result<Option<CalendarEvent>, Error> {
        let row = sqlx::query(
            "SELECT id, user_id, title, start_ms, end_ms, timezone FROM calendar_events WHERE user_id = ? AND id = ?",
        )
        .bind(user)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(calendar_event))
    }

    /// Deletes `user`'s event; false when there was none.
    pub async fn delete_calendar_event(&self, user: &str, id: &str) -> Result<bool, Error> {
        let result = sqlx::query("DELETE FROM calendar_events WHERE user_id = ? AND id = ?")
            .bind(user)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    /// `user`'s events overlapping `[from_ms, to_ms)`, by start (at most
    /// `limit`).
    pub async fn calendar_events(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        limit: u32,
    ) -> Result<Vec<CalendarEvent>, Error> {
        let rows = sqlx::query(
            "SELECT id, user_id, title, start_ms, end_ms, timezone FROM calendar_events \
             WHERE user_id = ? AND start_ms < ? AND end_ms > ? ORDER BY start_ms, id LIMIT ?",
        )
        .bind(user)
        .bind(to_ms)
        .bind(from_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(calendar_event).collect())
    }
}

fn calendar_event(row: &sqlx::sqlite::SqliteRow) -> CalendarEvent {
    CalendarEvent {
        id: row.get("id"),
        user_id: row.get("user_id"),
        title: row.get("title"),
        start_ms: row.get("start_ms"),
        end_ms: row.get("end_ms"),
        timezone: row.get("timezone"),
    }
}

/// An automation job as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Its id.
    pub id: String,
    /// Its owner.
    pub user_id: String,
    /// Its name.
    pub name: String,
    /// The schedule (JSON of [`crate::schedule::Schedule`]).
    pub schedule: String,
    /// The IANA zone the schedule is read in.
    pub timezone: String,
    /// What each run asks.
    pub prompt: String,
    /// The runtime config (JSON of [`crate::agents::JobRuntime`]).
    pub config: String,
    /// Whether it fires.
    pub enabled: bool,
    /// The thread its runs go to.
    pub thread_id: String,
    /// The next tick (ms), when enabled.
    pub next_run_at: Option<i64>,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

const JOB_COLUMNS: &str = "id, user_id, name, schedule, timezone, prompt, config, enabled, thread_id, next_run_at, created_at, updated_at";

fn job(row: &sqlx::sqlite::SqliteRow) -> JobRecord {
    JobRecord {
        id: row.get("id"),
        user_id: row.get("user_id"),
        name: row.get("name"),
        schedule: row.get("schedule"),
        timezone: row.get("timezone"),
        prompt: row.get("prompt"),
        config: row.get("config"),
        enabled: row.get::<i64, _>("enabled") != 0,
        thread_id: row.get("thread_id"),
        next_run_at: row.get("next_run_at"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
    }
}

impl Store {
    /// Creates or replaces a job (its owner never changes: a job of another
    /// user with this id is left alone and false returned).
    pub async fn put_job(&self, job: &JobRecord) -> Result<bool, Error> {
        let result = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO automation_jobs ({JOB_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
             ON CONFLICT (id) DO UPDATE SET name = ?3, schedule = ?4, timezone = ?5, prompt = ?6, config = ?7, \
             enabled = ?8, next_run_at = ?10, updated_at = ?12 WHERE automation_jobs.user_id = ?2"
        )))
        .bind(&job.id)
        .bind(&job.user_id)
        .bind(&job.name)
        .bind(&job.schedule)
        .bind(&job.timezone)
        .bind(&job.prompt)
        .bind(&job.config)
        .bind(i64::from(job.enabled))
        .bind(&job.thread_id)
        .bind(job.next_run_at)
        .bind(job.created_at)
        .bind(job.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// `user`'s job.
    pub async fn job(&self, user: &str, id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE user_id = ? AND id = ?"
        )))
        .bind(user)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(job))
    }

    /// The job whose runs go to `thread_id`.
    pub async fn job_of_thread(&self, thread_id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE thread_id = ?"
        )))
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(job))
    }

    /// `user`'s jobs, oldest first.
    pub async fn jobs(&self, user: &str) -> Result<Vec<JobRecord>, Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE user_id = ? ORDER BY created_at, id"
        )))
        .bind(user)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(job).collect())
    }

    /// Deletes `user`'s job (its runs and thread stay); false if none.
    pub async fn delete_job(&self, user: &str, id: &str) -> Result<bool, Error> {
        let result = sqlx::query("DELETE FROM automation_jobs WHERE user_id = ? AND id = ?")
            .bind(user)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Enabled jobs whose next tick is at or before `now_ms`.
    pub async fn due_jobs(&self, now_ms: i64, limit: u32) -> Result<Vec<JobRecord>, Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM automation_jobs WHERE enabled = 1 AND next_run_at <= ? \
             ORDER BY next_run_at LIMIT ?"
        )))
        .bind(now_ms)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(job).collect())
    }

    /// Moves a job from tick `due` to `next`; false when another scheduler
    /// (or a change to the job) got there first.
    pub async fn advance_job(&self, id: &str, due: i64, next: Option<i64>) -> Result<bool, Error> {
        let result = sqlx::query(
            "UPDATE automation_jobs SET next_run_at = ? WHERE id = ? AND next_run_at = ? AND enabled = 1",
        )
        .bind(next)
        .bind(id)
        .bind(due)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// The runs on a thread, newest first (at most `limit`).
    pub async fn thread_runs(&self, thread_id: &str, limit: u32) -> Result<Vec<RunRecord>, Error> {
        let rows = sqlx::query(
            "SELECT task_id, thread_id, run_id, status, input, error, usage, created_at, started_at, finished_at \
             FROM runs WHERE thread_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ?",
        )
        .bind(thread_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(record).collect())
    }
}
