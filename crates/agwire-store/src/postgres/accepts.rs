//! Group commit of accepts on PostgreSQL: the runs this replica is asked to
//! accept while its earlier batches commit go to the database together —
//! one statement (`agwire_accept_many`: the common calls, turns that open a
//! new thread, set-based; the rest through `agwire_accept`, in order — every
//! rule is the one-call function's, `store_contract::grouped` holds it to
//! that) and one commit —
//! and each request is answered once the batch holding it has committed,
//! never before (a `202` still means the run is durable). A run the batch
//! starts here comes back with its briefing (its owner's settings and its
//! thread's history), so its execution begins without a read of its own.
//!
//! Why: an accept is one short function call, and alone it pays a round
//! trip, a statement and a commit (a WAL flush) of its own; at a few
//! thousand requests a second those, not the function, set the rate.
//!
//! Up to a few lanes take batches side by side. A lane that finds a batch
//! committing gathers what arrives until that commit is done, so under load
//! accepts share few commits (a lane per request would pay PostgreSQL a
//! commit per accept: measured, 1 lane instead of 4 took its CPU per accept
//! from 467 to 311 µs at the same rate); only a batch slower than a commit
//! usually is (a lock another replica holds) lets the next lane go on
//! without it, so one slow batch never holds up the rest. A batch's calls are
//! ordered by user and thread (in arrival order within one), so two batches
//! take their users' and threads' locks in one order and never wait for each other in a
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
use sqlx::{PgConnection, PgPool};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::kept::Kept;
use super::runs::{accept_alone, answered};
use super::undone;
use crate::error::Error;
use crate::group::{Commit, GroupCommit, Shape};
use crate::rules::Accept;
use crate::{Accepted, Briefing};

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
            "options": run.options,
            "strategy": run.strategy.as_str(),
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
            "runs_per_minute": run.quotas.runs_per_minute,
            "tokens_per_day": run.quotas.tokens_per_day,
        })
    }
}

/// Hands accepts to the lanes.
#[derive(Debug, Clone)]
pub(super) struct Accepts {
    group: GroupCommit<AcceptMany>,
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
        let accepts = AcceptMany {
            kept: Kept::new(pool.clone()),
            pool,
            replica,
            lease_ms,
            runnable,
        };
        let shape = Shape {
            max_group: MAX_BATCH,
            lanes: LANES,
            first_guess: std::time::Duration::from_millis(1),
            queue: 4 * MAX_BATCH,
        };
        Self {
            group: GroupCommit::spawn(accepts, shape, stop),
        }
    }

    /// Accepts `run` (started by this replica when it holds a `start` and
    /// its thread is idle): answered after the commit that holds it.
    pub(super) async fn accept(&self, run: Accept) -> Result<Accepted, Error> {
        let (reply, answer) = oneshot::channel();
        self.group.queue(Call { run, reply }).await?;
        answer.await.map_err(|_| Error::ShuttingDown)?
    }
}

/// How a group of accepts is committed: one `agwire_accept_many`.
struct AcceptMany {
    pool: PgPool,
    /// The lanes' connections, kept between groups.
    kept: Kept,
    replica: Arc<str>,
    lease_ms: i64,
    /// Tells every replica of runs accepted and not started.
    runnable: super::Runnable,
}

impl Commit for AcceptMany {
    type Call = Call;
    type Failure = sqlx::Error;

    /// By user, then thread, stable (one thread's calls keep their arrival
    /// order): two groups take their users' quota locks and their threads'
    /// locks in one order (a thread is its user's).
    fn arrange(&self, group: &mut Vec<Call>, _later: &mut Vec<Call>) {
        group.sort_by(|a, b| (&a.run.user, &a.run.thread_id).cmp(&(&b.run.user, &b.run.thread_id)));
    }

