//! `agwire serve`: the agent-run service, on embedded SQLite or on a
//! PostgreSQL database shared by several replicas.

use std::net::SocketAddr;
use std::path::PathBuf;

use agwire_service::config::Config;
use agwire_service::run::MultitaskStrategy;
use agwire_service::{Service, Storage};

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
    /// Where run ends are posted as signed webhooks (`[webhooks] url`).
    #[arg(long, env = "AGWIRE_WEBHOOK_URL")]
    webhook_url: Option<String>,
    /// The webhooks' signing secret, whsec_… (`[webhooks] secret`).
    #[arg(long, env = "AGWIRE_WEBHOOK_SECRET", hide_env_values = true)]
    webhook_secret: Option<String>,
    /// Runs a user may start in any 60 seconds (`[quotas] runs_per_minute`).
    #[arg(long, env = "AGWIRE_QUOTA_RUNS_PER_MINUTE", value_name = "N")]
    quota_runs_per_minute: Option<std::num::NonZeroU32>,
    /// Tokens a user's runs may use in a UTC day (`[quotas] tokens_per_day`).
    #[arg(long, env = "AGWIRE_QUOTA_TOKENS_PER_DAY", value_name = "N")]
    quota_tokens_per_day: Option<std::num::NonZeroU64>,
    /// A run posted to a thread with an active run, unless its request says
    /// (`?multitask_strategy=`): reject (409), enqueue, interrupt or rollback.
    #[arg(long, env = "AGWIRE_BUSY_THREAD", value_parser = ["reject", "enqueue", "interrupt", "rollback"])]
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
    pub(crate) fn config(&self) -> Result<Config, String> {
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
        if let Some(url) = &self.webhook_url {
            config.webhooks.url = Some(url.clone());
        }
        if let Some(secret) = &self.webhook_secret {
            config.webhooks.secret = Some(secret.clone());
        }
        if let Some(limit) = self.quota_runs_per_minute {
            config.quotas.runs_per_minute = Some(limit);
        }
        if let Some(limit) = self.quota_tokens_per_day {
            config.quotas.tokens_per_day = Some(limit);
        }
        if let Some(strategy) = self
            .busy_thread
            .as_deref()
            .and_then(MultitaskStrategy::parse)
        {
            config.runs.busy_thread = strategy;
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
    let no_bucket = "no bucket is configured: set [attachments] url or AGWIRE_ATTACHMENTS_URL";
    let url = config.attachments.url.as_deref().ok_or(no_bucket)?;
    let storage = Storage::open(&config).await.map_err(|e| e.to_string())?;
    use std::io::Write;
    if sweeping {
        let removed = storage
            .sweep_bucket()
            .await
            .map_err(|e| e.to_string())?
            .ok_or(no_bucket)?;
        let _ = writeln!(
            std::io::stdout(),
            "{removed} objects without a record removed from {url}"
        );
        return Ok(());
    }
    let bucket = storage.bucket.as_deref().ok_or(no_bucket)?;
    let copied =
        agwire_service::attachments::copy_to_bucket(&*storage.store, bucket, |id, size| {
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

pub(crate) async fn serve(
    config: &Config,
    telemetry: agwire_service::telemetry::Telemetry,
) -> Result<(), String> {
    let service = Service::from_config_with(config, telemetry)
        .await
        .map_err(|e| e.to_string())?;
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
    tracing::info!(%addr, data_dir = %config.data_dir.display(), database, busy_thread = ?config.runs.busy_thread, open_files, "agwire serve listening");
    {
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), "listening http://{addr}");
    }
    // The API, and the web app at / (agwire-web).
    let app = service.router_with(agwire_web::router());
    service
        .serve(listener, app, service.drain_after(shutdown_signal()))
        .await
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
