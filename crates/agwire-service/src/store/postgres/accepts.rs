//! Group commit of accepts on PostgreSQL: the runs this replica is asked to
//! accept while its earlier batches commit go to the database together —
//! one statement (`agwire_accept_many`, which runs `agwire_accept` for each
//! call in order, so every rule is the one-call function's) and one commit —
//! and each request is answered once the batch holding it has committed,
//! never before (a `202` still means the run is durable).
//!
//! Why: an accept is one short function call, and alone it pays a round
//! trip, a statement and a commit (a WAL flush) of its own; at a few
//! thousand requests a second those, not the function, set the rate.
//!
//! A few lanes take batches side by side, so a lone request never waits for
//! another's commit and the database's cores are used. A batch's calls are
//! ordered by thread (in arrival order within one), so two batches take
//! their threads' locks in one order and never wait for each other in a
//! circle. A batch the database undoes as a whole (a deadlock with another
//! replica, two first posts of one runId racing) wrote nothing: its calls
//! go again one by one ([`super::runs::accept_alone`]), and only a bad one
//! fails.
//!
//! A run accepted but not started here (this replica is at its limit, or
//! holds no `start`) is announced to every replica once its batch has
//! committed, by [`super::Runnable`]: not by a `NOTIFY` inside the accept's
//! transaction, which would take PostgreSQL's one notify lock (held until
//! the commit's WAL flush is done) and so line up every accepting commit of
//! every replica behind one another.

use std::sync::Arc;

use serde_json::json;
use sqlx::{PgPool, Row};
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::runs::{accept_alone, answered};
use super::undone;
use crate::error::Error;
use crate::store::Accepted;
use crate::store::prepared::Accept;

/// Most accepts one statement carries.
const MAX_BATCH: usize = 64;
/// Batches in flight at once per replica.
const LANES: usize = 4;

/// One accept waiting for its batch.
struct Call {
    /// The prepared accept (started here, by this replica, when it holds a
    /// `start` and its thread is idle).
    run: Accept,
    reply: oneshot::Sender<Result<Accepted, Error>>,
}

impl Call {
    /// `agwire_accept`'s arguments as the object `agwire_accept_many` reads.
    fn to_json(&self, replica: &str) -> serde_json::Value {
        let run = &self.run;
        json!({
            "task": run.task_id,
            "user": run.user,
            "thread": run.thread_id,
            "run": run.run_id,
            "hash": run.request_hash,
            "input": run.input_json,
            "mode": run.mode,
            "client_time": run.client_time,
            "enqueue": run.enqueue,
            "dedupe": run.dedupe,
            "ids": run.candidates.iter().map(|m| &m.id).collect::<Vec<_>>(),
            "roles": run.candidates.iter().map(|m| m.role).collect::<Vec<_>>(),
            "bodies": run.candidates.iter().map(|m| &m.body).collect::<Vec<_>>(),
            "shown": run.candidates.iter().map(|m| m.shown).collect::<Vec<_>>(),
            "title": run.title(),
            "attachments": run.attachments,
            "pending": run.pending(),
            "now": run.now_ms,
            "owner": run.start.as_ref().map(|_| replica),
            "answers": run.answers,
            "strict": run.strict_answers,
        })
    }
}

/// Hands accepts to the lanes.
#[derive(Debug, Clone)]
pub(super) struct Accepts {
    calls: mpsc::Sender<Call>,
}

/// What every lane shares.
struct Lane {
    pool: PgPool,
    replica: Arc<str>,
    lease_ms: i64,
    queue: Mutex<mpsc::Receiver<Call>>,
    /// Tells every replica of runs accepted and not started.
    runnable: super::Runnable,
    stop: CancellationToken,
}

impl Accepts {
    /// Starts the lanes (they end with `stop`).
    pub(super) fn start(
        pool: PgPool,
        replica: Arc<str>,
        lease_ms: i64,
        runnable: super::Runnable,
        stop: CancellationToken,
    ) -> Self {
        let (calls, queue) = mpsc::channel(4 * MAX_BATCH);
        let lane = Arc::new(Lane {
            pool,
            replica,
            lease_ms,
            queue: Mutex::new(queue),
            runnable,
            stop,
        });
        for _ in 0..LANES {
            tokio::spawn(run(lane.clone()));
        }
        Self { calls }
    }