    /// A group of one call too: `agwire_accept_many` answers a run it
    /// starts with its briefing (not `agwire_accept`), and costs
    /// PostgreSQL no more for one call.
    async fn together(&self, group: &mut Vec<Call>) -> Result<(), sqlx::Error> {
        let mut conn = self.kept.take().await?;
        let rows = commit(self, &mut conn, group).await;
        self.kept.keep(conn, &rows);
        let rows = match rows {
            Ok(rows) => rows,
            Err(error) => {
                if !undone(&error) {
                    tracing::error!(%error, "a batch of accepts failed");
                }
                return Err(error);
            }
        };
        if rows.len() == group.len() {
            let mut queued = false;
            for (call, row) in group.drain(..).zip(rows) {
                let answer = row.answer(&call.run);
                queued |= is_runnable(&answer);
                let _ = call.reply.send(answer);
            }
            if queued {
                self.runnable.announce();
            }
        } else {
            let error = format!("{} answers to {} accepts", rows.len(), group.len());
            tracing::error!(error, "a batch of accepts answered wrongly");
            for call in group.drain(..) {
                let _ = call.reply.send(Err(Error::Internal(error.clone())));
            }
        }
        Ok(())
    }

    async fn alone(&self, call: Call) {
        let owner = call.run.start.as_ref().map(|_| &*self.replica);
        let answer = accept_alone(&self.pool, &call.run, owner, self.lease_ms).await;
        let queued = is_runnable(&answer);
        let _ = call.reply.send(answer);
        if queued {
            self.runnable.announce();
        }
    }

    /// Undone as a whole (a deadlock, a runId's first posts racing, one
    /// call's value the database refused): nothing was written; each call
    /// again alone, so only a bad one fails.
    fn undone(&self, failure: &sqlx::Error) -> bool {
        undone(failure)
    }

    /// Anything else (a lost connection) may have committed or not: never
    /// accept twice — the call fails; a client that posts the same request
    /// again gets the original run back (a replay) or a new one.
    fn fail(&self, call: Call, failure: &sqlx::Error) {
        let failed = Error::Internal(format!("the accept could not be committed: {failure}"));
        let _ = call.reply.send(Err(failed));
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

/// `agwire_accept_many`'s answer for one call.
#[derive(sqlx::FromRow)]
struct Answer {
    outcome: String,
    task_id: Option<String>,
    created: bool,
    waiting: bool,
    stopped: Option<super::runs::StoppedJson>,
    /// A run it started, answered with its briefing: `settings`, and
    /// `history` (`None` for a thread the call created).
    briefed: bool,
    settings: Option<String>,
    history: Option<Vec<String>>,
}

impl Answer {
    /// The accept's answer; a run it started carries its briefing unless it
    /// is an automation run (its job's config is read with the rest, apart).
    fn answer(self, run: &Accept) -> Result<Accepted, Error> {
        let mut accepted = answered(
            run,
            &self.outcome,
            self.task_id,
            self.created,
            self.waiting,
            self.stopped,
        )?;
        if let Some(started) = &mut accepted.started
            && self.briefed
            && started.mode != Some(crate::RuntimeMode::Automation)
        {
            let history = match self.history {
                Some(history) => history,
                None => run.new_thread_history(),
            };
            started.briefing = Some(Briefing::from_stored(self.settings.as_deref(), history)?);
        }
        Ok(accepted)
    }
}

/// One batch, one statement: each call's answer, in order.
async fn commit(
    lane: &AcceptMany,
    conn: &mut PgConnection,
    batch: &[Call],
) -> Result<Vec<Answer>, sqlx::Error> {
    let calls: Vec<serde_json::Value> = batch.iter().map(|c| c.to_json(&lane.replica)).collect();
    sqlx::query_as(
        "SELECT outcome, task_id, created, waiting, stopped, briefed, settings, history \
         FROM agwire_accept_many($1, $2, $3) ORDER BY n",
    )
    .bind(sqlx::types::Json(&calls))
    .bind(lane.lease_ms)
    .bind(i32::try_from(crate::HISTORY_WINDOW).unwrap_or(i32::MAX))
    .fetch_all(conn)
    .await
}
