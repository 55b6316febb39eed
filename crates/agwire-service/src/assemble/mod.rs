//! The service assembled from a [`Config`], as `agwire serve` runs it: the
//! store and the attachments' bucket, attachments and their signing key,
//! auth, the agent catalogue, the model; then the background tasks (the job
//! scheduler, the bucket's hourly sweep), and the drain a shutdown starts.
//! (Serving is `api/`'s: nothing here knows axum.)

mod brain;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::attachments::{Attachments, Bucket};
use crate::auth::Auth;
use crate::brain::agents::RuntimeConfig;
use crate::config::{AuthConfig, Config};
use crate::error::Error;
use crate::store::{PgStore, SqliteStore, Store};
use crate::{BuiltinAgent, Service};

/// How often the scheduler looks for due jobs.
const SCHEDULER_PERIOD: Duration = Duration::from_secs(1);
/// The bucket's first sweep comes this long after the start (not at once:
/// a replica restarting in a loop would sweep in a loop)…
const FIRST_SWEEP_AFTER: Duration = Duration::from_secs(60);
/// …then one every this long.
const SWEEP_PERIOD: Duration = Duration::from_secs(3600);

/// Where the service keeps what it keeps: the configured store, and the
/// attachments' bucket when one is configured (the store puts new
/// attachments there).
#[derive(Clone)]
pub struct Storage {
    /// PostgreSQL (`[store] url`), else SQLite at `data_dir/agwire.db`.
    pub store: Arc<dyn Store>,
    /// `[attachments] url`'s bucket.
    pub bucket: Option<Arc<Bucket>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// Opens the configured bucket (reached — a URL presigned — before
    /// anything starts), then the configured store with it.
    pub async fn open(config: &Config) -> Result<Self, Error> {
        let bucket = match &config.attachments.url {
            Some(url) => Some(Arc::new(Bucket::open(url, &config.attachments).await?)),
            None => None,
        };
        let store: Arc<dyn Store> = match &config.store.url {
            Some(url) => {
                let lease = Duration::from_secs(config.store.lease_seconds);
                let store = PgStore::connect_with_lease(url, lease).await?;
                Arc::new(match bucket.clone() {
                    Some(bucket) => store.with_blobs(bucket),
                    None => store,
                })
            }
            None => {
                let path = config.data_dir.join("agwire.db");
                let store = SqliteStore::open(&path)
                    .await
                    .map_err(|source| Error::OpenDatabase { path, source })?;
                Arc::new(match bucket.clone() {
                    Some(bucket) => store.with_blobs(bucket),
                    None => store,
                })
            }
        };
        Ok(Self { store, bucket })
    }

    /// Removes what a crash left in the bucket (see
    /// [`attachments::sweep`](crate::attachments::sweep)): how many objects,
    /// or `None` without a bucket.
    pub async fn sweep_bucket(&self) -> Result<Option<u64>, Error> {
        let Some(bucket) = &self.bucket else {
            return Ok(None);
        };
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let removed = crate::attachments::sweep(
            &*self.store,
            bucket,
            crate::attachments::SWEEP_GRACE_SECONDS,
            now_s,
        )
        .await?;
        Ok(Some(removed))
    }
}

