//! [`AgentEndpoint`]: an agent as a tower service that mounts on axum.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_core::decode::{DecodeMode, decode};
use agwire_core::{ProtocolVersion, RunAgentInput};
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures_util::FutureExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, BoxFuture, DynAgent};
use crate::body::EventBody;
use crate::context::{DisconnectPolicy, RunContext};
use crate::error::AgentError;

/// Default request body limit: 10 MiB, the official SSE parser's event limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// Default keep-alive period: a comment frame after 15 s without events, well
/// inside the idle timeouts of common proxies.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Default number of events buffered between the agent and a slow client
/// before the agent's emitters wait.
pub const DEFAULT_CHANNEL_CAPACITY: usize = 64;

/// How an endpoint serves its agent.
#[derive(Debug, Clone)]
struct Config {
    negotiator: Negotiator,
    keep_alive: Option<Duration>,
    disconnect: DisconnectPolicy,
    capacity: usize,
    max_body_bytes: usize,
    sse_ids: bool,
}

impl Default for Config {
    fn default() -> Self {
        let negotiator = Negotiator::new();
        #[cfg(not(feature = "proto"))]
        let negotiator = negotiator.sse_only();
        Self {
            negotiator,
            keep_alive: Some(DEFAULT_KEEP_ALIVE),
            disconnect: DisconnectPolicy::default(),
            capacity: DEFAULT_CHANNEL_CAPACITY,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            sse_ids: false,
        }
    }
}

struct Inner {
    agent: Box<dyn DynAgent>,
    config: Config,
}

/// One agent behind `POST`: a `tower::Service` to mount with axum's
/// `route_service`.
///
/// Before the stream, a bad request is an HTTP error with a JSON body
/// `{"detail": "..."}`: 405 for a method other than POST, 415 for a body that
/// is not JSON, 413 over the body limit, 400 for malformed JSON, 422 for JSON
/// that is not a `RunAgentInput`. Then the response is `200` in the format the
/// `Accept` header negotiates (SSE or protobuf, with `Cache-Control: no-store`
/// and `X-Accel-Buffering: no`), and every failure is a `RUN_ERROR` inside it.
///
/// ```no_run
/// use agwire_core::RunAgentInput;
/// use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
///
/// struct Hello;
/// impl Agent for Hello {
///     async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
///         ctx.say("Hello!").await?;
///         Ok(())
///     }
/// }
///
/// # async fn serve() -> std::io::Result<()> {
/// let app = axum::Router::new().route_service("/agent", AgentEndpoint::new(Hello));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
#[derive(Clone)]
pub struct AgentEndpoint {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AgentEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentEndpoint")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl AgentEndpoint {
    /// Serves `agent` with the defaults.
    pub fn new(agent: impl Agent) -> Self {
        Self {
            inner: Arc::new(Inner {
                agent: Box::new(agent),
                config: Config::default(),
            }),
        }
    }

