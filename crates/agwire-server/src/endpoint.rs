//! [`AgentEndpoint`]: an agent as a tower service that mounts on axum.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use agwire_codec::negotiate::{Negotiator, WireFormat};
use agwire_core::{ProtocolVersion, RunAgentInput};
use axum::body::Body;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, BoxFuture, DynAgent};
use crate::context::{DisconnectPolicy, RunContext};
use crate::error::AgentError;
use crate::intake::Intake;
use crate::queue;
use crate::response::{DEFAULT_KEEP_ALIVE, EventBody, stream_response};

/// Default number of events buffered between the agent and a slow client
/// before the agent's emitters wait.
pub const DEFAULT_CHANNEL_CAPACITY: usize = 64;

/// How an endpoint serves its agent.
#[derive(Debug, Clone)]
struct Config {
    intake: Intake,
    keep_alive: Option<Duration>,
    disconnect: DisconnectPolicy,
    capacity: usize,
    sse_ids: bool,
    keep_request: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            intake: Intake::new(),
            keep_alive: Some(DEFAULT_KEEP_ALIVE),
            disconnect: DisconnectPolicy::default(),
            capacity: DEFAULT_CHANNEL_CAPACITY,
            sse_ids: false,
            keep_request: true,
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
/// `{"detail": "..."}` ([`Intake`]'s checks): 405 for a method other than
/// POST, 415 for a body that is not JSON, 413 over the body limit (at once
/// when `Content-Length` declares it), 400 for malformed JSON, 422 for JSON
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
        self.config(|c| c.intake = c.intake.clone().negotiator(negotiator))
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
        self.config(|c| c.intake = c.intake.clone().max_body_bytes(bytes))
    }

    /// Writes `id: <n>` (1, 2, ...) before each SSE event.
    pub fn sse_event_ids(self, yes: bool) -> Self {
        self.config(|c| c.sse_ids = yes)
    }

    /// Whether the run keeps the request's head for the agent
    /// ([`RunContext::request`], [`RunContext::extension`]); on by default.
    /// Off saves what the head holds for as long as the run streams (with
    /// `bench/http.sh`'s three-header requests, 1.3 KiB of the 6.6 KiB an
    /// idle stream costs) for an agent that never reads it.
    pub fn keep_request(self, yes: bool) -> Self {
        self.config(|c| c.keep_request = yes)
    }

    /// Handles one request.
    pub async fn handle(&self, request: Request) -> Response {
        match self.accept(request).await {
            Ok(response) | Err(response) => response,
        }
    }

    async fn accept(&self, request: Request) -> Result<Response, Response> {
        let (head, body) = request.into_parts();
        let (input, format) = self
            .inner
            .config
            .intake
            .run_input_of(&head, body)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(self.start(input, format, head))
    }

    fn start(&self, input: RunAgentInput, format: WireFormat, head: Parts) -> Response {
        let config = &self.inner.config;
        let version = ProtocolVersion::negotiate(input.protocol_version.as_deref());
        let (tx, rx) = queue::event_queue(config.capacity);
        let cancel = CancellationToken::new();
        let mut ctx = RunContext::new(&input, version, tx, config.disconnect, cancel.clone());
        if config.keep_request {
            ctx = ctx.with_request(head);
        }
        let body = EventBody::new(
            Box::pin(drive(
                Runner::Shared(self.inner.clone()),
                Box::new(input),
                Box::new(ctx),
            )),
            rx,
            format,
            config.keep_alive,
            config.sse_ids,
            cancel,
            config.disconnect,
        );
        stream_response(Body::from_stream(body), format)
    }
}

/// Runs `agent` for `input` without HTTP: its events, `RUN_STARTED` to the
/// terminal one, go into `tx` (an [`crate::event_queue`]: bounded, so a slow
/// consumer makes the agent wait; holding no slots while the run waits),
/// verified exactly as an endpoint's are. `cancel` cancels the run (it
/// then finishes with outcome `cancelled`). Returns when the terminal event
/// was sent. This is how a service runs agents in the background, writing the
/// events to a log instead of a response.
pub fn run_detached(
    agent: &dyn DynAgent,
    input: RunAgentInput,
    tx: crate::EventSender,
    cancel: CancellationToken,
) -> impl Future<Output = ()> + Send + '_ {
    // Not an `async fn`: its arguments would stay in the future for the
    // whole run; set up now, the future holds boxes.
    let version = ProtocolVersion::negotiate(input.protocol_version.as_deref());
    let ctx = RunContext::new(&input, version, tx, DisconnectPolicy::Finish, cancel);
    drive(Runner::Borrowed(agent), Box::new(input), Box::new(ctx))
}

/// The agent a run executes: the endpoint's (shared, for a run that outlives
/// the request's borrow) or the caller's.
enum Runner<'a> {
    Shared(Arc<Inner>),
    Borrowed(&'a dyn DynAgent),
}

impl Runner<'_> {
    fn agent(&self) -> &dyn DynAgent {
        match self {
            Runner::Shared(inner) => &*inner.agent,
            Runner::Borrowed(agent) => *agent,
        }
    }
}

/// Runs the agent and sends the terminal event, whatever happens inside.
///
/// Everything large is boxed — the input (moved into the agent's future),
/// the context, the short-lived opening and closing sends — because this
/// future lives as long as the run's stream is open, idle or not, and an
/// async fn keeps a slot for every argument and every future it awaits.
async fn drive(runner: Runner<'_>, input: Box<RunAgentInput>, mut ctx: Box<RunContext>) {
    let agent = runner.agent();
    if Box::pin(ctx.start(input.parent_run_id.clone()))
        .await
        .is_err()
    {
        return;
    }
    // Unboxed in a call of its own, so the box is freed now rather than
    // when this future ends.
    let outcome = AssertUnwindSafe(agent.run_boxed(unbox(input), &mut ctx))
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
    Box::pin(ctx.finish(outcome)).await;
}

// The box is the point: see `drive`.
#[allow(clippy::boxed_local)]
fn unbox<T>(boxed: Box<T>) -> T {
    *boxed
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
