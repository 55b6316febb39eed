//! `agwire serve`: the agent-run service, on embedded SQLite or on a
//! PostgreSQL database shared by several replicas.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agwire_llm::local::fetch::{self, HubFile};
use agwire_llm::local::{LocalConfig, LocalModel};
use agwire_llm::{ChatModel, OpenAiCompatible, OpenAiConfig};
use agwire_service::attachments::{Attachments, Bucket};
use agwire_service::auth::Auth;
use agwire_service::brain::Brain;
use agwire_service::brain::agents::RuntimeConfig;
use agwire_service::brain::llm::LlmBrain;
use agwire_service::config::{BusyThread, Config};
use agwire_service::store::{PgStore, SqliteStore, Store};
use agwire_service::{BuiltinAgent, Service};

/// Arguments of `agwire serve`. Each overrides the same setting of the
/// configuration file.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Configuration file (TOML; see `agwire.example.toml`).
    #[arg(long, env = "AGWIRE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "AGWIRE_ADDR")]
    addr: Option<SocketAddr>,
    /// Where the database, attachments and signing key live [default: ./agwire-data].
    #[arg(long, env = "AGWIRE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// PostgreSQL database shared by every replica
    /// (`postgres://user:password@host/db`) [default: SQLite in the data dir].
    #[arg(long, env = "AGWIRE_DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// An S3-compatible bucket for attachments, `s3://bucket/prefix`
    /// (endpoint, region and credentials: `[attachments]` or the AWS
    /// environment).
    #[arg(long, env = "AGWIRE_ATTACHMENTS_URL")]
    attachments_url: Option<String>,
    /// The URL clients reach the service by (used in signed attachment URLs).
    #[arg(long, env = "AGWIRE_PUBLIC_URL")]
    public_url: Option<String>,
    /// HS256 secret of the bearer tokens (JWT, `sub` = user id, `exp`
    /// required) every request must carry; without it there is one local user.
    #[arg(long, env = "AGWIRE_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// JWKS URL of the identity provider (Supabase, Auth0, Clerk, Keycloak):
    /// RS256/ES256/EdDSA tokens are verified against its keys, refetched on
    /// rotation. https:// (plain http:// only to a loopback host); set
    /// --jwt-audience with it.
    #[arg(long, env = "AGWIRE_JWT_JWKS_URL")]
    jwt_jwks_url: Option<String>,
    /// Required `aud` of the tokens (Supabase: authenticated).
    #[arg(long, env = "AGWIRE_JWT_AUDIENCE")]
    jwt_audience: Option<String>,
    /// Required `iss` of the tokens.
    #[arg(long, env = "AGWIRE_JWT_ISSUER")]
    jwt_issuer: Option<String>,
    /// Allow a non-loopback address although authentication is not configured.
    #[arg(long)]
    insecure_no_auth: bool,
    /// A run posted to a thread with an active run: reject (409) or enqueue.
    #[arg(long, env = "AGWIRE_BUSY_THREAD", value_parser = ["reject", "enqueue"])]
    busy_thread: Option<String>,
    /// How long running runs may take to finish on shutdown [default: 10].
    #[arg(long, env = "AGWIRE_GRACE", value_name = "SECONDS")]
    grace: Option<u64>,
    /// Pause between the scripted model's streamed pieces, in milliseconds.
    #[arg(long, env = "AGWIRE_BUILTIN_TOKEN_DELAY_MS", hide = true)]
    builtin_token_delay_ms: Option<u64>,
    /// The agent catalogue (`system_agents.yaml`).
    #[arg(long = "agents", env = "AGWIRE_AGENTS_FILE", value_name = "FILE")]
    agents_file: Option<PathBuf>,
    /// OpenAI-compatible base URL (without it: the scripted model).
    #[arg(long, env = "AGWIRE_LLM_BASE_URL")]
    llm_base_url: Option<String>,
    /// The provider's key.
    #[arg(long, env = "AGWIRE_LLM_API_KEY", hide_env_values = true)]
    llm_api_key: Option<String>,
    /// The worker's model.
    #[arg(long, env = "AGWIRE_LLM_MODEL")]
    llm_model: Option<String>,
    /// The router's model.
    #[arg(long, env = "AGWIRE_LLM_ROUTER_MODEL")]
    llm_router_model: Option<String>,
    /// A GGUF model run in-process on the CPU: a file, or
    /// hf:OWNER/REPO/FILE.gguf (downloaded once into the data dir).
    #[arg(
        long = "model",
        env = "AGWIRE_LLM_LOCAL_MODEL",
        value_name = "PATH.gguf"
    )]
    local_model: Option<String>,
    /// Model calls generating at once on the local model, batched
    /// [default: 4].
    #[arg(long = "model-parallel", env = "AGWIRE_LLM_LOCAL_PARALLEL")]
    local_parallel: Option<usize>,
    /// CPU threads of the local model [default: every core].
    #[arg(long = "model-threads", env = "AGWIRE_LLM_LOCAL_THREADS")]
    local_threads: Option<usize>,
    /// Model calls that may wait for the local model [default: 64].
    #[arg(long = "model-queue", env = "AGWIRE_LLM_LOCAL_QUEUE")]
    local_queue: Option<usize>,
}

