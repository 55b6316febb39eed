//! `agwire.toml`: every setting of `agwire serve`, with the defaults a
//! newcomer gets when there is no file at all.
//!
//! Precedence, lowest first: defaults, the file, `AGWIRE_*` environment
//! variables and command-line flags (those two are the binary's). Unknown
//! keys are an error, so a typo never silently means "default".

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::Error;
use crate::run::MultitaskStrategy;

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on (loopback unless authentication is configured).
    pub addr: SocketAddr,
    /// Database, attachments and the URL-signing key live here.
    pub data_dir: PathBuf,
    /// Where runs, threads and the rest are stored.
    pub store: StoreConfig,
    /// The base URL clients reach the service by (`https://chat.example.com`),
    /// used in signed attachment URLs. Without it the request's `Host` is
    /// used, which is only right on loopback.
    pub public_url: Option<String>,
    /// Allow a non-loopback address without authentication.
    pub insecure_no_auth: bool,
    /// Seconds running runs get to finish on shutdown before they are
    /// cancelled.
    pub grace_seconds: u64,
    /// Bearer-token authentication.
    pub auth: AuthConfig,
    /// Connection limits and timeouts.
    pub http: HttpConfig,
    /// Run admission.
    pub runs: RunsConfig,
    /// Uploads.
    pub attachments: AttachmentsConfig,
    /// `/metrics`.
    pub metrics: MetricsConfig,
    /// The built-in agent (used until an LLM is configured).
    pub builtin: BuiltinConfig,
    /// The agent catalogue (`system_agents.yaml`); without it, the shipped
    /// one (a general and a calendar assistant).
    pub agents_file: Option<PathBuf>,
    /// The LLM provider.
    pub llm: LlmConfig,
    /// Signed webhooks on run end.
    pub webhooks: crate::webhooks::WebhooksConfig,
    /// Per-user limits.
    pub quotas: QuotasConfig,
    /// Traces and metrics over OTLP.
    pub telemetry: crate::telemetry::TelemetryConfig,
}

/// `[quotas]`: what each user may use, held in the store (so every replica
/// on one database counts together). Past a quota a run is refused with 429
/// `quota exceeded: …` and `Retry-After`, before anything is written;
/// `GET /api/v1/me/usage` shows a user their counts. Both are off unless
/// set.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuotasConfig {
    /// Runs a user may start in any 60 seconds (a sliding minute; automation
    /// jobs' runs count too), at most [`MAX_RUNS_PER_MINUTE`]: the check
    /// reads up to this many of the user's latest runs.
    pub runs_per_minute: Option<std::num::NonZeroU32>,
    /// Tokens (the runs' own usage: input and output) a user's runs may use
    /// in a UTC day; once reached, new runs wait for 00:00 UTC.
    pub tokens_per_day: Option<std::num::NonZeroU64>,
}

/// The largest `runs_per_minute`.
pub const MAX_RUNS_PER_MINUTE: u32 = 10_000;

impl QuotasConfig {
    /// The limits as the store checks them.
    pub fn limits(&self) -> agwire_store::Quotas {
        agwire_store::Quotas {
            runs_per_minute: self.runs_per_minute.map(std::num::NonZeroU32::get),
            tokens_per_day: self.tokens_per_day.map(std::num::NonZeroU64::get),
        }
    }
}

