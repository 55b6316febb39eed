//! Helpers of the service tests: a real server on loopback over a fresh
//! database — SQLite, or PostgreSQL with `AGWIRE_TEST_STORE=postgres` (the
//! test command runs the service tests both ways) — with its attachments
//! beside the database, or with `AGWIRE_TEST_ATTACHMENTS=bucket` in a
//! SeaweedFS bucket of its own (the test command's bucket pass); requests,
//! and the SSE log as `(seq, event)` pairs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    dead_code,
    unreachable_pub
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use agwire_client::core::Event;
use agwire_service::attachments::Bucket;
use agwire_service::auth::Auth;
use agwire_service::store::{PgStore, SqliteStore, Store};
use agwire_service::{BuiltinAgent, Config, Service};
use serde_json::{Value, json};

use agwire_testkit::pg::PgDatabase;
use agwire_testkit::s3::{ACCESS_KEY_ID, BUCKET, SECRET_ACCESS_KEY, SeaweedFs};

/// A service running in this process, served over real HTTP.
pub struct Server {
    pub addr: SocketAddr,
    pub service: Service,
    pub dir: PathBuf,
    /// Its database (kept after the test: the served service outlives this
    /// handle).
    pub database: Database,
    /// Its attachments' bucket, in the bucket pass: the object store and
    /// the prefix the service writes under (stopped with this handle).
    pub bucket: Option<(SeaweedFs, String)>,
}

impl Server {
    /// What the URLs of its uploads start with: its own attachment route,
    /// or the bucket's objects.
    pub fn attachment_urls(&self) -> String {
        match &self.bucket {
            Some((weed, prefix)) => format!("{}/{BUCKET}/{prefix}/", weed.endpoint),
            None => format!("http://{}/api/v1/agent/attachments/", self.addr),
        }
    }

    /// The names of the objects in its bucket (none without one).
    pub async fn objects(&self) -> Vec<String> {
        match &self.bucket {
            Some((weed, prefix)) => objects(weed, prefix).await,
            None => Vec::new(),
        }
    }
}

/// `url`, an attachment URL of either kind, claiming a later expiry than
/// it was signed with (ours: `exp=`, SigV4's: `X-Amz-Expires=`).
pub fn with_later_expiry(url: &str) -> String {
    let tampered = url
        .replace("exp=", "exp=9")
        .replace("X-Amz-Expires=", "X-Amz-Expires=9");
    assert_ne!(tampered, url, "no expiry in {url}");
    tampered
}

/// The content of the first user message of the last worker (not
/// router) request `model` was given.
pub fn worker_user_parts(model: &agwire_llm::ScriptedModel) -> Vec<agwire_llm::UserPart> {
    let worker = model
        .requests()
        .into_iter()
        .rfind(|r| !r.json_mode)
        .unwrap();
    worker
        .messages
        .iter()
        .find_map(|m| match m {
            agwire_llm::ChatMessage::User { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap()
}

/// `image` as the model receives it: a PNG data URL.
pub fn png_data_url(image: &[u8]) -> agwire_llm::UserPart {
    use base64::Engine;
    agwire_llm::UserPart::ImageUrl(format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(image)
    ))
}

/// A PNG data URL, as the model receives an image.
pub struct DataUrl(pub String);

/// `image` as a PNG data URL.
pub fn data_url(image: &[u8]) -> DataUrl {
    match png_data_url(image) {
        agwire_llm::UserPart::ImageUrl(url) => DataUrl(url),
        other => panic!("not an image: {other:?}"),
    }
}

/// Whether the service tests run on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var("AGWIRE_TEST_STORE").as_deref() == Ok("postgres")
}

/// Whether every service of the tests keeps its attachments in a bucket
/// (`AGWIRE_TEST_ATTACHMENTS=bucket`: a SeaweedFS of its own each).
pub fn in_bucket() -> bool {
    std::env::var("AGWIRE_TEST_ATTACHMENTS").as_deref() == Ok("bucket")
}

/// `config` with its attachments under a fresh prefix of `weed`'s bucket;
/// the prefix.
pub fn use_bucket(weed: &SeaweedFs, config: &mut Config) -> String {
    let prefix = format!("t-{}", uuid::Uuid::new_v4().simple());
    config.attachments.url = Some(format!("s3://{BUCKET}/{prefix}"));
    config.attachments.endpoint = Some(weed.endpoint.clone());
    config.attachments.access_key_id = Some(ACCESS_KEY_ID.into());
    config.attachments.secret_access_key = Some(SECRET_ACCESS_KEY.into());
    prefix
}

/// The bucket as a client of its own sees it (to list what is there).
pub fn bucket_client(weed: &SeaweedFs) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&weed.endpoint)
        .with_allow_http(true)
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id(ACCESS_KEY_ID)
        .with_secret_access_key(SECRET_ACCESS_KEY)
        .build()
        .unwrap()
}

