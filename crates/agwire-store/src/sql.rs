//! What both backends share of their record stores (threads, profiles,
//! calendars, jobs) and run reads: the SQL text, where it is the same for
//! both, and the decoding of what it reads. Placeholders are `$n`, which
//! SQLite reads too (as parameters numbered in order of first appearance:
//! each text here names `$1`, `$2`, ... in that order — a test holds them
//! to it).

use crate::StoredMessage;
use crate::error::Error;

/// A thread's latest messages an agent is given (`Briefing::history`),
/// newest first: `$1` the thread, `$2` how many. The roles are
/// `HISTORY_ROLES`'s.
pub(crate) const RECENT_MESSAGES: &str = "SELECT body FROM messages WHERE thread_id = $1 \
     AND role IN ('user', 'assistant', 'tool', 'system', 'developer') ORDER BY seq DESC LIMIT $2";

/// A user's profile settings (JSON text): `$1` the user.
pub(crate) const SETTINGS: &str = "SELECT settings FROM users WHERE id = $1";

/// The config of the automation job a thread belongs to: `$1` the user, `$2`
/// the thread.
pub(crate) const JOB_CONFIG: &str =
    "SELECT config FROM automation_jobs WHERE user_id = $1 AND thread_id = $2";

/// Replaces a user's settings: `$1` the user, `$2` the settings (JSON
/// text), `$3` now.
pub(crate) const SET_SETTINGS: &str = "INSERT INTO users (id, settings, updated_at) \
     VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET settings = $2, updated_at = $3";

// --- quotas ----------------------------------------------------------------

/// When the user's `$3`-th most recent run (counting from 0) of those
/// accepted after `$2` was accepted: `$1` the user. A row means the user has
/// more than `$3` runs in the window.
pub(crate) const NTH_RECENT_RUN: &str = "SELECT accepted_at FROM quota_runs \
     WHERE user_id = $1 AND accepted_at > $2 ORDER BY accepted_at DESC LIMIT 1 OFFSET $3";

/// How many runs the user accepted after a time: `$1` the user, `$2` the time.
pub(crate) const RUNS_SINCE: &str =
    "SELECT COUNT(*) FROM quota_runs WHERE user_id = $1 AND accepted_at > $2";

/// A run the user had accepted, for `runs_per_minute`: `$1` the user, `$2`
/// when.
pub(crate) const RECORD_RUN: &str = "INSERT INTO quota_runs (user_id, accepted_at) VALUES ($1, $2)";

/// Forgets the user's runs accepted at or before a time: `$1` the user, `$2`
/// the time.
pub(crate) const FORGET_RUNS: &str =
    "DELETE FROM quota_runs WHERE user_id = $1 AND accepted_at <= $2";

/// The tokens counted for a user on a UTC day: `$1` the user, `$2` the day.
pub(crate) const TOKENS_ON_DAY: &str =
    "SELECT tokens FROM token_usage WHERE user_id = $1 AND day = $2";

// --- threads ---------------------------------------------------------------

/// A thread's owner: `$1` the thread.
pub(crate) const THREAD_OWNER: &str = "SELECT user_id FROM threads WHERE id = $1";

/// A user's most recently active thread: `$1` the user.
pub(crate) const LATEST_THREAD: &str = "SELECT id FROM threads WHERE user_id = $1 \
     ORDER BY last_active_at DESC, created_at DESC LIMIT 1";

/// A thread's messages in order, as [`stored_message`] reads them (and
/// `role`): `$1` the thread.
pub(crate) const THREAD_MESSAGES: &str = "SELECT seq, body, created_at, ui_schema, role \
     FROM messages WHERE thread_id = $1 ORDER BY seq";

/// When the last shown message before a time was written: `$1` the thread,
/// `$2` the time.
pub(crate) const LAST_SHOWN_BEFORE: &str = "SELECT MAX(created_at) FROM messages \
     WHERE thread_id = $1 AND shown AND created_at < $2";

