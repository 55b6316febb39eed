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
use crate::error::Error;
use crate::hub::Hub;
use crate::store::Store;
use crate::validate::{MAX_PAYLOAD_BYTES, Rules, validate_run};

/// Backend tools of the built-in agent (frontend tools may not reuse them).
const BACKEND_TOOLS: &[&str] = &["get_time", "calendar_write"];
/// Keep-alive comment period on idle SSE streams.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The running service: store, live hub, the agent runs execute, and the
/// runs in progress on this process.
#[derive(Clone)]
pub struct Service {
    store: Store,
    hub: Hub,
    agent: Arc<dyn DynAgent>,
    shutdown: CancellationToken,
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
    attachments: Option<Attachments>,
    auth: Auth,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// The authenticated user of a request (401 without a valid token when auth
/// is on).
struct User(String);

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
            .map_err(|why| {
                let mut response = detail(StatusCode::UNAUTHORIZED, why);
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            })
    }
}

fn detail(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "detail": message }))).into_response()
}

impl From<Error> for Response {
    fn from(error: Error) -> Response {
        match &error {
            Error::NotFound(m) => detail(StatusCode::NOT_FOUND, m),
            Error::Conflict(m) | Error::Busy(m) => detail(StatusCode::CONFLICT, m),
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
            agent,
            shutdown: CancellationToken::new(),
            running: Arc::default(),
            attachments: None,
            auth: Auth::none(),
        }
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
        for run in self.store.active_runs().await? {
            if run.status == "running" {
                let error = Event::RunError(RunErrorEvent {
                    message: "the server restarted while the run was in progress".into(),
                    code: Some("server_restart".into()),
                    usage: None,
                    base: BaseEvent::default(),
                });
                self.store.append_event(&run.task_id, &error).await?;
                self.store
                    .set_status(&run.task_id, "failed", now_ms())
                    .await?;
                tracing::warn!(
                    run_id = run.run_id,
                    "run interrupted by a restart, marked failed"
                );
            } else {
                let input: RunAgentInput = serde_json::from_str(&run.input)?;
                self.start_run(run.task_id, input);
            }
        }
        Ok(())
    }

    /// Cancels every run in progress (shutdown); they finish as cancelled.
    pub fn cancel_all(&self) {
        self.shutdown.cancel();
    }

    /// Runs in progress on this process.
    pub fn running(&self) -> usize {
        self.running.lock().map_or(0, |r| r.len())
    }

    /// The API routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/healthz",
                get(|| async { axum::Json(json!({"status": "ok"})) }),
            )
            .route("/api/v1/agent/runs", post(post_run))
            .route("/api/v1/agent/runs/{run_id}", get(get_run))
            .route("/api/v1/agent/runs/{run_id}/events", get(get_events))
            .route("/api/v1/agent/runs/{run_id}/cancel", post(cancel_run))
            .route("/api/v1/agent/history", get(get_history))
            .route("/api/v1/me/profile", get(get_profile).patch(patch_profile))
            .route("/api/v1/agent/attachments", post(upload_attachment))
            .route("/api/v1/agent/attachments/{id}", get(download_attachment))
            .with_state(self.clone())
    }

    fn start_run(&self, task_id: String, input: RunAgentInput) {
        // Live before the 202 leaves: a stream opened right after it follows it.
        self.hub.open(&task_id);
        let cancel = self.shutdown.child_token();
        if let Ok(mut running) = self.running.lock() {
            running.insert(task_id.clone(), cancel.clone());
        }
        let service = self.clone();
        tokio::spawn(async move {
            let store = &service.store;
            if let Err(error) = store.set_status(&task_id, "running", now_ms()).await {
                tracing::error!(%error, "could not start run");
            }
            let (thread_id, run_id) = (input.thread_id.clone(), input.run_id.clone());
            let (tx, mut rx) = mpsc::channel(64);
            let agent = service.agent.clone();
            let producer =
                tokio::spawn(async move { run_detached(&*agent, input, tx, cancel).await });
            let mut status = "failed";
            let mut finished = false;
            // What the run says, folded into the thread's messages at its end.
            let mut output = agwire_core::apply::Session::new(Vec::new(), json!({}));
            // Events that are ready together are appended in one transaction.
            let mut batch: Vec<Event> = Vec::with_capacity(64);
            'run: while rx.recv_many(&mut batch, 64).await > 0 {
                let mut events = std::mem::take(&mut batch);
                let terminal = events.iter().position(is_terminal);
                let rest = terminal.map(|i| events.split_off(i)).unwrap_or_default();
                for event in &events {
                    output.apply(event);
                }
                if !events.is_empty() && !append_and_publish(&service, &task_id, events).await {
                    break 'run;
                }
                let Some(end) = rest.into_iter().next() else {
                    continue;
                };
                status = match &end {
                    Event::RunFinished(e) => match e.outcome {
                        Some(RunFinishedOutcome::Interrupt { .. }) => "interrupted",
                        Some(RunFinishedOutcome::Cancelled) => "cancelled",
                        _ => "succeeded",
                    },
                    _ => "failed",
                };
                finished = true;
                // Before the terminal event is visible, the turn is in the
                // thread and the status final: a client that saw the end can
                // read history and status at once.
                store_output(
                    store,
                    &thread_id,
                    &run_id,
                    std::mem::take(&mut output.messages),
                )
                .await;
                if let Err(error) = store.set_status(&task_id, status, now_ms()).await {
                    tracing::error!(%error, "could not finish run");
                }
                if !append_and_publish(&service, &task_id, vec![end]).await {
                    break 'run;
                }
            }
            drop(rx);
            let _ = producer.await;
            if !finished {
                store_output(store, &thread_id, &run_id, output.messages).await;
                if let Err(error) = store.set_status(&task_id, status, now_ms()).await {
                    tracing::error!(%error, "could not finish run");
                }
            }
            service.hub.close(&task_id);
            if let Ok(mut running) = service.running.lock() {
                running.remove(&task_id);
            }
        });
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
        let body = LogBody::new(rx, format);
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