/// `[llm]`: an OpenAI-compatible provider, or a GGUF model run in-process
/// (`local_model`). With neither, the service runs the pipeline on its
/// deterministic scripted model and says so.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `https://api.openai.com/v1`, `http://localhost:11434/v1`, …
    pub base_url: Option<String>,
    /// Bearer key (prefer `AGWIRE_LLM_API_KEY` to writing it here).
    pub api_key: Option<String>,
    /// The worker's model.
    pub model: String,
    /// The router's model (default: the worker's).
    pub router_model: Option<String>,
    /// Retries before the answer starts (429, 5xx, connection errors).
    pub max_retries: u32,
    /// A GGUF file run in-process on the CPU (router and worker), or
    /// `hf:OWNER/REPO/FILE.gguf`, downloaded once into
    /// `data_dir/models`.
    pub local_model: Option<String>,
    /// Model calls that generate at once on the local model, batched into
    /// one forward pass per token (a router call may run beside them); the
    /// others wait in order.
    pub local_parallel: usize,
    /// CPU threads of the local model (default: every core).
    pub local_threads: Option<usize>,
    /// Tokens of context per model call (prompt and answer); the KV cache
    /// holds `local_parallel + 1` of them (one for router calls).
    pub local_context: u32,
    /// Model calls that may wait for the local model; past this, a run
    /// fails at once with `RUN_ERROR` code `model_busy`.
    pub local_queue: usize,
    /// The hub `hf:` names are fetched from (default
    /// `https://huggingface.co`; `AGWIRE_HF_ENDPOINT`).
    pub hub_endpoint: Option<String>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            api_key: None,
            model: "gpt-4o-mini".into(),
            router_model: None,
            max_retries: 3,
            local_model: None,
            local_parallel: 4,
            local_threads: None,
            local_context: 4096,
            local_queue: 64,
            hub_endpoint: None,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./agwire-data"),
            store: StoreConfig::default(),
            public_url: None,
            insecure_no_auth: false,
            grace_seconds: 10,
            auth: AuthConfig::default(),
            http: HttpConfig::default(),
            runs: RunsConfig::default(),
            attachments: AttachmentsConfig::default(),
            metrics: MetricsConfig::default(),
            builtin: BuiltinConfig::default(),
            agents_file: None,
            llm: LlmConfig::default(),
            webhooks: crate::webhooks::WebhooksConfig::default(),
            quotas: QuotasConfig::default(),
            telemetry: crate::telemetry::TelemetryConfig::default(),
        }
    }
}

/// `[store]`: without `url`, an embedded SQLite database in `data_dir` (one
/// process); with a PostgreSQL URL, a database any number of replicas share.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:password@host:5432/db` (prefer
    /// `AGWIRE_DATABASE_URL` to writing a password here).
    pub url: Option<String>,
    /// How long a replica's claim on a running run holds without renewal:
    /// a replica that dies has its running runs ended by a survivor this
    /// long (plus up to 5 s) after its last renewal. PostgreSQL only.
    pub lease_seconds: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: None,
            lease_seconds: 20,
        }
    }
}

/// `[auth]`: JWT bearer tokens (`sub` = user id, `exp` required), signed
/// with a shared HS256 secret and/or an identity provider's published keys
/// (see `auth`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The HS256 secret (at least 16 bytes). Without it and without
    /// `jwks_url` there is one local user.
    pub jwt_secret: Option<String>,
    /// Where the identity provider publishes its signing keys (a JWKS, e.g.
    /// `https://<project>.supabase.co/auth/v1/.well-known/jwks.json`):
    /// RS/PS/ES256/384 and EdDSA tokens are verified against them. Must be
    /// `https://`: plain `http://` only to `localhost`, 127.0.0.0/8 or
    /// `[::1]` (keys fetched over plain HTTP can be replaced on the path).
    /// Set `audience` with it: a provider signs the tokens of all its
    /// applications with the same keys (`agwire serve` warns without it).
    pub jwks_url: Option<String>,
    /// Required `aud`: a token's `aud` (a string or an array) must name it
    /// (Supabase: `"authenticated"`). Unset, `aud` is not checked.
    pub audience: Option<String>,
    /// Required `iss`, exactly (e.g. `https://<project>.supabase.co/auth/v1`).
    /// Unset, `iss` is not checked.
    pub issuer: Option<String>,
}

/// `auth.jwks_url` is fetched over HTTPS, or plain HTTP only to a loopback
/// host (a provider on the same machine, tests): keys fetched over plain
/// HTTP can be replaced by anyone on the path, and then any token verifies.
fn check_jwks_url(url: &str) -> Result<(), Error> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| Error::Config(format!("auth.jwks_url: '{url}' is not a URL ({e})")))?;
    let host = parsed.host_str().unwrap_or_default();
    match parsed.scheme() {
        "https" if !host.is_empty() => Ok(()),
        "http" if is_loopback_host(host) => Ok(()),
        "http" => Err(Error::Config(format!(
            "auth.jwks_url must be https:// (got '{url}'): signing keys fetched over plain HTTP can be replaced by anyone on the path, and then any token verifies; plain http:// is allowed only to localhost, 127.0.0.0/8 or [::1]"
        ))),
        _ => Err(Error::Config(format!(
            "auth.jwks_url must be an https:// URL, not '{url}'"
        ))),
    }
}

