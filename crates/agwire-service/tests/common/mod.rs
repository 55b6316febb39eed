//! Helpers of the service tests: a real server on loopback over a fresh
//! database — SQLite, or PostgreSQL with `AGWIRE_TEST_STORE=postgres` (the
//! test command runs the service tests both ways) — requests, and the SSE
//! log as `(seq, event)` pairs.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agwire_client::core::Event;
use agwire_service::auth::Auth;
use agwire_service::store::{PgStore, SqliteStore, Store};
use agwire_service::{BuiltinAgent, Config, Service};
use serde_json::{Value, json};

#[path = "../support/pg_database.rs"]
mod pg_database;
use pg_database::PgDatabase;

/// A service running in this process, served over real HTTP.
pub struct Server {
    pub addr: SocketAddr,
    pub service: Service,
    pub dir: PathBuf,
    /// Its PostgreSQL database, when the tests run on PostgreSQL (kept
    /// after the test: the served service outlives this handle).
    pub database: Option<String>,
}

/// Whether the service tests run on PostgreSQL.
fn on_postgres() -> bool {
    std::env::var("AGWIRE_TEST_STORE").as_deref() == Ok("postgres")
}

/// A fresh store for a server in `dir`: SQLite there, or a PostgreSQL
/// database of its own.
pub async fn fresh_store(dir: &Path) -> (Arc<dyn Store>, Option<String>) {
    if on_postgres() {
        let database = PgDatabase::create()
            .await
            .expect("AGWIRE_TEST_STORE=postgres needs a PostgreSQL server")
            .keep();
        let store = PgStore::connect(&database).await.unwrap();
        (Arc::new(store), Some(database))
    } else {
        let store = SqliteStore::open(&dir.join("agwire.db")).await.unwrap();
        (Arc::new(store), None)
    }
}

/// The server's database opened again (a restart).
pub async fn reopen(server: &Server) -> Arc<dyn Store> {
    match &server.database {
        Some(database) => Arc::new(PgStore::connect(database).await.unwrap()),
        None => Arc::new(
            SqliteStore::open(&server.dir.join("agwire.db"))
                .await
                .unwrap(),
        ),
    }
}

/// A fresh data directory.
pub fn data_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agwire-{name}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Serves `agent` with `config` (and `auth`) on 127.0.0.1:0.
pub async fn start(config: &Config, agent: BuiltinAgent, auth: Auth) -> Server {
    start_service(config, auth, |service| {
        service.with_brain(Arc::new(agwire_service::brain::Fixed::new(
            Arc::new(agent),
            "builtin",
        )))
    })
    .await
}

/// Serves runs on `brain`.
pub async fn start_brain(brain: Arc<dyn agwire_service::brain::Brain>) -> Server {
    start_service(&Config::default(), Auth::none(), |service| {
        service.with_brain(brain)
    })
    .await
}

async fn start_service(
    config: &Config,
    auth: Auth,
    setup: impl FnOnce(Service) -> Service,
) -> Server {
    let dir = data_dir("service");
    let (store, database) = fresh_store(&dir).await;
    let attachments = agwire_service::attachments::Attachments::open(&dir).unwrap();
    let service = setup(Service::new(store, Arc::new(BuiltinAgent::default())))
        .with_config(config)
        .with_attachments(attachments)
        .with_auth(auth);
    service.start().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = service.router();
    let http = config.http.clone();
    tokio::spawn(async move {
        agwire_service::server::serve(listener, app, &http, std::future::pending())
            .await
            .unwrap();
    });
    Server {
        addr,
        service,
        dir,
        database,
    }
}

/// Default configuration, fast built-in agent, no auth.
pub async fn serve() -> SocketAddr {
    start(&Config::default(), BuiltinAgent::default(), Auth::none())
        .await
        .addr
}

/// A seed-004 request with one user message.
pub fn body(thread: &str, run_id: &str, text: &str) -> Value {
    json!({
        "threadId": thread, "runId": run_id, "state": {},
        "messages": [{"id": format!("{run_id}-u"), "role": "user", "content": text}],
        "tools": [], "context": [], "forwardedProps": {"runtime_mode": "chat"}
    })
}

/// An SSE body as `(id, event)` pairs; every frame must carry an id.
pub fn sse_with_ids(bytes: &[u8]) -> Vec<(u64, Event)> {
    let mut frames = Vec::new();
    let mut decoder = agwire_codec::sse::SseDecoder::new();
    decoder.push(bytes, &mut frames).unwrap();
    decoder.finish(&mut frames).unwrap();
    frames
        .iter()
        .map(|f| {
            let id =
                f.id.as_deref()
                    .expect("every frame has an id")
                    .parse()
                    .unwrap();
            let event =
                agwire_codec::sse::decode_frame(f, agwire_client::core::DecodeMode::Lenient)
                    .unwrap()
                    .value;
            (id, event)
        })
        .collect()
}

/// The run's log after `after` (to its end), over SSE.
pub async fn events(addr: SocketAddr, run_id: &str, after: Option<u64>) -> Vec<(u64, Event)> {
    let mut request = reqwest_like(addr, &format!("/api/v1/agent/runs/{run_id}/events"));
    if let Some(after) = after {
        request = request.header("last-event-id", after.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    sse_with_ids(&response.bytes().await.unwrap())
}

/// A GET asking for SSE.
/// What the assistant said in a run's log: its text deltas, joined.
pub fn said(log: &[(u64, Event)]) -> String {
    log.iter()
        .filter_map(|(_, e)| match e {
            Event::TextMessageContent(t) => Some(t.delta.as_str()),
            _ => None,
        })
        .collect()
}

pub fn reqwest_like(addr: SocketAddr, path: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .get(format!("http://{addr}{path}"))
        .header("accept", "text/event-stream")
}

/// POST /api/v1/agent/runs.
pub async fn post(addr: SocketAddr, body: &Value, accept: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/runs"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    request.send().await.unwrap()
}

/// Uploads `image` as the local user's attachment; returns its signed URL.
pub async fn upload(addr: SocketAddr, image: &[u8]) -> String {
    let answer: Value = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/agent/attachments"))
        .header("content-type", "image/png")
        .body(image.to_vec())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["url"].as_str().unwrap().to_owned()
}

/// GET a JSON document.
pub async fn get_json(addr: SocketAddr, path: &str) -> Value {
    reqwest::get(format!("http://{addr}{path}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// GET /api/v1/agent/runs/{runId}.
pub async fn status(addr: SocketAddr, run_id: &str) -> Value {
    get_json(addr, &format!("/api/v1/agent/runs/{run_id}")).await
}

/// Waits until the run reaches `want` (or fails after ~10 s).
pub async fn wait_status(addr: SocketAddr, run_id: &str, want: &str) -> Value {
    for _ in 0..1000 {
        let status = status(addr, run_id).await;
        if status["status"] == want {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!(
        "run {run_id} never reached {want}: {}",
        status(addr, run_id).await
    );
}

/// Runs `interop/httpagent.mjs` (the official `HttpAgent`) on `spec`; `None`
/// when the interop peers are not installed (and not required).
pub async fn http_agent(spec: &Value) -> Option<Value> {
    let interop = peers::interop_dir()?;
    Some(http_agent_peer::run(&interop, spec).await)
}

#[path = "../../../agwire-client/tests/support/http_agent.rs"]
mod http_agent_peer;
#[path = "../../../agwire-core/tests/common/peers.rs"]
pub mod peers;