/// A thread's shown messages in a time window, as [`stored_message`] reads
/// them: `$1` the thread, `$2` from, `$3` to.
pub(crate) const SHOWN_MESSAGES: &str = "SELECT seq, body, created_at, ui_schema FROM messages \
     WHERE thread_id = $1 AND shown AND created_at >= $2 AND created_at < $3 ORDER BY seq";

/// A thread's columns, in `ThreadRecord`'s order (`t` is the thread).
macro_rules! thread_columns {
    () => {
        "t.id, t.title, t.derived_title, t.created_at, t.last_active_at, \
         (SELECT r.run_id FROM runs r WHERE r.thread_id = t.id AND r.status IN ('queued', 'running') \
          ORDER BY r.created_at LIMIT 1) AS active_run, \
         (SELECT j.id FROM automation_jobs j WHERE j.thread_id = t.id LIMIT 1) AS job_id"
    };
}

/// A page of a user's threads, most recently active first: `$1` the user,
/// `$2` and `$3` the cursor (last active, id), `$4` how many.
pub(crate) const THREADS: &str = concat!(
    "SELECT ",
    thread_columns!(),
    " FROM threads t WHERE t.user_id = $1 \
     AND (t.last_active_at < $2 OR (t.last_active_at = $2 AND t.id < $3)) \
     ORDER BY t.last_active_at DESC, t.id DESC LIMIT $4"
);

/// One of a user's threads: `$1` the user, `$2` the thread.
pub(crate) const THREAD: &str = concat!(
    "SELECT ",
    thread_columns!(),
    " FROM threads t WHERE t.user_id = $1 AND t.id = $2"
);

/// Names a thread: `$1` the title, `$2` the thread, `$3` its user.
pub(crate) const SET_THREAD_TITLE: &str =
    "UPDATE threads SET title = $1 WHERE id = $2 AND user_id = $3";

/// A thread's open frontend tool calls, oldest first: `$1` the thread.
pub(crate) const PENDING_TOOL_CALLS: &str = "SELECT id, name, arguments, run_id, asked_at, expires_at \
     FROM tool_calls WHERE thread_id = $1 AND closed_by IS NULL AND NOT expired \
     AND (expires_at IS NULL OR expires_at > $2) ORDER BY asked_at, id";

/// The sweep: marks pending tool calls past their expiry (`$1`: now).
pub(crate) const EXPIRE_TOOL_CALLS: &str = "UPDATE tool_calls SET expired = TRUE \
     WHERE closed_by IS NULL AND NOT expired AND expires_at IS NOT NULL AND expires_at <= $1";

/// The automation job a thread belongs to, if any: `$1` the thread.
pub(crate) const JOB_OF_THREAD_ID: &str =
    "SELECT id FROM automation_jobs WHERE thread_id = $1 LIMIT 1";

/// A thread's queued and running runs: `$1` the thread.
pub(crate) const ACTIVE_RUNS: &str =
    "SELECT COUNT(*) FROM runs WHERE thread_id = $1 AND status IN ('queued', 'running')";

/// Deletes the attachments a deleted thread's turns refer to, less those
/// another of the owner's threads refers to too, returning their ids: `$1`
/// the owner, `$2` the thread. Recorded with each thread when its turns
/// were accepted (`attachment_refs`, the owner's own attachments only), so
/// this is two index reads per attachment, not a scan of the owner's
/// messages under the write lock.
pub(crate) const DELETE_THREAD_ATTACHMENTS: &str = "DELETE FROM attachments \
     WHERE user_id = $1 AND id IN ( \
       SELECT r.attachment_id FROM attachment_refs r WHERE r.thread_id = $2 \
       AND NOT EXISTS (SELECT 1 FROM attachment_refs o \
                       WHERE o.attachment_id = r.attachment_id AND o.thread_id <> $2)) \
     RETURNING id";

