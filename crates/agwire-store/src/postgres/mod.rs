//! The shared backend: PostgreSQL, for several `agwire serve` replicas on
//! one database.
//!
//! Every rule the traits state holds across processes, by row locks rather
//! than by one writer:
//! - accepting on a thread locks the thread's row (`FOR UPDATE`), so two
//!   accepts on one idle thread are serialized and the second sees the
//!   first's run; a thread's messages are numbered under the same lock;
//! - a claim takes `FOR UPDATE SKIP LOCKED` the oldest active run of each
//!   thread that is still queued, so two replicas never claim one run, and
//!   a claim and a cancel of one queued run exclude each other (whichever
//!   locks the row first wins; the other sees it is no longer queued);
//! - a run's events are numbered under its row's lock;
//! - a job's tick moves by compare-and-set on the tick it fired.
//!
//! Replicas learn of each other's work through the database itself: every
//! transaction that appends events, ends a run, or asks for a cancel sends
//! a `NOTIFY agwire` (delivered when it commits, in commit order), and each
//! replica `LISTEN`s on one connection and hands them to its engine as
//! [`Change`]s. Accepts are the exception: a run accepted and not started
//! is announced after its commit, apart ([`Runnable`]) — a `NOTIFY` takes
//! one lock for the whole server until its transaction's commit is flushed,
//! and with one in every accept, the accepts of all replicas committed one
//! at a time. A claimed run carries its replica's lease
//! (`runs.owner`, `runs.lease_until_ms`, on the database's clock), renewed
//! every quarter lease while the run executes; a run whose lease ran out was
//! abandoned by a replica that died, and a survivor ends it.
//!
//! Migrations are sqlx's (`migrations/postgres/`), run at connect under
//! sqlx's advisory lock, so replicas starting together migrate once.

mod accepts;
mod batch;
mod kept;
mod records;
mod runs;
mod webhooks;

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::Change;
use crate::error::Error;

/// The notification channel.
const CHANNEL: &str = "agwire";

/// The database's clock in ms: leases are set and judged on one clock,
/// whatever the replicas' clocks say.
const DB_NOW_MS: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";

/// How long a pooled connection may have been idle and still be handed out
/// untested.
const TESTED_AFTER_IDLE: Duration = Duration::from_secs(1);

/// How long a replica's claim on a running run holds without renewal.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(20);

/// The schema, versioned.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// The run's write functions as this binary has them: the one place they are
/// written (the migrations hold the tables and indexes).
const FUNCTIONS: &str = include_str!("functions.sql");
/// The advisory lock the processes connecting at once take in turn to
/// replace the functions (two `CREATE OR REPLACE` of one function at once
/// fail with "tuple concurrently updated").
const FUNCTIONS_LOCK: i64 = 0x6167_7769_7265_0001;

/// Puts this binary's write functions in place, in one transaction.
async fn apply_functions(pool: &PgPool) -> Result<(), Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(FUNCTIONS_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(FUNCTIONS).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}