    fn config(mut self, f: impl FnOnce(&mut Config)) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => f(&mut inner.config),
            None => {
                // Only reachable if the endpoint was cloned before configuring.
                tracing::warn!("AgentEndpoint configured after being cloned; ignoring");
            }
        }
        self
    }

    /// The `Accept` negotiation (e.g. `Negotiator::new().prefer_sse_for_wildcards(true)`
    /// so `curl` users get text).
    pub fn negotiator(self, negotiator: Negotiator) -> Self {
        self.config(|c| c.negotiator = negotiator)
    }

    /// Keep-alive comment period on idle SSE streams; `None` turns them off.
    pub fn keep_alive(self, period: Option<Duration>) -> Self {
        self.config(|c| c.keep_alive = period)
    }

    /// What a client disconnect does to its run.
    pub fn on_disconnect(self, policy: DisconnectPolicy) -> Self {
        self.config(|c| c.disconnect = policy)
    }

    /// Events buffered for a slow client before the agent waits (at least 1).
    pub fn channel_capacity(self, events: usize) -> Self {
        self.config(|c| c.capacity = events.max(1))
    }

    /// Largest request body accepted.
    pub fn max_body_bytes(self, bytes: usize) -> Self {
        self.config(|c| c.max_body_bytes = bytes)
    }

    /// Writes `id: <n>` (1, 2, ...) before each SSE event.
    pub fn sse_event_ids(self, yes: bool) -> Self {
        self.config(|c| c.sse_ids = yes)
    }

    /// Handles one request.
    pub async fn handle(&self, request: Request) -> Response {
        match self.accept(request).await {
            Ok(response) | Err(response) => response,
        }
    }

    async fn accept(&self, request: Request) -> Result<Response, Response> {
        let config = &self.inner.config;
        if request.method() != Method::POST {
            let mut response = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed: use POST",
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return Err(response);
        }
        let headers = request.headers();
        if let Some(content_type) = headers.get(header::CONTENT_TYPE)
            && !is_json(content_type)
        {
            return Err(error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the body must be a JSON RunAgentInput (Content-Type: application/json)",
            ));
        }
        let too_large = || {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body exceeds {} bytes", config.max_body_bytes),
            )
        };
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > config.max_body_bytes as u64) {
            return Err(too_large());
        }
        let format = config
            .negotiator
            .choose(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
        let body = Limited::new(request.into_body(), config.max_body_bytes)
            .collect()
            .await
            .map_err(|err| {
                if err.downcast_ref::<LengthLimitError>().is_some() {
                    too_large()
                } else {
                    error(
                        StatusCode::BAD_REQUEST,
                        &format!("could not read the body: {err}"),
                    )
                }
            })?
            .to_bytes();
        let value: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|err| error(StatusCode::BAD_REQUEST, &format!("invalid JSON: {err}")))?;
        let decoded = decode::<RunAgentInput>(value, DecodeMode::Lenient)
            .map_err(|err| error(StatusCode::UNPROCESSABLE_ENTITY, &err.to_string()))?;
        for warning in &decoded.warnings {
            warning.trace();
        }
        Ok(self.start(decoded.value, format))
    }

    fn start(&self, input: RunAgentInput, format: WireFormat) -> Response {
        let config = &self.inner.config;
        let version = ProtocolVersion::negotiate(input.protocol_version.as_deref());
        let (tx, rx) = mpsc::channel(config.capacity);
        let cancel = CancellationToken::new();
        let ctx = RunContext::new(&input, version, tx, config.disconnect, cancel.clone());
        let body = EventBody::new(
            Box::pin(run(self.inner.clone(), input, ctx)),
            rx,
            format,
            config.keep_alive,
            config.sse_ids,
            cancel,
            config.disconnect,
        );
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

/// Runs the agent and sends the terminal event, whatever happens inside.
async fn run(inner: Arc<Inner>, input: RunAgentInput, ctx: RunContext) {
    drive(&*inner.agent, input, ctx).await;
}

/// Runs `agent` for `input` without HTTP: its events, `RUN_STARTED` to the
/// terminal one, go into `tx` (bounded: a slow consumer makes the agent
/// wait), verified exactly as an endpoint's are. `cancel` cancels the run (it
/// then finishes with outcome `cancelled`). Returns when the terminal event
/// was sent. This is how a service runs agents in the background, writing the
/// events to a log instead of a response.
pub async fn run_detached(
    agent: &dyn DynAgent,
    input: RunAgentInput,
    tx: mpsc::Sender<agwire_core::Event>,
    cancel: CancellationToken,
) {
    let version = ProtocolVersion::negotiate(input.protocol_version.as_deref());
    let ctx = RunContext::new(&input, version, tx, DisconnectPolicy::Finish, cancel);
    drive(agent, input, ctx).await;
}

async fn drive(agent: &dyn DynAgent, input: RunAgentInput, mut ctx: RunContext) {
    if ctx.start(input.parent_run_id.clone()).await.is_err() {
        return;
    }
    let outcome = AssertUnwindSafe(agent.run_boxed(input, &mut ctx))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            tracing::error!(run_id = ctx.run_id(), %what, "agent panicked");
            Err(AgentError::new("the agent failed unexpectedly").with_code("panic"))
        });
    if let Err(error) = &outcome {
        tracing::debug!(run_id = ctx.run_id(), %error, "run failed");
    }
    ctx.finish(outcome).await;
}

fn is_json(content_type: &HeaderValue) -> bool {
    let Ok(value) = content_type.to_str() else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn error(status: StatusCode, detail: &str) -> Response {
    let body = serde_json::json!({ "detail": detail }).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

impl tower_service::Service<Request> for AgentEndpoint {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let endpoint = self.clone();
        Box::pin(async move { Ok(endpoint.handle(request).await) })
    }
}
