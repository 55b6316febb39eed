//! The AG-UI dojo features served by agwire-server, one deterministic agent per
//! path (`POST /agentic_chat`, `/backend_tool_rendering`, `/human_in_the_loop`,
//! `/agentic_generative_ui`, `/tool_based_generative_ui`, `/shared_state`,
//! `/predictive_state_updates`, `/reasoning`, `/subagents`, `/interrupt`).
//!
//! The agents are in `agents.rs` beside this file; the workspace's tests
//! run the same file (agwire-testkit's `dojo` module), so what the tests
//! prove is what this example serves.
//!
//! ```text
//! cargo run -p agwire-server --example dojo -- --addr 127.0.0.1:8000
//! curl -N -H 'Accept: text/event-stream' -H 'Content-Type: application/json' \
//!   -d '{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"hi"}],"tools":[],"context":[]}' \
//!   http://127.0.0.1:8000/agentic_chat
//! ```

use std::io::Write;
use std::net::SocketAddr;

use agwire_codec::negotiate::Negotiator;
use axum::serve::ListenerExt;
use clap::Parser;

mod agents;

/// Serve every AG-UI dojo feature, one deterministic agent per path
/// (POST /agentic_chat, /backend_tool_rendering, /human_in_the_loop, …).
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on (port 0 picks a free port; the bound address is
    /// printed as `listening http://ADDR`).
    #[arg(long, default_value = "127.0.0.1:8000")]
    addr: SocketAddr,
    /// Answer `Accept: */*` with SSE instead of protobuf (for curl).
    #[arg(long)]
    prefer_sse_for_wildcards: bool,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let negotiator = Negotiator::new().prefer_sse_for_wildcards(args.prefer_sse_for_wildcards);
    let app = agents::router(|endpoint| endpoint.negotiator(negotiator));
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    let addr = listener.local_addr()?;
    writeln!(std::io::stdout().lock(), "listening http://{addr}")?;
    // Events are written in small pieces: never let Nagle hold one back.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
