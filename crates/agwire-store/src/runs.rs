//! Runs and their event logs: what is asked of the store at each phase of
//! a run — accepted ([`NewRun`] → [`Accepted`]), claimed ([`Claimed`], with
//! the [`Briefing`] its agent reads), its events appended, ended
//! ([`Ending`]) — and what is read back ([`RunRecord`], [`Change`]).

use agwire_core::{Event, Message, RunAgentInput, RunStartedEvent};
use async_trait::async_trait;

use crate::Store;
use crate::error::Error;
use crate::quotas::Quotas;
#[cfg(doc)]
use crate::run::MultitaskStrategy;
use crate::run::{Admission, RunOptions, RunStatus, RuntimeMode};

/// A validated run to accept.
#[derive(Debug, Clone, Copy)]
pub struct NewRun<'a> {
    /// Its owner (and the owner of its thread, which it creates if new).
    pub user: &'a str,
    /// What it runs.
    pub input: &'a RunAgentInput,
    /// Identifies the request body: a re-post with the same hash is the same
    /// request.
    pub request_hash: &'a str,
    /// `forwardedProps.runtime_mode` (`None` on the standard endpoint).
    pub mode: Option<RuntimeMode>,
    /// What else its request said about it (`forwardedProps`), checked.
    pub options: &'a RunOptions,
    /// Busy-thread and history rules.
    pub admission: Admission,
    /// The limits its user's counts are checked against (service-wide).
    pub quotas: Quotas,
    /// When (ms since the epoch).
    pub now_ms: i64,
    /// Take the run for execution in the same write when it can start at
    /// once (see [`RunStore::accept_run`]).
    pub start: Option<&'a StartHere>,
}

/// How the accepting process takes a run it can execute at once: the claim
/// is part of the accept, so a run that starts right away costs one write,
/// not two (and no search of the queue).
#[derive(Clone)]
pub struct StartHere {
    /// Called with the started run's task id before the write commits (a
    /// cancel that sees the run `running` finds it).
    pub register: OnClaim,
    /// Called with it if that commit then fails.
    pub forget: OnClaim,
}

impl std::fmt::Debug for StartHere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartHere").finish_non_exhaustive()
    }
}

/// The answer to an accepted run (`TaskAcceptedResponse`).
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The task (this service's id for the run).
    pub task_id: String,
    /// The thread.
    pub thread_id: String,
    /// The client's run id.
    pub run_id: String,
    /// Whether the original request created the thread.
    pub created: bool,
    /// Whether this was a re-post of an accepted request (nothing new stored).
    pub replayed: bool,
    /// Whether the run waits behind the thread's active run (it starts when
    /// that one ends).
    pub waiting: bool,
    /// The run, taken for execution by the caller in the same write (asked
    /// for with [`NewRun::start`], when its thread was idle).
    pub started: Option<Claimed>,
    /// The thread's active runs this accept stopped (its strategy was
    /// [`MultitaskStrategy::Interrupt`] or [`MultitaskStrategy::Rollback`]),
    /// oldest first.
    pub stopped: Vec<Stopped>,
}

/// An active run an accept stopped to make way for its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The task id.
    pub task_id: String,
    /// Its client run id.
    pub run_id: String,
    /// It was waiting and ended in the accept's write: its whole log is
    /// [`cancelled_log`], numbered from this. `None`: it was running, and
    /// is asked to stop (kept with the run, so whichever process executes it
    /// hears it even if the word is lost); it ends as cancelled.
    pub ended: Option<u64>,
}

/// A run taken for execution by [`RunStore::claim_runnable`]: everything the
/// engine needs, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    /// The task id.
    pub task_id: String,
    /// Its owner.
    pub user_id: String,
    /// What it runs.
    pub input: RunAgentInput,
    /// `forwardedProps.runtime_mode` as accepted.
    pub mode: Option<RuntimeMode>,
    /// Its options as accepted.
    pub options: RunOptions,
    /// What its agent reads besides its input, read in the claim's own
    /// transaction by a backend that can do that without another trip to
    /// the database (`None`: read it afterwards, see
    /// [`Briefing::read`]).
    pub briefing: Option<Briefing>,
}

impl Claimed {
    /// Its task id and input, the rest dropped (with the box it came in).
    pub fn into_task(self: Box<Self>) -> (String, agwire_core::RunAgentInput) {
        let Self { task_id, input, .. } = *self;
        (task_id, input)
    }
}