    /// Accepts `run` (started by this replica when it holds a `start` and
    /// its thread is idle): answered after the commit that holds it.
    pub(super) async fn accept(&self, run: Accept) -> Result<Accepted, Error> {
        let (reply, answer) = oneshot::channel();
        let gone = || Error::ShuttingDown;
        self.calls
            .send(Call { run, reply })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn run(lane: Arc<Lane>) {
    let mut batch: Vec<Call> = Vec::with_capacity(MAX_BATCH);
    loop {
        // One lane waits for work at a time; the others wait their turn
        // here, so whatever arrives while a batch commits forms the next.
        let count = {
            let mut queue = lane.queue.lock().await;
            tokio::select! {
                () = lane.stop.cancelled() => return,
                count = queue.recv_many(&mut batch, MAX_BATCH) => count,
            }
        };
        if count == 0 {
            return;
        }
        // Stable: one thread's calls keep their arrival order.
        batch.sort_by(|a, b| a.run.thread_id.cmp(&b.run.thread_id));
        if batch.len() == 1 {
            // Nothing to share a statement with.
            alone(&lane, batch.drain(..)).await;
            continue;
        }
        match commit(&lane, &batch).await {
            Ok(rows) if rows.len() == batch.len() => {
                let mut queued = false;
                for (call, (outcome, task_id, created, waiting)) in batch.drain(..).zip(rows) {
                    let answer = answered(&call.run, &outcome, task_id, created, waiting);
                    queued |= is_runnable(&answer);
                    let _ = call.reply.send(answer);
                }
                if queued {
                    lane.runnable.announce();
                }
            }
            Ok(rows) => {
                let error = format!("{} answers to {} accepts", rows.len(), batch.len());
                tracing::error!(error, "a batch of accepts answered wrongly");
                for call in batch.drain(..) {
                    let _ = call.reply.send(Err(Error::Internal(error.clone())));
                }
            }
            // Undone as a whole (a deadlock, a runId's first posts racing,
            // one call's value the database refused): nothing was written;
            // each call again alone, so only a bad one fails.
            Err(error) if undone(&error) => alone(&lane, batch.drain(..)).await,
            // Anything else (a lost connection) may have committed or not:
            // never accept twice — the calls fail; a client that posts the
            // same request again gets the original run back (a replay) or
            // a new one.
            Err(error) => {
                tracing::error!(%error, "a batch of accepts failed");
                for call in batch.drain(..) {
                    let failed =
                        Error::Internal(format!("the accept could not be committed: {error}"));
                    let _ = call.reply.send(Err(failed));
                }
            }
        }
    }
}

/// Each call on its own statement.
async fn alone(lane: &Lane, calls: impl Iterator<Item = Call>) {
    for call in calls {
        let owner = call.run.start.as_ref().map(|_| &*lane.replica);
        let answer = accept_alone(&lane.pool, &call.run, owner, lane.lease_ms).await;
        let queued = is_runnable(&answer);
        let _ = call.reply.send(answer);
        if queued {
            lane.runnable.announce();
        }
    }
}

/// Whether an accept left a run that any replica may claim now: new, not
/// started by this replica, and not waiting behind its thread's active run
/// (that one's end announces it).
fn is_runnable(answer: &Result<Accepted, Error>) -> bool {
    answer
        .as_ref()
        .is_ok_and(|a| !a.replayed && !a.waiting && a.started.is_none())
}

/// `agwire_accept`'s answer for one call: outcome, task id, created, waiting.
type Answer = (String, Option<String>, bool, bool);

/// One batch, one statement: each call's answer, in order.
async fn commit(lane: &Lane, batch: &[Call]) -> Result<Vec<Answer>, sqlx::Error> {
    let calls: Vec<serde_json::Value> = batch.iter().map(|c| c.to_json(&lane.replica)).collect();
    let rows = sqlx::query(
        "SELECT outcome, task_id, created, waiting FROM agwire_accept_many($1, $2) ORDER BY n",
    )
    .bind(sqlx::types::Json(&calls))
    .bind(lane.lease_ms)
    .fetch_all(&lane.pool)
    .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get("outcome")?,
                row.try_get("task_id")?,
                row.try_get("created")?,
                row.try_get("waiting")?,
            ))
        })
        .collect()
}
