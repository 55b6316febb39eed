//! The HTTP API: runs accepted and executed in the background, their event
//! logs streamed (and resumed) as AG-UI.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_codec::sse::SseEncoder;
use agwire_core::{BaseEvent, Event, RunAgentInput, RunErrorEvent, RunFinishedOutcome};
use agwire_server::{CancellationToken, DynAgent, run_detached};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_core::Stream;
use http_body_util::{BodyExt, Limited};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::attachments::{Attachments, REFERENCE_PREFIX, sniff};
use crate::auth::Auth;
use crate::config::{BusyThread, Config};
use crate::error::Error;
use crate::hub::Hub;
use crate::metrics::Metrics;
use crate::store::{Admission, Ending, Store};
use crate::validate::{MAX_PAYLOAD_BYTES, Rules, validate_run};

/// Backend tools (frontend tools may not reuse their names).
const BACKEND_TOOLS: &[&str] = &crate::tools::NAMES;
/// Keep-alive comment period on idle SSE streams.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The running service: store, live hub, the agent runs execute, and the
/// runs in progress on this process.
#[derive(Clone)]
pub struct Service {
    pub(crate) store: Store,
    hub: Hub,
    brain: Arc<dyn crate::runtime::Brain>,
    shutdown: CancellationToken,
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
    attachments: Option<Attachments>,
    auth: Auth,
    options: Options,
    metrics: Arc<Metrics>,
    /// The agent catalogue (`system_agents.yaml`); jobs are checked against it.
    pub(crate) runtime: Arc<crate::agents::RuntimeConfig>,
    /// Runs executing on this process now (queued ones are not).
    executing: Arc<std::sync::atomic::AtomicUsize>,
    /// Shutting down: no new runs.
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// Cancelled when the drain starts (background loops stop).
    stop: CancellationToken,
}

/// The settings the HTTP layer reads on every request.
#[derive(Debug, Clone)]
struct Options {
    busy_thread: BusyThread,
    agui_max_payload_bytes: usize,
    public_url: Option<String>,
    metrics_public: bool,
}

impl Default for Options {
    fn default() -> Self {
        let config = Config::default();
        Self {
            busy_thread: config.runs.busy_thread,
            agui_max_payload_bytes: config.runs.agui_max_payload_bytes,
            public_url: config.public_url,
            metrics_public: config.metrics.public,
        }
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

pub(crate) fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The authenticated user of a request (401 without a valid token when auth
/// is on).
pub(crate) struct User(pub(crate) String);

impl axum::extract::FromRequestParts<Service> for User {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        service: &Service,
    ) -> Result<Self, Response> {
        let authorization = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        service
            .auth
            .user(authorization, now_ms() / 1000)
            .map(User)
            .map_err(unauthorized)
    }
}

fn unauthorized(why: &str) -> Response {
    let mut response = detail(StatusCode::UNAUTHORIZED, why);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

pub(crate) fn detail(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "detail": message }))).into_response()
}

impl From<Error> for Response {
    fn from(error: Error) -> Response {
        match &error {
            Error::NotFound(m) => detail(StatusCode::NOT_FOUND, m),
            Error::Conflict(m) | Error::Busy(m) => detail(StatusCode::CONFLICT, m),
            Error::Unavailable(m) => detail(StatusCode::SERVICE_UNAVAILABLE, m),
            _ => {
                tracing::error!(%error, "internal error");
                detail(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
            }
        }
    }
}

impl Service {
    /// A service over `store` running `agent`.
    pub fn new(store: Store, agent: Arc<dyn DynAgent>) -> Self {
        Self {
            store,
            hub: Hub::default(),
            brain: Arc::new(crate::runtime::Fixed::new(agent, "builtin")),
            shutdown: CancellationToken::new(),
            running: Arc::default(),
            attachments: None,
            auth: Auth::none(),
            options: Options::default(),
            metrics: Arc::default(),
            runtime: Arc::new(crate::agents::RuntimeConfig::builtin()),
            executing: Arc::default(),
            draining: Arc::default(),
            stop: CancellationToken::new(),
        }
    }

    /// What builds each run's agent (default: the agent given to
    /// [`Service::new`], for every run).
    pub fn with_brain(mut self, brain: Arc<dyn crate::runtime::Brain>) -> Self {
        self.brain = brain;
        self
    }

    /// The agent catalogue runs choose from (default: the shipped one).
    pub fn with_runtime(mut self, runtime: crate::agents::RuntimeConfig) -> Self {
        self.runtime = Arc::new(runtime);
        self
    }

    /// Applies the HTTP-level settings of `config` (busy-thread policy,
    /// `/api/v1/agui` body limit, public URL, `/metrics` access).
    pub fn with_config(mut self, config: &Config) -> Self {
        self.options = Options {
            busy_thread: config.runs.busy_thread,
            agui_max_payload_bytes: config.runs.agui_max_payload_bytes,
            public_url: config
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_owned()),
            metrics_public: config.metrics.public,
        };
        self
    }

