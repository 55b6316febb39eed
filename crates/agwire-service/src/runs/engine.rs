//! The run engine: accepts runs, claims the runnable ones, executes them
//! (the agent's events appended to the log, then published live), ends and
//! cancels them, and follows a run's log for whoever streams it. It knows
//! nothing of HTTP: the API and the scheduler call it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agwire_core::{BaseEvent, Event, RunAgentInput, RunErrorEvent, RunFinishedOutcome};
use agwire_server::{CancellationToken, DynAgent, run_detached};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::attachments::REFERENCE_PREFIX;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::runs::hub::{Hub, Producer};
use crate::store::{
    Accepted, Admission, Change, Claimed, Ending, NewRun, OnClaim, RunRecord, RunStatus, StartHere,
    Store,
};
use crate::validate::{ClientTime, RuntimeMode};

/// Runs the dispatcher takes per claim (one transaction).
const CLAIM_BATCH: u32 = 64;
/// How often the dispatcher looks for runnable runs nobody told it about
/// (a safety net: accepts and endings wake it at once), and for runs a dead
/// replica abandoned.
const SWEEP_PERIOD: Duration = Duration::from_secs(5);
/// How long a follower of a run in a shared database waits on live events
/// before it checks the log itself (a safety net: a change from another
/// replica can be lost with its connection). In an embedded database every
/// event passes through this process's hub, and followers only wait.
const FOLLOW_RECHECK: Duration = Duration::from_secs(15);

pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// A place among `max_concurrent` held by an accept in flight (given back
/// when dropped: by then the run executes, or does not start here).
struct StartPlace(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for StartPlace {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A validated run, ready to be accepted: who asks, what, and what
/// validation established about it.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Its owner.
    pub user: String,
    /// What it runs.
    pub input: RunAgentInput,
    /// `forwardedProps.runtime_mode` (`None` on the standard AG-UI endpoint).
    pub mode: Option<RuntimeMode>,
    /// `forwardedProps.client_time`, checked.
    pub client_time: Option<ClientTime>,
    /// Busy-thread and history rules.
    pub admission: Admission,
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
    /// Cancelled to cancel every run in progress.
    shutdown: CancellationToken,
    /// The cancel token of each run executing on this process.
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
    /// The executions on this process (the drain waits for them).
    executions: TaskTracker,
    /// Accepts in flight that will start their run here if they can (their
    /// places among `max_concurrent` are held).
    starting: Arc<std::sync::atomic::AtomicUsize>,
    /// Wakes the dispatcher: a run was accepted, or one ended.
    dispatch: Arc<tokio::sync::Notify>,
    /// Shutting down: no new runs.
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// Cancelled when the drain starts (background loops stop).
    stop: CancellationToken,
    /// How often followers check the log themselves (shared databases).
    recheck: Option<Duration>,
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
        Self {
            store,
            hub: Hub::default(),
            brain: Arc::new(crate::brain::Fixed::new(agent, "builtin")),
            runtime: Arc::new(crate::brain::agents::RuntimeConfig::builtin()),
            metrics: Arc::default(),
            max_concurrent: crate::config::RunsConfig::default().max_concurrent,
            shutdown: CancellationToken::new(),
            running: Arc::default(),
            executions: TaskTracker::new(),
            starting: Arc::default(),
            dispatch: Arc::default(),
            draining: Arc::default(),
            stop: CancellationToken::new(),
            recheck: store_changes.then_some(FOLLOW_RECHECK),
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

    /// Ends a run whose process is gone (a restart, or a replica that died)
    /// as failed, code `server_restart`, after a valid start of its log. A
    /// run that already ended is left as it is (another survivor was first).
    async fn end_interrupted(&self, run: &RunRecord) -> Result<(), Error> {
        let why = "the server restarted while the run was in progress";
        let error = Event::RunError(RunErrorEvent {
            message: why.into(),
            code: Some("server_restart".into()),
            usage: None,
            base: BaseEvent::default(),
        });
        let detail = json!({"message": why, "code": "server_restart"});
        let ending = Ending {
            status: RunStatus::Failed,
            error: Some(&detail),
            usage: None,
            terminal: &error,
            output: &[],
            ui_schema: None,
        };
        if let Some(seq) = self.store.end_run(&run.task_id, &ending, now_ms()).await? {
            self.hub.publish(&run.task_id, seq, error);
            tracing::warn!(
                run_id = run.run_id,
                thread_id = run.thread_id,
                "run interrupted (its process is gone), marked failed"
            );
        }
        Ok(())
    }

    /// What other replicas commit, applied here: their runs' events to the
    /// followers here, cancels of runs executing here, runnable runs to the
    /// dispatcher.
    async fn follow_changes(&self, mut changes: broadcast::Receiver<Change>) {
        loop {
            let change = tokio::select! {
                () = self.stop.cancelled() => return,
                change = changes.recv() => change,
            };
            match change {
                Ok(Change::Appended {
                    task_id,
                    first,
                    last,
                }) => {
                    if self.hub.followed_from_elsewhere(&task_id) {
                        self.relay(&task_id, first, last).await;
                    }
                }
                Ok(Change::CancelRequested { task_id }) => {
                    let token = self
                        .running
                        .lock()
                        .ok()
                        .and_then(|r| r.get(&task_id).cloned());
                    if let Some(token) = token {
                        token.cancel();
                    }
                }
                Ok(Change::Runnable) => self.dispatch.notify_one(),
                // Missed changes: the dispatcher looks; followers re-read
                // the log on their own within FOLLOW_RECHECK.
                Err(broadcast::error::RecvError::Lagged(_)) => self.dispatch.notify_one(),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Publishes events `first..=last` of a run executing elsewhere to its
    /// followers here, read from the log.
    async fn relay(&self, task_id: &str, first: u64, last: u64) {
        match self
            .store
            .events_after(task_id, first.saturating_sub(1))
            .await
        {
            Ok(events) => {
                for (seq, event) in events.into_iter().take_while(|(seq, _)| *seq <= last) {
                    self.hub.publish(task_id, seq, event);
                }
            }
            Err(error) => tracing::warn!(%error, "could not read a run's log to relay it"),
        }
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

    /// Executes runnable runs (claimed from the store in batches) whenever
    /// woken, and every [`SWEEP_PERIOD`] in case a wake-up was missed, until
    /// the drain.
    async fn dispatch_loop(&self) {
        loop {
            if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let hooks = self.claim_hooks();
            let room = self
                .max_concurrent
                .saturating_sub(self.running() + self.starting());
            let limit = CLAIM_BATCH.min(u32::try_from(room).unwrap_or(u32::MAX));
            let claim = async {
                if limit == 0 {
                    return Ok(Vec::new());
                }
                self.store
                    .claim_runnable(limit, now_ms(), hooks.register, hooks.forget)
                    .await
            };
            match claim.await {
                Ok(claimed) => {
                    let full = limit > 0 && claimed.len() == limit as usize;
                    for run in claimed {
                        self.spawn_execution(run);
                    }
                    if full {
                        continue;
                    }
                }
                Err(error) => tracing::error!(%error, "could not claim runs"),
            }
            tokio::select! {
                () = self.dispatch.notified() => {}
                () = tokio::time::sleep(SWEEP_PERIOD) => self.end_abandoned().await,
                () = self.stop.cancelled() => return,
            }
        }
    }

    /// What registers a run taken for execution here (its cancel token,
    /// before the taking commits: a cancel that sees the run `running` finds
    /// it), and forgets it if that commit fails.
    fn claim_hooks(&self) -> StartHere {
        let (running, shutdown) = (self.running.clone(), self.shutdown.clone());
        let register: OnClaim = Arc::new(move |task_id: &str| {
            if let Ok(mut running) = running.lock() {
                running.insert(task_id.to_owned(), shutdown.child_token());
            }
        });
        let running = self.running.clone();
        let forget: OnClaim = Arc::new(move |task_id: &str| {
            if let Ok(mut running) = running.lock() {
                running.remove(task_id);
            }
        });
        StartHere { register, forget }
    }

    /// Accepts that hold a place to start their run here.
    fn starting(&self) -> usize {
        self.starting.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Holds a place among `max_concurrent` for a run about to be accepted,
    /// if there is one.
    fn hold_start(&self) -> Option<StartPlace> {
        use std::sync::atomic::Ordering;
        let held = self.starting.fetch_add(1, Ordering::SeqCst) + 1;
        let place = StartPlace(self.starting.clone());
        (self.running() + held <= self.max_concurrent).then_some(place)
    }

    /// Ends the runs a dead replica abandoned (their lease ran out).
    async fn end_abandoned(&self) {
        let abandoned = match self.store.abandoned_runs().await {
            Ok(abandoned) => abandoned,
            Err(error) => {
                tracing::error!(%error, "could not look for abandoned runs");
                return;
            }
        };
        for run in abandoned {
            if let Err(error) = self.end_interrupted(&run).await {
                tracing::error!(%error, "could not end an abandoned run");
            }
        }
    }

    /// Executes a claimed run on a task of its own.
    fn spawn_execution(&self, run: Claimed) {
        let cancel = self
            .running
            .lock()
            .ok()
            .and_then(|running| running.get(&run.task_id).cloned())
            .unwrap_or_else(|| self.shutdown.child_token());
        let service = self.clone();
        let span = tracing::info_span!(
            "run",
            run_id = %run.input.run_id,
            thread_id = %run.input.thread_id,
            user = %run.user_id,
        );
        self.executions.spawn(
            async move {
                let producer = service.hub.produce(&run.task_id);
                let task_id = run.task_id.clone();
                service.execute(run, cancel, &producer).await;
                if let Ok(mut running) = service.running.lock() {
                    running.remove(&task_id);
                }
                drop(producer);
                // The thread's next run (if one waits) is runnable now.
                service.dispatch.notify_one();
            }
            .instrument(span),
        );
    }

    /// Runs the agent, appending its events to the log as they come and
    /// ending the run (status, output, terminal event) in one transaction.
    async fn execute(
        &self,
        run: crate::store::Claimed,
        cancel: CancellationToken,
        live: &Producer,
    ) {
        let task_id = run.task_id.as_str();
        let started = std::time::Instant::now();
        let (tx, mut rx) = mpsc::channel(64);
        let agent = match self.setup(&run).await {
            Ok(setup) => self.brain.agent(setup),
            Err(error) => {
                tracing::error!(%error, "could not prepare the run");
                let failure = Event::RunError(RunErrorEvent {
                    message: "the run could not be prepared".into(),
                    code: Some("internal".into()),
                    usage: None,
                    base: BaseEvent::default(),
                });
                self.end(task_id, &failure, &[], live, started).await;
                return;
            }
        };
        let input = run.input;
        let producer = tokio::spawn(async move { run_detached(&*agent, input, tx, cancel).await });
        // What the run says, folded into the thread's messages at its end.
        let mut output = agwire_core::apply::Session::new(Vec::new(), json!({}));
        // Events that are ready together are appended in one transaction.
        let mut batch: Vec<Event> = Vec::with_capacity(64);
        let mut ended = false;
        'run: while rx.recv_many(&mut batch, 64).await > 0 {
            let mut events = std::mem::take(&mut batch);
            let terminal = events.iter().position(is_terminal);
            let rest = terminal.map(|i| events.split_off(i)).unwrap_or_default();
            for event in &events {
                output.apply(event);
            }
            if !events.is_empty() && !self.append_and_publish(task_id, events, live).await {
                break 'run;
            }
            if let Some(end) = rest.into_iter().next() {
                ended = self
                    .end(task_id, &end, &output.messages, live, started)
                    .await;
                break 'run;
            }
        }
        drop(rx);
        let _ = producer.await;
        if !ended {
            // The log refused events, or the agent vanished without an end:
            // the run still ends, with what it said so far.
            let failure = Event::RunError(RunErrorEvent {
                message: "the run could not be recorded".into(),
                code: Some("internal".into()),
                usage: None,
                base: BaseEvent::default(),
            });
            self.end(task_id, &failure, &output.messages, live, started)
                .await;
        }
    }

    /// What the run's agent needs besides its input.
    async fn setup(&self, run: &Claimed) -> Result<crate::brain::RunSetup, Error> {
        use crate::validate::RuntimeMode;
        let (user, input, mode) = (run.user_id.as_str(), &run.input, run.mode);
        let settings = self.store.settings(user).await?;
        let clock = crate::clock::RunClock::resolve(
            run.client_time.as_ref(),
            settings.get("timezone").and_then(Value::as_str),
            jiff::Timestamp::now(),
        );
        let locale = settings
            .get("locale")
            .and_then(Value::as_str)
            .unwrap_or("en")
            .to_owned();
        let history = self
            .store
            .thread_messages(
                &input.thread_id,
                &["user", "assistant", "tool", "system", "developer"],
            )
            .await?
            .into_iter()
            .map(|stored| stored.message)
            .collect();
        let history = self.inline_attachments(user, history).await;
        let runtime = match mode {
            Some(RuntimeMode::Automation) => {
                match self.store.job_of_thread(user, &input.thread_id).await? {
                    Some(job) => {
                        let job_runtime: crate::brain::agents::JobRuntime =
                            serde_json::from_str(&job.config)?;
                        self.runtime.for_job(&job_runtime)?
                    }
                    // An automation run without a job (posted by hand): the
                    // default agent alone.
                    None => self
                        .runtime
                        .for_job(&crate::brain::agents::JobRuntime::default())?,
                }
            }
            _ => (*self.runtime).clone(),
        };
        Ok(crate::brain::RunSetup {
            user: user.to_owned(),
            mode,
            clock,
            locale,
            history,
            runtime,
            store: self.store.clone(),
        })
    }

    /// The model must see the user's images: stored attachment references
    /// become `data:` URLs (the user's own attachments only; ones that are
    /// gone or too large stay references, which the model is told about as
    /// text).
    async fn inline_attachments(
        &self,
        user: &str,
        mut history: Vec<agwire_core::Message>,
    ) -> Vec<agwire_core::Message> {
        use agwire_core::{Content, ContentPart, Message, PartSource};
        use base64::Engine;
        /// Largest image sent inline.
        const MAX_INLINE: usize = 5 * 1024 * 1024;
        for message in &mut history {
            let Message::User(message) = message else {
                continue;
            };
            let Content::Parts(parts) = &mut message.content else {
                continue;
            };
            for part in parts.iter_mut() {
                let ContentPart::Image(media) = part else {
                    continue;
                };
                let PartSource::Url { value, .. } = &mut media.source else {
                    continue;
                };
                let Some(id) = value.strip_prefix(REFERENCE_PREFIX).map(str::to_owned) else {
                    continue;
                };
                let Ok(Some(record)) = self.store.attachment(&id).await else {
                    continue;
                };
                let mime = record.mime_type;
                if record.user_id != user {
                    continue;
                }
                match self.store.attachment_bytes(&id).await {
                    Ok(Some(bytes)) if bytes.len() <= MAX_INLINE => {
                        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                        *value = format!("data:{mime};base64,{data}");
                    }
                    _ => {}
                }
            }
        }
        history
    }

    /// Writes a run's end; true when this call ended it.
    async fn end(
        &self,
        task_id: &str,
        terminal: &Event,
        said: &[agwire_core::Message],
        live: &Producer,
        started: std::time::Instant,
    ) -> bool {
        let (status, error, usage) = match terminal {
            Event::RunFinished(e) => (
                match e.outcome {
                    Some(RunFinishedOutcome::Interrupt { .. }) => RunStatus::Interrupted,
                    Some(RunFinishedOutcome::Cancelled) => RunStatus::Cancelled,
                    _ => RunStatus::Succeeded,
                },
                None,
                e.usage.as_ref(),
            ),
            Event::RunError(e) => (
                RunStatus::Failed,
                Some(json!({"message": e.message, "code": e.code})),
                e.usage.as_ref(),
            ),
            _ => return false,
        };
        // One line per run for the operator (its ids are on the span).
        tracing::info!(
            status = %status,
            ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            input_tokens = tokens(usage, |u| u.input_tokens),
            output_tokens = tokens(usage, |u| u.output_tokens),
            "run ended"
        );
        let usage = usage.and_then(|u| serde_json::to_value(u).ok());
        // Tool messages too: the runtime needs them; history never shows them.
        let output: Vec<agwire_core::Message> = said
            .iter()
            .filter(|m| {
                matches!(
                    m,
                    agwire_core::Message::Assistant(_) | agwire_core::Message::Tool(_)
                )
            })
            .cloned()
            .collect();
        // The turn's UI streamed as an `ui_schema` activity; the last one is
        // what history shows under the answer.
        let ui_schema = said.iter().rev().find_map(|m| match m {
            agwire_core::Message::Activity(a) if a.activity_type == "ui_schema" => {
                Some(Value::Object(a.content.clone()))
            }
            _ => None,
        });
        let ending = Ending {
            status,
            error: error.as_ref(),
            usage: usage.as_ref(),
            terminal,
            output: &output,
            ui_schema: ui_schema.as_ref(),
        };
        let started = std::time::Instant::now();
        match self.store.end_run(task_id, &ending, now_ms()).await {
            Ok(Some(seq)) => {
                self.metrics.appended(1, started.elapsed());
                live.publish(seq, terminal.clone());
                true
            }
            Ok(None) => false,
            Err(error) => {
                tracing::error!(%error, "could not end run");
                false
            }
        }
    }

    /// Appends events to the log, then (only then) publishes them. False
    /// when the log could not take them: the run then fails.
    async fn append_and_publish(&self, task_id: &str, events: Vec<Event>, live: &Producer) -> bool {
        let started = std::time::Instant::now();
        match self.store.append_events(task_id, &events).await {
            Ok(first) => {
                self.metrics.appended(events.len(), started.elapsed());
                for (i, event) in events.into_iter().enumerate() {
                    live.publish(first + i as u64, event);
                }
                true
            }
            Err(error) => {
                tracing::error!(%error, "could not append events; the run fails");
                false
            }
        }
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
        let events = [
            crate::store::run_started(thread_id, run_id),
            Event::RunFinished(agwire_core::RunFinishedEvent {
                thread_id: thread_id.to_owned(),
                run_id: run_id.to_owned(),
                result: None,
                outcome: Some(RunFinishedOutcome::Cancelled),
                usage: None,
                base: BaseEvent::default(),
            }),
        ];
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
        if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Unavailable(
                "the server is shutting down; retry shortly".into(),
            ));
        }
        let engine = self.clone();
        tokio::spawn(async move {
            let fingerprint = serde_json::to_string(&run.input)?;
            // With room here, a run whose thread is idle starts with its
            // accept: one write, no trip through the queue.
            let place = engine.hold_start();
            let start = place.as_ref().map(|_| engine.claim_hooks());
            let mut accepted = engine
                .store
                .accept_run(NewRun {
                    user: &run.user,
                    input: &run.input,
                    request_hash: &fingerprint,
                    mode: run.mode,
                    client_time: run.client_time.as_ref(),
                    admission: run.admission,
                    now_ms: now_ms(),
                    start: start.as_ref(),
                })
                .await?;
            if !accepted.replayed {
                engine.metrics.run_accepted();
            }
            match accepted.started.take() {
                Some(run) => engine.spawn_execution(run),
                None if !accepted.replayed => engine.dispatch.notify_one(),
                None => {}
            }
            drop(place);
            Ok(accepted)
        })
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
        let token = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(&run.task_id).cloned());
        match token {
            Some(token) => token.cancel(),
            // Executing on another replica (if anywhere): it hears this.
            None => self.store.request_cancel(&run.task_id).await?,
        }
        Ok(())
    }

    /// The run's events numbered above `after`, then its live ones, until
    /// its terminal event (or the drain).
    ///
    /// Subscribe first, then backfill from the log, then live events not
    /// yet sent; a lagging follower re-reads the log. A run that is still
    /// queued (or executes elsewhere) is waited for. The stream is polled by
    /// whoever reads it (a response body, on its connection's task): an idle
    /// follower costs no task and no channel of its own, and one that leaves
    /// simply drops it.
    pub fn follow(
        &self,
        task_id: String,
        after: u64,
    ) -> impl futures_core::Stream<Item = (u64, Arc<Event>)> + Send + 'static {
        let store = self.store.clone();
        let hub = self.hub.clone();
        let recheck = self.recheck;
        let stop = self.stop.clone();
        async_stream::stream! {
            let mut live = hub.subscribe(&task_id);
            let mut last = after;
            loop {
                let Some(events) = read_log(&*store, &task_id, last).await else {
                    return;
                };
                for (seq, event) in events {
                    last = seq;
                    let terminal = is_terminal(&event);
                    yield (seq, Arc::new(event));
                    if terminal {
                        return;
                    }
                }
                // The log does not end the run (yet): is it still to come?
                let active = match store.run_status(&task_id).await {
                    Ok(Some(status)) => status.is_active(),
                    Ok(None) => false,
                    Err(error) => {
                        tracing::error!(%error, "could not read a run's status");
                        return;
                    }
                };
                if !active || stop.is_cancelled() {
                    // Its end was written with its status: one last read
                    // has it.
                    for (seq, event) in read_log(&*store, &task_id, last).await.unwrap_or_default() {
                        let terminal = is_terminal(&event);
                        yield (seq, Arc::new(event));
                        if terminal {
                            return;
                        }
                    }
                    return;
                }
                loop {
                    let received = match recheck {
                        None => live.recv().await,
                        Some(period) => match tokio::time::timeout(period, live.recv()).await {
                            Ok(received) => received,
                            // Quiet for a while: the log says whether it
                            // moved on.
                            Err(_) => break,
                        },
                    };
                    match received {
                        // Only the next event goes out as it comes; after a
                        // gap (an end that wrote `RUN_STARTED` too, a relay
                        // that missed a change) the log fills it in.
                        Ok((seq, _)) if seq > last + 1 => break,
                        Ok((seq, event)) if seq == last + 1 => {
                            last = seq;
                            let terminal = is_terminal(&event);
                            yield (seq, event);
                            if terminal {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            // The run stopped executing here, or the service
                            // stops: the log tells which.
                            live = hub.subscribe(&task_id);
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The run's log after `last`; `None` (logged) when it cannot be read.
async fn read_log(store: &dyn Store, task_id: &str, last: u64) -> Option<Vec<(u64, Event)>> {
    match store.events_after(task_id, last).await {
        Ok(events) => Some(events),
        Err(error) => {
            tracing::error!(%error, "could not read a run's log");
            None
        }
    }
}

/// A token count summed over a run's usage entries (one per model).
fn tokens(
    usage: Option<&Vec<agwire_core::TokenUsage>>,
    count: impl Fn(&agwire_core::TokenUsage) -> Option<u64>,
) -> u64 {
    usage.map_or(0, |entries| entries.iter().filter_map(count).sum())
}

fn is_terminal(event: &Event) -> bool {
    matches!(event, Event::RunFinished(_) | Event::RunError(_))
}
