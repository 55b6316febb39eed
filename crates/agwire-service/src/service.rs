//! The service: the run engine behind the HTTP API, with the settings the
//! API reads on every request. `Service::router` (in [`crate::api`]) is what
//! a binary or an embedder mounts.

use std::sync::Arc;
use std::time::Duration;

use agwire_server::DynAgent;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::attachments::Attachments;
use crate::auth::Auth;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::Error;
use crate::run::MultitaskStrategy;
use crate::store::Store;

/// The service: the run engine behind the HTTP API, with the API's own
/// settings (auth, limits, uploads). A handle: every request's handler gets
/// a clone, which is one reference count, not a copy of the engine's
/// handles and the settings.
#[derive(Clone)]
pub struct Service(Arc<Shared>);

/// What every clone of a [`Service`] shares.
#[derive(Clone)]
pub struct Shared {
    pub(crate) engine: Engine,
    pub(crate) attachments: Option<Attachments>,
    pub(crate) auth: Auth,
    pub(crate) options: Options,
    pub(crate) background: Background,
    /// Where run ends are posted, if anywhere.
    pub(crate) webhooks: Option<crate::webhooks::Webhooks>,
}

/// The service's own tasks beside its runs (the job scheduler, the
/// bucket's sweep): started by [`Service::from_config`], ended by
/// [`Service::drain`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Background {
    pub(crate) tasks: TaskTracker,
    /// Cancelled once the runs have drained: whatever a task is still
    /// doing then is dropped, as the process exiting would.
    pub(crate) stop: CancellationToken,
}

/// The settings the HTTP layer reads on every request.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) busy_thread: MultitaskStrategy,
    pub(crate) agui_max_payload_bytes: usize,
    pub(crate) public_url: Option<String>,
    pub(crate) metrics_public: bool,
    pub(crate) http: crate::config::HttpConfig,
    /// How long running runs may take to finish on shutdown.
    pub(crate) grace: Duration,
}

impl Options {
    fn of(config: &Config) -> Self {
        Self {
            busy_thread: config.runs.busy_thread,
            agui_max_payload_bytes: config.runs.agui_max_payload_bytes,
            public_url: config
                .public_url
                .as_ref()
                .map(|u| u.trim_end_matches('/').to_owned()),
            metrics_public: config.metrics.public,
            http: config.http.clone(),
            grace: Duration::from_secs(config.grace_seconds),
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self::of(&Config::default())
    }
}

impl std::ops::Deref for Service {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl Service {
    /// The settings, to change while the service is built (copied only if
    /// a clone of it is already out).
    fn shared(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.0)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// A service over `store` running `agent`.
    pub fn new(store: Arc<dyn Store>, agent: Arc<dyn DynAgent>) -> Self {
        Self(Arc::new(Shared {
            engine: Engine::new(store, agent),
            attachments: None,
            auth: Auth::none(),
            options: Options::default(),
            background: Background::default(),
            webhooks: None,
        }))
    }

    /// What builds each run's agent (default: the agent given to
    /// [`Service::new`], for every run).
    pub fn with_brain(mut self, brain: Arc<dyn crate::brain::Brain>) -> Self {
        self.shared().engine.brain = brain;
        self
    }

    /// The agent catalogue runs choose from (default: the shipped one).
    pub fn with_runtime(mut self, runtime: crate::brain::agents::RuntimeConfig) -> Self {
        self.shared().engine.runtime = Arc::new(runtime);
        self
    }

    /// Applies the HTTP-level settings of `config` (busy-thread policy,
    /// `/api/v1/agui` body limit, public URL, `/metrics` access) and the
    /// engine's concurrency limit.
    pub fn with_config(mut self, config: &Config) -> Self {
        let shared = self.shared();
        shared.options = Options::of(config);
        shared.engine.max_concurrent = config.runs.max_concurrent;
        shared.engine.tool_call_ttl = config.runs.pending_tool_call_ttl;
        shared.engine.quotas = config.quotas.limits();
        self
    }

    /// Exports traces and metrics with `telemetry` (default: off). The
    /// spans are `tracing`'s: the subscriber must have
    /// [`Telemetry::layer`](crate::telemetry::Telemetry::layer) too.
    pub fn with_telemetry(mut self, telemetry: crate::telemetry::Telemetry) -> Self {
        let shared = self.shared();
        shared.engine.telemetry = telemetry;
        shared.engine.telemetry.register_metrics(&shared.engine);
        self
    }

    /// How requests are authenticated (default: none, one local user).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.shared().auth = auth;
        self
    }

    /// Accepts uploads and signs their URLs (without it, no URL passes the
    /// signed-URL rule).
    pub fn with_attachments(mut self, attachments: Attachments) -> Self {
        self.shared().attachments = Some(attachments);
        self
    }

    /// The run engine (the scheduler and embedders call it directly).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The job scheduler over this service's engine (`agwire serve` runs it
    /// once a second; tests call [`Scheduler::run_due_jobs`](crate::Scheduler::run_due_jobs) with their own
    /// clock).
    pub fn scheduler(&self) -> crate::Scheduler {
        crate::Scheduler::new(self.engine.clone())
    }

    /// Signed webhooks on run end (default: none).
    pub fn with_webhooks(mut self, webhooks: Option<crate::webhooks::Webhooks>) -> Self {
        self.shared().webhooks = webhooks;
        self
    }

    /// Starts the engine (see [`Engine::start`]), and with webhooks their
    /// delivery, a background task until [`Service::drain`]. The store is
    /// told whether run ends write webhook messages either way, so a
    /// service restarted without webhooks stops filling the outbox.
    pub async fn start(&self) -> Result<(), Error> {
        self.engine
            .store
            .set_webhooks_enabled(self.webhooks.is_some())
            .await?;
        self.engine.start().await?;
        if let Some(webhooks) = &self.webhooks {
            let deliverer = crate::webhooks::Deliverer::new(
                webhooks.clone(),
                self.engine.store.clone(),
                self.engine.metrics.clone(),
            )?;
            let stop = self.background.stop.clone();
            self.background.tasks.spawn(deliverer.run(stop));
        }
        Ok(())
    }

    /// Cancels every run in progress (shutdown); they finish as cancelled.
    pub fn cancel_all(&self) {
        self.engine.cancel_all();
    }

    /// Runs executing on this process now.
    pub fn running(&self) -> usize {
        self.engine.running()
    }

    /// Shutdown: the runs drain (see [`Engine::drain`]; the scheduler
    /// stops starting jobs' runs with them), then the background tasks end
    /// — none is left running when this returns.
    pub async fn drain(&self, grace: Duration) {
        self.engine.drain(grace).await;
        self.background.stop.cancel();
        self.background.tasks.close();
        self.background.tasks.wait().await;
    }

    /// The background tasks still running (the scheduler, the bucket's
    /// sweep): none before [`Service::from_config`] starts them, none after
    /// [`Service::drain`].
    pub fn background_tasks(&self) -> usize {
        self.background.tasks.len()
    }
}