    /// How requests are authenticated (default: none, one local user).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    /// Accepts uploads and signs their URLs (without it, no URL passes the
    /// signed-URL rule).
    pub fn with_attachments(mut self, attachments: Attachments) -> Self {
        self.attachments = Some(attachments);
        self
    }

    /// Restart safety: runs a crash left `running` end as failed with a
    /// `RUN_ERROR` (code `server_restart`) in their log; queued runs start.
    pub async fn recover(&self) -> Result<(), Error> {
        let mut threads = Vec::new();
        for run in self.store.active_runs().await? {
            if run.status == "running" {
                let error = Event::RunError(RunErrorEvent {
                    message: "the server restarted while the run was in progress".into(),
                    code: Some("server_restart".into()),
                    usage: None,
                    base: BaseEvent::default(),
                });
                let why = json!({"message": "the server restarted while the run was in progress", "code": "server_restart"});
                let ending = Ending {
                    status: "failed",
                    error: Some(&why),
                    usage: None,
                    terminal: &error,
                    output: &[],
                    ui_schema: None,
                };
                self.store.end_run(&run.task_id, &ending, now_ms()).await?;
                tracing::warn!(
                    run_id = run.run_id,
                    "run interrupted by a restart, marked failed"
                );
            } else {
                self.admit(&run.task_id);
                if !threads.contains(&run.thread_id) {
                    threads.push(run.thread_id);
                }
            }
        }
        for thread in threads {
            self.start_next(&thread).await;
        }
        Ok(())
    }

    /// Cancels every run in progress (shutdown); they finish as cancelled.
    pub fn cancel_all(&self) {
        self.shutdown.cancel();
    }

    /// Resolves when the service starts shutting down.
    pub(crate) async fn stopping(&self) {
        self.stop.cancelled().await;
    }

