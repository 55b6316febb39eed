//! The write path: one thread owns the one SQLite connection that writes
//! and commits the work of many calls (runs' writes, and the rare record
//! writes) in one transaction (the store's group commit, `store::group`;
//! [`Transactions`] is how SQLite writes a group).
//!
//! Why: through a driver like sqlx (used here before) every statement is a
//! round trip to the connection's worker thread, and a run's writes are a
//! dozen statements; with many runs in flight those trips, and one commit per call, set the throughput — not
//! SQLite. Here the statements run where the connection lives, and whatever
//! callers queued while the previous transaction committed goes into the
//! next one. Each call is its own savepoint, so one failing call (a conflict,
//! a busy thread) rolls back only itself. A caller is answered after the
//! `COMMIT` that holds its work: a `202` still means the run is durable (WAL,
//! `synchronous = NORMAL`: durable across a crash of the process; a power
//! loss may lose the last commits, as with every WAL database at that
//! level).
//!
//! A call made while no other is in flight, after a quiet spell
//! ([`QUIET`]) without writes, does not go to the thread: the caller runs it
//! on the connection itself, in a transaction of its own (there is nothing
//! to group it with). Why: handing the call to the thread and its answer
//! back costs two thread wake-ups, a large part of a streamed token's
//! latency (a lone run's appends are exactly such calls). Under load calls
//! follow one another closely and go to the thread, grouped as before (run
//! alone there, each would be a commit of its own on a tokio worker: 17 %
//! fewer accepts at saturation, measured). A lone call never waits: if
//! another connection holds SQLite's write lock, it goes to the thread.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, Transaction};
use tokio::sync::oneshot;

use super::connection::{self, BUSY_TIMEOUT, Role};
use crate::error::Error;
use crate::group::{Commit, GroupCommit, Shape};

mod checkpoint;

use checkpoint::{Stop, Tuning, checkpoint};

/// Most calls one transaction takes.
const MAX_BATCH: usize = 512;

/// A unit of work run on the writer's connection, inside its own savepoint.
type Work = Box<dyn FnOnce(&Transaction<'_>) -> Box<dyn Reply> + Send>;

/// The answer of one unit of work, held until the commit is known.
pub(super) trait Reply: Send {
    /// Whether the work failed (its savepoint is rolled back).
    fn failed(&self) -> bool;

    /// Sends the result (`Err`: the transaction did not commit, so the work
    /// is not there).
    fn send(self: Box<Self>, committed: Result<(), String>);
}

/// What to do with a call's successful result when its commit fails.
type Undo<T> = Box<dyn FnOnce(&T) + Send>;

/// A call's result and where it goes.
struct Pending<T: Send> {
    result: Result<T, Error>,
    to: oneshot::Sender<Result<T, Error>>,
    undo: Option<Undo<T>>,
}

impl<T: Send> Reply for Pending<T> {
    fn failed(&self) -> bool {
        self.result.is_err()
    }

    fn send(self: Box<Self>, committed: Result<(), String>) {
        let Pending { result, to, undo } = *self;
        let _ = to.send(settled(result, committed, undo));
    }
}

/// A call's answer once its transaction's fate is known: its own result
/// when that committed; else an error, after `undo` of what it had done.
fn settled<T>(
    result: Result<T, Error>,
    committed: Result<(), String>,
    undo: Option<Undo<T>>,
) -> Result<T, Error> {
    match committed {
        Ok(()) => result,
        Err(why) => {
            if let (Ok(done), Some(undo)) = (&result, undo) {
                undo(done);
            }
            Err(Error::Internal(format!("commit failed: {why}")))
        }
    }
}

/// The handle callers hold; the threads end when every handle is gone.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    group: GroupCommit<Transactions>,
    shared: Arc<Shared>,
    _checkpointer: std::sync::Arc<Stop>,
}

/// What the thread and the callers share.
#[derive(Debug)]
struct Shared {
    /// The write connection: the thread holds it for a batch, a lone call
    /// for its own transaction.
    connection: Mutex<Connection>,
    /// Calls made and not yet answered (a lone call is one with none
    /// beside it).
    in_flight: AtomicUsize,
    /// When the last write ended, in µs since `epoch`.
    quiet_since: AtomicU64,
    epoch: std::time::Instant,
    /// Its timings and sizes (how long without writes makes a call lone,
    /// when the checkpointer restarts and trims the WAL).
    tuning: Tuning,
    /// Set by the checkpointer: the thread's next batch starts the WAL
    /// over (see `checkpoint`), so calls go to the thread until it has.
    restart: AtomicBool,
}

/// Counts a call in flight until it is answered (or its caller gives up).
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long without writes before a call may run alone on its caller's
/// thread: longer than the gap between a saturated writer's batches, much
/// shorter than between a streaming run's tokens.
const QUIET: std::time::Duration = std::time::Duration::from_millis(1);