impl Service {
    /// The service `config` describes, started, as `agwire serve` runs it:
    /// the store (PostgreSQL, else SQLite in the data dir) and the
    /// attachments' bucket, attachments signed with the key the database
    /// holds, auth (what it leaves open logged as warnings), the agent
    /// catalogue, and the model (the local model — fetched from the hub
    /// first if named `hf:…` — or the OpenAI-compatible provider, else the
    /// scripted model). Runs a crash interrupted end failed and queued ones
    /// execute; the job scheduler and the bucket's hourly sweep run in the
    /// background until [`Service::drain`].
    ///
    /// ```no_run
    /// # use agwire_service::{Config, Service};
    /// # async fn serve(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctrl_c = async { let _ = tokio::signal::ctrl_c().await; };
    /// let service = Service::from_config(&config).await?;
    /// let listener = tokio::net::TcpListener::bind(config.addr).await?;
    /// service.serve(listener, service.router(), service.drain_after(ctrl_c)).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn from_config(config: &Config) -> Result<Self, Error> {
        Self::from_config_with(config, crate::telemetry::Telemetry::off()).await
    }

    /// [`Service::from_config`], exporting traces and metrics with
    /// `telemetry` ([`Telemetry::start`](crate::telemetry::Telemetry::start)
    /// of `config.telemetry`; its layer must be in the subscriber).
    pub async fn from_config_with(
        config: &Config,
        telemetry: crate::telemetry::Telemetry,
    ) -> Result<Self, Error> {
        let data_dir = &config.data_dir;
        std::fs::create_dir_all(data_dir).map_err(|source| Error::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        let storage = Storage::open(config).await?;
        let mut attachments =
            Attachments::open(data_dir).map_err(|source| Error::AttachmentsDir {
                path: data_dir.clone(),
                source,
            })?;
        // Replicas sign with the key their database holds, so a URL one
        // signed verifies on all.
        if let Some(key) = storage.store.url_signing_key().await? {
            attachments = attachments.with_key(key);
        }
        if let Some(bucket) = &storage.bucket {
            attachments = attachments.with_bucket(bucket.clone());
        }
        attachments.max_bytes = config.attachments.max_bytes;
        attachments.ttl_seconds = config.attachments.url_ttl_seconds;
        let runtime = match &config.agents_file {
            Some(path) => RuntimeConfig::load(path)?,
            None => RuntimeConfig::builtin(),
        };
        let brain = brain::brain(config).await?;
        let service = Self::new(storage.store.clone(), Arc::new(BuiltinAgent::default()))
            .with_brain(brain)
            .with_runtime(runtime)
            .with_config(config)
            .with_attachments(attachments)
            .with_auth(auth_of(&config.auth))
            .with_telemetry(telemetry)
            .with_webhooks(crate::webhooks::Webhooks::from_config(&config.webhooks)?);
        service.start().await?;
        service.start_background(storage);
        Ok(service)
    }

    /// The scheduler, and with a bucket its hourly sweep (by every replica:
    /// a sweep is idempotent), as tasks [`Service::drain`] ends.
    fn start_background(&self, storage: Storage) {
        let (tasks, stop) = (&self.background.tasks, &self.background.stop);
        let scheduler = self.scheduler();
        let until_stopped = stop.clone();
        tasks.spawn(async move {
            // The scheduler stops by itself when the runs drain; the token
            // ends a pass still going after them.
            until_stopped
                .run_until_cancelled(scheduler.run(SCHEDULER_PERIOD))
                .await;
        });
        if storage.bucket.is_some() {
            let until_stopped = stop.clone();
            tasks.spawn(async move {
                until_stopped
                    .run_until_cancelled(sweep_every_hour(storage))
                    .await;
            });
        }
    }

    /// Waits for `shutdown`, then drains: no new runs are accepted, running
    /// ones get the configured grace period (`grace_seconds`), and the
    /// background tasks end (see [`Service::drain`]). Given to
    /// [`Service::serve`] as its shutdown, the listener keeps answering
    /// (streams, status, refusals) until the drain is over.
    pub async fn drain_after(&self, shutdown: impl Future<Output = ()>) {
        shutdown.await;
        let grace = self.options.grace;
        tracing::info!(
            ?grace,
            "shutting down: no new runs; running ones get the grace period"
        );
        self.drain(grace).await;
    }
}

/// Sweeps the bucket a minute after the start, then every hour.
async fn sweep_every_hour(storage: Storage) {
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + FIRST_SWEEP_AFTER,
        SWEEP_PERIOD,
    );
    loop {
        ticks.tick().await;
        match storage.sweep_bucket().await {
            Ok(None | Some(0)) => {}
            Ok(Some(removed)) => {
                tracing::info!(removed, "removed attachment objects no record names");
            }
            Err(error) => tracing::warn!(%error, "could not sweep the attachment bucket"),
        }
    }
}

/// How requests are authenticated, from `[auth]`; what that leaves open
/// (a JWKS without an audience or an issuer) is logged as warnings.
fn auth_of(config: &AuthConfig) -> Auth {
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