/// The object names under `prefix`, sorted.
pub async fn objects(weed: &SeaweedFs, prefix: &str) -> Vec<String> {
    use futures_util::TryStreamExt;
    use object_store::ObjectStore;
    let client = bucket_client(weed);
    let mut names: Vec<String> = client
        .list(Some(&object_store::path::Path::from(prefix)))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    names.sort();
    names
}

/// A test's database: SQLite in its data directory, or — with
/// `AGWIRE_TEST_STORE=postgres` — a PostgreSQL database of its own. Each
/// [`Database::open`] is what a process starting on it opens.
#[derive(Debug, Clone)]
pub struct Database {
    pub dir: PathBuf,
    /// The PostgreSQL database's URL, on PostgreSQL.
    pub postgres: Option<String>,
}

impl Database {
    /// A fresh one, its data directory named after `name`. Says which
    /// store it is, so a test's output tells what it ran on.
    pub async fn fresh(name: &str) -> Self {
        let dir = data_dir(name);
        let postgres = if on_postgres() {
            let database = PgDatabase::create()
                .await
                .expect("AGWIRE_TEST_STORE=postgres needs a PostgreSQL server")
                .keep();
            Some(database)
        } else {
            None
        };
        let database = Self { dir, postgres };
        eprintln!("store under test: {}", database.describe());
        database
    }

    /// `sqlite <file>` or `postgres <url>`.
    pub fn describe(&self) -> String {
        match &self.postgres {
            Some(url) => format!("postgres {url}"),
            None => format!("sqlite {}", self.dir.join("agwire.db").display()),
        }
    }

    /// A store on it.
    pub async fn open(&self) -> Arc<dyn Store> {
        self.open_with_bucket(None).await
    }

    /// A store on it, putting new attachments in `bucket` if given.
    pub async fn open_with_bucket(&self, bucket: Option<Arc<Bucket>>) -> Arc<dyn Store> {
        match &self.postgres {
            Some(url) => {
                let store = PgStore::connect(url).await.unwrap();
                Arc::new(match bucket {
                    Some(bucket) => store.with_blobs(bucket),
                    None => store,
                })
            }
            None => {
                let store = SqliteStore::open(&self.dir.join("agwire.db"))
                    .await
                    .unwrap();
                Arc::new(match bucket {
                    Some(bucket) => store.with_blobs(bucket),
                    None => store,
                })
            }
        }
    }

    /// A store on it whose runs another process takes over `lease` after
    /// it stops (PostgreSQL's replicas); SQLite has one process, whose
    /// start ends what the last one left.
    pub async fn open_with_lease(&self, lease: std::time::Duration) -> Arc<dyn Store> {
        match &self.postgres {
            Some(url) => Arc::new(PgStore::connect_with_lease(url, lease).await.unwrap()),
            None => self.open().await,
        }
    }
}

/// The server's database opened again (a restart).
pub async fn reopen(server: &Server) -> Arc<dyn Store> {
    server.database.open().await
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

/// Serves runs on `brain` with `config` and `auth`.
pub async fn start_brain_with(
    config: &Config,
    auth: Auth,
    brain: Arc<dyn agwire_service::brain::Brain>,
) -> Server {
    start_service(config, auth, |service| service.with_brain(brain)).await
}

async fn start_service(
    config: &Config,
    auth: Auth,
    setup: impl FnOnce(Service) -> Service,
) -> Server {
    start_on(Database::fresh("service").await, config, auth, setup).await
}

/// Serves a service on `database` (another process's, or a fresh one).
pub async fn start_on(
    database: Database,
    config: &Config,
    auth: Auth,
    setup: impl FnOnce(Service) -> Service,
) -> Server {
    // The bucket pass: a bucket for a service that was given none.
    let mut config = config.clone();
    let weed = if in_bucket() && config.attachments.url.is_none() {
        let weed = tokio::task::spawn_blocking(SeaweedFs::start)
            .await
            .unwrap()
            .expect("AGWIRE_TEST_ATTACHMENTS=bucket needs SeaweedFS (AGWIRE_TEST_WEED)");
        let prefix = use_bucket(&weed, &mut config);
        eprintln!(
            "attachments under test: {}/{BUCKET}/{prefix}",
            weed.endpoint
        );
        Some((weed, prefix))
    } else {
        None
    };
    let config = &config;
    // The configured bucket, as `agwire serve` opens it.
    let bucket = match &config.attachments.url {
        Some(url) => Some(Arc::new(
            Bucket::open(url, &config.attachments).await.unwrap(),
        )),
        None => None,
    };
    let store = database.open_with_bucket(bucket.clone()).await;
    let dir = database.dir.clone();
    let mut attachments = agwire_service::attachments::Attachments::open(&dir).unwrap();
    if let Some(bucket) = bucket {
        attachments = attachments.with_bucket(bucket);
    }
    attachments.max_bytes = config.attachments.max_bytes;
    attachments.ttl_seconds = config.attachments.url_ttl_seconds;
    let service = setup(Service::new(store, Arc::new(BuiltinAgent::default())))
        .with_config(config)
        .with_attachments(attachments)
        .with_auth(auth);
    service.start().await.unwrap();
    let addr = listen(&service).await;
    Server {
        addr,
        service,
        dir,
        database,
        bucket: weed,
    }
}

/// Serves `service` on 127.0.0.1:0 (with its own HTTP settings); its
/// address.
pub async fn listen(service: &Service) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (service, app) = (service.clone(), service.router());
    tokio::spawn(async move {
        service
            .serve(listener, app, std::future::pending())
            .await
            .unwrap();
    });
    addr
}

