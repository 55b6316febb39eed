//! The HTTP API: runs accepted and executed in the background, their event
//! logs streamed (and resumed) as AG-UI.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_codec::sse::SseEncoder;
use agwire_core::{Event, RunAgentInput};
use agwire_server::DynAgent;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_core::Stream;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::attachments::{Attachments, REFERENCE_PREFIX, sniff};
use crate::auth::Auth;
use crate::config::{BusyThread, Config};
use crate::error::Error;
use crate::metrics::Metrics;
use crate::runs::{Engine, RunRequest};
use crate::store::{Admission, Store};
use crate::validate::{MAX_PAYLOAD_BYTES, Rules, validate_run};

/// Backend tools (frontend tools may not reuse their names).
const BACKEND_TOOLS: &[&str] = &crate::brain::tools::NAMES;
/// Keep-alive comment period on idle SSE streams.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The service: the run engine behind the HTTP API, with the API's own
/// settings (auth, limits, uploads).
#[derive(Clone)]
pub struct Service {
    pub(crate) engine: Engine,
    attachments: Option<Attachments>,
    auth: Auth,
    options: Options,
}

/// The settings the HTTP layer reads on every request.
#[derive(Debug, Clone)]
struct Options {
    busy_thread: BusyThread,
    agui_max_payload_bytes: usize,
    public_url: Option<String>,
    metrics_public: bool,
    http: crate::config::HttpConfig,
}