/// Which messages of a thread a run's agent is given: the latest this many
/// of the roles in [`HISTORY_ROLES`] (what the model is sent; older turns
/// would cost every executing run memory — images inline — for nothing).
pub const HISTORY_WINDOW: u32 = 60;

/// The roles of a thread's messages a run's agent is given.
pub const HISTORY_ROLES: [&str; 5] = ["user", "assistant", "tool", "system", "developer"];

/// What a claimed run's agent reads from the store besides its input, as
/// stored (JSON text: parsed where the run executes, not where it was read).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Briefing {
    /// The owner's profile settings (`None`: never set).
    pub settings: Option<String>,
    /// The thread's latest [`HISTORY_WINDOW`] messages of
    /// [`HISTORY_ROLES`], oldest first (this turn's included).
    pub history: Vec<String>,
    /// The config of the automation job the thread belongs to (read for an
    /// automation run only).
    pub job_config: Option<String>,
}

impl Briefing {
    /// Reads it (for a run claimed without it): its history and the
    /// owner's settings in one read where the store has one
    /// ([`ThreadStore::recent_messages_and_settings`](crate::ThreadStore::recent_messages_and_settings)),
    /// else apart; the job's config only for an `automation` run.
    pub async fn read(
        store: &dyn Store,
        user: &str,
        thread_id: &str,
        automation: bool,
    ) -> Result<Self, Error> {
        let mut briefing = match store
            .recent_messages_and_settings(user, thread_id, HISTORY_WINDOW)
            .await?
        {
            Some((text, history)) => Self::from_stored(text.as_deref(), history)?,
            None => {
                let settings = store.settings(user).await?;
                Self {
                    settings: (!settings.is_empty())
                        .then(|| serde_json::to_string(&settings))
                        .transpose()?,
                    history: store.recent_messages(thread_id, HISTORY_WINDOW).await?,
                    job_config: None,
                }
            }
        };
        if automation {
            briefing.job_config = store
                .job_of_thread(user, thread_id)
                .await?
                .map(|job| job.config);
        }
        Ok(briefing)
    }

    /// A briefing (without a job's config) from the owner's settings as
    /// stored (`None`: never set) and the history: the settings as
    /// [`Briefing::read`] gives them — `None` when there are none.
    pub(crate) fn from_stored(settings: Option<&str>, history: Vec<String>) -> Result<Self, Error> {
        let settings: serde_json::Map<String, serde_json::Value> = match settings {
            Some(text) => serde_json::from_str(text)?,
            None => serde_json::Map::new(),
        };
        Ok(Self {
            settings: (!settings.is_empty())
                .then(|| serde_json::to_string(&settings))
                .transpose()?,
            history,
            job_config: None,
        })
    }
}

/// A run as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// The task id.
    pub task_id: String,
    /// Its owner.
    pub user_id: String,
    /// The thread.
    pub thread_id: String,
    /// The client's run id.
    pub run_id: String,
    /// Its state.
    pub status: RunStatus,
    /// Why it failed (`{message, code}` JSON).
    pub error: Option<String>,
    /// Token usage (AG-UI `TokenUsage` JSON).
    pub usage: Option<String>,
    /// Its options as accepted.
    pub options: RunOptions,
    /// When it was accepted (ms since the epoch).
    pub created_at: i64,
    /// When it started.
    pub started_at: Option<i64>,
    /// When it ended.
    pub finished_at: Option<i64>,
}

/// Everything the end of a run changes (see [`RunStore::end_run`]).
#[derive(Debug)]
pub struct Ending<'a> {
    /// A final status.
    pub status: RunStatus,
    /// Why it failed (`{message, code}`).
    pub error: Option<&'a serde_json::Value>,
    /// Token usage (AG-UI `TokenUsage`).
    pub usage: Option<&'a serde_json::Value>,
    /// The tokens that usage adds up to ([`crate::run_tokens`]): added to
    /// its user's count for the UTC day it ends (`tokens_per_day`; 0 while
    /// that quota is off, which writes nothing).
    pub tokens: u64,
    /// The run's events not yet in its log (none after its terminal one):
    /// written before the terminal event, in the same transaction — a run's
    /// last events and its end are one write, not two.
    pub events: &'a [Event],
    /// The `RUN_FINISHED` or `RUN_ERROR` event.
    pub terminal: &'a Event,
    /// What the run said (assistant and tool messages), for its thread.
    pub output: &'a [Message],
    /// The turn's `UiSchemaRenderer`, kept on its last assistant message.
    pub ui_schema: Option<&'a serde_json::Value>,
    /// When the frontend tool calls it leaves pending expire (ms since the
    /// epoch; `None`: never).
    pub calls_expire_at: Option<i64>,
}