/// `Shared::quiet_since` before the first write.
const NEVER: u64 = u64::MAX;

impl Shared {
    /// Notes that a write just ended.
    fn wrote(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(NEVER - 1);
        self.quiet_since.store(now, Ordering::Relaxed);
    }

    /// Whether no write ended for `tuning.quiet`.
    fn is_quiet(&self) -> bool {
        self.quiet_for(self.tuning.quiet)
    }

    /// Whether no write ended for `spell`.
    fn quiet_for(&self, spell: std::time::Duration) -> bool {
        let last = self.quiet_since.load(Ordering::Relaxed);
        last == NEVER
            || self
                .epoch
                .elapsed()
                .saturating_sub(std::time::Duration::from_micros(last))
                >= spell
    }
}

impl Writer {
    /// Opens the connection (the database exists and is migrated) and starts
    /// the thread.
    pub(super) fn open(path: &Path) -> Result<Self, Error> {
        Self::open_with(path, Tuning::DEFAULT)
    }

    /// [`Writer::open`] with other timings and sizes.
    fn open_with(path: &Path, tuning: Tuning) -> Result<Self, Error> {
        let connection = connection::open(path, Role::Write)?;
        let checkpoints = connection::open(path, Role::Checkpoint)?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let wal = std::path::PathBuf::from(wal);
        let shared = Arc::new(Shared {
            connection: Mutex::new(connection),
            in_flight: AtomicUsize::new(0),
            quiet_since: AtomicU64::new(NEVER),
            epoch: std::time::Instant::now(),
            tuning,
            restart: AtomicBool::new(false),
        });
        let shape = Shape {
            max_group: MAX_BATCH,
            lanes: 1,
            first_guess: std::time::Duration::from_millis(1),
            queue: 4 * MAX_BATCH,
        };
        let transactions = Transactions {
            shared: shared.clone(),
        };
        let group = GroupCommit::spawn_thread(transactions, shape, "agwire-sqlite-writer")?;
        let (stop, stopped) = std_mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("agwire-sqlite-checkpoint".into())
            .spawn({
                let shared = shared.clone();
                move || {
                    checkpoint(&checkpoints, &stopped, &shared, &wal);
                }
            })
            .map_err(|e| {
                Error::Internal(format!("could not start the SQLite checkpointer: {e}"))
            })?;
        Ok(Self {
            group,
            shared,
            _checkpointer: std::sync::Arc::new(Stop { _sender: stop }),
        })
    }

    /// Runs `work` in the next transaction; resolves after its commit.
    pub(super) async fn call<T, F>(&self, work: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, Error> + Send + 'static,
    {
        self.call_or_undo(work, None).await
    }

    /// Like [`Writer::call`]; `undo` is called with the work's result if the
    /// transaction then fails to commit.
    pub(super) async fn call_or_undo<T, F>(
        &self,
        work: F,
        mut undo: Option<Undo<T>>,
    ) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, Error> + Send + 'static,
    {
        let lone = self.shared.in_flight.fetch_add(1, Ordering::AcqRel) == 0;
        let _in_flight = InFlight(&self.shared.in_flight);
        let work = if lone && !self.shared.restart.load(Ordering::Relaxed) && self.shared.is_quiet()
        {
            match self.try_alone(work, undo) {
                Ok(done) => return done,
                Err((work, again)) => {
                    undo = again;
                    work
                }
            }
        } else {
            work
        };
        let (to, answer) = oneshot::channel();
        let unit: Work = Box::new(move |tx| {
            Box::new(Pending {
                result: work(tx),
                to,
                undo,
            })
        });
        self.group
            .queue(unit)
            .await
            .map_err(|_| Error::Internal("the SQLite writer is gone".into()))?;
        // A dropped answer: the transaction could not even begin.
        answer
            .await
            .map_err(|_| Error::Internal("the write could not be committed".into()))?
    }
}

/// Why a lone call went to the thread after all.
type NotAlone<T, F> = (F, Option<Undo<T>>);

impl Writer {
    /// Runs a lone call on the connection here, in a transaction of its
    /// own; gives the call back when the connection or SQLite's write lock
    /// is taken (it then goes to the thread, which waits for them).
    fn try_alone<T, F>(
        &self,
        work: F,
        undo: Option<Undo<T>>,
    ) -> Result<Result<T, Error>, NotAlone<T, F>>
    where
        F: FnOnce(&Transaction<'_>) -> Result<T, Error>,
    {
        let Ok(connection) = self.shared.connection.try_lock() else {
            return Err((work, undo));
        };
        // Never wait here for another connection's write: that would hold
        // this task's worker thread.
        if connection.busy_timeout(std::time::Duration::ZERO).is_err() {
            return Err((work, undo));
        }
        // (`new_unchecked`: a shared borrow, so the busy timeout can be
        // set back beside it; the guard is this call's alone.)
        let Ok(tx) =
            Transaction::new_unchecked(&connection, rusqlite::TransactionBehavior::Immediate)
        else {
            let _ = connection.busy_timeout(BUSY_TIMEOUT);
            return Err((work, undo));
        };
        // As in a batch: a panicking call fails alone, and its caller gets
        // an error.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&tx)))
            .unwrap_or_else(|_| {
                tracing::error!("a write panicked; it is undone");
                Err(Error::Internal("the write could not be committed".into()))
            });
        let committed = if result.is_ok() {
            tx.commit().map_err(|why| why.to_string())
        } else {
            // (Dropping the transaction rolls it back; the call's error is
            // its answer.)
            drop(tx);
            Ok(())
        };
        let done = settled(result, committed, undo);
        self.shared.wrote();
        if let Err(error) = connection.busy_timeout(BUSY_TIMEOUT) {
            tracing::warn!(%error, "could not restore the writer's busy timeout");
        }
        Ok(done)
    }
}

/// How a group of writes is committed on SQLite: by the writer's thread,
/// in one transaction on its connection, each call in a savepoint of its
/// own — so a call's failure undoes only it, and a group never fails as a
/// whole but each caller hears how its call went.
struct Transactions {
    shared: Arc<Shared>,
}

impl Commit for Transactions {
    type Call = Work;
    type Failure = std::convert::Infallible;