/// A PostgreSQL database shared by any number of replicas.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// This replica (a fresh id per process: a restarted replica's old
    /// leases are somebody else's to expire).
    replica: Arc<str>,
    lease_ms: i64,
    changes: broadcast::Sender<Change>,
    /// Event appends, committed in batches.
    writer: batch::Writer,
    /// Accepts, committed in batches.
    accepts: accepts::Accepts,
    /// Stops the listener and the lease renewal with the last clone.
    _tasks: Arc<DropGuard>,
    /// Where new attachments' bytes go, when a bucket is configured.
    blobs: Option<Arc<dyn crate::Blobs>>,
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host/db`) and migrates the schema
    /// (or refuses one newer than this binary), with leases of
    /// 20 s.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with_lease(url, DEFAULT_LEASE).await
    }

    /// Attachments recorded as in a bucket are read and removed through
    /// `blobs` (the service puts them there).
    #[must_use]
    pub fn with_blobs(mut self, blobs: Arc<dyn crate::Blobs>) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// The same, with leases of `lease`: how long the running runs of a
    /// replica that died wait before a survivor ends them.
    pub async fn connect_with_lease(url: &str, lease: Duration) -> Result<Self, Error> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            // sqlx tests every connection it hands out with a round trip of
            // its own (a `Sync`): one more per statement, measured at half
            // of a replica's messages to the server. A connection used
            // within the last second is known alive; one idle longer may
            // have been cut (a restarted server), and is tested.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= TESTED_AFTER_IDLE {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect(url)
            .await
            .map_err(|error| {
                Error::Config(format!(
                    "cannot reach the PostgreSQL database at {}: {error}",
                    redacted(url)
                ))
            })?;
        MIGRATOR.run(&pool).await.map_err(|error| match error {
            sqlx::migrate::MigrateError::VersionMissing(version) => Error::Config(format!(
                "the database's schema (migration {version}) is newer than this binary's: upgrade agwire"
            )),
            other => Error::Config(format!("cannot migrate the PostgreSQL database: {other}")),
        })?;
        apply_functions(&pool).await?;
        let store = Self::start(pool, lease).await?;
        store.fill_derived_titles().await?;
        Ok(store)
    }

    async fn start(pool: PgPool, lease: Duration) -> Result<Self, Error> {
        let stop = CancellationToken::new();
        let (changes, _) = broadcast::channel(1024);
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        tokio::spawn(listen(listener, changes.clone(), stop.clone()));
        let replica: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        tokio::spawn(renew_leases(
            pool.clone(),
            replica.clone(),
            lease,
            changes.clone(),
            stop.clone(),
        ));
        let writer = batch::Writer::start(pool.clone(), stop.clone());
        let runnable = Runnable::start(pool.clone(), stop.clone());
        let accepts = accepts::Accepts::start(
            pool.clone(),
            replica.clone(),
            lease_ms,
            runnable,
            stop.clone(),
        );
        Ok(Self {
            pool,
            replica,
            lease_ms,
            changes,
            writer,
            accepts,
            _tasks: Arc::new(stop.drop_guard()),
            blobs: None,
        })
    }
}

/// Hands the database's notifications to the engine until `stop`.
async fn listen(
    mut listener: PgListener,
    changes: broadcast::Sender<Change>,
    stop: CancellationToken,
) {
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return,
            received = listener.try_recv() => received,
        };
        match received {
            Ok(Some(notification)) => {
                for change in notification.payload().lines().filter_map(parse) {
                    // Nobody listening is not an error.
                    let _ = changes.send(change);
                }
            }
            // The connection was lost (and is re-made on the next call):
            // what was sent meanwhile is gone, so wake whoever waits.
            Ok(None) => {
                let _ = changes.send(Change::Runnable);
            }
            Err(error) => {
                tracing::warn!(%error, "lost the PostgreSQL notification connection; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = changes.send(Change::Runnable);
            }
        }
    }
}

/// A line of a notification's payload (a batch's appends share one
/// notification, a line each): `a <first> <last> <task>`, `c <task>`, `r`.
/// Whether PostgreSQL undid a whole statement before anything of it could
/// commit, so that its calls may go again one by one without any being
/// written twice: a deadlock or serialization failure (class 40), a value
/// it refused (class 22, data exceptions: a NUL in text, 22021; `\u0000`
/// in jsonb, 22P05), or a constraint (class 23: two first posts of one
/// runId racing past the lookup). Each is raised by the statement, in an
/// implicit transaction that then rolls back; a lost connection is not:
/// the commit may have happened.
pub(super) fn undone(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| {
            code == "40P01" || code == "40001" || code.starts_with("22") || code.starts_with("23")
        })
}

fn parse(payload: &str) -> Option<Change> {
    let mut words = payload.split(' ');
    match words.next()? {
        "a" => {
            let first = words.next()?.parse().ok()?;
            let last = words.next()?.parse().ok()?;
            let task_id = words.next()?.to_owned();
            Some(Change::Appended {
                task_id,
                first,
                last,
            })
        }
        "c" => Some(Change::CancelRequested {
            task_id: words.next()?.to_owned(),
        }),
        "r" => Some(Change::Runnable),
        _ => None,
    }
}

/// Renews this replica's leases every quarter lease until `stop`; the runs
/// among them asked to stop (`runs.stop_requested`) are told to this
/// replica's engine again, so a lost `NOTIFY` only delays a stop.
async fn renew_leases(
    pool: PgPool,
    replica: Arc<str>,
    lease: Duration,
    changes: broadcast::Sender<Change>,
    stop: CancellationToken,
) {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(lease / 4);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let renewed: Result<Vec<(String, bool)>, _> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "UPDATE runs SET lease_until_ms = {DB_NOW_MS} + $1 WHERE owner = $2 AND status = 'running' \
             RETURNING task_id, stop_requested IS NOT NULL"
        )))
        .bind(lease_ms)
        .bind(&*replica)
        .fetch_all(&pool)
        .await;
        match renewed {
            Ok(runs) => {
                for (task_id, _) in runs.into_iter().filter(|(_, stop)| *stop) {
                    let _ = changes.send(Change::CancelRequested { task_id });
                }
            }
            Err(error) => tracing::warn!(%error, "could not renew this replica's run leases"),
        }
    }
}

/// Announces to every replica (this one too, through its listener) that a
/// run may be claimed: `r` on the channel, sent after the accepts that
/// queued runs have committed. At most one goes out per
/// [`ANNOUNCE_PERIOD`]: those asked for meanwhile go out together as the
/// next (a dispatcher woken once claims every runnable run it has room for).
///
/// Each is its own short transaction, committed without waiting for its
/// WAL flush (`synchronous_commit` off for it alone: a notification is not
/// kept anyway), so the notify lock it takes is held for microseconds. One
/// that fails is only late: every dispatcher also looks for runnable runs
/// every few seconds.
#[derive(Debug, Clone)]
pub(super) struct Runnable {
    wake: Arc<tokio::sync::Notify>,
}

impl Runnable {
    fn start(pool: PgPool, stop: CancellationToken) -> Self {
        let wake = Arc::new(tokio::sync::Notify::new());
        tokio::spawn({
            let wake = wake.clone();
            async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = wake.notified() => {}
                    }
                    let sent = sqlx::query(
                        "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, 'r')",
                    )
                    .bind(CHANNEL)
                    .execute(&pool)
                    .await;
                    if let Err(error) = sent {
                        tracing::warn!(%error, "could not announce a runnable run");
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(ANNOUNCE_PERIOD) => {}
                    }
                }
            }
        });
        Self { wake }
    }

    /// Asks for an announcement (one is sent after this call).
    pub(super) fn announce(&self) {
        self.wake.notify_one();
    }
}

/// The most often a replica announces runnable runs (a run queued by a
/// replica at its limit waits this much longer, at most, for another).
const ANNOUNCE_PERIOD: Duration = Duration::from_millis(10);

/// Sends a notification when `tx` commits.
async fn notify(tx: &mut sqlx::PgConnection, payload: &str) -> Result<(), Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// A database URL without its password (for messages).
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{}{user}@{}", &url[..scheme + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_read_back() {
        assert_eq!(
            parse("a 3 7 task-1"),
            Some(Change::Appended {
                task_id: "task-1".into(),
                first: 3,
                last: 7
            })
        );
        assert_eq!(
            parse("c task-1"),
            Some(Change::CancelRequested {
                task_id: "task-1".into()
            })
        );
        assert_eq!(parse("r"), Some(Change::Runnable));
        // A batch's appends: one notification, a line each.
        let batch: Vec<Change> = "a 1 2 t1\na 5 5 t2".lines().filter_map(parse).collect();
        assert_eq!(batch.len(), 2);
        assert_eq!(
            batch[1],
            Change::Appended {
                task_id: "t2".into(),
                first: 5,
                last: 5
            }
        );
        assert_eq!(parse("a 3"), None);
        assert_eq!(parse("zz"), None);
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        assert_eq!(
            super::redacted("postgres://me:secret@db.example:5432/agwire"),
            "postgres://me@db.example:5432/agwire"
        );
        assert_eq!(
            super::redacted("postgres://db.example/agwire"),
            "postgres://db.example/agwire"
        );
    }
}
