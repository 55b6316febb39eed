//! The checkpointer: copies the writer's WAL into the database beside it,
//! starts the WAL over under a load that never pauses, and cuts the file
//! back once writes stop.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;

use rusqlite::Connection;

use super::{QUIET, Shared};
use crate::sqlite::connection::BUSY_TIMEOUT;

/// Stops the checkpointer when the last handle goes.
#[derive(Debug)]
pub(super) struct Stop {
    pub(super) _sender: std_mpsc::Sender<()>,
}

/// How often the WAL is checkpointed when it is small.
const CHECKPOINT_PERIOD: std::time::Duration = std::time::Duration::from_millis(500);
/// How soon the next checkpoint follows one that found the WAL larger than
/// [`WAL_RESTART_FRAMES`].
const CHECKPOINT_CATCH_UP: std::time::Duration = std::time::Duration::from_millis(20);
/// A WAL of more frames than this (4 KiB each: 64 MiB) is to be started
/// over.
const WAL_RESTART_FRAMES: i64 = 16384;
/// A WAL file larger than this is cut back ([`trim`]) ...
const WAL_TRIM_ABOVE: u64 = 64 << 20;
/// ... once no write came for this long.
const WAL_TRIM_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// How long the trim waits for SQLite's locks before trying again later
/// (it holds up writes while it runs).
const WAL_TRIM_BUSY: std::time::Duration = std::time::Duration::from_millis(100);

/// The writer's and checkpointer's timings and sizes (tests shrink them).
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    /// How often the WAL is checkpointed when it is small.
    pub(super) period: std::time::Duration,
    /// Past this many frames the WAL is started over.
    pub(super) restart_frames: i64,
    /// How long without writes makes a call lone.
    pub(super) quiet: std::time::Duration,
    /// Past this size the WAL file is cut back ...
    pub(super) trim_above: u64,
    /// ... once no write came for this long.
    pub(super) trim_after: std::time::Duration,
}

impl Tuning {
    pub(super) const DEFAULT: Self = Self {
        period: CHECKPOINT_PERIOD,
        restart_frames: WAL_RESTART_FRAMES,
        quiet: QUIET,
        trim_above: WAL_TRIM_ABOVE,
        trim_after: WAL_TRIM_AFTER,
    };
}

/// Copies the WAL into the database beside the writer (`PASSIVE`: never
/// waits for, nor blocks, the writer or readers), until stopped.
///
/// SQLite writes the WAL from its start again only when a write begins
/// after a checkpoint copied all of it. Under a steady load the writer
/// appends during every checkpoint here, so these never copy all of it,
/// and the WAL would grow without end (2 GB in 10 s of runs were seen).
/// So once the WAL is larger than [`WAL_RESTART_FRAMES`], this keeps
/// copying (every 20 ms: little is left for the writer) and asks the writer
/// for the last one: between two of its transactions, it copies what came
/// since (a pause of ~10 ms at saturation, mostly its two `fsync`s), and
/// its next transaction starts the WAL over.
///
/// Starting over reuses the file from its beginning; it is not cut back
/// then (no `journal_size_limit` on the writer): cutting tens of MiB off a
/// file took 30–45 ms, a pause of every write at each restart, once a
/// second at saturation — most of the end-to-end p99 (measured with `perf
/// trace`). The file stays at the size a restart found it (the restart size
/// plus one check period of writes), and [`trim`] cuts it back once writes
/// stop.
pub(super) fn checkpoint(
    connection: &Connection,
    stopped: &std_mpsc::Receiver<()>,
    shared: &Shared,
    wal: &Path,
) {
    let tuning = shared.tuning;
    let mut wait = tuning.period;
    while let Err(std_mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
        // (busy, frames in the WAL, frames copied)
        match connection.query_row("PRAGMA wal_checkpoint(PASSIVE);", [], |row| {
            row.get::<_, i64>(1)
        }) {
            Ok(frames) if frames > tuning.restart_frames => {
                shared.restart.store(true, Ordering::Relaxed);
                wait = CHECKPOINT_CATCH_UP.min(tuning.period);
            }
            Ok(_) => {
                wait = tuning.period;
                trim(connection, shared, wal);
            }
            Err(error) => {
                tracing::warn!(%error, "WAL checkpoint failed");
                wait = tuning.period;
            }
        }
    }
}

/// Cuts the WAL file back to nothing when it is larger than
/// `tuning.trim_above` and no write came for `tuning.trim_after`: a
/// `TRUNCATE` checkpoint, which holds up writes while it runs (tens of ms),
/// so only in a quiet spell, and giving up after [`WAL_TRIM_BUSY`] if a
/// reader or a write is in the way (the next check tries again).
fn trim(connection: &Connection, shared: &Shared, wal: &Path) {
    let tuning = shared.tuning;
    let large = std::fs::metadata(wal).is_ok_and(|m| m.len() > tuning.trim_above);
    if !large || !shared.quiet_for(tuning.trim_after) {
        return;
    }
    let trimmed = connection.busy_timeout(WAL_TRIM_BUSY).and_then(|()| {
        connection.query_row("PRAGMA wal_checkpoint(TRUNCATE);", [], |row| {
            row.get::<_, i64>(0)
        })
    });
    if let Err(error) = trimmed {
        tracing::warn!(%error, "WAL trim failed");
    }
    if let Err(error) = connection.busy_timeout(BUSY_TIMEOUT) {
        tracing::warn!(%error, "could not restore the checkpointer's busy timeout");
    }
}