/// The `RUN_STARTED` a log opens with when the agent never wrote one.
pub fn run_started(thread_id: &str, run_id: &str) -> Event {
    Event::RunStarted(RunStartedEvent::new(
        thread_id.to_owned(),
        run_id.to_owned(),
    ))
}

/// The whole log of a run cancelled before it started: `RUN_STARTED`, then
/// `RUN_FINISHED` with outcome `cancelled` (a valid AG-UI run).
pub fn cancelled_log(thread_id: &str, run_id: &str) -> [Event; 2] {
    [
        run_started(thread_id, run_id),
        Event::RunFinished(
            agwire_core::RunFinishedEvent::new(thread_id.to_owned(), run_id.to_owned())
                .outcome(agwire_core::RunFinishedOutcome::Cancelled),
        ),
    ]
}

/// Called with a claimed run's task id (before the claim commits, or after
/// its commit failed).
pub type OnClaim = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Runs and their event logs.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Accepts a validated run, or explains why not — atomically: either the
    /// thread (when new), the turn's messages and the run are all stored, or
    /// nothing is. Rules, in order: the same `(user, runId)` with the same
    /// request hash answers the original acceptance again (`replayed`,
    /// nothing stored); with another hash or thread it is
    /// [`Error::RunIdReused`]; a user past `run.quotas` — as many runs
    /// accepted in the last [`crate::RUN_WINDOW_MS`] as `runs_per_minute`
    /// (runs accepted under that quota: an accepted run is recorded while it
    /// is on), or as many tokens counted for the UTC day of `now_ms` as
    /// `tokens_per_day` — is [`Error::QuotaExceeded`] (checked so that
    /// accepts on every process sharing the store see one count); a thread of another user is
    /// [`Error::ThreadNotFound`]; on a thread with an active run,
    /// `admission.strategy` decides: [`MultitaskStrategy::Reject`] is
    /// [`Error::ThreadBusy`]; [`MultitaskStrategy::Enqueue`] accepts the run
    /// as waiting, its messages kept aside until it is claimed, so a thread
    /// reads in the order its turns ran; [`MultitaskStrategy::Interrupt`]
    /// stops every active run of the thread in the same write (a waiting one
    /// ends cancelled, with [`cancelled_log`]; a running one is marked to
    /// stop, and the new run waits for it) and lists them in
    /// [`Accepted::stopped`]; [`MultitaskStrategy::Rollback`] does the same
    /// and removes the stopped runs' messages from the thread, reopens the
    /// tool calls they had closed, and keeps out whatever a stopped running
    /// run would add when it ends. On the agent-run API (not
    /// `whole_history`) a tool message answering a call the thread does not
    /// hold pending (a rollback reopening counted) is
    /// [`Error::ToolCallNotPending`], [`Error::ToolCallAnswered`],
    /// [`Error::ToolCallClosed`] or, past its expiry at `now_ms`,
    /// [`Error::ToolCallExpired`]; every refusal comes before anything is
    /// written. An accepted run closes every pending tool call of its
    /// thread, as answered (by one of its tool messages) or gone past; an
    /// expired one stays expired. Two
    /// accepts racing on one thread take their turns: the second sees what
    /// the first did. With `run.start`, a run that can start at once (not
    /// waiting) is also taken for execution in the same write — `running`,
    /// exactly as [`RunStore::claim_runnable`] would leave it — and returned
    /// in `started`; `start.register` sees its task id before the commit.
    async fn accept_run(&self, run: NewRun<'_>) -> Result<Accepted, Error>;

    /// Takes up to `limit` runs for execution (`queued` → `running`), each the
    /// oldest active run of its thread (so a thread never executes two runs,
    /// and executes them in the order they were accepted), oldest first. A
    /// run that waited adds its messages to its thread in the same
    /// transaction. `register` is called with each claimed task id before the
    /// claim commits; `forget` with each one if the commit fails. A run
    /// cancelled while queued is never claimed: the cancel and the claim
    /// exclude each other.
    async fn claim_runnable(
        &self,
        limit: u32,
        now_ms: i64,
        register: OnClaim,
        forget: OnClaim,
    ) -> Result<Vec<Claimed>, Error>;

    /// Appends events to a running run's log, numbered on from its last one
    /// (the first event of a log is 1), in one transaction; returns the first
    /// one's number. A run that is not running (it ended — perhaps ended by
    /// another process that found its lease expired) takes nothing:
    /// [`Error::RunNotRunning`].
    async fn append_events(&self, task_id: &str, events: &[Event]) -> Result<u64, Error>;

    /// Ends an active run in one transaction: its final status, error and
    /// usage; its output appended to its thread (the UI schema on the last
    /// assistant message); its remaining [`Ending::events`] appended to its
    /// log (a running run's only, as [`RunStore::append_events`]);
    /// `RUN_STARTED` first if its log is still empty; then its terminal
    /// event. A run an accept marked to stop with
    /// [`MultitaskStrategy::Rollback`] adds nothing to its thread (its log
    /// still ends as given). Its [`Ending::tokens`] are added to its user's
    /// count for the UTC day of `now_ms`. A crash leaves all of it or none. Returns the terminal event's
    /// number (the remaining events are numbered just before it), or `None`
    /// when the run had already ended (nothing is written: a final state
    /// never changes).
    async fn end_run(
        &self,
        task_id: &str,
        ending: &Ending<'_>,
        now_ms: i64,
    ) -> Result<Option<u64>, Error>;

    /// `user`'s counts at `now_ms`, as the quotas read them.
    async fn usage(&self, user: &str, now_ms: i64) -> Result<crate::Usage, Error>;

    /// Cancels a run that has not started (`queued` → `cancelled`) and writes
    /// `events` (its whole log) in the same transaction; its waiting messages
    /// never reach the thread. Returns the first event's number, or `None`
    /// when it was no longer queued (nothing is written).
    async fn cancel_queued(
        &self,
        task_id: &str,
        events: &[Event],
        now_ms: i64,
    ) -> Result<Option<u64>, Error>;

    /// The run's events numbered above `after`, in order.
    async fn events_after(&self, task_id: &str, after: u64) -> Result<Vec<(u64, Event)>, Error>;

    /// `user`'s run with this client run id.
    async fn run(&self, user: &str, run_id: &str) -> Result<Option<RunRecord>, Error>;

    /// A run's status by task id.
    async fn run_status(&self, task_id: &str) -> Result<Option<RunStatus>, Error>;

    /// Runs left `running` by a process that is gone (at the start of the
    /// only process of an embedded database: every running run).
    async fn interrupted_runs(&self) -> Result<Vec<RunRecord>, Error>;

    /// How many runs are in each status (statuses with none are absent).
    async fn status_counts(&self) -> Result<Vec<(RunStatus, i64)>, Error>;

    /// The runs of a thread, newest first (at most `limit`).
    async fn thread_runs(&self, thread_id: &str, limit: u32) -> Result<Vec<RunRecord>, Error>;

    /// Which database holds the runs: `sqlite` or `postgres`.
    fn database(&self) -> &'static str;

    /// This process's name among those sharing the database (what
    /// `runs.owner` holds for the runs it executes); `None` when it is the
    /// only one.
    fn replica_id(&self) -> Option<String> {
        None
    }

    /// What the other processes sharing this database do, as it commits —
    /// `None` when only this process writes it (embedded databases), where
    /// the engine's own hub sees everything.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<Change>> {
        None
    }

    /// Asks whichever process executes a running run to stop it (a
    /// [`Change::CancelRequested`] to every process sharing the database),
    /// kept with the run: a process renewing its lease on a run asked to
    /// stop hears it again, so a lost word only delays the stop.
    async fn request_cancel(&self, _task_id: &str) -> Result<(), Error> {
        Ok(())
    }

    /// Runs left `running` by a process sharing the database that stopped
    /// renewing its lease on them (it died, or lost the database): they are
    /// to be ended by a survivor. Embedded databases have none while their
    /// one process runs.
    async fn abandoned_runs(&self) -> Result<Vec<RunRecord>, Error> {
        Ok(Vec::new())
    }
}

/// A change committed by some process sharing the database (see
/// [`RunStore::changes`]). Delivered at most once and possibly not at all (a
/// lost connection): the log stays the truth, changes only wake readers early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Events `first..=last` joined a run's log.
    Appended {
        /// The run.
        task_id: String,
        /// The first new event's number.
        first: u64,
        /// The last one's.
        last: u64,
    },
    /// Someone asked for a running run to stop.
    CancelRequested {
        /// The run.
        task_id: String,
    },
    /// A run may have become runnable (accepted, or its thread's active
    /// run ended).
    Runnable,
}