/// The rest of a thread, each `$1` the thread, in this order: its
/// attachment references, its runs' events, its runs, its messages, its
/// tool calls, itself.
pub(crate) const DELETE_THREAD_REFS: &str = "DELETE FROM attachment_refs WHERE thread_id = $1";
pub(crate) const DELETE_THREAD_EVENTS: &str =
    "DELETE FROM run_events WHERE task_id IN (SELECT task_id FROM runs WHERE thread_id = $1)";
pub(crate) const DELETE_THREAD_RUNS: &str = "DELETE FROM runs WHERE thread_id = $1";
pub(crate) const DELETE_THREAD_MESSAGES: &str = "DELETE FROM messages WHERE thread_id = $1";
pub(crate) const DELETE_THREAD_TOOL_CALLS: &str = "DELETE FROM tool_calls WHERE thread_id = $1";
pub(crate) const DELETE_THREAD: &str = "DELETE FROM threads WHERE id = $1";

/// A page of the threads stored before names were stored with them, each
/// with its first user message (see `fill_derived_titles`).
pub(crate) const UNNAMED_THREADS: &str = "SELECT t.id, (SELECT m.body FROM messages m \
     WHERE m.thread_id = t.id AND m.role = 'user' ORDER BY m.seq LIMIT 1) AS first FROM threads t \
     WHERE t.derived_title IS NULL AND EXISTS (SELECT 1 FROM messages m \
     WHERE m.thread_id = t.id AND m.role = 'user') LIMIT 256";

/// Names an unnamed thread: `$1` the name, `$2` the thread.
pub(crate) const NAME_THREAD: &str =
    "UPDATE threads SET derived_title = $1 WHERE id = $2 AND derived_title IS NULL";

// --- calendars -------------------------------------------------------------

/// Creates or replaces a user's event (never another user's): `$1` the id,
/// `$2` the user, `$3` the title, `$4` start, `$5` end, `$6` the timezone,
/// `$7` now.
pub(crate) const PUT_CALENDAR_EVENT: &str = "INSERT INTO calendar_events \
     (id, user_id, title, start_ms, end_ms, timezone, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
     ON CONFLICT (id) DO UPDATE SET title = $3, start_ms = $4, end_ms = $5, timezone = $6, updated_at = $7 \
     WHERE calendar_events.user_id = EXCLUDED.user_id";

/// One of a user's events: `$1` the user, `$2` the event.
pub(crate) const CALENDAR_EVENT: &str = "SELECT id, user_id, title, start_ms, end_ms, timezone \
     FROM calendar_events WHERE user_id = $1 AND id = $2";

/// Deletes one of a user's events: `$1` the user, `$2` the event.
pub(crate) const DELETE_CALENDAR_EVENT: &str =
    "DELETE FROM calendar_events WHERE user_id = $1 AND id = $2";

/// A user's events overlapping a window, by start: `$1` the user, `$2` the
/// window's end, `$3` its start, `$4` how many.
pub(crate) const CALENDAR_EVENTS: &str = "SELECT id, user_id, title, start_ms, end_ms, timezone \
     FROM calendar_events WHERE user_id = $1 AND start_ms < $2 AND end_ms > $3 \
     ORDER BY start_ms, id LIMIT $4";

// --- jobs ------------------------------------------------------------------

/// A job's columns, in `JobRecord`'s order.
macro_rules! job_columns {
    () => {
        "id, user_id, name, schedule, timezone, prompt, config, enabled, thread_id, next_run_at, \
         created_at, updated_at"
    };
}

/// A new job's thread: `$1` the thread, `$2` the user, `$3` now. Inserts
/// nothing when the id is taken.
pub(crate) const CREATE_JOB_THREAD: &str = "INSERT INTO threads \
     (id, user_id, created_at, last_active_at) VALUES ($1, $2, $3, $3) ON CONFLICT (id) DO NOTHING";

