//! The write path of a run: one thread owns one SQLite connection and
//! commits the work of many runs in one transaction (the store's group
//! commit, `store::group`; [`Transactions`] is how SQLite writes a group).
//!
//! Why: through sqlx every statement is a round trip to the connection's
//! worker thread, and a run's writes are a dozen statements; with many runs
//! in flight those trips, and one commit per call, set the throughput — not
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

use crate::error::Error;
use crate::store::group::{Commit, GroupCommit, Shape};

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

/// How long the thread waits for SQLite's write lock when another
/// connection (the pool's rare writes) holds it.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Stops the checkpointer when the last handle goes.
#[derive(Debug)]
struct Stop {
    _sender: std_mpsc::Sender<()>,
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
struct Tuning {
    /// How often the WAL is checkpointed when it is small.
    period: std::time::Duration,
    /// Past this many frames the WAL is started over.
    restart_frames: i64,
    /// How long without writes makes a call lone.
    quiet: std::time::Duration,
    /// Past this size the WAL file is cut back ...
    trim_above: u64,
    /// ... once no write came for this long.
    trim_after: std::time::Duration,
}

impl Tuning {
    const DEFAULT: Self = Self {
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
fn checkpoint(
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

impl Writer {
    /// Opens the connection (the database exists and is migrated) and starts
    /// the thread.
    pub(super) fn open(path: &Path) -> Result<Self, Error> {
        Self::open_with(path, Tuning::DEFAULT)
    }

    /// [`Writer::open`] with other timings and sizes.
    fn open_with(path: &Path, tuning: Tuning) -> Result<Self, Error> {
        let connection = Connection::open(path)?;
        // The writer never checkpoints: a checkpoint (and its fsync) inside
        // a commit would hold up every run waiting on that commit — the
        // long tail of a token's latency. The checkpointer does it beside.
        connection.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA foreign_keys = ON; \
             PRAGMA wal_autocheckpoint = 0;",
        )?;
        connection.busy_timeout(BUSY_TIMEOUT)?;
        let checkpoints = Connection::open(path)?;
        checkpoints.busy_timeout(BUSY_TIMEOUT)?;
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
mod tests {
    use super::*;

    /// Under writes that never pause, the WAL is still started over: it
    /// stays near its restart size instead of growing with what was written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_stays_bounded_under_writes_that_never_pause() {
        let dir = std::env::temp_dir().join(format!("agwire-wal-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("wal.db");
        {
            let setup = Connection::open(&path).unwrap();
            setup
                .execute_batch(
                    "PRAGMA journal_mode = WAL; CREATE TABLE b (id INTEGER PRIMARY KEY, v BLOB NOT NULL);",
                )
                .unwrap();
        }
        // Checkpoints every 10 ms, 64 frames (256 KiB) before a restart;
        // 96 MiB written in all, by eight writers that each send their next
        // write as soon as the last one is answered: the writer's queue is
        // never empty.
        let writer = Writer::open_with(
            &path,
            Tuning {
                period: std::time::Duration::from_millis(10),
                restart_frames: 64,
                ..Tuning::DEFAULT
            },
        )
        .unwrap();
        let wal = path.with_extension("db-wal");
        let mut largest = 0;
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let writer = writer.clone();
                tokio::spawn(async move {
                    for _ in 0..768 {
                        writer
                            .call(|tx| {
                                let mut insert =
                                    tx.prepare_cached("INSERT INTO b (v) VALUES (zeroblob(4000))")?;
                                for _ in 0..4 {
                                    insert.execute([])?;
                                }
                                Ok(())
                            })
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        while writers.iter().any(|w| !w.is_finished()) {
            largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        for w in writers {
            w.await.unwrap();
        }
        // What the rows hold (read through the WAL: the database file alone
        // holds only what checkpoints copied so far).
        let written: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT SUM(length(v)) FROM b", [], |row| row.get(0))
            .unwrap();
        let written = u64::try_from(written).unwrap();
        println!("rows of {written} bytes; the WAL at most {largest} bytes");
        // Never started over, the WAL holds all of it and more (~100 MB
        // seen); started over, what is written between two restarts
        // (7–20 MB seen; 51 MB once, on a machine busy with other tests,
        // where the checkpointer fell behind the writers).
        assert!(written > 80 << 20, "the test wrote {written} bytes only");
        assert!(
            largest < written / 4 * 3,
            "the WAL grew to {largest} bytes: it was never started over"
        );
        drop(writer);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A WAL file larger than the trim size is cut back once writes stop
    /// (starting the WAL over no longer cuts it: see `checkpoint`), and the
    /// rows are all there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_wal_file_is_cut_back_once_writes_stop() {
        let (dir, path) = file();
        let writer = Writer::open_with(
            &path,
            Tuning {
                period: std::time::Duration::from_millis(10),
                trim_above: 256 << 10,
                trim_after: std::time::Duration::from_millis(50),
                ..Tuning::DEFAULT
            },
        )
        .unwrap();
        let wal = path.with_extension("db-wal");
        // ~1 MiB of rows, more than the trim size.
        for _ in 0..64 {
            writer
                .call(|tx| {
                    let mut insert = tx.prepare_cached("INSERT INTO t (v) VALUES (?1)")?;
                    for v in 0..1000 {
                        insert.execute([v])?;
                    }
                    Ok(())
                })
                .await
                .unwrap();
        }
        let grown = std::fs::metadata(&wal).unwrap().len();
        assert!(grown > 256 << 10, "the WAL grew to {grown} bytes only");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut size = grown;
        while size > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the WAL file stayed at {size} bytes (grown to {grown}) after writes stopped"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            size = std::fs::metadata(&wal).map_or(0, |m| m.len());
        }
        let rows: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 64_000);
        // Writes go on after the trim.
        writer.call(insert_on(1)).await.unwrap();
        drop(writer);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A database file for a writer, and the path to open it beside.
    fn file() -> (std::path::PathBuf, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("agwire-writer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER NOT NULL);")
            .unwrap();
        (dir, path)
    }

    /// Which thread a call ran on, with its row written.
    fn insert_on(v: i64) -> impl FnOnce(&Transaction<'_>) -> Result<String, Error> + Send {
        move |tx| {
            tx.execute("INSERT INTO t (v) VALUES (?1)", [v])?;
            Ok(std::thread::current().name().unwrap_or("").to_owned())
        }
    }

    /// A lone call runs on its caller's thread; a call made while another is
    /// in flight goes to the writer's thread (and waits there for the
    /// connection); both commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lone_call_runs_where_it_is_made_and_calls_side_by_side_go_to_the_writer() {
        let (dir, path) = file();
        let writer = Writer::open(&path).unwrap();
        let (entered, is_entered) = std_mpsc::channel();
        let (release, released) = std_mpsc::channel::<()>();
        let lone = tokio::spawn({
            let writer = writer.clone();
            async move {
                let caller = std::thread::current().id();
                let ran_on = writer
                    .call(move |tx| {
                        tx.execute("INSERT INTO t (v) VALUES (1)", [])?;
                        entered.send(()).unwrap();
                        released.recv().unwrap();
                        Ok(std::thread::current().id())
                    })
                    .await;
                (caller, ran_on)
            }
        });
        is_entered
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap();
        // The first call is in flight (it holds the connection): this one
        // goes to the thread.
        let beside = tokio::spawn({
            let writer = writer.clone();
            async move { writer.call(insert_on(2)).await }
        });
        // Released once the second call counts itself in flight (it then
        // goes to the thread whatever the first one does next).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while writer.shared.in_flight.load(Ordering::Acquire) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the second call never started"
            );
            std::thread::yield_now();
        }
        release.send(()).unwrap();
        // The lone call ran on the tokio worker that made it.
        let (caller, ran_on) = lone.await.unwrap();
        assert_eq!(ran_on.unwrap(), caller);
        assert_eq!(beside.await.unwrap().unwrap(), "agwire-sqlite-writer");
        let connection = Connection::open(&path).unwrap();
        assert_eq!(values(&connection), [1, 2]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A lone call that fails or panics is undone and answered with an
    /// error; the next lone call commits.
    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_call_that_fails_or_panics_is_undone() {
        let (dir, path) = file();
        // (No quiet spell asked for: these calls follow one another.)
        let writer = Writer::open_with(
            &path,
            Tuning {
                quiet: std::time::Duration::ZERO,
                ..Tuning::DEFAULT
            },
        )
        .unwrap();
        let failed = writer
            .call(|tx| {
                tx.execute("INSERT INTO t (v) VALUES (1)", [])?;
                Err::<(), _>(Error::ThreadBusy)
            })
            .await;
        assert!(matches!(failed, Err(Error::ThreadBusy)));
        let panicked = writer
            .call(|tx| -> Result<(), Error> {
                tx.execute("INSERT INTO t (v) VALUES (2)", []).unwrap();
                panic!("a bug in one call");
            })
            .await;
        assert!(panicked.is_err());
        // On this (the caller's) thread: it ran alone.
        assert_ne!(
            writer.call(insert_on(3)).await.unwrap(),
            "agwire-sqlite-writer"
        );
        assert_eq!(values(&Connection::open(&path).unwrap()), [3]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A lone call never waits for another connection's write lock on its
    /// caller's thread: it goes to the writer's thread, which waits, and
    /// commits once the lock is free.
    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_call_blocked_by_another_connection_goes_to_the_writer() {
        let (dir, path) = file();
        let writer = Writer::open(&path).unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        // The lock is let go a moment later, from another thread. Had the
        // call waited for it here, it would have got it then and run here;
        // going to the writer's thread, it runs there whenever that is.
        let holder = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            other.execute_batch("COMMIT").unwrap();
            other
        });
        assert_eq!(
            writer.call(insert_on(1)).await.unwrap(),
            "agwire-sqlite-writer"
        );
        assert_eq!(values(&holder.join().unwrap()), [1]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn database() -> Connection {
        let connection = Connection::open_in_memory().unwrap();
        connection
            .execute_batch("CREATE TABLE t (v INTEGER NOT NULL);")
            .unwrap();
        connection
    }

    /// A call as the writer runs it, and where its answer arrives.
    fn call<T: Send + 'static>(
        work: impl FnOnce(&Transaction<'_>) -> Result<T, Error> + Send + 'static,
    ) -> (Work, oneshot::Receiver<Result<T, Error>>) {
        let (to, answer) = oneshot::channel();
        let unit: Work = Box::new(move |tx| {
            Box::new(Pending {
                result: work(tx),
                to,
                undo: None,
            })
        });
        (unit, answer)
    }

    fn insert(v: i64) -> impl FnOnce(&Transaction<'_>) -> Result<(), Error> + Send + 'static {
        move |tx| {
            tx.execute("INSERT INTO t (v) VALUES (?1)", [v])?;
            Ok(())
        }
    }

    fn values(connection: &Connection) -> Vec<i64> {
        let mut statement = connection.prepare("SELECT v FROM t ORDER BY v").unwrap();
        statement
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn run_batch(connection: &mut Connection, batch: Vec<Work>) -> Result<(), String> {
        let mut batch = batch;
        let mut replies = Vec::new();
        let committed = commit_batch(connection, &mut batch, &mut replies);
        for reply in replies {
            reply.send(committed.clone());
        }
        committed
    }

    #[test]
    fn a_failing_or_panicking_call_is_undone_alone() {
        let mut connection = database();
        let (first, first_answer) = call(insert(1));
        let (failing, failing_answer) = call(|tx| {
            tx.execute("INSERT INTO t (v) VALUES (2)", [])?;
            Err::<(), _>(Error::ThreadBusy)
        });
        let (panicking, panicking_answer) = call(|tx| -> Result<(), Error> {
            tx.execute("INSERT INTO t (v) VALUES (3)", []).unwrap();
            panic!("a bug in one call");
        });
        let (last, last_answer) = call(insert(4));
        run_batch(&mut connection, vec![first, failing, panicking, last]).unwrap();
        assert!(first_answer.blocking_recv().unwrap().is_ok());
        assert!(matches!(
            failing_answer.blocking_recv().unwrap(),
            Err(Error::ThreadBusy)
        ));
        // The panicking call's answer channel is dropped: its caller gets an error.
        assert!(panicking_answer.blocking_recv().is_err());
        assert!(last_answer.blocking_recv().unwrap().is_ok());
        assert_eq!(values(&connection), [1, 4]);
    }

    #[test]
    fn when_sqlite_drops_the_transaction_nothing_of_the_batch_stays_and_every_caller_knows() {
        let mut connection = database();
        let (first, first_answer) = call(insert(1));
        // What SQLite does by itself on some errors (I/O, a full disk):
        // the whole transaction is rolled back under the calls' feet.
        let (dropping, dropping_answer) = call(|tx| {
            tx.execute_batch("ROLLBACK")?;
            Ok(())
        });
        let (after, after_answer) = call(insert(3));
        assert!(run_batch(&mut connection, vec![first, dropping, after]).is_err());
        assert!(first_answer.blocking_recv().unwrap().is_err());
        assert!(dropping_answer.blocking_recv().unwrap().is_err());
        // Never run outside the transaction.
        assert!(after_answer.blocking_recv().is_err());
        assert!(values(&connection).is_empty());
    }
}