    async fn together(&self, group: &mut Vec<Work>) -> Result<(), Self::Failure> {
        let shared = &*self.shared;
        // (A call that panicked held it: SQLite rolled its transaction
        // back; the connection is sound.)
        let mut connection = shared
            .connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The WAL's last frames copied with no write in between: the group
        // below starts the WAL over (see `checkpoint`).
        if shared.restart.swap(false, Ordering::Relaxed)
            && let Err(error) = connection.execute_batch("PRAGMA wal_checkpoint(PASSIVE);")
        {
            tracing::warn!(%error, "WAL checkpoint failed");
        }
        let mut replies: Vec<Box<dyn Reply>> = Vec::with_capacity(group.len());
        let committed = commit_batch(&mut connection, group, &mut replies);
        shared.wrote();
        // Its callers may make their next calls alone.
        drop(connection);
        for reply in replies {
            reply.send(committed.clone());
        }
        Ok(())
    }

    async fn alone(&self, call: Work) {
        let Ok(()) = self.together(&mut vec![call]).await;
    }

    fn undone(&self, failure: &Self::Failure) -> bool {
        match *failure {}
    }

    fn fail(&self, _call: Work, failure: &Self::Failure) {
        match *failure {}
    }
}

/// Runs one statement without results from the connection's cache.
fn run_cached(tx: &Transaction<'_>, sql: &str) -> rusqlite::Result<()> {
    tx.prepare_cached(sql)?.raw_execute().map(|_| ())
}

fn commit_batch(
    connection: &mut Connection,
    batch: &mut Vec<Work>,
    replies: &mut Vec<Box<dyn Reply>>,
) -> Result<(), String> {
    let tx = match connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(error) => {
            // Nothing runs; dropping the work drops its answer channel, and
            // each caller gets an error.
            tracing::error!(%error, "could not begin a write transaction");
            batch.clear();
            return Err(error.to_string());
        }
    };
    for work in batch.drain(..) {
        // Each call in a savepoint of its own: its failure undoes only it.
        // (Prepared once: a statement per call is parsed for nothing.)
        if let Err(error) = run_cached(&tx, "SAVEPOINT call") {
            // Without a savepoint the call could not be undone alone: it is
            // not run (its caller gets an error).
            tracing::error!(%error, "could not open a savepoint; the call is refused");
            drop(work);
        } else {
            // A panicking call fails alone (its caller gets an error); the
            // writer goes on.
            let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&tx)));
            let failed = reply.as_ref().map_or(true, |reply| reply.failed());
            let undone = if failed {
                run_cached(&tx, "ROLLBACK TO call")
            } else {
                Ok(())
            };
            if let Err(error) = undone.and_then(|()| run_cached(&tx, "RELEASE call")) {
                tracing::error!(%error, "could not close a savepoint");
            }
            match reply {
                Ok(reply) => replies.push(reply),
                Err(_) => tracing::error!("a write panicked; it is undone"),
            }
        }
        // Some errors (I/O, a full disk, memory) make SQLite roll back the
        // whole transaction itself. Then nothing of this batch is there:
        // the calls still queued must not run outside a transaction, and
        // every caller learns that nothing was committed.
        if tx.is_autocommit() {
            tracing::error!("SQLite rolled back the write transaction; the batch is refused");
            // (Returning drops the calls not yet run.)
            return Err("the transaction was rolled back".into());
        }
    }
    tx.commit().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