/// A new job, its columns in order (`$1` ... `$12`).
pub(crate) const INSERT_JOB: &str = concat!(
    "INSERT INTO automation_jobs (",
    job_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
);

/// Changes a user's job: `$1` name, `$2` schedule, `$3` timezone, `$4`
/// prompt, `$5` config, `$6` enabled, `$7` next run, `$8` now, `$9` the job,
/// `$10` the user.
pub(crate) const UPDATE_JOB: &str = "UPDATE automation_jobs SET name = $1, schedule = $2, \
     timezone = $3, prompt = $4, config = $5, enabled = $6, next_run_at = $7, updated_at = $8 \
     WHERE id = $9 AND user_id = $10";

/// One of a user's jobs: `$1` the user, `$2` the job.
pub(crate) const JOB: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM automation_jobs WHERE user_id = $1 AND id = $2"
);

/// The job a user's thread belongs to: `$1` the user, `$2` the thread.
pub(crate) const JOB_OF_THREAD: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM automation_jobs WHERE user_id = $1 AND thread_id = $2"
);

/// A user's jobs, oldest first: `$1` the user.
pub(crate) const JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM automation_jobs WHERE user_id = $1 ORDER BY created_at, id"
);

/// Deletes one of a user's jobs: `$1` the user, `$2` the job.
pub(crate) const DELETE_JOB: &str = "DELETE FROM automation_jobs WHERE user_id = $1 AND id = $2";

/// The enabled jobs due by a time, soonest first: `$1` the time, `$2` how
/// many.
pub(crate) const DUE_JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM automation_jobs WHERE enabled AND next_run_at <= $1 ORDER BY next_run_at LIMIT $2"
);

/// Moves a job's next run on, if it was still due then: `$1` the next run,
/// `$2` the job, `$3` when it was due.
pub(crate) const ADVANCE_JOB: &str = "UPDATE automation_jobs SET next_run_at = $1 \
     WHERE id = $2 AND next_run_at = $3 AND enabled";

// --- runs ------------------------------------------------------------------

/// A run's columns as `RunRecord` holds them, in its order.
macro_rules! run_columns {
    () => {
        "task_id, user_id, thread_id, run_id, status, error, usage, created_at, started_at, finished_at, options"
    };
}

/// [`run_columns`] as a constant.
pub(crate) const RUN_COLUMNS: &str = run_columns!();

/// The rows of a run's log that hold its events after a number, in order:
/// `$1` the run, `$2` the number. The first is the row holding event
/// `$2 + 1` (it may start before it: `log::unpack` skips what was read).
pub(crate) const EVENTS_AFTER: &str = "SELECT seq, n_events, events FROM run_events \
     WHERE task_id = $1 AND seq >= (SELECT COALESCE(MAX(seq), 0) FROM run_events \
     WHERE task_id = $1 AND seq <= $2 + 1) ORDER BY seq";

/// One of a user's runs: `$1` the user, `$2` the client's run id.
pub(crate) const RUN: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM runs WHERE user_id = $1 AND run_id = $2"
);

/// A run's status: `$1` the run.
pub(crate) const RUN_STATUS: &str = "SELECT status FROM runs WHERE task_id = $1";

/// How many runs are in each status.
pub(crate) const STATUS_COUNTS: &str = "SELECT status, COUNT(*) AS n FROM runs GROUP BY status";

// --- decoding --------------------------------------------------------------

/// A message row's columns (`seq`, `body`, `created_at`, `ui_schema`) as a
/// message (a UI schema that is not JSON is dropped, as it was written).
pub(crate) fn stored_message(
    seq: i64,
    body: &str,
    created_at: i64,
    ui_schema: Option<&str>,
) -> Result<StoredMessage, Error> {
    Ok(StoredMessage {
        seq,
        message: serde_json::from_str(body)?,
        created_at,
        ui_schema: ui_schema.and_then(|u| serde_json::from_str(u).ok()),
    })
}

