//! The run engine of one process: it accepts runs, claims the runnable
//! ones, executes them (the agent's events appended to the log, then
//! published live), ends and cancels them, and follows a run's log for
//! whoever streams it. It knows nothing of HTTP: the API and the scheduler
//! call it.
//!
//! A run's way through it, a file each: [`Engine::accept`] and
//! [`Engine::cancel`] here; claims, leases, abandoned runs and relays from
//! other replicas in `dispatch`, the places among `runs.max_concurrent` it
//! claims into in `places`; execution, its end and the log's appends
//! in `execute`; streaming a run's log in `follow`; live events in `hub`.
//!
//! The API reaches the database only through the engine's typed
//! operations, each with its rule in one place: a run's reads here, a
//! user's settings in `profile`, attachments in `attachments`, the calendar
//! in `calendar`, and the threads', jobs' and history's in their own
//! modules ([`crate::threads`], [`crate::jobs`], `crate::history`).

mod attachments;
mod calendar;
mod dispatch;
mod execute;
mod follow;
pub(crate) mod hub;
mod places;
mod profile;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agwire_server::{CancellationToken, DynAgent};
use tokio_util::task::TaskTracker;

use crate::error::Error;
use crate::metrics::Metrics;
use crate::run::{RunRequest, RunStatus};
use crate::store::{NewRun, Store};
// What the engine's operations answer with, named here so that their
// callers (the API) need not name the store.
pub use crate::store::{Accepted, RunRecord};
pub(crate) use follow::FromStart;
use hub::Hub;

pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The run engine of one process: the store, the live hub, what builds each
/// run's agent, and the runs executing here.
#[derive(Clone)]
pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) hub: Hub,
    pub(crate) brain: Arc<dyn crate::brain::Brain>,
    /// The agent catalogue (`system_agents.yaml`); jobs are checked against it.
    pub(crate) runtime: Arc<crate::brain::agents::RuntimeConfig>,
    pub(crate) metrics: Arc<Metrics>,
    /// Most runs executing at once on this process.
    pub(crate) max_concurrent: usize,
    /// How long a frontend tool call a run leaves pending waits for its
    /// answer.
    pub(crate) tool_call_ttl: Duration,
    /// Per-user limits every accept is checked against.
    pub(crate) quotas: agwire_store::Quotas,
    /// Cancelled to cancel every run in progress.
    shutdown: CancellationToken,
    /// The cancel token of each run executing on this process.
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
    /// The executions on this process (the drain waits for them).
    executions: TaskTracker,
    /// The places among `max_concurrent` that executions and accepts in
    /// flight hold.
    places: Arc<places::Places>,
    /// Wakes the dispatcher: a run was accepted, one ended, or a place
    /// freed while it waited for one.
    dispatch: Arc<tokio::sync::Notify>,
    /// Whether the store tells every process of runs that become runnable
    /// (a shared database's changes): then a run's end here wakes the
    /// dispatcher only when it waits for a place.
    store_changes: bool,
    /// Shutting down: no new runs.
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// Cancelled when the drain starts (background loops stop).
    stop: CancellationToken,
    /// How often followers check the log themselves (shared databases).
    recheck: Option<Duration>,
    /// Traces and metrics export (off by default).
    pub(crate) telemetry: crate::telemetry::Telemetry,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store)
            .field("running", &self.running())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `store` running `agent` for every run.
    pub fn new(store: Arc<dyn Store>, agent: Arc<dyn DynAgent>) -> Self {
        let store_changes = store.changes().is_some();
        let dispatch = Arc::new(tokio::sync::Notify::new());
        Self {
            store,
            hub: Hub::default(),
            brain: Arc::new(crate::brain::Fixed::new(agent, "builtin")),
            runtime: Arc::new(crate::brain::agents::RuntimeConfig::builtin()),
            metrics: Arc::default(),
            max_concurrent: crate::config::RunsConfig::default().max_concurrent,
            tool_call_ttl: crate::config::RunsConfig::default().pending_tool_call_ttl,
            quotas: agwire_store::Quotas::default(),
            shutdown: CancellationToken::new(),
            running: Arc::default(),
            executions: TaskTracker::new(),
            places: Arc::new(places::Places::new(dispatch.clone())),
            dispatch,
            store_changes,
            draining: Arc::default(),
            stop: CancellationToken::new(),
            recheck: store_changes.then_some(follow::FOLLOW_RECHECK),
            telemetry: crate::telemetry::Telemetry::off(),
        }
    }

    /// Starts the engine: runs a crash left `running` end as
    /// failed with a `RUN_ERROR` (code `server_restart`) after a valid start
    /// of their log; queued runs are executed; from then on the dispatcher
    /// executes every run that becomes runnable (accepted, or next on its
    /// thread) until the drain.
    pub async fn start(&self) -> Result<(), Error> {
        for run in self.store.interrupted_runs().await? {
            self.end_interrupted(&run).await?;
        }
        if let Some(changes) = self.store.changes() {
            let engine = self.clone();
            tokio::spawn(async move { engine.follow_changes(changes).await });
        }
        let dispatcher = self.clone();
        tokio::spawn(async move { dispatcher.dispatch_loop().await });
        Ok(())
    }

    /// Cancels every run in progress (shutdown); they finish as cancelled.
    pub fn cancel_all(&self) {
        self.shutdown.cancel();
    }

    /// Resolves when the service starts shutting down.
    pub async fn stopping(&self) {
        self.stop.cancelled().await;
    }

    /// Runs executing on this process now.
    pub fn running(&self) -> usize {
        self.executions.len()
    }

    /// Shutdown: new runs are refused (503); running ones get `grace` to
    /// finish, then are cancelled (they end as `cancelled`); queued ones stay
    /// queued for the next start; open streams end so connections close.
    pub async fn drain(&self, grace: Duration) {
        use std::sync::atomic::Ordering;
        self.draining.store(true, Ordering::SeqCst);
        self.stop.cancel();
        self.executions.close();
        if tokio::time::timeout(grace, self.executions.wait())
            .await
            .is_err()
        {
            tracing::info!(
                runs = self.running(),
                "grace period over: cancelling the running runs"
            );
            self.cancel_all();
            // Cancelled runs only need to write their end.
            let _ = tokio::time::timeout(Duration::from_secs(5), self.executions.wait()).await;
        }
        self.hub.close_all();
    }

    /// Ends a run that has not started as cancelled, if it still has not
    /// (false when a worker took it first). Its log gets `RUN_STARTED` then
    /// `RUN_FINISHED` with outcome `cancelled`, so it is still a valid run.
    pub(crate) async fn cancel_unstarted(
        &self,
        task_id: &str,
        thread_id: &str,
        run_id: &str,
    ) -> Result<bool, Error> {
        let events = crate::store::cancelled_log(thread_id, run_id);
        let Some(first) = self.store.cancel_queued(task_id, &events, now_ms()).await? else {
            return Ok(false);
        };
        for (i, event) in events.into_iter().enumerate() {
            self.hub.publish(task_id, first + i as u64, event);
        }
        Ok(true)
    }

    /// Stores an accepted run and hands it to the engine (it executes as
    /// soon as its thread is free: at once, started by the accept itself,
    /// when this process has room). The answer's `started` is always `None`:
    /// the engine took the run.
    ///
    /// The write and the hand-off happen on a task of their own: a client
    /// that goes away mid-request cannot leave a committed run behind that
    /// nobody starts (the dispatcher's sweep is the second line of defence).
    pub async fn accept(&self, run: RunRequest) -> Result<Accepted, Error> {
        Ok(self.admit(run, false).await?.0)
    }

    /// [`Engine::accept`] for a caller that streams the run from its start
    /// (a POST answered with the stream): when the accept started the run
    /// here, the caller's subscription is made before its execution is
    /// spawned, and [`Engine::follow_from_start`] takes every event live.
    pub(crate) async fn accept_following(
        &self,
        run: RunRequest,
    ) -> Result<(Accepted, Option<FromStart>), Error> {
        self.admit(run, true).await
    }

    async fn admit(
        &self,
        mut run: RunRequest,
        follow: bool,
    ) -> Result<(Accepted, Option<FromStart>), Error> {
        use tracing::Instrument as _;
        if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::ShuttingDown);
        }
        // The run continues the trace of what accepted it (the request, a
        // job's tick), on whichever replica executes it.
        let within = match self.telemetry.is_on() {
            true => {
                run.options.trace_parent = self.telemetry.current_parent();
                tracing::Span::current()
            }
            false => tracing::Span::none(),
        };
        let engine = self.clone();
        tokio::spawn(
            async move {
                let fingerprint = serde_json::to_string(&run.input)?;
                // With room here, a run whose thread is idle starts with its
                // accept: one write, no trip through the queue.
                let place = engine.places.hold_start(engine.max_concurrent);
                let start = place.as_ref().map(|_| engine.claim_hooks());
                let writing = std::time::Instant::now();
                let mut accepted = engine
                    .store
                    .accept_run(NewRun {
                        user: &run.user,
                        input: &run.input,
                        request_hash: &fingerprint,
                        mode: run.mode,
                        options: &run.options,
                        admission: run.admission,
                        quotas: engine.quotas,
                        now_ms: now_ms(),
                        start: start.as_ref(),
                    })
                    .await?;
                engine
                    .telemetry
                    .store_write("accept_run", engine.store.database(), writing);
                if !accepted.replayed {
                    engine.metrics.run_accepted();
                }
                for stopped in std::mem::take(&mut accepted.stopped) {
                    engine.stopped(&accepted.thread_id, stopped).await;
                }
                let mut from_start = None;
                match accepted.started.take() {
                    Some(run) => {
                        if follow {
                            from_start = Some(FromStart(engine.hub.subscribe(&run.task_id)));
                        }
                        engine.spawn_execution(run);
                    }
                    None if !accepted.replayed => engine.dispatch.notify_one(),
                    None => {}
                }
                drop(place);
                Ok((accepted, from_start))
            }
            .instrument(within),
        )
        .await
        .map_err(|e| Error::Internal(format!("accepting a run failed: {e}")))?
    }

    /// Cancels `run`: a run that has not started ends at once (its log a
    /// valid cancelled run); a running one is told to stop wherever it is in
    /// its work, and ends as cancelled. Ended runs are left as they are.
    pub async fn cancel(&self, run: &RunRecord) -> Result<(), Error> {
        if run.status == RunStatus::Queued {
            // Not started: it ends here, unless the dispatcher takes it this
            // instant — then its token (registered before the claim commits)
            // is found below.
            if self
                .cancel_unstarted(&run.task_id, &run.thread_id, &run.run_id)
                .await?
            {
                return Ok(());
            }
        }
        self.stop_running(&run.task_id).await
    }

    /// Tells a running run to stop, wherever it executes: here, its token;
    /// elsewhere, the store's word to every replica.
    async fn stop_running(&self, task_id: &str) -> Result<(), Error> {
        let token = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(task_id).cloned());
        match token {
            Some(token) => token.cancel(),
            // Executing on another replica (if anywhere): it hears this.
            None => self.store.request_cancel(task_id).await?,
        }
        Ok(())
    }

    /// Follows up on a run an accept stopped (`interrupt`, `rollback`): a
    /// waiting one's log, written by the accept, goes to its followers here;
    /// a running one is told to stop (the accept marked it in the store, so
    /// a replica that misses the word still hears it on its next lease
    /// renewal).
    async fn stopped(&self, thread_id: &str, stopped: crate::store::Stopped) {
        match stopped.ended {
            Some(first) => {
                let log = crate::store::cancelled_log(thread_id, &stopped.run_id);
                for (i, event) in log.into_iter().enumerate() {
                    self.hub.publish(&stopped.task_id, first + i as u64, event);
                }
            }
            None => {
                if let Err(error) = self.stop_running(&stopped.task_id).await {
                    tracing::warn!(%error, run_id = stopped.run_id, "could not tell a run to stop; its lease renewal will");
                }
            }
        }
    }

    /// `user`'s run `run_id` (`None`: no such run of theirs).
    pub(crate) async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error> {
        Ok(self.store.run(user, run_id).await?)
    }

    /// How many runs are in each status (every replica's: they share the
    /// database).
    pub(crate) async fn status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error> {
        Ok(self.store.status_counts().await?)
    }

    /// Webhook messages still to deliver (every replica's).
    pub(crate) async fn webhooks_pending(&self) -> Result<u64, Error> {
        Ok(self.store.webhooks_pending().await?)
    }

    /// Which database holds the runs: `sqlite` or `postgres`.
    pub(crate) fn database(&self) -> &'static str {
        self.store.database()
    }

    /// This process's name among the replicas sharing the database; `None`
    /// when it is the only one.
    pub(crate) fn replica_id(&self) -> Option<String> {
        self.store.replica_id()
    }
}