impl ServeArgs {
    /// Defaults, then the file, then environment and flags.
    fn config(&self) -> Result<Config, String> {
        let mut config = match &self.config {
            Some(path) => Config::load(path).map_err(|e| e.to_string())?,
            None => Config::default(),
        };
        if let Some(addr) = self.addr {
            config.addr = addr;
        }
        if let Some(dir) = &self.data_dir {
            config.data_dir.clone_from(dir);
        }
        if let Some(url) = self.database_url.as_ref().filter(|u| !u.is_empty()) {
            config.store.url = Some(url.clone());
        }
        if let Some(url) = &self.public_url {
            config.public_url = Some(url.clone());
        }
        if let Some(url) = self.attachments_url.as_ref().filter(|u| !u.is_empty()) {
            config.attachments.url = Some(url.clone());
        }
        if let Some(secret) = &self.jwt_secret {
            config.auth.jwt_secret = Some(secret.clone());
        }
        if let Some(url) = &self.jwt_jwks_url {
            config.auth.jwks_url = Some(url.clone());
        }
        if let Some(audience) = &self.jwt_audience {
            config.auth.audience = Some(audience.clone());
        }
        if let Some(issuer) = &self.jwt_issuer {
            config.auth.issuer = Some(issuer.clone());
        }
        config.insecure_no_auth |= self.insecure_no_auth;
        match self.busy_thread.as_deref() {
            Some("enqueue") => config.runs.busy_thread = BusyThread::Enqueue,
            Some(_) => config.runs.busy_thread = BusyThread::Reject,
            None => {}
        }
        if let Some(grace) = self.grace {
            config.grace_seconds = grace;
        }
        if let Some(delay) = self.builtin_token_delay_ms {
            config.builtin.token_delay_ms = delay;
        }
        if let Some(file) = &self.agents_file {
            config.agents_file = Some(file.clone());
        }
        if let Some(url) = self.llm_base_url.as_ref().filter(|u| !u.is_empty()) {
            config.llm.base_url = Some(url.clone());
        }
        if let Some(key) = self.llm_api_key.as_ref().filter(|k| !k.is_empty()) {
            config.llm.api_key = Some(key.clone());
        }
        if let Some(model) = &self.llm_model {
            config.llm.model.clone_from(model);
        }
        if let Some(model) = &self.llm_router_model {
            config.llm.router_model = Some(model.clone());
        }
        if let Some(model) = self.local_model.as_ref().filter(|m| !m.is_empty()) {
            config.llm.local_model = Some(model.clone());
        }
        if let Some(parallel) = self.local_parallel {
            config.llm.local_parallel = parallel;
        }
        if let Some(queue) = self.local_queue {
            config.llm.local_queue = queue;
        }
        if let Some(threads) = self.local_threads {
            config.llm.local_threads = Some(threads);
        }
        if let Ok(endpoint) = std::env::var("AGWIRE_HF_ENDPOINT")
            && !endpoint.is_empty()
        {
            config.llm.hub_endpoint = Some(endpoint);
        }
        config.check().map_err(|e| e.to_string())?;
        Ok(config)
    }
}