/// An unnamed thread's name from its first user message (empty when that
/// is not a user message).
pub(crate) fn derived_title(first: Option<String>) -> String {
    match first.map(|b| serde_json::from_str::<agwire_core::Message>(&b)) {
        Some(Ok(agwire_core::Message::User(user))) => crate::derived_title(&user),
        _ => String::new(),
    }
}

/// The run reads PostgreSQL answers with sqlx (its `RunStore` impl calls
/// them; `RUN_COLUMNS` and `record` come with them). SQLite's are in
/// `sqlite/runs.rs`, on the same SQL text.
macro_rules! shared_run_reads {
    ($store:ty, $row:ty) => {
        const RUN_COLUMNS: &str = crate::sql::RUN_COLUMNS;

        fn record(row: &$row) -> Result<RunRecord, Error> {
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
                options: crate::rules::stored_options(
                    row.try_get("task_id")?,
                    row.try_get("options")?,
                ),
            })
        }

        impl $store {
            async fn read_events_after(
                &self,
                task_id: &str,
                after: u64,
            ) -> Result<Vec<(u64, Event)>, Error> {
                let rows = sqlx::query(crate::sql::EVENTS_AFTER)
                    .bind(task_id)
                    .bind(crate::log::bound(after))
                    .fetch_all(&self.pool)
                    .await?;
                let mut events = Vec::new();
                for row in &rows {
                    crate::log::unpack(
                        task_id,
                        row.try_get("seq")?,
                        row.try_get::<i32, _>("n_events")?.into(),
                        row.try_get("events")?,
                        after,
                        &mut events,
                    )?;
                }
                Ok(events)
            }

            async fn read_run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
                let row = sqlx::query(crate::sql::RUN)
                    .bind(user)
                    .bind(run_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(record).transpose()
            }

            async fn read_run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error> {
                let status: Option<String> = sqlx::query_scalar(crate::sql::RUN_STATUS)
                    .bind(task_id)
                    .fetch_optional(&self.pool)
                    .await?;
                status.map(|s| s.parse()).transpose()
            }

            async fn read_status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
                let rows = sqlx::query(crate::sql::STATUS_COUNTS)
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
        }
    };
}

pub(super) use shared_run_reads;

#[cfg(test)]
mod tests;

/// Turns the outbox on or off: `$1` enabled.
pub(crate) const SET_WEBHOOKS_ENABLED: &str =
    "UPDATE webhook_settings SET enabled = $1 WHERE id = 1";

// (Parameters appear in the order of their numbers: SQLite numbers named
// parameters by first appearance.)

/// A delivered message: `$1` now, `$2` id.
pub(crate) const WEBHOOK_DELIVERED: &str = "UPDATE webhook_outbox \
     SET delivered_at = $1, lease_until = NULL, last_error = NULL WHERE id = $2";

/// A failed attempt (SQLite; PostgreSQL's casts `$2`): `$1` error, `$2`
/// next attempt (NULL: give up), `$3` now, `$4` id.
pub(crate) const WEBHOOK_FAILED: &str = "UPDATE webhook_outbox \
     SET lease_until = NULL, last_error = $1, next_attempt_at = COALESCE($2, next_attempt_at), \
     gave_up_at = CASE WHEN $2 IS NULL THEN $3 END WHERE id = $4";

/// Deletes up to `$2` messages done with (delivered or given up) before
/// `$1`.
pub(crate) const PRUNE_WEBHOOKS: &str = "DELETE FROM webhook_outbox WHERE id IN (\
     SELECT id FROM webhook_outbox WHERE (delivered_at IS NOT NULL OR gave_up_at IS NOT NULL) \
     AND COALESCE(delivered_at, gave_up_at) < $1 LIMIT $2)";

/// Messages still to deliver.
pub(crate) const WEBHOOKS_PENDING: &str =
    "SELECT COUNT(*) FROM webhook_outbox WHERE delivered_at IS NULL AND gave_up_at IS NULL";