/// Appends events to the log, then (only then) publishes them. False when
/// the log could not take them: the run then fails.
async fn append_and_publish(service: &Service, task_id: &str, events: Vec<Event>) -> bool {
    match service.store.append_events(task_id, &events).await {
        Ok(first) => {
            for (i, event) in events.into_iter().enumerate() {
                service.hub.publish(task_id, first + i as u64, event);
            }
            true
        }
        Err(error) => {
            tracing::error!(%error, "could not append events; the run fails");
            false
        }
    }
}

/// Adds the assistant's turn to the thread (tool messages too: the runtime
/// needs them; history never shows them).
async fn store_output(
    store: &Store,
    thread_id: &str,
    run_id: &str,
    messages: Vec<agwire_core::Message>,
) {
    let produced: Vec<agwire_core::Message> = messages
        .into_iter()
        .filter(|m| {
            matches!(
                m,
                agwire_core::Message::Assistant(_) | agwire_core::Message::Tool(_)
            )
        })
        .collect();
    if let Err(error) = store
        .append_run_output(thread_id, run_id, &produced, now_ms())
        .await
    {
        tracing::error!(%error, "could not store the run's messages");
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
    let fingerprint = serde_json::to_string(&run.input).unwrap_or_default();
    let accepted = match service
        .store
        .accept_run(&user, &run, &fingerprint, now_ms())
        .await
    {
        Ok(accepted) => accepted,
        Err(error) => return error.into(),
    };
    if !accepted.replayed {
        service.start_run(accepted.task_id.clone(), run.input);
    }
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
    let token = service
        .running
        .lock()
        .ok()
        .and_then(|r| r.get(&run.task_id).cloned());
    match token {
        Some(token) => token.cancel(),
        None if run.status == "queued" => {
            if let Err(error) = service
                .store
                .set_status(&run.task_id, "cancelled", now_ms())
                .await
            {
                return error.into();
            }
        }
        None => {}
    }
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({"runId": run.run_id, "cancelRequested": true})),
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
}

impl LogBody {
    fn new(rx: mpsc::Receiver<(u64, Event)>, format: WireFormat) -> Self {
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Self {
            rx,
            format,
            sse: SseEncoder::new(),
            buf: Vec::new(),
            keep_alive,
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

/// The base URL clients reached us by (for absolute attachment URLs).
fn base_url(headers: &HeaderMap) -> String {
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
                .sign(&base_url(headers), id, user, now_ms() / 1000)
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
    let (url, exp) = attachments.sign(&base_url(&headers), &id, &user, now_ms() / 1000);
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