/// `localhost`, an address in 127.0.0.0/8 or `[::1]` (as `Url` writes
/// hosts: lower case, IPv4 normalised, IPv6 in brackets).
fn is_loopback_host(host: &str) -> bool {
    let unbracketed = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host == "localhost"
        || unbracketed
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `[http]`: what every connection and request may take, so that a client
/// that stalls, trickles or sends too much cannot hold the service's
/// resources. Every limit answers a JSON `{"detail"}` error.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Seconds a client has to send a request's headers, counted from when
    /// the service starts waiting for them: after connecting, and between
    /// requests on a kept-alive connection (the idle timeout). The
    /// connection is closed when they run out.
    pub header_read_timeout_seconds: u64,
    /// Seconds a write to a client may wait for it to take bytes (an open
    /// stream included: any progress restarts them). A client that stops
    /// reading is disconnected when they run out, and its stream dropped.
    pub write_timeout_seconds: u64,
    /// Seconds from a request's headers to its answer's head: reading the
    /// body and doing the work (a stream's body is not counted). 408 when
    /// they run out.
    pub request_timeout_seconds: u64,
    /// Largest total size of a request's headers (431 above it).
    pub max_header_bytes: usize,
    /// Most headers in one request (431 above it).
    pub max_headers: usize,
    /// Most connections open at once (streams included). Past it the
    /// service stops accepting: new clients wait in the kernel's queue
    /// until a connection closes. With the header limits it bounds what
    /// clients can make the connections hold: at most `max_header_bytes`
    /// + 12 KiB each while a request head arrives.
    pub max_connections: usize,
    /// Most connections open at once from one client address (an IPv4
    /// address, an IPv6 /64); past it a new one is answered 503 and closed,
    /// so that one client cannot hold all `max_connections`. 1,000 by
    /// default: a share, not a cap — a whole office behind one NAT address
    /// stays well within it, one client cannot take more than a tenth of
    /// the default limit. Behind a reverse proxy every connection comes
    /// from the proxy's address: set it to `max_connections` there (or 0,
    /// no share) and limit clients at the proxy.
    pub max_connections_per_peer: usize,
    /// Largest body of the routes that take small JSON documents (profile,
    /// jobs; 413 above it). Runs and uploads have their own limits.
    pub max_body_bytes: usize,
    /// Origins (`https://app.example.com`) whose pages may call the API
    /// from the browser (CORS). Empty, the default: none but the service's
    /// own (the web app it serves). `*` allows every origin — only sensible
    /// with bearer tokens, which a browser never sends on its own.
    pub cors_allowed_origins: Vec<String>,
    /// Host names the service answers besides loopback names
    /// (`localhost`, `*.localhost`), IP addresses and `public_url`'s host:
    /// `chat.example.com`, `.example.com` for a domain and its subdomains,
    /// `*` for any. Without authentication a request naming another host
    /// is refused (403), so that a page whose name an attacker points at
    /// 127.0.0.1 (DNS rebinding) cannot read the service; with
    /// authentication the list applies only when set.
    pub allowed_hosts: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_seconds: 10,
            write_timeout_seconds: 60,
            request_timeout_seconds: 60,
            max_header_bytes: 32 * 1024,
            max_headers: 100,
            max_connections: 10_000,
            max_connections_per_peer: 1000,
            max_body_bytes: 64 * 1024,
            cors_allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// `scheme://host[:port]`, as browsers send it in `Origin`.
fn is_origin(text: &str) -> bool {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    rest.is_some_and(|authority| {
        !authority.is_empty()
            && authority
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
    })
}

/// `[runs]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunsConfig {
    /// What a run posted to a thread that already has an active run gets,
    /// unless its request says (`?multitask_strategy=`): `reject` (409, the
    /// agent-run API's one active run per thread), `enqueue`, `interrupt` or
    /// `rollback`.
    pub busy_thread: MultitaskStrategy,
    /// Body limit of `POST /api/v1/agui` (full histories are larger than
    /// the agent-run API's single turn, whose 256 KiB limit is fixed by the contract).
    pub agui_max_payload_bytes: usize,
    /// Most runs executing at once on this process; the others wait queued
    /// (in order) and start as executions end.
    pub max_concurrent: usize,
    /// How long a frontend tool call a run leaves pending (an approval)
    /// waits for its answer; after that an answer is refused (409 `tool call
    /// <id> expired`) and the call is no longer listed. A duration such as
    /// `"24h"`, `"30m"` or `"7 days"`.
    #[serde(deserialize_with = "duration")]
    pub pending_tool_call_ttl: std::time::Duration,
}