/// Every open stream holds a socket: the soft limit on open files (often
/// 1,024) is raised to the hard one, as far as the system lets this process
/// go, so streams are not refused long before memory runs short. Returns the
/// limit now in force (0 when it cannot be read).
fn raise_open_files_limit() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "could not raise the open-files limit");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(0, |(soft, _)| soft)
        }
    }
}

/// The configured store (PostgreSQL, else SQLite in the data directory),
/// putting new attachments in `bucket` if given.
async fn open_store(
    config: &Config,
    bucket: Option<Arc<Bucket>>,
) -> Result<Arc<dyn Store>, String> {
    Ok(match &config.store.url {
        Some(url) => {
            let store =
                PgStore::connect_with_lease(url, Duration::from_secs(config.store.lease_seconds))
                    .await
                    .map_err(|e| e.to_string())?;
            Arc::new(match bucket {
                Some(bucket) => store.with_bucket(bucket),
                None => store,
            })
        }
        None => {
            let db = config.data_dir.join("agwire.db");
            let store = SqliteStore::open(&db)
                .await
                .map_err(|e| format!("{}: {e}", db.display()))?;
            Arc::new(match bucket {
                Some(bucket) => store.with_bucket(bucket),
                None => store,
            })
        }
    })
}

/// Now, in seconds since the epoch.
fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Sweeps the bucket (see `agwire attachments sweep`) a minute after the
/// start, then every hour.
async fn sweep_every_hour(store: Arc<dyn Store>, bucket: Arc<Bucket>) {
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + Duration::from_secs(60),
        Duration::from_secs(3600),
    );
    loop {
        ticks.tick().await;
        let now_s = unix_seconds();
        match agwire_service::attachments::sweep(
            &*store,
            &bucket,
            agwire_service::attachments::SWEEP_GRACE_SECONDS,
            now_s,
        )
        .await
        {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "removed attachment objects no record names"),
            Err(error) => tracing::warn!(%error, "could not sweep the attachment bucket"),
        }
    }
}

/// `agwire attachments …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum AttachmentsCommand {
    /// Move the attachments kept beside the database (files of an embedded
    /// one, rows of PostgreSQL) into the bucket `[attachments] url` names:
    /// each copied, read back, compared by SHA-256, then recorded as
    /// there. Idempotent and resumable: run it again after any failure.
    /// Takes `agwire serve`'s settings; with SQLite, stop the service
    /// first.
    CopyToBucket(ServeArgs),
    /// Remove what a crash left in the bucket: attachment objects no record
    /// names, older than an hour (`agwire serve` does this every hour too).
    Sweep(ServeArgs),
}