/// Default configuration, fast built-in agent, no auth.
pub async fn serve() -> SocketAddr {
    start(&Config::default(), BuiltinAgent::default(), Auth::none())
        .await
        .addr
}

/// An agent-run API request with one user message.
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
    // The stream ends with the run: bounded, so a run that never ends fails.
    let bytes = tokio::time::timeout(std::time::Duration::from_secs(120), response.bytes())
        .await
        .unwrap_or_else(|_| panic!("{run_id}: the stream did not end within 120 s"))
        .unwrap();
    sse_with_ids(&bytes)
}

/// Follows the run's stream until its first text delta arrives (fails
/// after 30 s, or if the run ends without one).
pub async fn wait_for_text(addr: SocketAddr, run_id: &str) {
    let mut response = reqwest_like(addr, &format!("/api/v1/agent/runs/{run_id}/events"))
        .send()
        .await
        .unwrap();
    let mut decoder = agwire_codec::sse::SseEventDecoder::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("{run_id}: no text within 30 s"))
            .unwrap()
            .unwrap_or_else(|| panic!("{run_id}: ended without text"));
        let mut events = Vec::new();
        decoder.push(&chunk, &mut events).unwrap();
        if events
            .iter()
            .any(|e| matches!(e, Event::TextMessageContent(_)))
        {
            return;
        }
    }
}

/// A random generator for `test`, seeded from `AGWIRE_TEST_SEED` or afresh;
/// the seed is printed, so a failure can be repeated.
pub fn seeded_rng(test: &str) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    let seed = std::env::var("AGWIRE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: random choices seeded with {seed} (AGWIRE_TEST_SEED={seed} repeats them)");
    rand::rngs::StdRng::seed_from_u64(seed)
}

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

/// [`wait_status`] for a run of the user `token` (a bearer token) names.
pub async fn wait_status_as(addr: SocketAddr, run_id: &str, want: &str, token: &str) -> Value {
    let read = || async {
        reqwest::Client::new()
            .get(format!("http://{addr}/api/v1/agent/runs/{run_id}"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let status = read().await;
        if status["status"] == want {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "run {run_id} never reached {want}: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Runs `interop/httpagent.mjs` (the official `HttpAgent`) on `spec`; `None`
/// when the interop peers are not installed (and not required).
pub async fn http_agent(spec: &Value) -> Option<Value> {
    let interop = peers::interop_dir()?;
    Some(http_agent_peer::run(&interop, spec).await)
}

use agwire_testkit::http_agent as http_agent_peer;
pub use agwire_testkit::peers;

/// How a run's log ended (`RUN_FINISHED`'s outcome); panics if it did not finish.
pub fn outcome(log: &[(u64, Event)]) -> Option<agwire_client::core::RunFinishedOutcome> {
    match log.last() {
        Some((_, Event::RunFinished(e))) => e.outcome.clone(),
        other => panic!("not finished: {other:?}"),
    }
}

/// Today's history of a thread as (role, text) pairs.
pub async fn history(addr: SocketAddr, thread: &str) -> Vec<(String, String)> {
    let snapshot = get_json(addr, &format!("/api/v1/agent/history?threadId={thread}")).await;
    snapshot["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
