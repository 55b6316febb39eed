//! The schema's migrations and the one-time fill of old threads' names, run
//! at start on a connection of their own before the writer and the readers
//! open.

use rusqlite::{Connection, TransactionBehavior, params};

use crate::error::Error;

/// Schema versions, applied in order (`migrations/sqlite/`, one file each);
/// `PRAGMA user_version` records the last. A file, once released, never
/// changes: a change is a new file.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_init.sql"),
    include_str!("../../migrations/sqlite/0002_users.sql"),
    include_str!("../../migrations/sqlite/0003_attachments.sql"),
    include_str!("../../migrations/sqlite/0004_run_usage.sql"),
    include_str!("../../migrations/sqlite/0005_calendar_events.sql"),
    include_str!("../../migrations/sqlite/0006_automation_jobs.sql"),
    include_str!("../../migrations/sqlite/0007_message_ui_schema.sql"),
    include_str!("../../migrations/sqlite/0008_runs_by_status.sql"),
    include_str!("../../migrations/sqlite/0009_job_threads_owned.sql"),
    include_str!("../../migrations/sqlite/0010_run_mode_and_client_time.sql"),
    include_str!("../../migrations/sqlite/0011_thread_list_and_tool_calls.sql"),
    include_str!("../../migrations/sqlite/0012_attachments_in_bucket.sql"),
    include_str!("../../migrations/sqlite/0013_bounded_reads.sql"),
    include_str!("../../migrations/sqlite/0014_run_options.sql"),
    include_str!("../../migrations/sqlite/0015_run_control.sql"),
    include_str!("../../migrations/sqlite/0016_quotas.sql"),
    include_str!("../../migrations/sqlite/0017_event_batches.sql"),
];

/// Brings the schema up to date (or refuses one newer than this binary).
pub(super) fn migrate(connection: &mut Connection) -> Result<(), Error> {
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let applied = usize::try_from(version).unwrap_or(0);
    if applied > MIGRATIONS.len() {
        return Err(Error::Config(format!(
            "the database's schema (version {applied}) is newer than this binary's ({}): upgrade agwire",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(sql)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
    }
    tx.commit()?;
    Ok(())
}

/// Names the threads stored before names were stored with them
/// (`derived_title`, from their first user message), in pages: once a
/// thread has a user message its name is never NULL again, so after the
/// first start this finds nothing.
pub(super) fn fill_derived_titles(connection: &Connection) -> Result<u64, Error> {
    let mut named = 0;
    let mut unnamed = connection.prepare(crate::sql::UNNAMED_THREADS)?;
    let mut name = connection.prepare(crate::sql::NAME_THREAD)?;
    loop {
        let rows: Vec<(String, Option<String>)> = unnamed
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        if rows.is_empty() {
            return Ok(named);
        }
        for (id, body) in rows {
            name.execute(params![crate::sql::derived_title(body), id])?;
            named += 1;
        }
    }
}