impl Options {
    fn of(config: &Config) -> Self {
        Self {
            busy_thread: config.runs.busy_thread,
            agui_max_payload_bytes: config.runs.agui_max_payload_bytes,
            public_url: config
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_owned()),
            metrics_public: config.metrics.public,
            http: config.http.clone(),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self::of(&Config::default())
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

pub(crate) use crate::runs::now_ms;

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

pub(crate) use crate::api::limits::detail;

/// What a multipart upload may add around its file (boundaries, part
/// headers, other small fields).
const MULTIPART_OVERHEAD: usize = 64 * 1024;

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
    pub fn new(store: Arc<dyn Store>, agent: Arc<dyn DynAgent>) -> Self {
        Self {
            engine: Engine::new(store, agent),
            attachments: None,
            auth: Auth::none(),
            options: Options::default(),
        }
    }

    /// What builds each run's agent (default: the agent given to
    /// [`Service::new`], for every run).
    pub fn with_brain(mut self, brain: Arc<dyn crate::brain::Brain>) -> Self {
        self.engine.brain = brain;
        self
    }

    /// The agent catalogue runs choose from (default: the shipped one).
    pub fn with_runtime(mut self, runtime: crate::brain::agents::RuntimeConfig) -> Self {
        self.engine.runtime = Arc::new(runtime);
        self
    }

    /// Applies the HTTP-level settings of `config` (busy-thread policy,
    /// `/api/v1/agui` body limit, public URL, `/metrics` access) and the
    /// engine's concurrency limit.
    pub fn with_config(mut self, config: &Config) -> Self {
        self.options = Options::of(config);
        self.engine.max_concurrent = config.runs.max_concurrent;
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
        self.engine.attachments = Some(attachments.clone());
        self.attachments = Some(attachments);
        self
    }

    /// The run engine (the scheduler and embedders call it directly).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Starts the engine (see [`Engine::start`]).
    pub async fn start(&self) -> Result<(), Error> {
        self.engine.start().await
    }

    /// Cancels every run in progress (shutdown); they finish as cancelled.
    pub fn cancel_all(&self) {
        self.engine.cancel_all();
    }

    /// Runs executing on this process now.
    pub fn running(&self) -> usize {
        self.engine.running()
    }

    /// Shutdown (see [`Engine::drain`]).
    pub async fn drain(&self, grace: Duration) {
        self.engine.drain(grace).await;
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
        use crate::api::limits::{body_limit, header_limits, json_errors};
        use axum::middleware::from_fn;
        let http = &self.options.http;
        let run_body = || {
            from_fn(body_limit(
                MAX_PAYLOAD_BYTES,
                "RunAgentInput payload exceeds size limit",
            ))
        };
        let agui_body = from_fn(body_limit(
            self.options.agui_max_payload_bytes,
            "RunAgentInput payload exceeds size limit",
        ));
        let upload_limit = self
            .attachments
            .as_ref()
            .map_or(0, |a| a.max_bytes + MULTIPART_OVERHEAD);
        let upload_body = from_fn(body_limit(upload_limit, "attachment exceeds size limit"));
        // Routes with a body limit of their own (runs, uploads); the rest
        // take small JSON documents at most.
        let sized = Router::new()
            .route("/api/v1/agui", post(post_agui).layer(agui_body))
            .route("/api/v1/agent/runs", post(post_run).layer(run_body()))
            .route(
                "/api/v1/agent/attachments",
                post(upload_attachment).layer(upload_body),
            );
        let small = Router::new()
            .route(
                "/healthz",
                get(|service: State<Service>| async move {
                    axum::Json(json!({"status": "ok", "agent": service.engine.brain.describe()}))
                }),
            )
            .route("/metrics", get(get_metrics))
            .route("/openapi.json", get(get_openapi))
            .route("/api/v1/agent/runs/{run_id}", get(get_run))
            .route("/api/v1/agent/runs/{run_id}/events", get(get_events))
            .route("/api/v1/agent/runs/{run_id}/cancel", post(cancel_run))
            .route("/api/v1/agent/history", get(get_history))
            .route("/api/v1/me/profile", get(get_profile).patch(patch_profile))
            .route("/api/v1/agent/attachments/{id}", get(download_attachment))
            .route(
                "/api/v1/automation/jobs",
                post(crate::api::jobs::create).get(crate::api::jobs::list),
            )
            .route(
                "/api/v1/automation/jobs/{id}",
                get(crate::api::jobs::read)
                    .patch(crate::api::jobs::update)
                    .delete(crate::api::jobs::remove),
            )
            .route(
                "/api/v1/automation/jobs/{id}/runs",
                get(crate::api::jobs::runs),
            )
            .route("/api/v1/calendar/events", get(calendar_events))
            .layer(from_fn(body_limit(
                http.max_body_bytes,
                "the request body exceeds the size limit",
            )));
        sized
            .merge(small)
            .with_state(self.clone())
            // The limits above are the body limits (axum's default of 2 MB
            // would cut uploads short).
            .layer(axum::extract::DefaultBodyLimit::disable())
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                Duration::from_secs(http.request_timeout_seconds),
            ))
            .layer(from_fn(header_limits(
                http.max_header_bytes,
                http.max_headers,
            )))
            .layer(from_fn(json_errors))
    }

    /// The run's events after `after`, then live ones, until its terminal event.
    fn stream(&self, task_id: String, after: u64, format: WireFormat) -> Response {
        let rx = self.engine.follow(task_id, after);
        let body = LogBody::new(rx, format, Metrics::stream_opened(&self.engine.metrics));
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

/// What a path segment must escape: everything but RFC 3986's unreserved
/// characters and the sub-delimiters a segment may hold as they are.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

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
    if !crate::api::limits::declares_json(&headers) {
        return crate::api::limits::not_json();
    }
    // One byte over the limit is enough to know.
    let body = match crate::api::limits::read_body(
        request.into_body(),
        MAX_PAYLOAD_BYTES + 1,
        "RunAgentInput payload exceeds size limit",
    )
    .await
    {
        Ok(body) => body,
        Err(response) => return response,
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
    let request = RunRequest {
        user: user.clone(),
        input: run.input,
        mode: Some(run.runtime_mode),
        client_time: run.client_time,
        admission,
    };
    let accepted = match service.engine.accept(request).await {
        Ok(accepted) => accepted,
        Err(error) => return error.into(),
    };
    if let Some(format) = asked_stream(&headers) {
        return service.stream(accepted.task_id, 0, format);
    }
    let location = format!(
        "/api/v1/agent/runs/{}/events",
        percent_encoding::utf8_percent_encode(&accepted.run_id, PATH_SEGMENT)
    );
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
    match service.engine.store.run(&user, &run_id).await {
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
    let run = match service.engine.store.run(&user, &run_id).await {
        Ok(Some(run)) => run,
        Ok(None) => return detail(StatusCode::NOT_FOUND, "run not found"),
        Err(error) => return error.into(),
    };
    let resume = match headers.get("last-event-id").map(|v| v.to_str()) {
        Some(Ok(id)) => Some(id.to_owned()),
        // Bytes that are not text are not a sequence number either.
        Some(Err(_)) => Some(String::from("\u{fffd}")),
        None => query.get("after").cloned(),
    };
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
    let run = match service.engine.store.run(&user, &run_id).await {
        Ok(Some(run)) => run,
        Ok(None) => return detail(StatusCode::NOT_FOUND, "run not found"),
        Err(error) => return error.into(),
    };
    if let Err(error) = service.engine.cancel(&run).await {
        return error.into();
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
    rx: mpsc::Receiver<(u64, Arc<Event>)>,
    format: WireFormat,
    sse: SseEncoder,
    buf: Vec<u8>,
    keep_alive: tokio::time::Interval,
    _open: crate::metrics::StreamGuard,
}

impl LogBody {
    fn new(
        rx: mpsc::Receiver<(u64, Arc<Event>)>,
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
        Some(thread) => match service.engine.store.thread_owner(thread).await {
            Ok(Some(owner)) if owner == user => Some(thread.clone()),
            Ok(_) => return detail(StatusCode::NOT_FOUND, "thread not found"),
            Err(error) => return error.into(),
        },
        None => match service.engine.store.latest_thread(&user).await {
            Ok(thread) => thread,
            Err(error) => return error.into(),
        },
    };
    let messages = match &thread {
        Some(thread) => match service
            .engine
            .store
            .thread_messages(thread, &["user", "assistant"])
            .await
        {
            Ok(messages) => messages,
            Err(error) => return error.into(),
        },
        None => Vec::new(),
    };
    let tz = match service.engine.store.settings(&user).await {
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
    match service.engine.store.settings(&user).await {
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
    let mut settings = match service.engine.store.settings(&user).await {
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
    if let Err(error) = service
        .engine
        .store
        .set_settings(&user, &settings, now_ms())
        .await
    {
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
        // A part that breaks the body's limit is the upload being too large;
        // anything else wrong with the form is a bad request.
        let failed = |e: axum::extract::multipart::MultipartError| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large()
            } else {
                detail(StatusCode::BAD_REQUEST, &e.body_text())
            }
        };
        let mut file = None;
        loop {
            match form.next_field().await {
                Ok(Some(field)) if field.name() == Some("file") => match field.bytes().await {
                    Ok(bytes) => {
                        file = Some(bytes);
                        break;
                    }
                    Err(e) => return failed(e),
                },
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => return failed(e),
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
        match crate::api::limits::read_body(
            request.into_body(),
            attachments.max_bytes,
            "attachment exceeds size limit",
        )
        .await
        {
            Ok(body) => body,
            Err(response) => return response,
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
        .engine
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
    let owner = match service.engine.store.attachment(&id).await {
        Ok(Some(found)) => found,
        Ok(None) => return detail(StatusCode::NOT_FOUND, "attachment not found"),
        Err(error) => return error.into(),
    };
    let exp = query.get("exp").and_then(|e| e.parse::<i64>().ok());
    let sig = query.get("sig").and_then(|s| hex::decode(s).ok());
    let valid = match (exp, sig) {
        (Some(exp), Some(sig)) => {
            attachments.verify(&id, &owner.user_id, exp, &sig, now_ms() / 1000)
        }
        _ => false,
    };
    if !valid {
        return detail(StatusCode::FORBIDDEN, "invalid or expired signature");
    }
    match attachments.load(&id) {
        Ok(bytes) => {
            let mut response = Response::new(Body::from(bytes));
            if let Ok(value) = HeaderValue::from_str(&owner.mime_type) {
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
    let runs = match service.engine.store.status_counts().await {
        Ok(runs) => runs,
        Err(error) => return error.into(),
    };
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        service.engine.metrics.render(
            &runs,
            crate::metrics::Held {
                executing: service.running(),
                live_channels: service.engine.hub.len(),
            },
        ),
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
    if !crate::api::limits::declares_json(&headers) {
        return crate::api::limits::not_json();
    }
    let body = match crate::api::limits::read_body(
        request.into_body(),
        service.options.agui_max_payload_bytes,
        "RunAgentInput payload exceeds size limit",
    )
    .await
    {
        Ok(body) => body,
        Err(response) => return response,
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
    } else if input.run_id.is_empty() {
        Some("runId must not be empty")
    } else if input.run_id.chars().count() > MAX_AGUI_ID {
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
    let request = RunRequest {
        user,
        input,
        mode: None,
        client_time: None,
        admission,
    };
    match service.engine.accept(request).await {
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
        .engine.store
        .calendar_events(&user, from.as_millisecond(), to.as_millisecond(), 500)
        .await
    {
        Ok(events) => axum::Json(
            json!({"events": events.iter().map(crate::brain::tools::event_json).collect::<Vec<_>>()}),
        )
        .into_response(),
        Err(error) => error.into(),
    }
}