pub(crate) async fn attachments(command: AttachmentsCommand) -> Result<(), String> {
    let (args, sweeping) = match command {
        AttachmentsCommand::CopyToBucket(args) => (args, false),
        AttachmentsCommand::Sweep(args) => (args, true),
    };
    let config = args.config()?;
    let url = config
        .attachments
        .url
        .as_deref()
        .ok_or("no bucket is configured: set [attachments] url or AGWIRE_ATTACHMENTS_URL")?;
    let bucket = Arc::new(
        Bucket::open(url, &config.attachments)
            .await
            .map_err(|e| e.to_string())?,
    );
    let store = open_store(&config, Some(bucket.clone())).await?;
    use std::io::Write;
    if sweeping {
        let now_s = unix_seconds();
        let removed = agwire_service::attachments::sweep(
            &*store,
            &bucket,
            agwire_service::attachments::SWEEP_GRACE_SECONDS,
            now_s,
        )
        .await
        .map_err(|e| e.to_string())?;
        let _ = writeln!(
            std::io::stdout(),
            "{removed} objects without a record removed from {url}"
        );
        return Ok(());
    }
    let copied = agwire_service::attachments::copy_to_bucket(&*store, &bucket, |id, size| {
        let _ = writeln!(std::io::stdout(), "moved {id} ({size} bytes)");
    })
    .await
    .map_err(|e| e.to_string())?;
    let _ = writeln!(
        std::io::stdout(),
        "{} attachments moved to {url} ({} bytes); {} records had no bytes",
        copied.moved,
        copied.bytes,
        copied.missing
    );
    Ok(())
}

pub(crate) async fn serve(args: ServeArgs) -> Result<(), String> {
    let config = args.config()?;
    let data_dir = &config.data_dir;
    std::fs::create_dir_all(data_dir)
        .map_err(|e| format!("data dir {}: {e}", data_dir.display()))?;
    // The attachments' bucket, when one is configured: reached (a URL
    // presigned) before anything starts.
    let bucket = match &config.attachments.url {
        Some(url) => Some(Arc::new(
            Bucket::open(url, &config.attachments)
                .await
                .map_err(|e| e.to_string())?,
        )),
        None => None,
    };
    let store = open_store(&config, bucket.clone()).await?;
    // What a crash left in the bucket is removed every hour (by every
    // replica: a sweep is idempotent).
    let (swept_store, bucket_to_sweep) = (store.clone(), bucket.clone());
    let mut attachments = Attachments::open(data_dir)
        .map_err(|e| format!("attachments in {}: {e}", data_dir.display()))?;
    // Replicas sign with the key their database holds, so a URL one
    // signed verifies on all.
    if let Some(key) = store.url_signing_key().await.map_err(|e| e.to_string())? {
        attachments = attachments.with_key(key);
    }
    if let Some(bucket) = bucket {
        attachments = attachments.with_bucket(bucket);
    }
    attachments.max_bytes = config.attachments.max_bytes;
    attachments.ttl_seconds = config.attachments.url_ttl_seconds;
    let auth = auth_of(&config.auth);
    let runtime = match &config.agents_file {
        Some(path) => RuntimeConfig::load(path).map_err(|e| e.to_string())?,
        None => RuntimeConfig::builtin(),
    };
    let brain = brain(&config).await?;
    let service = Service::new(store, Arc::new(BuiltinAgent::default()))
        .with_brain(brain)
        .with_runtime(runtime)
        .with_config(&config)
        .with_attachments(attachments)
        .with_auth(auth);
    service.start().await.map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("{}: {e}", config.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let database = if config.store.url.is_some() {
        "postgres"
    } else {
        "sqlite"
    };
    let open_files = raise_open_files_limit();
    tracing::info!(%addr, data_dir = %data_dir.display(), database, busy_thread = ?config.runs.busy_thread, open_files, "agwire serve listening");
    {
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), "listening http://{addr}");
    }
    // The API, and the web app at / (agwire-web).
    let app = service.router_with(agwire_web::router());
    let scheduler = service.scheduler();
    tokio::spawn(async move { scheduler.run(Duration::from_secs(1)).await });
    if let Some(bucket) = bucket_to_sweep {
        tokio::spawn(sweep_every_hour(swept_store, bucket));
    }
    let draining = service.clone();
    let grace = Duration::from_secs(config.grace_seconds);
    let shutdown = async move {
        shutdown_signal().await;
        tracing::info!(
            ?grace,
            "shutting down: no new runs; running ones get the grace period"
        );
        draining.drain(grace).await;
    };
    service
        .serve(listener, app, shutdown)
        .await
        .map_err(|e| e.to_string())
}