/// Longest `pending_tool_call_ttl`.
const MAX_TOOL_CALL_TTL: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);

/// A positive duration of at most a year, written as jiff reads them
/// (`"24h"`, `"90 minutes"`, `"PT30M"`).
fn duration<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<std::time::Duration, D::Error> {
    use serde::de::Error as _;
    let text = String::deserialize(deserializer)?;
    let parsed: jiff::SignedDuration = text
        .parse()
        .map_err(|e| D::Error::custom(format!("invalid duration '{text}': {e}")))?;
    std::time::Duration::try_from(parsed)
        .ok()
        .filter(|d| !d.is_zero() && *d <= MAX_TOOL_CALL_TTL)
        .ok_or_else(|| {
            D::Error::custom(format!(
                "duration '{text}' must be positive and at most 365 days"
            ))
        })
}

impl Default for RunsConfig {
    fn default() -> Self {
        Self {
            busy_thread: MultitaskStrategy::Reject,
            agui_max_payload_bytes: 1024 * 1024,
            max_concurrent: 256,
            pending_tool_call_ttl: std::time::Duration::from_secs(24 * 3600),
        }
    }
}

/// `[attachments]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttachmentsConfig {
    /// Largest upload.
    pub max_bytes: usize,
    /// How long a signed URL stays valid.
    pub url_ttl_seconds: i64,
    /// An S3-compatible bucket for their bytes, `s3://bucket/prefix`
    /// (`AGWIRE_ATTACHMENTS_URL`); download URLs are then the bucket's own
    /// presigned URLs. Unset: files beside the embedded database, rows of
    /// a PostgreSQL one.
    pub url: Option<String>,
    /// The bucket's S3 endpoint (MinIO, SeaweedFS, Supabase Storage's
    /// `https://<project>.supabase.co/storage/v1/s3`); unset:
    /// `AWS_ENDPOINT_URL`, else AWS's for the region.
    pub endpoint: Option<String>,
    /// The bucket's region; unset: `AWS_REGION`, `AWS_DEFAULT_REGION`,
    /// else `us-east-1`.
    pub region: Option<String>,
    /// Address the bucket as `https://bucket.endpoint/key` (AWS's style)
    /// instead of `endpoint/bucket/key` (path style, the default: what
    /// MinIO, SeaweedFS and Supabase Storage take).
    pub virtual_hosted: bool,
    /// The bucket's access key id; unset: the AWS credential chain
    /// (`AWS_ACCESS_KEY_ID`, web identity, container, instance metadata).
    pub access_key_id: Option<String>,
    /// Its secret (prefer `AWS_SECRET_ACCESS_KEY` to writing it here).
    pub secret_access_key: Option<String>,
}

impl Default for AttachmentsConfig {
    fn default() -> Self {
        Self {
            max_bytes: 10 * 1024 * 1024,
            url_ttl_seconds: 3600,
            url: None,
            endpoint: None,
            region: None,
            virtual_hosted: false,
            access_key_id: None,
            secret_access_key: None,
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Serve `/metrics` without a token even when authentication is on
    /// (it holds counts only, no user data).
    pub public: bool,
}

/// `[builtin]`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BuiltinConfig {
    /// Pause between streamed words (demos, and tests that need runs in
    /// flight).
    pub token_delay_ms: u64,
}

impl Config {
    /// Reads `path`; a missing file is an error (it was asked for).
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        Self::parse(&text).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    /// Parses TOML text.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let config: Self = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config.check()?;
        Ok(config)
    }

