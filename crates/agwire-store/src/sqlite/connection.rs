//! Opening a connection to the embedded database: one set of pragmas for
//! every connection (the writer's, the checkpointer's, the readers', the
//! migration's), and what each role adds.

use std::path::Path;

use rusqlite::Connection;

use crate::error::Error;

/// How long a connection waits for SQLite's locks (another connection's
/// write, a checkpoint) before it gives up with `SQLITE_BUSY`.
pub(super) const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How many prepared statements a connection keeps (more than any role
/// uses: an evicted statement is parsed again on its next use).
const STATEMENTS: usize = 64;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Migrates the schema at start (and names old threads).
    Migrate,
    /// The one connection that writes runs and records (`writer`).
    Write,
    /// Copies the WAL into the database (`checkpoint`).
    Checkpoint,
    /// One of the readers' pool (`read`).
    Read,
}

/// Opens (creating if needed) the database at `path` with the pragmas
/// every connection shares, then the role's own.
pub(super) fn open(path: &Path, role: Role) -> Result<Connection, Error> {
    let connection = Connection::open(path)?;
    // First: the pragmas below may wait for another connection's lock.
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
    )?;
    // Every statement of a role fits (`prepare_cached`): the writer's runs'
    // and records' writes, the readers' reads.
    connection.set_prepared_statement_cache_capacity(STATEMENTS);
    match role {
        // The writer never checkpoints: a checkpoint (and its fsync) inside
        // a commit would hold up every run waiting on that commit — the
        // long tail of a token's latency. The checkpointer does it beside.
        Role::Write => connection.execute_batch("PRAGMA wal_autocheckpoint = 0;")?,
        // A reader that wrote would take SQLite's write lock beside the
        // writer's: refused, so every write goes through the writer.
        Role::Read => connection.execute_batch("PRAGMA query_only = ON;")?,
        Role::Migrate | Role::Checkpoint => {}
    }
    Ok(connection)
}