/// The LLM pipeline on the configured provider, on the local model, or on
/// the scripted model.
async fn brain(config: &Config) -> Result<Arc<dyn Brain>, String> {
    let delay = Duration::from_millis(config.builtin.token_delay_ms);
    if let Some(spec) = &config.llm.local_model {
        let model: Arc<dyn ChatModel> = Arc::new(local_model(config, spec).await?);
        return Ok(Arc::new(LlmBrain::new(model.clone(), model)));
    }
    let Some(base_url) = &config.llm.base_url else {
        tracing::warn!("{}", agwire_service::brain::llm::SCRIPTED_NOTE);
        let model: Arc<dyn ChatModel> = Arc::new(agwire_service::brain::demo::model(delay));
        return Ok(Arc::new(LlmBrain::new(model.clone(), model)));
    };
    let provider = |model: &str| -> Result<Arc<dyn ChatModel>, String> {
        let mut llm = OpenAiConfig::new(base_url.clone(), model);
        llm.api_key.clone_from(&config.llm.api_key);
        llm.max_retries = config.llm.max_retries;
        Ok(Arc::new(
            OpenAiCompatible::new(llm).map_err(|e| e.to_string())?,
        ))
    };
    let worker = provider(&config.llm.model)?;
    let router = match &config.llm.router_model {
        Some(model) => provider(model)?,
        None => worker.clone(),
    };
    tracing::info!(base_url, model = config.llm.model, "LLM provider");
    Ok(Arc::new(LlmBrain::new(router, worker)))
}

/// The local model: the file, or the hub's file fetched into the data
/// dir's model cache first; loaded off the async threads.
async fn local_model(config: &Config, spec: &str) -> Result<LocalModel, String> {
    let path = match HubFile::parse(spec) {
        None => PathBuf::from(spec),
        Some(file) => {
            let file = file.map_err(|e| e.to_string())?;
            let cache = config.data_dir.join("models");
            let endpoint = config
                .llm
                .hub_endpoint
                .as_deref()
                .unwrap_or(fetch::DEFAULT_ENDPOINT);
            let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
            let name = file.file.clone();
            fetch::fetch(&file, &cache, endpoint, token.as_deref(), |p| {
                let percent = p.done * 100 / p.total.max(1);
                tracing::info!(
                    file = name,
                    "downloading the model: {percent}% ({} of {} MB)",
                    p.done >> 20,
                    p.total >> 20
                );
            })
            .await
            .map_err(|e| e.to_string())?
        }
    };
    let mut local = LocalConfig::new(path);
    local.parallel = config.llm.local_parallel;
    // One engine runs every call: it takes every core unless told.
    if let Some(threads) = config.llm.local_threads {
        local.threads = threads;
    }
    local.context = config.llm.local_context;
    local.queue = config.llm.local_queue;
    tokio::task::spawn_blocking(move || LocalModel::load(local))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// How requests are authenticated, from `[auth]`; what that leaves open
/// (a JWKS without an audience or an issuer) is logged as warnings.
fn auth_of(config: &agwire_service::config::AuthConfig) -> Auth {
    if config.jwt_secret.is_none() && config.jwks_url.is_none() {
        return Auth::none();
    }
    let mut auth = Auth::none();
    if let Some(secret) = &config.jwt_secret {
        auth = auth.with_secret(secret.as_bytes().to_vec());
    }
    if let Some(url) = &config.jwks_url {
        auth = auth.with_jwks(url.clone());
    }
    if let Some(audience) = &config.audience {
        auth = auth.with_audience(audience);
    }
    if let Some(issuer) = &config.issuer {
        auth = auth.with_issuer(issuer);
    }
    for warning in auth.warnings() {
        tracing::warn!("{warning}");
    }
    auth
}
