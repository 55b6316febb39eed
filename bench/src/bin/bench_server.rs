//! The agwire side of the HTTP benchmarks (`bench/http.sh`): the same routes
//! as the Python and node reference servers in `interop/`.
//!
//! - `POST /short`: five events (RUN_STARTED, one text message of one delta,
//!   RUN_FINISHED), for runs per second.
//! - `POST /long?n=N`: one run with N text deltas, for events per second.
//! - `POST /idle`: RUN_STARTED, then nothing until the client leaves, for the
//!   memory an open stream costs.
//! - `POST /idle_events`: the same through `EventStream` (a body fed by
//!   `(seq, event)` pairs from elsewhere, as a service follows a run), for
//!   the memory such a stream costs.
//!
//! Usage: `bench_server [ADDR]` (default 127.0.0.1:0); prints `listening <port>`.
#![allow(clippy::print_stdout)]

use std::collections::HashMap;

use agwire_core::{Event, RunAgentInput, RunStartedEvent};
use agwire_server::{Agent, AgentEndpoint, AgentError, EventStream, Intake, RunContext};
use axum::extract::{Query, Request};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;

struct Short;
impl Agent for Short {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.say("Hello from agwire.").await?;
        Ok(())
    }
}

struct Long(usize);
impl Agent for Long {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let id = ctx.start_text().await?;
        for i in 0..self.0 {
            ctx.text(&id, agwire_bench::word(i)).await?;
        }
        ctx.end_text(&id).await?;
        Ok(())
    }
}

struct Idle;
impl Agent for Idle {
    async fn run(&self, _: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        ctx.cancelled().await;
        Ok(())
    }
}

/// RUN_STARTED with id 1, then an open stream with nothing more to send.
async fn idle_events(request: Request) -> Response {
    let (input, format) = match Intake::new().run_input(request).await {
        Ok(accepted) => accepted,
        Err(refused) => return refused.into_response(),
    };
    let started = Event::RunStarted(RunStartedEvent::new(input.thread_id, input.run_id));
    let events = futures_util::stream::iter([(1, started)]).chain(futures_util::stream::pending());
    EventStream::new(events, format).into_response()
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let long = |Query(q): Query<HashMap<String, usize>>, req: Request| async move {
        let n = q.get("n").copied().unwrap_or(100_000);
        let response: Response = AgentEndpoint::new(Long(n)).handle(req).await;
        response
    };
    let app = axum::Router::new()
        .route_service("/short", AgentEndpoint::new(Short))
        .route("/long", axum::routing::post(long))
        .route_service("/idle", AgentEndpoint::new(Idle))
        .route("/idle_events", axum::routing::post(idle_events));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening {}", listener.local_addr()?.port());
    // HTTP/1.1 with TCP_NODELAY: streams are written in small pieces, and
    // never held back by Nagle.
    agwire_server::serve(listener, app, std::future::pending()).await
}