    /// Rules no single field can state.
    pub fn check(&self) -> Result<(), Error> {
        if self
            .quotas
            .runs_per_minute
            .is_some_and(|n| n.get() > MAX_RUNS_PER_MINUTE)
        {
            return Err(Error::Config(format!(
                "quotas.runs_per_minute must be at most {MAX_RUNS_PER_MINUTE}"
            )));
        }
        for origin in &self.http.cors_allowed_origins {
            if origin != "*" && !is_origin(origin) {
                return Err(Error::Config(format!(
                    "http.cors_allowed_origins: '{origin}' is not an origin (scheme://host[:port], or *)"
                )));
            }
        }
        for host in &self.http.allowed_hosts {
            let name = host.strip_prefix('.').unwrap_or(host);
            let valid = host == "*"
                || (!name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)));
            if !valid {
                return Err(Error::Config(format!(
                    "http.allowed_hosts: '{host}' is not a host name (name, .domain, or *; no scheme or port)"
                )));
            }
        }
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(Error::Config(format!(
                "public_url must start with http:// or https:// (got '{url}')"
            )));
        }
        if self.auth.jwt_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err(Error::Config(
                "auth.jwt_secret must be at least 16 bytes".into(),
            ));
        }
        if self.http.header_read_timeout_seconds == 0
            || self.http.write_timeout_seconds == 0
            || self.http.request_timeout_seconds == 0
        {
            return Err(Error::Config(
                "http timeouts must be at least 1 second".into(),
            ));
        }
        if self.llm.local_model.is_some() && self.llm.base_url.is_some() {
            return Err(Error::Config(
                "llm.local_model and llm.base_url are both set: runs use one model source".into(),
            ));
        }
        if self.llm.local_parallel == 0
            || self.llm.local_threads == Some(0)
            || self.llm.local_queue == 0
        {
            return Err(Error::Config(
                "llm.local_parallel, llm.local_threads and llm.local_queue must be at least 1"
                    .into(),
            ));
        }
        if let Some(url) = &self.store.url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return Err(Error::Config(
                "store.url must be a postgres:// URL (without it: SQLite in data_dir)".into(),
            ));
        }
        if self.store.lease_seconds < 2 {
            return Err(Error::Config(
                "store.lease_seconds must be at least 2".into(),
            ));
        }
        if self.runs.max_concurrent == 0 {
            return Err(Error::Config(
                "runs.max_concurrent must be at least 1".into(),
            ));
        }
        if self.attachments.url_ttl_seconds <= 0 {
            return Err(Error::Config(
                "attachments.url_ttl_seconds must be positive".into(),
            ));
        }
        if let Some(url) = &self.auth.jwks_url {
            check_jwks_url(url)?;
        }
        let authenticated = self.auth.jwt_secret.is_some() || self.auth.jwks_url.is_some();
        if !self.addr.ip().is_loopback() && !self.insecure_no_auth && !authenticated {
            return Err(Error::Config(format!(
                "refusing to listen on {} without authentication: use a loopback address, set auth.jwt_secret (--jwt-secret) or auth.jwks_url (--jwt-jwks-url), or pass --insecure-no-auth",
                self.addr
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_file_means_loopback_sqlite_in_agwire_data() {
        let config = Config::parse("").unwrap();
        assert_eq!(config.addr.to_string(), "127.0.0.1:8080");
        assert_eq!(config.data_dir, PathBuf::from("./agwire-data"));
        assert_eq!(config.runs.busy_thread, MultitaskStrategy::Reject);
    }

    #[test]
    fn every_section_parses_and_typos_are_errors() {
        let config = Config::parse(
            r#"
addr = "127.0.0.1:9000"
data_dir = "/var/lib/agwire"
public_url = "https://chat.example.com"
grace_seconds = 3
[auth]
jwt_secret = "0123456789abcdef0123"
audience = "authenticated"
[runs]
busy_thread = "enqueue"
agui_max_payload_bytes = 2048
[attachments]
max_bytes = 100
url_ttl_seconds = 60
[metrics]
public = true
[builtin]
token_delay_ms = 5
"#,
        )
        .unwrap();
        assert_eq!(config.runs.busy_thread, MultitaskStrategy::Enqueue);
        assert_eq!(config.attachments.max_bytes, 100);
        assert_eq!(config.auth.audience.as_deref(), Some("authenticated"));
        assert!(config.metrics.public);
        let typo = Config::parse("[runs]\nbusy_threads = \"enqueue\"\n").unwrap_err();
        assert!(typo.to_string().contains("busy_threads"), "{typo}");
        let bad = Config::parse("[runs]\nbusy_thread = \"later\"\n").unwrap_err();
        assert!(bad.to_string().contains("later"), "{bad}");
        let rollback = Config::parse("[runs]\nbusy_thread = \"rollback\"\n").unwrap();
        assert_eq!(rollback.runs.busy_thread, MultitaskStrategy::Rollback);
        let ttl = Config::parse("[runs]\npending_tool_call_ttl = \"90 minutes\"\n").unwrap();
        assert_eq!(ttl.runs.pending_tool_call_ttl.as_secs(), 5400);
        for bad in ["0s", "-1h", "400 days", "soon"] {
            let refused =
                Config::parse(&format!("[runs]\npending_tool_call_ttl = \"{bad}\"\n")).unwrap_err();
            assert!(refused.to_string().contains(bad), "{refused}");
        }
        let quotas = Config::parse(
            "[quotas]
runs_per_minute = 30
tokens_per_day = 100000
",
        )
        .unwrap();
        assert_eq!(
            quotas.quotas.limits(),
            agwire_store::Quotas {
                runs_per_minute: Some(30),
                tokens_per_day: Some(100_000)
            }
        );
        for (bad, why) in [
            ("runs_per_minute = 0", "nonzero"),
            ("tokens_per_day = 0", "nonzero"),
            ("runs_per_minute = 10001", "at most 10000"),
            ("runs_per_hour = 5", "runs_per_hour"),
        ] {
            let refused = Config::parse(&format!("[quotas]\n{bad}\n")).unwrap_err();
            assert!(refused.to_string().contains(why), "{bad}: {refused}");
        }
    }

    #[test]
    fn the_example_file_lists_the_defaults() {
        let example = Config::parse(include_str!("../../../agwire.example.toml")).unwrap();
        let defaults = Config::default();
        assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn a_public_address_needs_auth_or_an_explicit_opt_out() {
        let open = Config::parse("addr = \"0.0.0.0:8080\"\n").unwrap_err();
        assert!(open.to_string().contains("refusing to listen"), "{open}");
        Config::parse("addr = \"0.0.0.0:8080\"\ninsecure_no_auth = true\n").unwrap();
        Config::parse("addr = \"0.0.0.0:8080\"\n[auth]\njwt_secret = \"0123456789abcdef\"\n")
            .unwrap();
        Config::parse("addr = \"0.0.0.0:8080\"\n[auth]\njwks_url = \"https://id.example/jwks\"\n")
            .unwrap();
        let short = Config::parse("[auth]\njwt_secret = \"short\"\n").unwrap_err();
        assert!(short.to_string().contains("16 bytes"), "{short}");
    }

    #[test]
    fn a_jwks_url_is_https_or_plain_http_on_loopback_only() {
        let with = |url: &str| Config::parse(&format!("[auth]\njwks_url = \"{url}\"\n"));
        for allowed in [
            "https://id.example/.well-known/jwks.json",
            "https://10.0.0.5:8443/jwks",
            "http://localhost:9999/jwks.json",
            "http://LOCALHOST/jwks.json",
            "http://127.0.0.1:4000/jwks.json",
            "http://127.8.9.10/jwks.json",
            "http://[::1]:4000/jwks.json",
        ] {
            with(allowed).unwrap_or_else(|e| panic!("{allowed}: {e}"));
        }
        for refused in [
            "http://id.example/.well-known/jwks.json",
            "http://10.0.0.5/jwks.json",
            "http://[::2]/jwks.json",
            "http://0.0.0.0/jwks.json",
            // Names that merely start like a loopback host.
            "http://localhost.evil.example/jwks.json",
            "http://127.0.0.1.nip.io/jwks.json",
            "http://localhost@id.example/jwks.json",
        ] {
            let error = with(refused).unwrap_err().to_string();
            assert!(
                error.contains("auth.jwks_url") && error.contains("plain HTTP"),
                "{refused}: {error}"
            );
        }
        for not_https in [
            "id.example/jwks",
            "ftp://id.example/jwks",
            "file:///etc/jwks.json",
        ] {
            let error = with(not_https).unwrap_err().to_string();
            assert!(error.contains("auth.jwks_url"), "{not_https}: {error}");
        }
    }
}