    /// Runs executing on this process now.
    pub fn running(&self) -> usize {
        self.executing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Shutdown: new runs are refused (503); running ones get `grace` to
    /// finish, then are cancelled (they end as `cancelled`); queued ones stay
    /// queued for the next start; open streams end so connections close.
    pub async fn drain(&self, grace: Duration) {
        use std::sync::atomic::Ordering;
        self.draining.store(true, Ordering::SeqCst);
        self.stop.cancel();
        let wait = |limit: Duration| async move {
            let deadline = tokio::time::Instant::now() + limit;
            while self.running() > 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        wait(grace).await;
        if self.running() > 0 {
            tracing::info!(
                runs = self.running(),
                "grace period over: cancelling the running runs"
            );
            self.cancel_all();
            // Cancelled runs only need to write their end.
            wait(Duration::from_secs(5)).await;
        }
        self.hub.close_all();
    }

    /// Every route the service answers, as (method, path): `/openapi.json`
    /// describes exactly these (a test holds both to it).
    pub const ROUTES: &'static [(&'static str, &'static str)] = &[
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("POST", "/api/v1/agui"),
        ("POST", "/api/v1/agent/runs"),
        ("GET", "/api/v1/agent/runs/{runId}"),
        ("GET", "/api/v1/agent/runs/{runId}/events"),
        ("POST", "/api/v1/agent/runs/{runId}/cancel"),
        ("GET", "/api/v1/agent/history"),
        ("GET", "/api/v1/me/profile"),
        ("PATCH", "/api/v1/me/profile"),
        ("POST", "/api/v1/agent/attachments"),
        ("GET", "/api/v1/agent/attachments/{id}"),
        ("POST", "/api/v1/automation/jobs"),
        ("GET", "/api/v1/automation/jobs"),
        ("GET", "/api/v1/automation/jobs/{id}"),
        ("PATCH", "/api/v1/automation/jobs/{id}"),
        ("DELETE", "/api/v1/automation/jobs/{id}"),
        ("GET", "/api/v1/automation/jobs/{id}/runs"),
        ("GET", "/api/v1/calendar/events"),
    ];

    /// The API routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/healthz",
                get(|service: State<Service>| async move {
                    axum::Json(json!({"status": "ok", "agent": service.brain.describe()}))
                }),
            )
            .route("/metrics", get(get_metrics))
            .route("/openapi.json", get(get_openapi))
            .route("/api/v1/agui", post(post_agui))
            .route("/api/v1/agent/runs", post(post_run))
            .route("/api/v1/agent/runs/{run_id}", get(get_run))
            .route("/api/v1/agent/runs/{run_id}/events", get(get_events))
            .route("/api/v1/agent/runs/{run_id}/cancel", post(cancel_run))
            .route("/api/v1/agent/history", get(get_history))
            .route("/api/v1/me/profile", get(get_profile).patch(patch_profile))
            .route("/api/v1/agent/attachments", post(upload_attachment))
            .route("/api/v1/agent/attachments/{id}", get(download_attachment))
            .route(
                "/api/v1/automation/jobs",
                post(crate::jobs::create).get(crate::jobs::list),
            )
            .route(
                "/api/v1/automation/jobs/{id}",
                get(crate::jobs::read)
                    .patch(crate::jobs::update)
                    .delete(crate::jobs::remove),
            )
            .route("/api/v1/automation/jobs/{id}/runs", get(crate::jobs::runs))
            .route("/api/v1/calendar/events", get(calendar_events))
            .with_state(self.clone())
    }

    /// Makes an accepted run live before its answer leaves: streams opened
    /// right after the 202 follow it, and a cancel finds its token.
    fn admit(&self, task_id: &str) -> CancellationToken {
        self.hub.open(task_id);
        let cancel = self.shutdown.child_token();
        if let Ok(mut running) = self.running.lock() {
            running.insert(task_id.to_owned(), cancel.clone());
        }
        cancel
    }

    /// The run left this process (ended, or never to start here).
    fn release(&self, task_id: &str) {
        self.hub.close(task_id);
        if let Ok(mut running) = self.running.lock() {
            running.remove(task_id);
        }
    }

    /// Starts the oldest queued run of `thread` if it has none running.
    async fn start_next(&self, thread: &str) {
        match self.store.next_queued(thread).await {
            Ok(Some(run)) => match serde_json::from_str::<RunAgentInput>(&run.input) {
                Ok(input) => self.start_run(run.task_id, input),
                Err(error) => tracing::error!(%error, "a queued run's input is unreadable"),
            },
            Ok(None) => {}
            Err(error) => tracing::error!(%error, "could not read the thread's queue"),
        }
    }

    fn start_run(&self, task_id: String, input: RunAgentInput) {
        let cancel = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(&task_id).cloned())
            .unwrap_or_else(|| self.admit(&task_id));
        let service = self.clone();
        tokio::spawn(async move {
            let thread_id = input.thread_id.clone();
            match service.store.claim(&task_id, now_ms()).await {
                Ok(true) => {
                    use std::sync::atomic::Ordering;
                    service.executing.fetch_add(1, Ordering::SeqCst);
                    service.execute(&task_id, input, cancel).await;
                    service.executing.fetch_sub(1, Ordering::SeqCst);
                }
                // A cancel got there first (it wrote the run's end), or the
                // run is already another worker's.
                Ok(false) => {}
                Err(error) => tracing::error!(%error, "could not start run"),
            }
            service.release(&task_id);
            let draining = service.draining.load(std::sync::atomic::Ordering::SeqCst);
            if service.options.busy_thread == BusyThread::Enqueue && !draining {
                service.start_next(&thread_id).await;
            }
        });
    }

    /// Runs the agent, appending its events to the log as they come and
    /// ending the run (status, output, terminal event) in one transaction.
    async fn execute(&self, task_id: &str, input: RunAgentInput, cancel: CancellationToken) {
        let (tx, mut rx) = mpsc::channel(64);
        let agent = match self.setup(&input).await {
            Ok(setup) => self.brain.agent(setup),
            Err(error) => {
                tracing::error!(%error, "could not prepare the run");
                let failure = Event::RunError(RunErrorEvent {
                    message: "the run could not be prepared".into(),
                    code: Some("internal".into()),
                    usage: None,
                    base: BaseEvent::default(),
                });
                self.end(task_id, &failure, &[]).await;
                return;
            }
        };
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
            if !events.is_empty() && !self.append_and_publish(task_id, events).await {
                break 'run;
            }
            if let Some(end) = rest.into_iter().next() {
                ended = self.end(task_id, &end, &output.messages).await;
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
            self.end(task_id, &failure, &output.messages).await;
        }
    }

    /// What the run's agent needs besides its input.
    async fn setup(&self, input: &RunAgentInput) -> Result<crate::runtime::RunSetup, Error> {
        use crate::validate::RuntimeMode;
        let user = self
            .store
            .thread_owner(&input.thread_id)
            .await?
            .ok_or_else(|| Error::NotFound("thread not found".into()))?;
        let settings = self.store.settings(&user).await?;
        let (mode, client_time) = crate::validate::run_context(input.forwarded_props.as_ref());
        let clock = crate::clock::RunClock::resolve(
            client_time.as_ref(),
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
        let history = self.inline_attachments(&user, history).await;
        let runtime = match mode {
            Some(RuntimeMode::Automation) => {
                match self.store.job_of_thread(&input.thread_id).await? {
                    Some(job) => {
                        let job_runtime: crate::agents::JobRuntime =
                            serde_json::from_str(&job.config)?;
                        self.runtime.for_job(&job_runtime)?
                    }
                    // An automation run without a job (posted by hand): the
                    // default agent alone.
                    None => self
                        .runtime
                        .for_job(&crate::agents::JobRuntime::default())?,
                }
            }
            _ => (*self.runtime).clone(),
        };
        Ok(crate::runtime::RunSetup {
            user,
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
        let Some(attachments) = &self.attachments else {
            return history;
        };
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
                let Ok(Some((owner, mime))) = self.store.attachment(&id).await else {
                    continue;
                };
                if owner != user {
                    continue;
                }
                match attachments.load(&id) {
                    Ok(bytes) if bytes.len() <= MAX_INLINE => {
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
    async fn end(&self, task_id: &str, terminal: &Event, said: &[agwire_core::Message]) -> bool {
        let (status, error, usage) = match terminal {
            Event::RunFinished(e) => (
                match e.outcome {
                    Some(RunFinishedOutcome::Interrupt { .. }) => "interrupted",
                    Some(RunFinishedOutcome::Cancelled) => "cancelled",
                    _ => "succeeded",
                },
                None,
                e.usage.as_ref(),
            ),
            Event::RunError(e) => (
                "failed",
                Some(json!({"message": e.message, "code": e.code})),
                e.usage.as_ref(),
            ),
            _ => return false,
        };
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
                self.hub.publish(task_id, seq, terminal.clone());
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
    async fn append_and_publish(&self, task_id: &str, events: Vec<Event>) -> bool {
        let started = std::time::Instant::now();
        match self.store.append_events(task_id, &events).await {
            Ok(first) => {
                self.metrics.appended(events.len(), started.elapsed());
                for (i, event) in events.into_iter().enumerate() {
                    self.hub.publish(task_id, first + i as u64, event);
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
    async fn cancel_unstarted(&self, task_id: &str, input: &RunAgentInput) -> Result<bool, Error> {
        let ids = json!({"threadId": input.thread_id, "runId": input.run_id});
        let mut started = ids.clone();
        started["type"] = "RUN_STARTED".into();
        let mut finished = ids;
        finished["type"] = "RUN_FINISHED".into();
        finished["outcome"] = json!({"type": "cancelled"});
        let events = [
            Event::from_json(&started.to_string())?.value,
            Event::from_json(&finished.to_string())?.value,
        ];
        let Some(first) = self.store.cancel_queued(task_id, &events, now_ms()).await? else {
            return Ok(false);
        };
        for (i, event) in events.into_iter().enumerate() {
            self.hub.publish(task_id, first + i as u64, event);
        }
        Ok(true)
    }

    /// Stores an accepted run and starts it (or queues it behind the
    /// thread's active run).
    pub(crate) async fn accept(
        &self,
        user: &str,
        input: RunAgentInput,
        admission: Admission,
    ) -> Result<crate::store::Accepted, Error> {
        if self.draining.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Error::Unavailable(
                "the server is shutting down; retry shortly".into(),
            ));
        }
        let fingerprint = serde_json::to_string(&input)?;
        let accepted = self
            .store
            .accept_run(user, &input, &fingerprint, admission, now_ms())
            .await?;
        if !accepted.replayed {
            self.metrics.run_accepted();
            if accepted.waiting {
                self.admit(&accepted.task_id);
            } else {
                self.start_run(accepted.task_id.clone(), input);
            }
        }
        Ok(accepted)
    }

    /// The run's events after `after`, then live ones, until its terminal event.
    fn stream(&self, task_id: String, after: u64, format: WireFormat) -> Response {
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(follow(
            self.store.clone(),
            self.hub.clone(),
            task_id,
            after,
            tx,
        ));
        let body = LogBody::new(rx, format, Metrics::stream_opened(&self.metrics));
        let mut response = Response::new(Body::from_stream(body));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
        response
    }
}

fn is_terminal(event: &Event) -> bool {
    matches!(event, Event::RunFinished(_) | Event::RunError(_))
}

/// Subscribe first, then backfill from the log, then live events not yet
/// sent; a lagging subscriber re-reads the log.
async fn follow(
    store: Store,
    hub: Hub,
    task_id: String,
    after: u64,
    tx: mpsc::Sender<(u64, Event)>,
) {
    let mut live = hub.subscribe(&task_id);
    let mut last = after;
    // Sends one event; false when the stream is over (terminal event sent,
    // or the client gone).
    let forward = |seq: u64, event: Event, last: &mut u64| {
        let tx = tx.clone();
        *last = seq;
        async move {
            let terminal = is_terminal(&event);
            tx.send((seq, event)).await.is_ok() && !terminal
        }
    };
    loop {
        let events = match store.events_after(&task_id, last).await {
            Ok(events) => events,
            Err(error) => {
                tracing::error!(%error, "could not read a run's log");
                return;
            }
        };
        for (seq, event) in events {
            if !forward(seq, event, &mut last).await {
                return;
            }
        }
        let Some(receiver) = live.as_mut() else {
            // Not live: the log was everything.
            return;
        };
        loop {
            match receiver.recv().await {
                Ok((seq, event)) if seq > last => {
                    if !forward(seq, event, &mut last).await {
                        return;
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => break,
                Err(broadcast::error::RecvError::Closed) => {
                    live = None;
                    break;
                }
            }
        }
    }
}

/// Which format to stream in, if the request asks for a stream explicitly.
fn asked_stream(headers: &HeaderMap) -> Option<WireFormat> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    if !(accept.contains("text/event-stream")
        || accept.contains("application/vnd.ag-ui.event+proto"))
    {
        return None;
    }
    Some(Negotiator::new().choose(Some(accept)))
}

async fn post_run(State(service): State<Service>, User(user): User, request: Request) -> Response {
    let headers = request.headers().clone();
    // One byte over the limit is enough to know.
    let body = match Limited::new(request.into_body(), MAX_PAYLOAD_BYTES + 1)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return detail(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RunAgentInput payload exceeds size limit",
            );
        }
    };
    // (Scoped: `Rules` holds a `&dyn Fn`, which must not live across an await.)
    let now_s = now_ms() / 1000;
    let validated = {
        let attachments = service.attachments.as_ref();
        let signed =
            |url: &str| attachments.is_some_and(|a| a.verify_url(url, &user, now_s).is_some());
        let rules = Rules {
            backend_tools: BACKEND_TOOLS,
            signed_url: &signed,
        };
        validate_run(&body, &rules)
    };
    let mut run = match validated {
        Ok(run) => run,
        Err(rejection) => {
            let status =
                StatusCode::from_u16(rejection.status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
            return detail(status, &rejection.detail);
        }
    };
    // Store references, not URLs: a URL expires, the attachment does not.
    if let Some(attachments) = &service.attachments {
        to_references(&mut run.input, attachments, &user, now_s);
    }
    let admission = Admission {
        enqueue: service.options.busy_thread == BusyThread::Enqueue,
        whole_history: false,
    };
    let accepted = match service.accept(&user, run.input, admission).await {
        Ok(accepted) => accepted,
        Err(error) => return error.into(),
    };
    if let Some(format) = asked_stream(&headers) {
        return service.stream(accepted.task_id, 0, format);
    }
    let location = format!("/api/v1/agent/runs/{}/events", accepted.run_id);
    let mut response = (
        StatusCode::ACCEPTED,
        axum::Json(json!({
            "taskId": accepted.task_id,
            "threadId": accepted.thread_id,
            "runId": accepted.run_id,
            "created": accepted.created,
        })),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

async fn get_run(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
) -> Response {
    match service.store.run(&user, &run_id).await {
        Ok(Some(run)) => axum::Json(json!({
            "taskId": run.task_id,
            "threadId": run.thread_id,
            "runId": run.run_id,
            "status": run.status,
            "createdAt": run.created_at,
            "startedAt": run.started_at,
            "finishedAt": run.finished_at,
            "error": run.error.as_deref().and_then(|e| serde_json::from_str::<Value>(e).ok()),
            "usage": run.usage.as_deref().and_then(|u| serde_json::from_str::<Value>(u).ok()),
        }))
        .into_response(),
        Ok(None) => detail(StatusCode::NOT_FOUND, "run not found"),
        Err(error) => error.into(),
    }
}

async fn get_events(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let run = match service.store.run(&user, &run_id).await {
        Ok(Some(run)) => run,
        Ok(None) => return detail(StatusCode::NOT_FOUND, "run not found"),
        Err(error) => return error.into(),
    };
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| query.get("after").cloned());
    let after = match resume.as_deref().map(str::parse::<u64>) {
        None => 0,
        Some(Ok(after)) => after,
        Some(Err(_)) => {
            return detail(
                StatusCode::BAD_REQUEST,
                "Last-Event-ID / after must be an event sequence number",
            );
        }
    };
    let format = Negotiator::new()
        .prefer_sse_for_wildcards(true)
        .choose(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    service.stream(run.task_id, after, format)
}

async fn cancel_run(
    State(service): State<Service>,
    User(user): User,
    Path(run_id): Path<String>,
) -> Response {
    let run = match service.store.run(&user, &run_id).await {
        Ok(Some(run)) => run,
        Ok(None) => return detail(StatusCode::NOT_FOUND, "run not found"),
        Err(error) => return error.into(),
    };
    if run.status == "queued" {
        // Not started: it ends here, unless a worker takes it this instant —
        // then the worker finds its token cancelled below.
        let input = match serde_json::from_str::<RunAgentInput>(&run.input) {
            Ok(input) => input,
            Err(error) => return Error::from(error).into(),
        };
        match service.cancel_unstarted(&run.task_id, &input).await {
            Ok(true) => {
                service.release(&run.task_id);
                return cancel_accepted(&run.run_id);
            }
            Ok(false) => {}
            Err(error) => return error.into(),
        }
    }
    let token = service
        .running
        .lock()
        .ok()
        .and_then(|r| r.get(&run.task_id).cloned());
    if let Some(token) = token {
        token.cancel();
    }
    cancel_accepted(&run.run_id)
}

fn cancel_accepted(run_id: &str) -> Response {
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({"runId": run_id, "cancelRequested": true})),
    )
        .into_response()
}

/// Encodes `(seq, event)` pairs: SSE frames carry `id: <seq>`.
struct LogBody {
    rx: mpsc::Receiver<(u64, Event)>,
    format: WireFormat,
    sse: SseEncoder,
    buf: Vec<u8>,
    keep_alive: tokio::time::Interval,
    _open: crate::metrics::StreamGuard,
}

impl LogBody {
    fn new(
        rx: mpsc::Receiver<(u64, Event)>,
        format: WireFormat,
        open: crate::metrics::StreamGuard,
    ) -> Self {
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            rx,
            format,
            sse: SseEncoder::new(),
            buf: Vec::new(),
            keep_alive,
            _open: open,
        }
    }
}

impl Stream for LogBody {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let mut ended = false;
        while this.buf.len() < 32 * 1024 {
            match this.rx.poll_recv(cx) {
                Poll::Ready(Some((seq, event))) => match this.format {
                    WireFormat::Sse => this.sse.encode_with_id(seq, &event, &mut this.buf),
                    _ => {
                        if let Err(error) = agwire_codec::proto::encode_frame(&event, &mut this.buf)
                        {
                            tracing::error!(%error, "event cannot be sent as protobuf");
                        }
                    }
                },
                Poll::Ready(None) => {
                    ended = true;
                    break;
                }
                Poll::Pending => break,
            }
        }
        if !this.buf.is_empty() {
            this.keep_alive.reset();
            return Poll::Ready(Some(Ok(Bytes::from(std::mem::take(&mut this.buf)))));
        }
        if ended {
            return Poll::Ready(None);
        }
        if this.format == WireFormat::Sse && this.keep_alive.poll_tick(cx).is_ready() {
            this.sse.keep_alive(&mut this.buf);
            return Poll::Ready(Some(Ok(Bytes::from(std::mem::take(&mut this.buf)))));
        }
        Poll::Pending
    }
}

async fn get_history(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let before = match query.get("before").map(|b| b.parse::<jiff::civil::Date>()) {
        None => None,
        Some(Ok(date)) => Some(date),
        Some(Err(_)) => {
            return detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "before must be a date (YYYY-MM-DD)",
            );
        }
    };
    let thread = match query.get("threadId") {
        Some(thread) => match service.store.thread_owner(thread).await {
            Ok(Some(owner)) if owner == user => Some(thread.clone()),
            Ok(_) => return detail(StatusCode::NOT_FOUND, "thread not found"),
            Err(error) => return error.into(),
        },
        None => match service.store.latest_thread(&user).await {
            Ok(thread) => thread,
            Err(error) => return error.into(),
        },
    };
    let messages = match &thread {
        Some(thread) => match service
            .store
            .thread_messages(thread, &["user", "assistant"])
            .await
        {
            Ok(messages) => messages,
            Err(error) => return error.into(),
        },
        None => Vec::new(),
    };
    let tz = match service.store.settings(&user).await {
        Ok(settings) => settings
            .get("timezone")
            .and_then(Value::as_str)
            .and_then(|name| jiff::tz::TimeZone::get(name).ok())
            .unwrap_or(jiff::tz::TimeZone::UTC),
        Err(error) => return error.into(),
    };
    let snapshot =
        crate::history::snapshot(thread.as_deref(), &messages, &tz, before, &|reference| {
            resign(&service, &headers, &user, reference)
        });
    axum::Json(snapshot).into_response()
}

async fn get_profile(State(service): State<Service>, User(user): User) -> Response {
    match service.store.settings(&user).await {
        Ok(settings) => axum::Json(json!({"id": &user, "settings": settings})).into_response(),
        Err(error) => error.into(),
    }
}

/// A BCP 47-shaped language tag (`en`, `zh-CN`, `sr-Latn-RS`).
fn is_locale(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 35
        && tag
            .split('-')
            .all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
        && tag
            .split('-')
            .next()
            .is_some_and(|l| l.bytes().all(|b| b.is_ascii_alphabetic()))
}

async fn patch_profile(State(service): State<Service>, User(user): User, body: Bytes) -> Response {
    let Ok(Value::Object(patch)) = serde_json::from_slice::<Value>(&body) else {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the profile patch must be a JSON object",
        );
    };
    if let Some(key) = patch.keys().find(|k| *k != "settings") {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("unknown profile field '{key}'"),
        );
    }
    let Some(Value::Object(changes)) = patch.get("settings") else {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "settings must be an object",
        );
    };
    for (key, value) in changes {
        let valid = value.is_null()
            || match key.as_str() {
                "timezone" => value
                    .as_str()
                    .is_some_and(|z| jiff::tz::TimeZone::get(z).is_ok()),
                "locale" => value.as_str().is_some_and(is_locale),
                _ => true,
            };
        if !valid {
            return detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("invalid settings.{key}"),
            );
        }
    }
    let mut settings = match service.store.settings(&user).await {
        Ok(settings) => settings,
        Err(error) => return error.into(),
    };
    for (key, value) in changes {
        // `null` clears a setting.
        if value.is_null() {
            settings.remove(key);
        } else {
            settings.insert(key.clone(), value.clone());
        }
    }
    if let Err(error) = service.store.set_settings(&user, &settings, now_ms()).await {
        return error.into();
    }
    axum::Json(json!({"id": &user, "settings": settings})).into_response()
}

/// The base URL clients reach us by (for absolute attachment URLs): the
/// configured public URL, else the request's `Host`.
fn base_url(service: &Service, headers: &HeaderMap) -> String {
    if let Some(url) = &service.options.public_url {
        return url.clone();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// A fresh signed URL for a stored `attachment:{id}` reference.
fn resign(service: &Service, headers: &HeaderMap, user: &str, reference: &str) -> String {
    match (
        reference.strip_prefix(REFERENCE_PREFIX),
        &service.attachments,
    ) {
        (Some(id), Some(attachments)) => {
            attachments
                .sign(&base_url(service, headers), id, user, now_ms() / 1000)
                .0
        }
        _ => reference.to_owned(),
    }
}

/// Replaces the user message's signed attachment URLs by references.
fn to_references(input: &mut RunAgentInput, attachments: &Attachments, user: &str, now_s: i64) {
    use agwire_core::{Content, ContentPart, Message, PartSource};
    for message in &mut input.messages {
        let Message::User(message) = message else {
            continue;
        };
        let Content::Parts(parts) = &mut message.content else {
            continue;
        };
        for part in parts.iter_mut() {
            if let ContentPart::Image(media) = part
                && let PartSource::Url { value, .. } = &mut media.source
                && let Some(id) = attachments.verify_url(value, user, now_s)
            {
                *value = format!("{REFERENCE_PREFIX}{id}");
            }
        }
    }
}

async fn upload_attachment(
    State(service): State<Service>,
    User(user): User,
    request: Request,
) -> Response {
    let Some(attachments) = service.attachments.clone() else {
        return detail(StatusCode::NOT_FOUND, "attachments are not enabled");
    };
    let headers = request.headers().clone();
    let multipart = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let too_large = || {
        detail(
            StatusCode::PAYLOAD_TOO_LARGE,
            "attachment exceeds size limit",
        )
    };
    let bytes: Bytes = if multipart {
        use axum::extract::FromRequest;
        let mut form = match axum::extract::Multipart::from_request(request, &()).await {
            Ok(form) => form,
            Err(rejection) => return detail(StatusCode::BAD_REQUEST, &rejection.body_text()),
        };
        let mut file = None;
        loop {
            match form.next_field().await {
                Ok(Some(field)) if field.name() == Some("file") => match field.bytes().await {
                    Ok(bytes) => {
                        file = Some(bytes);
                        break;
                    }
                    Err(e) => return detail(StatusCode::BAD_REQUEST, &e.body_text()),
                },
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => return detail(StatusCode::BAD_REQUEST, &e.body_text()),
            }
        }
        match file {
            Some(bytes) if bytes.len() > attachments.max_bytes => return too_large(),
            Some(bytes) => bytes,
            None => {
                return detail(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "multipart upload needs a 'file' field",
                );
            }
        }
    } else {
        match Limited::new(request.into_body(), attachments.max_bytes)
            .collect()
            .await
        {
            Ok(body) => body.to_bytes(),
            Err(_) => return too_large(),
        }
    };
    let Some(mime_type) = sniff(&bytes) else {
        return detail(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the upload is not a PNG, JPEG, GIF or WebP image",
        );
    };
    let id = uuid::Uuid::now_v7().to_string();
    if let Err(error) = attachments.save(&id, &bytes) {
        tracing::error!(%error, "could not store an attachment");
        return detail(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
    }
    if let Err(error) = service
        .store
        .insert_attachment(&id, &user, mime_type, bytes.len(), now_ms())
        .await
    {
        return error.into();
    }
    let (url, exp) = attachments.sign(&base_url(&service, &headers), &id, &user, now_ms() / 1000);
    let expires_at = jiff::Timestamp::from_second(exp)
        .map(|t| t.to_string())
        .unwrap_or_default();
    (
        StatusCode::CREATED,
        axum::Json(json!({"id": id, "url": url, "mimeType": mime_type, "size": bytes.len(), "expiresAt": expires_at})),
    )
        .into_response()
}

async fn download_attachment(
    State(service): State<Service>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(attachments) = service.attachments.clone() else {
        return detail(StatusCode::NOT_FOUND, "attachment not found");
    };
    let owner = match service.store.attachment(&id).await {
        Ok(Some(found)) => found,
        Ok(None) => return detail(StatusCode::NOT_FOUND, "attachment not found"),
        Err(error) => return error.into(),
    };
    let exp = query.get("exp").and_then(|e| e.parse::<i64>().ok());
    let sig = query.get("sig").and_then(|s| hex::decode(s).ok());
    let valid = match (exp, sig) {
        (Some(exp), Some(sig)) => attachments.verify(&id, &owner.0, exp, &sig, now_ms() / 1000),
        _ => false,
    };
    if !valid {
        return detail(StatusCode::FORBIDDEN, "invalid or expired signature");
    }
    match attachments.load(&id) {
        Ok(bytes) => {
            let mut response = Response::new(Body::from(bytes));
            if let Ok(value) = HeaderValue::from_str(&owner.1) {
                response.headers_mut().insert(header::CONTENT_TYPE, value);
            }
            response.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=300"),
            );
            response
        }
        Err(_) => detail(StatusCode::NOT_FOUND, "attachment not found"),
    }
}

async fn get_metrics(State(service): State<Service>, headers: HeaderMap) -> Response {
    if !service.options.metrics_public {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(why) = service.auth.user(authorization, now_ms() / 1000) {
            return unauthorized(why);
        }
    }
    let runs = match service.store.status_counts().await {
        Ok(runs) => runs,
        Err(error) => return error.into(),
    };
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        service.metrics.render(&runs),
    )
        .into_response()
}

/// The API description (`docs/API.md` is its prose twin).
const OPENAPI: &str = include_str!("openapi.json");

async fn get_openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

/// Longest thread or run id `/api/v1/agui` takes (ids are opaque there).
const MAX_AGUI_ID: usize = 128;
/// Most messages one `/api/v1/agui` request may carry.
const MAX_AGUI_MESSAGES: usize = 2000;

/// A standard AG-UI endpoint: the whole conversation in every request, as
/// `HttpAgent` and CopilotKit send it; same runs, log and threads as the
/// seed-004 endpoint, without its single-turn rules.
async fn post_agui(State(service): State<Service>, User(user): User, request: Request) -> Response {
    let headers = request.headers().clone();
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        });
    if !json {
        return detail(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
    }
    let limit = service.options.agui_max_payload_bytes;
    let body = match Limited::new(request.into_body(), limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return detail(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RunAgentInput payload exceeds size limit",
            );
        }
    };
    let input: RunAgentInput = match serde_json::from_slice(&body) {
        Ok(input) => input,
        Err(error) => {
            return detail(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("invalid RunAgentInput: {error}"),
            );
        }
    };
    let rejection = if input.thread_id.is_empty() || input.thread_id.chars().count() > MAX_AGUI_ID {
        Some("threadId must be 1 to 128 characters")
    } else if input.run_id.is_empty() || input.run_id.chars().count() > MAX_AGUI_ID {
        Some("runId exceeds length limit")
    } else if input.messages.len() > MAX_AGUI_MESSAGES {
        Some("RunAgentInput.messages exceeds limit")
    } else {
        None
    };
    if let Some(message) = rejection {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, message);
    }
    if let Some(tool) = input
        .tools
        .iter()
        .find(|t| BACKEND_TOOLS.contains(&t.name.as_str()))
    {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!(
                "RunAgentInput.tools: '{}' is the name of a backend tool; frontend tools must not reuse it",
                tool.name
            ),
        );
    }
    let admission = Admission {
        enqueue: service.options.busy_thread == BusyThread::Enqueue,
        whole_history: true,
    };
    // `*/*` (curl, fetch without headers) reads best as SSE; HttpAgent
    // names its types explicitly.
    let format = Negotiator::new()
        .prefer_sse_for_wildcards(true)
        .choose(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    match service.accept(&user, input, admission).await {
        Ok(accepted) => service.stream(accepted.task_id, 0, format),
        Err(error) => error.into(),
    }
}

/// `GET /api/v1/calendar/events?from=&to=`: the user's events overlapping
/// the range (RFC 3339 instants; default: from now, 30 days), each shown in
/// its own zone and in UTC.
async fn calendar_events(
    State(service): State<Service>,
    User(user): User,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let instant = |key: &str| match query.get(key) {
        None => Ok(None),
        Some(text) => text
            .parse::<jiff::Timestamp>()
            .map(Some)
            .map_err(|_| format!("{key} must be an RFC 3339 date-time with an offset")),
    };
    let (from, to) = match (instant("from"), instant("to")) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(why), _) | (_, Err(why)) => {
            return detail(StatusCode::UNPROCESSABLE_ENTITY, &why);
        }
    };
    let from = from.unwrap_or_else(jiff::Timestamp::now);
    let to = to.unwrap_or_else(|| from + jiff::SignedDuration::from_hours(24 * 30));
    if to <= from {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "to must be after from");
    }
    match service
        .store
        .calendar_events(&user, from.as_millisecond(), to.as_millisecond(), 500)
        .await
    {
        Ok(events) => axum::Json(
            json!({"events": events.iter().map(crate::tools::event_json).collect::<Vec<_>>()}),
        )
        .into_response(),
        Err(error) => error.into(),
    }
}
